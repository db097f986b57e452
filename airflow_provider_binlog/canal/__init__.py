"""canal layer: a destination's durable subscription to the binlog (no Airflow, no Spark).

Modules, one concern each:

* :mod:`.change`   the change model (RowChange, DdlEntry, TransactionEnd, OrderKey)
* :mod:`.filter`   canal's table/column filter syntax
* :mod:`.store`    the bounded ring buffer with put/get/ack cursors
* :mod:`.meta`     cursor, marks and records: memory, canal ``meta.dat`` file, ZooKeeper
* :mod:`.ha`       the EPHEMERAL ``running`` node: one live consumer per destination client
* :mod:`.schema`   the position-keyed schema history
* :mod:`.convert`  event -> entry conversion (rows, transaction ends, DDL, XA, statement DML)
* :mod:`.reader`   the reader thread: dump, convert, put; reconnect; re-read from the cursor
* :mod:`.instance` lifecycle, HA and the consumer API (subscribe/get/ack/rollback/peek)

Sub-packages by concern:

* :mod:`.sql`        the SQL grammar: tokens, DDL, partitioning, statement DML, DDL classification
* :mod:`.positions`  where reading starts and stops (cursor, file:pos, GTID, timestamp, head), the
  binlog index, the XA look back, archived binlog files
* :mod:`.snapshot`   the initial snapshot, its consistent position, its values, table re-snapshots
"""
