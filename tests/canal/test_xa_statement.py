"""XA transactions and statement-format DML through the canal instance, against the real MariaDB.

A statement-format DML on a routed table is handed out as a ``STATEMENT_DML`` entry inside its
transaction (held and released with an XA transaction's rows); what the lake does with it is tested
in ``tests/lake/test_statement_dml_fold.py`` and through the operator.

What MariaDB 10.11 writes for each XA form is in ``canal/convert.py``'s docstring (read with the
parser); these tests drive the instance over those events. A "run" here is what the drain does:
subscribe up to the head, hand out and ack everything, close; the lake is modelled by a dict per
key plus canal-style per-table marks (an entry whose order key is at or below the table's mark is
skipped, as ``lake/commits.CommittedMark.covers`` does).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Entry, OrderKey, RowChange, TransactionEnd
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.instance import CanalInstance, InstanceConfig
from airflow_provider_binlog.canal.meta import MemoryMetaManager, MetaManager
from airflow_provider_binlog.canal.positions.start import StartSpec

pytestmark = pytest.mark.integration


def source(server: Any) -> ReplicationConfig:
    return ReplicationConfig(
        host=server.host, port=server.port, user=server.repl_user, password=server.repl_password,
        heartbeat_period=1.0,
    )  # fmt: skip


def head(server: Any) -> BinlogPosition:
    return ReplicationClient(source(server)).head_position()


def make(server: Any, include: str, meta: MetaManager, start: BinlogPosition) -> CanalInstance:
    cfg = InstanceConfig(
        destination="d", source=source(server), filter=TableFilter(include=include),
        start=StartSpec(position=str(start)), idle_end_interval=0.0,
    )  # fmt: skip
    return CanalInstance(cfg, meta)


def run(
    server: Any, include: str, meta: MetaManager, start: BinlogPosition, deadline: float = 60
) -> list[Entry]:
    """One drain up to the head: every batch handed out and acked."""
    inst = make(server, include, meta, start)
    inst.subscribe(stop_at="head")
    out: list[Entry] = []
    end = time.monotonic() + deadline
    try:
        while not inst.done:
            assert time.monotonic() < end, "drain did not finish"
            batch = inst.get_without_ack(1000, timeout=0.5)
            if batch.id is not None:
                out.extend(batch.entries)
                inst.ack(batch.id)
    finally:
        inst.close()
    return out


class Lake:
    """A table's rows by key plus its mark (what the merger does with marks, for one table)."""

    def __init__(self) -> None:
        self.rows: dict[Any, Any] = {}
        self.mark: OrderKey | None = None
        self.applied: Counter[tuple[str, Any]] = Counter()

    def apply(self, entries: list[Entry]) -> None:
        for e in entries:
            if not isinstance(e, RowChange):
                continue
            if self.mark is not None and tuple(e.order_key) <= tuple(self.mark):
                continue  # already in the lake
            self.mark = e.order_key
            image = e.after if e.after is not None else e.before
            assert image is not None
            self.applied[(e.op.value, image["id"])] += 1
            if e.before is not None:
                self.rows.pop(e.before["id"], None)
            if e.after is not None:
                self.rows[e.after["id"]] = e.after["v"]


def source_rows(server: Any, database: str) -> dict[Any, Any]:
    return dict(server.execute(f"SELECT id, v FROM `{database}`.t"))


@pytest.fixture
def table(mariadb: Any, database: str) -> Iterator[str]:
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT)")
    mariadb.execute(f"CREATE TABLE `{database}`.u (id INT PRIMARY KEY, v INT)")
    yield database
    # a prepared XA transaction outlives its connection (MariaDB >= 10.5) and holds its locks (DROP
    # DATABASE would wait for it): close the connections (a prepared XA becomes recoverable by
    # others only then), then roll back whatever a failed test left prepared
    while _OPEN:
        with contextlib.suppress(Exception):
            _OPEN.pop().close()
    for fmt, glen, blen, data in mariadb.execute("XA RECOVER"):
        raw = data if isinstance(data, bytes) else str(data).encode()
        xid = f"X'{raw[:glen].hex()}',X'{raw[glen : glen + blen].hex()}',{fmt}"
        with contextlib.suppress(pymysql.err.MySQLError):
            mariadb.execute(f"XA ROLLBACK {xid}")


_OPEN: list[Any] = []  # connections of the running test (closed at its teardown)


def connect(server: Any, database: str) -> Any:
    conn = server.connect(database)
    _OPEN.append(conn)
    conn.autocommit(True)
    with conn.cursor() as cur:
        cur.execute("SET SESSION innodb_lock_wait_timeout = 10")
    return conn


