"""The converter fed decoded events by hand (no server), and the statement-DML table finder.

The event sequences are the ones MariaDB 10.11 writes (see ``canal/convert.py``); the row paths
are covered against the real server in ``test_xa_statement.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.event import Event, EventHeader
from airflow_provider_binlog.binlog.events import XaPrepareEvent, XidEvent
from airflow_provider_binlog.binlog.events_mariadb import MariadbGtidEvent
from airflow_provider_binlog.binlog.events_query import QueryEvent
from airflow_provider_binlog.canal.change import Entry, TransactionEnd
from airflow_provider_binlog.canal.convert import EntryConverter
from airflow_provider_binlog.canal.errors import StatementDmlError
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.statement import dml_tables

FILE = "mysql-bin.000003"
PREPARED, COMPLETED = 76, 141  # the GTID flags MariaDB writes (FL_PREPARED_XA / FL_COMPLETED_XA ...)


class Feed:
    """Events at increasing positions into a converter that collects what it emits."""

    def __init__(self, include: str = "db\\.t") -> None:
        self.out: list[Entry] = []
        self.conv = EntryConverter(
            "d", TableFilter(include=include), lambda e, size: self.out.extend(e), idle_end_interval=0.0
        )
        self.pos = 256
        self.seq = 0

    def event(self, code: int, body: Any, size: int = 40) -> Event:
        ev = Event(
            EventHeader(1_700_000_000, code, 1, size, self.pos + size, 0),
            body,
            FILE,
            self.pos,
            self.pos + size,
        )
        self.pos += size
        self.conv.handle(ev)
        return ev

    def gtid(self, flags: int = 12, xid: bytes | None = None) -> None:
        self.seq += 1
        fmt = 1 if xid is not None else None
        self.event(
            EventType.GTID_EVENT,
            MariadbGtidEvent(0, 1, self.seq, flags, None, fmt, xid, b"" if xid else None),
        )

    def query(self, sql: str, schema: str = "") -> Event:
        return self.event(EventType.QUERY_EVENT, QueryEvent(9, 0, 0, schema, sql))

    def xid(self) -> None:
        self.event(EventType.XID_EVENT, XidEvent(1))

    def prepare(self, xid: bytes) -> None:
        self.event(EventType.XA_PREPARE_LOG_EVENT, XaPrepareEvent(False, 1, xid, b""))

    def ends(self) -> list[TransactionEnd]:
        return [e for e in self.out if isinstance(e, TransactionEnd)]


def test_ends_after_an_unresolved_prepare_are_not_durable_until_it_is_resolved() -> None:
    f = Feed()
    f.gtid()
    f.xid()
    assert [e.durable for e in f.ends()] == [True]
    f.gtid(PREPARED, b"a")
    f.query("XA END X'61',X'',1")
    f.prepare(b"a")
    assert len(f.out) == 1 and f.conv.prepared == ((1, b"a", b""),)  # nothing emitted at the PREPARE
    f.gtid()
    f.xid()  # a transaction committed while 'a' is prepared
    assert [e.durable for e in f.ends()] == [True, False]
    f.gtid(COMPLETED, b"a")
    f.query("XA ROLLBACK X'61',X'',1")
    assert [e.durable for e in f.ends()] == [True, False, True] and f.conv.prepared == ()
    keys = [e.order_key for e in f.out]
    assert keys == sorted(keys)


def test_a_commit_found_by_its_statement_text_and_reset_forgets_prepared() -> None:
    f = Feed()
    f.gtid(PREPARED, b"\x01\x02")
    f.prepare(b"\x01\x02")
    f.gtid()
    f.xid()
    assert not f.ends()[-1].durable
    f.conv.reset(None)  # a re-read from the cursor reads the PREPARE again
    assert f.conv.prepared == ()
    f.gtid(PREPARED, b"b")
    f.prepare(b"b")
    f.gtid(13)  # no XA fields on the GTID: the XID comes from the statement
    f.query("XA COMMIT X'62',X'',1")
    assert f.conv.prepared == () and f.ends()[-1].durable


def test_statement_dml_on_a_routed_table_raises_with_table_statement_and_position() -> None:
    f = Feed()
    f.gtid()
    f.query("INSERT INTO u VALUES (1)", "db")  # not routed: ignored
    f.xid()
    f.gtid()
    with pytest.raises(StatementDmlError) as info:
        f.query("UPDATE t SET v = 1", "db")
    err = info.value
    assert err.table == "db.t" and err.statement == "UPDATE t SET v = 1"
    assert err.position == f"{FILE}:{f.pos - 40}" and err.position in str(err)
    assert [e.durable for e in f.ends()] == [True]  # nothing after the statement's start


def test_system_schema_and_server_statements_are_not_dml() -> None:
    f = Feed("mysql\\..*,db\\..*")
    f.query("INSERT INTO mysql.user VALUES ()", "db")
    f.query("FLUSH PRIVILEGES", "db")
    f.query("GRANT SELECT ON db.* TO x", "db")
    assert all(isinstance(e, TransactionEnd) for e in f.out)


@pytest.mark.parametrize(
    ("sql", "tables"),
    [
        ("INSERT INTO t VALUES (1)", [("db", "t")]),
        ("insert low_priority ignore x.t (a) values (1)", [("x", "t")]),
        ("REPLACE INTO `a b`.`c` SET x=1", [("a b", "c")]),
        ("INSERT INTO t SELECT * FROM u", [("db", "t")]),
        ("/* hint */ UPDATE t SET v=1", [("db", "t")]),
        (
            "UPDATE t AS a JOIN s.u b ON a.id=b.id LEFT JOIN w USING (id) SET a.v=1",
            [("db", "t"), ("s", "u"), ("db", "w")],
        ),
        ("update t1, t2 set t1.a=t2.a", [("db", "t1"), ("db", "t2")]),
        ("UPDATE (SELECT 1) AS d, t SET t.v=1", [("db", "t")]),
        ("UPDATE t PARTITION (p0) JOIN u ON 1 SET v=1", [("db", "t"), ("db", "u")]),
        ("DELETE FROM t WHERE id=1", [("db", "t")]),
        ("DELETE t1, t2 FROM t1 INNER JOIN t2 ON t1.id=t2.id", [("db", "t1"), ("db", "t2")]),
        (
            "DELETE FROM t1.*, t2 USING t1 JOIN t2 USING (id) JOIN t3",
            [("db", "t1"), ("db", "t2"), ("db", "t3")],
        ),
        ("WITH c AS (SELECT 1) DELETE FROM t WHERE id IN (SELECT * FROM c)", [("db", "t")]),
        ("LOAD DATA INFILE '/tmp/x.csv' INTO TABLE `x`.`t` FIELDS TERMINATED BY ','", [("x", "t")]),
        ("SELECT 1", None),
        ("GRANT ALL ON *.* TO x", None),
        ("FLUSH PRIVILEGES", None),
        ("SAVEPOINT a", None),
    ],
)
def test_dml_tables(sql: str, tables: list[tuple[str, str]] | None) -> None:
    assert dml_tables(sql, "db") == tables
