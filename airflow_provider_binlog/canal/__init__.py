"""canal layer: a destination's durable subscription to the binlog (no Airflow, no Spark).

Modules, one concern each:

* :mod:`.change`   the change model (RowChange, DdlEntry, TransactionEnd, OrderKey)
* :mod:`.filter`   canal's table/column filter syntax
* :mod:`.store`    the bounded ring buffer with put/get/ack cursors
* :mod:`.meta`     cursor, marks and records: memory, canal ``meta.dat`` file, ZooKeeper
* :mod:`.ha`       the EPHEMERAL ``running`` node: one live consumer per destination client
* :mod:`.ddl`, :mod:`.schema`   DDL parsing and the position-keyed schema history
* :mod:`.start`    where reading starts (cursor, file:pos, GTID, timestamp, head)
* :mod:`.convert`  event -> entry conversion (rows, transaction ends, DDL, XA, statement DML)
* :mod:`.reader`   the reader thread: dump, convert, put; reconnect; re-read from the cursor
* :mod:`.instance` lifecycle, HA and the consumer API (subscribe/get/ack/rollback/peek)
"""