def test_xa_commit_rollback_and_one_phase(mariadb: Any, table: str) -> None:
    start = head(mariadb)
    conn = connect(mariadb, table)
    with conn.cursor() as cur:
        for stmt in ("XA START 'a'", "INSERT INTO t VALUES (1, 1)", "XA END 'a'", "XA PREPARE 'a'"):
            cur.execute(stmt)
        mariadb.execute(f"INSERT INTO `{table}`.t VALUES (2, 2)")  # commits between PREPARE and COMMIT
        for stmt in (
            "XA COMMIT 'a'",
            "XA START 'b'", "INSERT INTO t VALUES (3, 3)", "UPDATE t SET v = 20 WHERE id = 2", "XA END 'b'",
            "XA PREPARE 'b'", "XA ROLLBACK 'b'",
            "XA START 'c'", "INSERT INTO t VALUES (4, 4)", "XA END 'c'", "XA COMMIT 'c' ONE PHASE",
            "XA START 'd'", "INSERT INTO t VALUES (5, 5)", "XA END 'd'", "XA ROLLBACK 'd'",  # never prepared
        ):  # fmt: skip
            cur.execute(stmt)
    conn.close()
    stop = head(mariadb)
    meta = MemoryMetaManager()
    got = run(mariadb, f"{table}\\.t", meta, start)
    changes = [e for e in got if isinstance(e, RowChange)]
    assert [(e.op.value, e.after) for e in changes] == [
        ("insert", {"id": 2, "v": 2}),
        ("insert", {"id": 1, "v": 1}),  # at its XA COMMIT, after what committed before it
        ("insert", {"id": 4, "v": 4}),
    ]
    keys = [e.order_key for e in got]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    lake = Lake()
    lake.apply(got)
    assert lake.rows == source_rows(mariadb, table) == {1: 1, 2: 2, 4: 4}
    cursor, _ = meta.get_cursor(make(mariadb, f"{table}\\.t", meta, start).identity)
    assert cursor is not None and cursor.binlog_position is not None
    assert cursor.binlog_position > changes[-1].position and cursor.binlog_position < stop


def test_xa_pending_at_the_stop_point_is_applied_once_after_its_commit(mariadb: Any, table: str) -> None:
    start = head(mariadb)
    meta = MemoryMetaManager()
    include = f"{table}\\.t"
    lake = Lake()
    mariadb.execute(f"INSERT INTO `{table}`.t VALUES (1, 1), (2, 2)")
    xa = connect(mariadb, table)
    with xa.cursor() as cur:
        for stmt in ("XA START 'p'", "INSERT INTO t VALUES (10, 10)", "UPDATE t SET v = 11 WHERE id = 1",
                     "XA END 'p'", "XA PREPARE 'p'"):  # fmt: skip
            cur.execute(stmt)
    before_prepare = head(mariadb)  # the PREPARE's group ends here
    mariadb.execute(f"INSERT INTO `{table}`.t VALUES (3, 3)")
    mariadb.execute(f"DELETE FROM `{table}`.t WHERE id = 2")

    first = run(mariadb, include, meta, start)
    lake.apply(first)
    assert lake.rows == {1: 1, 3: 3}  # nothing of the prepared transaction
    ident = make(mariadb, include, meta, start).identity
    cursor, _ = meta.get_cursor(ident)
    assert cursor is not None and cursor.binlog_position is not None
    assert cursor.binlog_position < before_prepare, "the cursor passed an unresolved XA PREPARE"
    ends = [e for e in first if isinstance(e, TransactionEnd)]
    assert ends and not ends[-1].durable  # the ends after the PREPARE are no ack points

    again = run(mariadb, include, meta, start)  # still prepared: nothing new, nothing lost
    lake.apply(again)
    assert lake.rows == {1: 1, 3: 3}

    with xa.cursor() as cur:
        cur.execute("XA COMMIT 'p'")
    xa.close()
    mariadb.execute(f"INSERT INTO `{table}`.t VALUES (4, 4)")
    third = run(mariadb, include, meta, start)
    lake.apply(third)
    assert lake.rows == source_rows(mariadb, table) == {1: 11, 3: 3, 4: 4, 10: 10}
    assert lake.applied[("insert", 10)] == 1 and lake.applied[("update", 1)] == 1
    cursor, _ = meta.get_cursor(ident)
    assert cursor is not None and cursor.binlog_position is not None
    assert cursor.binlog_position > before_prepare
    # the XA rows come at the XA COMMIT's place: after the PREPARE and the transactions after it
    xa_rows = [e for e in third if isinstance(e, RowChange) and (e.after or {}).get("id") in (10, 1)]
    assert xa_rows and all(e.position > before_prepare for e in xa_rows)


