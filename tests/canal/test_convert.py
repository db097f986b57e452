"""The converter fed decoded events by hand (no server), and the statement-DML table finder.

The event sequences are the ones MariaDB 10.11 writes (see ``canal/convert.py``); the row paths
are covered against the real server in ``test_xa_statement.py``.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.event import Event, EventHeader
from airflow_provider_binlog.binlog.events import XaPrepareEvent, XidEvent
from airflow_provider_binlog.binlog.events_mariadb import MariadbGtidEvent
from airflow_provider_binlog.binlog.events_query import QueryEvent
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Entry, TransactionEnd
from airflow_provider_binlog.canal.convert import EntryConverter
from airflow_provider_binlog.canal.errors import StatementDmlError, XaPrepareUnseenError
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.sql.statement import dml_tables

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


def test_a_commit_of_an_xa_prepared_before_the_start_stops_and_a_rollback_applies_nothing() -> None:
    f = Feed()  # started after the PREPAREs of 'a' and 'b': their rows were never read
    f.gtid(COMPLETED, b"b")
    f.query("XA ROLLBACK X'62',X'',1")
    assert [type(e) for e in f.out] == [TransactionEnd] and f.ends()[0].durable
    f.gtid(COMPLETED, b"a")
    with pytest.raises(XaPrepareUnseenError) as info:
        f.query("XA COMMIT X'61',X'',1")
    at = f"{FILE}:{f.pos - 40}"
    assert info.value.xid == "X'61',X'',1" and info.value.position == at
    text = str(info.value)
    assert "X'61',X'',1" in text and at in text and 'snapshot="initial"' in text
    assert len(f.out) == 1  # nothing of the commit was handed out
    assert pickle.loads(pickle.dumps(info.value)).args == info.value.args


def test_statement_dml_on_a_routed_table_becomes_an_entry_inside_its_transaction() -> None:
    f = Feed("db\\.t,db\\.w")
    f.gtid()
    f.query("INSERT INTO u VALUES (1)", "db")  # not routed: ignored
    f.xid()
    f.gtid()
    f.query("BEGIN")
    at = f.query("UPDATE t SET v = 1", "db")
    both = f.query("UPDATE t JOIN u ON t.id = u.id JOIN w ON w.id = t.id SET t.v = 2, w.v = 2", "db")
    f.xid()
    stmts = [e for e in f.out if isinstance(e, DdlEntry)]
    assert [(e.schema, e.table, e.kind, e.sql) for e in stmts] == [
        ("db", "t", DdlKind.STATEMENT_DML, "UPDATE t SET v = 1"),
        ("db", "t", DdlKind.STATEMENT_DML, both.body.sql),
        ("db", "w", DdlKind.STATEMENT_DML, both.body.sql),  # u is not routed
    ]
    assert stmts[0].position == at.position and str(stmts[0].position) == f"{FILE}:{at.pos}"
    assert [e.order_key.row_index for e in stmts] == [0, 0, 1]
    # inside its transaction: no ack point of its own, the XID after it is one
    assert not any(e.ends_statement for e in stmts) and all(e.durable for e in stmts)
    assert isinstance(f.out[-1], TransactionEnd) and f.out[-1].position > stmts[-1].position
    keys = [e.order_key for e in f.out]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_statement_dml_outside_a_transaction_is_followed_by_its_end() -> None:
    f = Feed()
    f.gtid(flags=13)  # standalone: no BEGIN, no XID
    f.query("DELETE FROM t WHERE v > 3", "db")
    assert [type(e) for e in f.out] == [DdlEntry, TransactionEnd]
    assert f.out[0].order_key < f.out[1].order_key


def test_statement_dml_whose_tables_cannot_be_named_stops_reading() -> None:
    f = Feed()
    f.gtid()
    with pytest.raises(StatementDmlError) as info:
        f.query("INSERT INTO 1 VALUES (1)", "db")
    err = info.value
    assert err.position == f"{FILE}:{f.pos - 40}" and err.position in str(err)
    assert "could not be named" in str(err) and "binlog_format=ROW" in str(err)
    assert pickle.loads(pickle.dumps(err)).position == err.position


def test_statement_dml_in_an_xa_transaction_comes_with_its_commit_and_goes_with_its_rollback() -> None:
    f = Feed()
    f.gtid(PREPARED, b"a")
    f.query("UPDATE t SET v = 5", "db")
    f.query("XA END X'61',X'',1")
    f.prepare(b"a")
    f.gtid(PREPARED, b"b")
    f.query("DELETE FROM t", "db")
    f.query("XA END X'62',X'',1")
    f.prepare(b"b")
    assert not [e for e in f.out if isinstance(e, DdlEntry)]  # held while prepared
    f.gtid(COMPLETED, b"b")
    f.query("XA ROLLBACK X'62',X'',1")
    f.gtid(COMPLETED, b"a")
    commit = f.query("XA COMMIT X'61',X'',1")
    (stmt,) = [e for e in f.out if isinstance(e, DdlEntry)]  # the rolled-back DELETE never comes
    assert stmt.sql == "UPDATE t SET v = 5" and stmt.kind is DdlKind.STATEMENT_DML
    assert stmt.position == commit.position and stmt.order_key[:2] == (3, commit.pos)  # at its commit
    assert f.out[-1] == f.ends()[-1] and f.ends()[-1].durable and f.ends()[-1].order_key > stmt.order_key


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