def _statements(entries: list[Entry]) -> list[DdlEntry]:
    return [e for e in entries if isinstance(e, DdlEntry) and e.kind is DdlKind.STATEMENT_DML]


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO t VALUES (7, 7)",
        "UPDATE t SET v = v + 1 WHERE id = 1",
        "DELETE FROM t WHERE id = 1",
        "UPDATE u JOIN t ON t.id = u.id SET t.v = 5",
        "REPLACE INTO t SELECT id + 100, v FROM u",
    ],
)
def test_statement_format_dml_on_a_routed_table_is_handed_out_in_its_transaction(
    mariadb: Any, table: str, statement: str
) -> None:
    mariadb.execute(f"INSERT INTO `{table}`.u VALUES (1, 1)")
    start = head(mariadb)
    mariadb.execute(f"INSERT INTO `{table}`.t VALUES (1, 1)")
    before = head(mariadb)
    conn = connect(mariadb, table)
    with conn.cursor() as cur:
        cur.execute("SET SESSION binlog_format = 'STATEMENT'")
        cur.execute(statement)
    conn.close()
    after = head(mariadb)
    mariadb.execute(f"INSERT INTO `{table}`.t VALUES (8, 8)")
    meta = MemoryMetaManager()
    got = run(mariadb, f"{table}\\.t", meta, start)
    (stmt,) = _statements(got)  # u is not routed: one entry, for t
    assert (stmt.schema, stmt.table, stmt.sql) == (table, "t", statement)
    assert before <= stmt.position < after and not stmt.ends_statement
    at = got.index(stmt)
    assert isinstance(got[at + 1], TransactionEnd)  # its transaction's end, the ack point after it
    assert [(e.op.value, e.after) for e in got if isinstance(e, RowChange)] == [
        ("insert", {"id": 1, "v": 1}),
        ("insert", {"id": 8, "v": 8}),  # the stream goes on: the consumer decides what to do with it
    ]
    keys = [e.order_key for e in got]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_statement_format_dml_on_tables_not_routed_is_ignored(mariadb: Any, table: str) -> None:
    start = head(mariadb)
    conn = connect(mariadb, table)
    with conn.cursor() as cur:
        cur.execute("SET SESSION binlog_format = 'STATEMENT'")
        cur.execute("INSERT INTO u VALUES (1, 1)")
        cur.execute("UPDATE u SET v = 2")
        cur.execute("DELETE FROM u")
        cur.execute("SET SESSION binlog_format = 'ROW'")
        cur.execute("INSERT INTO t VALUES (1, 1)")
    conn.close()
    got = run(mariadb, f"{table}\\.t", MemoryMetaManager(), start)
    assert [(e.table, e.after) for e in got if isinstance(e, RowChange)] == [("t", {"id": 1, "v": 1})]
    assert not [e for e in got if isinstance(e, DdlEntry)]


def test_statement_format_dml_in_xa_comes_at_its_commit_and_peek_counts_it(mariadb: Any, table: str) -> None:
    mariadb.execute(f"INSERT INTO `{table}`.t VALUES (5, 5), (9, 9)")
    start = head(mariadb)
    include = f"{table}\\.t"
    kept, dropped = connect(mariadb, table), connect(mariadb, table)
    # rows apart, so that neither waits for the other's locks
    for conn, xid, stmt in (
        (kept, "k", "INSERT INTO t VALUES (1, 1)"),
        (dropped, "r", "DELETE FROM t WHERE id = 9"),
    ):
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            for sql in (f"XA START '{xid}'", stmt, f"XA END '{xid}'", f"XA PREPARE '{xid}'"):
                cur.execute(sql)
    mariadb.execute(f"UPDATE `{table}`.t SET v = 55 WHERE id = 5")
    meta = MemoryMetaManager()
    assert not _statements(run(mariadb, include, meta, start))  # both prepared: held
    with dropped.cursor() as cur:
        cur.execute("XA ROLLBACK 'r'")
    before_commit = head(mariadb)
    with kept.cursor() as cur:
        cur.execute("XA COMMIT 'k'")
    # the sensor's count: the routed statement-format writes (both XA ones) and the row
    assert make(mariadb, include, meta, start).peek() == 3
    got = run(mariadb, include, meta, start)
    (stmt,) = _statements(got)  # the rolled-back DELETE never comes
    assert stmt.sql == "INSERT INTO t VALUES (1, 1)" and stmt.position >= before_commit  # at its XA COMMIT
    cursor, _ = meta.get_cursor(make(mariadb, include, meta, start).identity)
    assert cursor is not None and cursor.binlog_position is not None
    assert cursor.binlog_position >= stmt.position  # resolved: the cursor is at its commit ...
    assert make(mariadb, include, meta, start).peek() == 0  # ... and nothing is left after it


def test_randomized_xa_and_normal_transactions_across_runs(mariadb: Any, table: str) -> None:
    seed = int(os.environ.get("XA_SEED", random.randrange(1_000_000)))
    print(f"seed {seed}")
    rnd = random.Random(seed)
    start = head(mariadb)
    meta = MemoryMetaManager()
    include = f"{table}\\.t"
    lake = Lake()
    normal = connect(mariadb, table)
    pending: dict[str, tuple[Any, list[int]]] = {}  # xid -> (its connection, rows it locks)
    model: dict[int, int] = {}  # rows of the normal range (id < 1000), for the choice of a delete
    next_xa_id = 1000
    n = 0
    try:
        for _ in range(4):  # runs
            for _ in range(rnd.randint(5, 12)):
                n += 1
                choice = rnd.random()
                with normal.cursor() as cur:
                    if choice < 0.5:
                        key = rnd.randrange(40)
                        if key in model and rnd.random() < 0.4:
                            cur.execute("DELETE FROM t WHERE id = %s", (key,))
                            del model[key]
                        else:
                            cur.execute("REPLACE INTO t VALUES (%s, %s)", (key, n))
                            model[key] = n
                        continue
                if choice < 0.85 or not pending:  # a new XA transaction
                    xid = f"x{n}"
                    conn = connect(mariadb, table)
                    ids = [next_xa_id, next_xa_id + 1]
                    next_xa_id += 2
                    with conn.cursor() as cur:
                        cur.execute(f"XA START '{xid}'")
                        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, n) for i in ids])
                        cur.execute(f"XA END '{xid}'")
                        if rnd.random() < 0.2:
                            cur.execute(f"XA COMMIT '{xid}' ONE PHASE")
                            conn.close()
                            continue
                        cur.execute(f"XA PREPARE '{xid}'")
                    pending[xid] = (conn, ids)
                    continue
                xid = rnd.choice(sorted(pending))  # resolve a prepared one
                conn, _ = pending.pop(xid)
                with conn.cursor() as cur:
                    cur.execute(f"XA {'COMMIT' if rnd.random() < 0.7 else 'ROLLBACK'} '{xid}'")
                conn.close()
            lake.apply(run(mariadb, include, meta, start))
            # what the source has committed (prepared rows are not visible to another session)
            assert lake.rows == source_rows(mariadb, table), f"seed {seed}: the lake differs"
        for xid, (conn, _) in sorted(pending.items()):
            with conn.cursor() as cur:
                cur.execute(f"XA {'COMMIT' if rnd.random() < 0.5 else 'ROLLBACK'} '{xid}'")
            conn.close()
        pending.clear()
        lake.apply(run(mariadb, include, meta, start))
        assert lake.rows == source_rows(mariadb, table), f"seed {seed}"
        xa_inserts = [k for k in lake.applied if k[0] == "insert" and k[1] >= 1000]
        assert all(lake.applied[k] == 1 for k in xa_inserts), f"seed {seed}: an XA row applied twice"
    finally:
        normal.close()
        for xid, (conn, _) in pending.items():
            with contextlib.suppress(pymysql.err.MySQLError), conn.cursor() as cur:
                cur.execute(f"XA ROLLBACK '{xid}'")
            conn.close()


# ---------------------------------------------------------------- XA prepared before the start point


def _prepare(conn: Any, xid: str, *stmts: str) -> None:
    with conn.cursor() as cur:
        for stmt in (f"XA START '{xid}'", *stmts, f"XA END '{xid}'", f"XA PREPARE '{xid}'"):
            cur.execute(stmt)


def test_xa_prepared_before_the_start_and_committed_after_it_arrives_once(mariadb: Any, table: str) -> None:
    """A destination first started at the head while XA transactions are prepared: the COMMIT's
    rows are read back from the PREPARE (in an earlier binlog file too) and arrive once; a rollback
    of one applies nothing; one touching only an unrouted table makes no entry and no stop; one
    prepared AND committed before the start is never read."""
    include = f"{table}\\.t"
    mariadb.execute(f"INSERT INTO `{table}`.t VALUES (1, 1), (2, 2)")
    done = connect(mariadb, table)  # prepared and committed before the start: its COMMIT is too
    _prepare(done, "q", "INSERT INTO t VALUES (7, 7)")
    with done.cursor() as cur:
        cur.execute("XA COMMIT 'q'")
    early = connect(mariadb, table)  # an XID used before: the last PREPARE before the start counts
    _prepare(early, "p", "INSERT INTO t VALUES (8, 8)")
    with early.cursor() as cur:
        cur.execute("XA ROLLBACK 'p'")
    xa, gone, other = connect(mariadb, table), connect(mariadb, table), connect(mariadb, table)
    _prepare(xa, "p", "INSERT INTO t VALUES (10, 10)", "UPDATE t SET v = 11 WHERE id = 1")
    mariadb.execute("FLUSH BINARY LOGS")  # the start point's file holds neither PREPARE of 'p'
    _prepare(gone, "r", "INSERT INTO t VALUES (20, 20)")
    _prepare(other, "u", "INSERT INTO u VALUES (1, 1)")
    mariadb.execute(f"INSERT INTO `{table}`.t VALUES (3, 3)")
    start = head(mariadb)  # a first start at the head: every PREPARE above lies before it

    meta = MemoryMetaManager()
    lake = Lake()
    lake.rows = {1: 1, 2: 2, 3: 3, 7: 7}  # what a snapshot at the start would have loaded
    mariadb.execute(f"DELETE FROM `{table}`.t WHERE id = 2")
    for conn, stmt in ((xa, "XA COMMIT 'p'"), (gone, "XA ROLLBACK 'r'"), (other, "XA COMMIT 'u'")):
        with conn.cursor() as cur:
            cur.execute(stmt)
    mariadb.execute(f"INSERT INTO `{table}`.t VALUES (4, 4)")
    got = run(mariadb, include, meta, start)
    lake.apply(got)
    assert lake.rows == source_rows(mariadb, table) == {1: 11, 3: 3, 4: 4, 7: 7, 10: 10}
    changes = [(e.op.value, e.after) for e in got if isinstance(e, RowChange)]
    assert changes == [
        ("delete", None),
        ("insert", {"id": 10, "v": 10}),  # at 'p''s XA COMMIT, not 8 of the earlier 'p'
        ("update", {"id": 1, "v": 11}),
        ("insert", {"id": 4, "v": 4}),
    ]
    keys = [e.order_key for e in got]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert all(e.position >= start for e in got)
    again = run(mariadb, include, meta, start)  # the cursor moved past the commit: nothing twice
    assert not [e for e in again if isinstance(e, RowChange)]
    cursor, _ = meta.get_cursor(make(mariadb, include, meta, start).identity)
    assert cursor is not None and cursor.binlog_position is not None
    xa_rows = [e for e in got if isinstance(e, RowChange) and e.after and e.after["id"] in (1, 10)]
    assert cursor.binlog_position > xa_rows[-1].position  # past the XA COMMIT: never read again


def test_xa_commit_whose_prepare_is_not_found_stops_before_it(mariadb: Any, table: str) -> None:
    """The lookback against the server's binlogs: an XID no binlog holds a PREPARE of is a reason;
    the converter then stops with XaPrepareUnseenError and hands out nothing of the commit."""
    from airflow_provider_binlog.canal.convert import EntryConverter
    from airflow_provider_binlog.canal.errors import XaPrepareUnseenError
    from airflow_provider_binlog.canal.positions.xa_lookback import XaLookback

    xa = connect(mariadb, table)
    _prepare(xa, "f", "INSERT INTO t VALUES (1, 1)")
    start = head(mariadb)
    client = ReplicationClient(source(mariadb))
    look = XaLookback("d", client, TableFilter(include=f"{table}\\.t"), None)
    found = look((0, b"f", b""), start)  # format id 0: never prepared (the server's default is 1)
    assert isinstance(found, str) and "none of the binlogs" in found and str(start) in found
    held = look((1, b"f", b""), start)
    assert not isinstance(held, str)
    rows = [(e.op.value, e.after) for e in held if isinstance(e, RowChange)]
    assert rows == [("insert", {"id": 1, "v": 1})]
    out: list[Entry] = []
    conv = EntryConverter(
        "d", TableFilter(include=f"{table}\\.t"), lambda e, size: out.extend(e),
        lookback=lambda xid, before: "the binlog holding it was purged",
    )  # fmt: skip
    with xa.cursor() as cur:
        cur.execute("XA COMMIT 'f'")
    with pytest.raises(XaPrepareUnseenError) as info, client.dump(start, stop_at=head(mariadb)) as stream:
        for event in stream:
            conv.handle(event)
    assert info.value.xid == "X'66',X'',1" and "purged" in str(info.value)
    assert not [e for e in out if isinstance(e, RowChange)]
