"""The instance against a real MariaDB: exactly-once restarts, start positions, DDL, rollback, peek."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, Entry, RowChange, TransactionEnd
from airflow_provider_binlog.canal.errors import BatchOrderError, StartPositionError
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.instance import CanalInstance, InstanceConfig
from airflow_provider_binlog.canal.meta import FileMetaManager, MemoryMetaManager, MetaManager
from airflow_provider_binlog.canal.positions.start import StartSpec

pytestmark = pytest.mark.integration


def source(server: Any) -> ReplicationConfig:
    return ReplicationConfig(
        host=server.host, port=server.port, user=server.repl_user, password=server.repl_password,
        heartbeat_period=1.0,
    )  # fmt: skip


def head(server: Any) -> BinlogPosition:
    return ReplicationClient(source(server)).head_position()


def make(server: Any, database: str, meta: MetaManager, **kw: Any) -> CanalInstance:
    cfg = InstanceConfig(
        destination=kw.pop("destination", "d"),
        source=source(server),
        filter=TableFilter(include=f"{database}\\..*"),
        **kw,
    )
    return CanalInstance(cfg, meta)


def drain(inst: CanalInstance, batch_size: int = 1000, deadline: float = 60) -> list[Entry]:
    out: list[Entry] = []
    end = time.monotonic() + deadline
    while not inst.done:
        assert time.monotonic() < end, "drain did not finish"
        batch = inst.get_without_ack(batch_size, timeout=0.5)
        if batch.id is None:
            continue
        out.extend(batch.entries)
        inst.ack(batch.id)
    return out


def rows(entries: list[Entry]) -> list[tuple[str, str, Any, Any]]:
    return [(e.table, e.op.value, e.before, e.after) for e in entries if isinstance(e, RowChange)]


@pytest.fixture
def workload(mariadb: Any, database: str) -> Iterator[BinlogPosition]:
    """Two tables, multi-statement transactions, an unrelated database; yields the start position."""
    mariadb.execute(f"CREATE TABLE `{database}`.a (id INT PRIMARY KEY, v VARCHAR(20))")
    mariadb.execute(f"CREATE TABLE `{database}`.b (id INT PRIMARY KEY, n BIGINT)")
    mariadb.execute("CREATE DATABASE IF NOT EXISTS other_db")
    mariadb.execute("CREATE TABLE IF NOT EXISTS other_db.x (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
    start = head(mariadb)
    conn = mariadb.connect(database)
    try:
        with conn.cursor() as cur:
            for t in range(6):
                conn.begin()
                cur.execute("INSERT INTO a VALUES (%s, %s), (%s, %s)", (2 * t, f"v{t}", 2 * t + 1, f"w{t}"))
                cur.execute("INSERT INTO b VALUES (%s, %s)", (t, t * 100))
                cur.execute("UPDATE a SET v = CONCAT(v, '!') WHERE id = %s", (2 * t,))
                cur.execute("INSERT INTO other_db.x (v) VALUES (%s)", (t,))
                if t % 2:
                    cur.execute("DELETE FROM b WHERE id = %s", (t - 1,))
                conn.commit()
                cur.execute("INSERT INTO other_db.x (v) VALUES (99)")  # an unrelated autocommit txn
    finally:
        conn.close()
    yield start


def test_restart_from_every_ack_point_delivers_each_change_once_in_order(
    mariadb: Any, database: str, workload: BinlogPosition
) -> None:
    meta = MemoryMetaManager()
    inst = make(mariadb, database, meta, start=StartSpec(position=str(workload)))
    inst.subscribe(stop_at="head")
    full: list[Entry] = []
    cursors = []
    while not inst.done:
        batch = inst.get_without_ack(1, timeout=0.5)
        if batch.id is None:
            continue
        full.extend(batch.entries)
        cursor = inst.ack(batch.id)
        if cursor is not None:
            cursors.append((len(full), cursor))
    inst.close()

    changes = [e for e in full if isinstance(e, RowChange)]
    assert all(e.schema == database for e in changes)
    # 6 txns x (2 inserts + 1 insert + 1 update) + 3 deletes
    assert len(changes) == 6 * 4 + 3
    keys = [e.order_key for e in full]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert [(e.op.value, e.table) for e in changes[:4]] == [
        ("insert", "a"), ("insert", "a"), ("insert", "b"), ("update", "a"),
    ]  # fmt: skip
    assert changes[3].before == {"id": 0, "v": "v0"} and changes[3].after == {"id": 0, "v": "v0!"}
    assert changes[0].primary_key == ("id",) and changes[0].gtid is not None
    ends = [e for e in full if isinstance(e, TransactionEnd)]
    assert len(ends) >= 6
    assert len(cursors) >= 6

    # restart from every ack point: exactly the rest, in order
    for seen, cursor in cursors:
        meta2 = MemoryMetaManager()
        meta2.subscribe(inst.identity)
        meta2.set_cursor(inst.identity, cursor, None)
        again = make(mariadb, database, meta2)
        again.subscribe(stop_at=inst.stop_at)
        rest = drain(again, batch_size=3)
        again.close()
        assert rows(rest) == rows(full[seen:]), f"restart from {cursor}"
        assert [e.order_key for e in rest if isinstance(e, RowChange)] == [
            e.order_key for e in full[seen:] if isinstance(e, RowChange)
        ]


def test_cursor_in_zookeeper_format_and_marks(
    mariadb: Any, database: str, workload: BinlogPosition, tmp_path: Any
) -> None:
    meta = FileMetaManager(tmp_path)
    inst = make(mariadb, database, meta, start=StartSpec(position=str(workload)))
    inst.subscribe(stop_at="head")
    b1 = inst.get_without_ack(5, timeout=5)
    b2 = inst.get_without_ack(5, timeout=5)
    assert b1.id is not None and b2.id is not None
    assert list(meta.marks(inst.identity)) == [b1.id, b2.id]
    with pytest.raises(
        BatchOrderError, match=f"batch {b2.id} is not the oldest outstanding batch, {b1.id} is"
    ):
        inst.ack(b2.id)
    inst.ack(b1.id)
    assert list(meta.marks(inst.identity)) == [b2.id]
    inst.close()
    # a later attempt sees what the earlier one took and continues the ids after it
    later = make(mariadb, database, meta)
    later.subscribe(stop_at="head")
    assert list(later.stale_marks) == [b2.id]
    assert meta.marks(later.identity) == {}
    b = later.get_without_ack(5, timeout=5)
    assert b.id is not None and b.id > b2.id
    later.close()
    cursor = meta.get_cursor(inst.identity).value
    assert cursor is not None and cursor.address == mariadb.host and cursor.included is False


def test_rollback_redelivers_the_same_changes(mariadb: Any, database: str, workload: BinlogPosition) -> None:
    inst = make(mariadb, database, MemoryMetaManager(), start=StartSpec(position=str(workload)))
    inst.subscribe(stop_at="head")
    first = inst.get_without_ack(7, timeout=5)
    second = inst.get_without_ack(7, timeout=5)
    inst.rollback()
    again = inst.get_without_ack(14, timeout=5)
    assert list(again.entries) == list(first.entries) + list(second.entries)
    inst.close()


def test_rollback_after_a_partial_transaction_ack_rereads_it(mariadb: Any, database: str) -> None:
    """A 200-row transaction through a 16-entry store: ack inside it, roll back, get it all again."""
    mariadb.execute(f"CREATE TABLE `{database}`.big (id INT PRIMARY KEY)")
    start = head(mariadb)
    conn = mariadb.connect(database)
    try:
        with conn.cursor() as cur:
            conn.begin()
            cur.executemany("INSERT INTO big VALUES (%s)", [(i,) for i in range(200)])
            conn.commit()
    finally:
        conn.close()
    inst = make(mariadb, database, MemoryMetaManager(), start=StartSpec(position=str(start)), max_entries=16)
    inst.subscribe(stop_at="head")
    part = inst.get_without_ack(10, timeout=5)
    assert part.ack_point is None and part.id is not None
    assert inst.ack(part.id) is None  # memory released, cursor unchanged
    inst.rollback()  # part of the open transaction is gone from memory: the instance re-reads it
    got = drain(inst, batch_size=10)
    ids = [e.after["id"] for e in got if isinstance(e, RowChange) and e.after]
    assert ids == list(range(200))
    assert inst.store.peak_entries <= 16
    inst.close()


def test_start_inside_a_transaction_rewinds_to_its_start(
    mariadb: Any, database: str, workload: BinlogPosition
) -> None:
    inst = make(mariadb, database, MemoryMetaManager(), start=StartSpec(position=str(workload)))
    inst.subscribe(stop_at="head")
    full = drain(inst)
    inst.close()
    changes = [e for e in full if isinstance(e, RowChange)]
    inside = changes[2].position  # the INSERT INTO b of the first transaction
    inst2 = make(mariadb, database, MemoryMetaManager(), start=StartSpec(position=str(inside)))
    point = inst2.subscribe(stop_at="head")
    assert point.position is not None and point.position < inside
    assert rows(drain(inst2)) == rows(full)
    inst2.close()


def test_start_by_timestamp_and_by_mariadb_gtid(mariadb: Any, database: str) -> None:
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1)")
    gtid_after_first = str(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0])
    time.sleep(1.2)
    moment = time.time()
    time.sleep(1.2)
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (2)")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (3)")

    by_time = make(mariadb, database, MemoryMetaManager(), start=StartSpec(timestamp=moment))
    point = by_time.subscribe(stop_at="head")
    assert point.reason == "timestamp"
    got = [e.after for e in drain(by_time) if isinstance(e, RowChange)]
    by_time.close()
    assert got == [{"id": 2}, {"id": 3}]

    by_gtid = make(mariadb, database, MemoryMetaManager(), start=StartSpec(gtid=gtid_after_first))
    point = by_gtid.subscribe(stop_at="head")
    assert point.reason == "gtid"
    entries = drain(by_gtid)
    by_gtid.close()
    assert [e.after for e in entries if isinstance(e, RowChange)] == [{"id": 2}, {"id": 3}]
    first_row = next(e for e in entries if isinstance(e, RowChange))
    assert first_row.gtid is not None and first_row.gtid.count("-") == 2  # MariaDB d-s-n
    last_end = [e for e in entries if isinstance(e, TransactionEnd)][-1]
    assert last_end.gtid_set == str(mariadb.execute("SELECT @@gtid_binlog_pos")[0][0])


def test_purged_binlog_names_position_oldest_and_remedy(tmp_path: Any) -> None:
    from airflow_provider_binlog.dev.services import MariaDbServer

    server = MariaDbServer(server_id=31).start()
    try:
        server.execute("CREATE DATABASE p")
        server.execute("CREATE TABLE p.t (id INT PRIMARY KEY)")
        old = head(server)
        server.execute("FLUSH BINARY LOGS")
        deadline = time.monotonic() + 30
        while True:  # MariaDB keeps a file until a later binlog checkpoint says it is not needed
            server.execute("FLUSH BINARY LOGS")
            newest = head(server)
            server.execute(f"PURGE BINARY LOGS TO '{newest.file}'")
            if old.file not in [r[0] for r in server.execute("SHOW BINARY LOGS")]:
                break
            assert time.monotonic() < deadline, "the server would not purge"
            time.sleep(0.5)
        inst = make(server, "p", MemoryMetaManager(), start=StartSpec(position=str(old)))
        with pytest.raises(StartPositionError) as info:
            inst.subscribe(stop_at="head")
        msg = str(info.value)
        oldest = server.execute("SHOW BINARY LOGS")[0][0]
        assert str(old) in msg and f"the oldest binlog there is {oldest}" in msg and "snapshot" in msg
        assert server.repl_password not in msg
        # the same for a stored cursor
        from airflow_provider_binlog.canal.meta import LogPosition

        meta = MemoryMetaManager()
        inst = make(server, "p", meta)
        meta.subscribe(inst.identity)
        meta.set_cursor(inst.identity, LogPosition(old.file, old.pos, 0, 31, "", False), None)
        with pytest.raises(
            StartPositionError, match=f"stored cursor {old} is in {old.file}, which was purged"
        ):
            inst.subscribe(stop_at="head")
    finally:
        server.stop()


def test_peek_counts_without_moving(mariadb: Any, database: str, workload: BinlogPosition) -> None:
    meta = MemoryMetaManager()
    inst = make(mariadb, database, meta, start=StartSpec(position=str(workload)))
    assert inst.peek() == 27
    assert inst.peek(limit=5) >= 5
    assert meta.get_cursor(inst.identity).value is None
    inst.subscribe(stop_at="head")
    drain(inst)
    assert inst.peek() == 0
    inst.close()


def test_add_and_drop_column_between_writes_minimal_metadata(mariadb_minimal: Any) -> None:
    """binlog_row_metadata=MINIMAL: the TABLE_MAP has no names; reading from before two ALTERs
    (after they happened) must still put each value in its own column."""
    server = mariadb_minimal
    server.execute("CREATE DATABASE IF NOT EXISTS ddl_db")
    server.execute("DROP TABLE IF EXISTS ddl_db.t")
    server.execute("CREATE TABLE ddl_db.t (id INT PRIMARY KEY, a VARCHAR(10), b INT)")
    start = head(server)
    meta = MemoryMetaManager()
    first = make(server, "ddl_db", meta, start=StartSpec(position=str(start)))
    first.subscribe(stop_at="head")  # bootstraps the schema history at the head
    drain(first)
    first.close()

    server.execute("INSERT INTO ddl_db.t VALUES (1, 'x', 10)")
    server.execute("ALTER TABLE ddl_db.t ADD COLUMN c INT AFTER a")
    server.execute("INSERT INTO ddl_db.t VALUES (2, 'y', 200, 20)")
    server.execute("ALTER TABLE ddl_db.t DROP COLUMN a")
    server.execute("INSERT INTO ddl_db.t VALUES (3, 300, 30)")

    for attempt in range(2):  # the second read uses the versions the first one recorded
        meta.delete_cursor(first.identity)
        inst = make(server, "ddl_db", meta, start=StartSpec(position=str(start)))
        inst.subscribe(stop_at="head")
        entries = drain(inst)
        inst.close()
        got = [e.after for e in entries if isinstance(e, RowChange)]
        assert got == [
            {"id": 1, "a": "x", "b": 10},
            {"id": 2, "a": "y", "c": 200, "b": 20},
            {"id": 3, "c": 300, "b": 30},
        ], f"attempt {attempt}"
        ddls = [e for e in entries if isinstance(e, DdlEntry)]
        assert [d.sql.split()[3] for d in ddls] == ["ADD", "DROP"]
        assert meta.list_keys(first.identity, "schema") == ["ddl_db.t"]  # no history for other tables
        assert ddls[0].table_schema is not None and ddls[0].table_schema.column_names == ("id", "a", "c", "b")


def test_reconnect_after_the_dump_connection_is_killed(mariadb: Any, database: str) -> None:
    """Kill the server side of the dump mid-stream: every change arrives once, in order."""
    mariadb.execute(f"CREATE TABLE `{database}`.r (id INT PRIMARY KEY, t INT, pad TEXT)")
    start = head(mariadb)
    conn = mariadb.connect(database)
    pad = "p" * 2000  # 6 MB of binlog: more than the socket buffers hold
    try:
        with conn.cursor() as cur:
            for t in range(30):
                conn.begin()
                cur.executemany(
                    "INSERT INTO r VALUES (%s, %s, %s)", [(t * 100 + i, t, pad) for i in range(100)]
                )
                conn.commit()
    finally:
        conn.close()
    inst = make(
        mariadb, database, MemoryMetaManager(), start=StartSpec(position=str(start)),
        max_entries=16, reconnect_initial=0.1,
    )  # fmt: skip
    inst.subscribe(stop_at="head")
    got: list[Entry] = []
    kills = 0
    deadline = time.monotonic() + 60
    while not inst.done:
        assert time.monotonic() < deadline
        batch = inst.get_without_ack(50, timeout=0.5)
        if batch.id is None:
            continue
        got.extend(batch.entries)
        inst.ack(batch.id)
        if kills < 2 and len(got) > 500 * (kills + 1):
            threads = mariadb.execute(
                "SELECT ID FROM information_schema.PROCESSLIST "
                "WHERE COMMAND LIKE 'Binlog Dump%%' AND USER = %s",
                (mariadb.repl_user,),
            )
            killed = 0
            for (tid,) in threads:
                try:
                    mariadb.execute(f"KILL {int(tid)}")
                    killed += 1
                except pymysql.err.OperationalError:
                    pass  # already gone
            kills += killed > 0
    inst.close()
    # the second kill may land after the rest of the binlog is already in the socket buffers
    assert kills == 2 and inst.reconnects >= 1, (kills, inst.reconnects, len(got))
    ids = [e.after["id"] for e in got if isinstance(e, RowChange) and e.after]
    assert ids == list(range(3000))


def test_ack_refused_after_the_zookeeper_session_is_lost(
    mariadb: Any, database: str, workload: BinlogPosition, zookeeper: Any, zk_client: Any, zk_chroot: str
) -> None:
    from kazoo.client import KazooClient
    from kazoo.protocol.states import KazooState

    from airflow_provider_binlog.canal.errors import RunningHeldError, SessionLostError
    from airflow_provider_binlog.canal.ha import RunningNode
    from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager

    meta = ZooKeeperMetaManager(zk_client)
    cfg = InstanceConfig(
        "zkdest", source(mariadb), TableFilter(f"{database}\\..*"), start=StartSpec(str(workload))
    )
    running = RunningNode(zk_client, cfg.identity, label="first", reconnect_wait=0.5)
    inst = CanalInstance(cfg, meta, running=running)
    inst.subscribe(stop_at="head")
    batch = inst.get_without_ack(10, timeout=5)
    assert batch.id is not None
    data, _ = zk_client.get("/otter/canal/destinations/zkdest/1001/mark/" + f"{batch.id:010d}")
    assert b"PositionRange" in data

    other_zk = KazooClient(hosts=zookeeper.hosts + zk_chroot)
    other_zk.start(timeout=15)
    try:
        second = CanalInstance(
            cfg, ZooKeeperMetaManager(other_zk), running=RunningNode(other_zk, cfg.identity, "second")
        )
        with pytest.raises(RunningHeldError, match="first"):
            second.subscribe(stop_at="head", running_timeout=0.5)
        assert inst.running is not None
        inst.running._listener(KazooState.SUSPENDED)  # the connection to ZooKeeper dropped
        with pytest.raises(SessionLostError):
            inst.ack(batch.id)
        assert inst.store.outstanding == (batch.id,)  # nothing moved
        pinned = meta.get_cursor(cfg.identity).value  # the start pinned at subscribe, not an ack point
        assert pinned is not None and pinned.included and pinned.binlog_position == workload
    finally:
        inst.close()
        other_zk.stop()
        other_zk.close()


def test_ack_many_writes_the_cursor_once_and_a_restart_resumes_after_it(
    mariadb: Any, database: str, workload: BinlogPosition, zk_client: Any
) -> None:
    """Three batches acked as one (fenced, in ZooKeeper): one cursor write, at the last ack point
    among them, and their marks gone; a restart delivers exactly what follows that point."""
    from airflow_provider_binlog.canal.ha import RunningNode
    from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager

    reference = make(mariadb, database, MemoryMetaManager(), start=StartSpec(position=str(workload)))
    reference.subscribe(stop_at="head")
    everything = [e.order_key for e in drain(reference)]
    reference.close()

    meta = ZooKeeperMetaManager(zk_client)
    cfg = InstanceConfig(
        "many", source(mariadb), TableFilter(f"{database}\\..*"), start=StartSpec(str(workload))
    )
    inst = CanalInstance(cfg, meta, running=RunningNode(zk_client, cfg.identity, label="first"))
    inst.subscribe(stop_at="head")
    batches: list[Any] = []
    while len(batches) < 4:
        batch = inst.get_without_ack(4, timeout=5)
        if batch.id is not None:
            batches.append(batch)
    ids = [b.id for b in batches]
    with pytest.raises(
        BatchOrderError, match=f"batch {ids[1]} is not the oldest outstanding batch, {ids[0]} is"
    ):
        inst.ack_many(ids[1:3])
    assert inst.store.outstanding == tuple(ids)  # nothing moved
    path = "/otter/canal/destinations/many/1001/cursor"
    before = zk_client.exists(path).version
    cursor = inst.ack_many(ids[:3])
    assert zk_client.exists(path).version == before + 1  # written once
    assert cursor is not None and meta.get_cursor(cfg.identity).value == cursor
    assert list(meta.marks(inst.identity)) == ids[3:] and inst.store.outstanding == tuple(ids[3:])
    point = next(b.ack_point for b in reversed(batches[:3]) if b.ack_point is not None)
    inst.close()

    later = CanalInstance(
        cfg, ZooKeeperMetaManager(zk_client), running=RunningNode(zk_client, cfg.identity, "later")
    )
    later.subscribe(stop_at="head")
    rest = [e.order_key for e in drain(later)]
    later.close()
    assert rest == [k for k in everything if k > point.order_key] and len(rest) < len(everything)


def test_a_head_start_is_pinned_so_the_next_run_misses_nothing(mariadb: Any, database: str) -> None:
    mariadb.execute(f"CREATE TABLE `{database}`.h (id INT PRIMARY KEY)")
    meta = MemoryMetaManager()
    first = make(mariadb, database, meta)  # no cursor, no configured start: the head
    point = first.subscribe(stop_at="head")
    assert point.reason == "head"
    drain(first)
    first.close()
    mariadb.execute(f"INSERT INTO `{database}`.h VALUES (7)")
    second = make(mariadb, database, meta)
    assert second.peek() == 1
    assert second.subscribe(stop_at="head").reason == "cursor"
    assert [e.after for e in drain(second) if isinstance(e, RowChange)] == [{"id": 7}]
    second.close()


def test_minimal_metadata_table_created_in_the_stream(mariadb_minimal: Any) -> None:
    """The CREATE TABLE itself is read from the binlog: names, signedness and ENUM labels come from
    the parsed DDL, and rows before a later ALTER keep their own columns."""
    server = mariadb_minimal
    server.execute("CREATE DATABASE IF NOT EXISTS ddl_db2")
    server.execute("DROP TABLE IF EXISTS ddl_db2.t")
    start = head(server)
    server.execute(
        "CREATE TABLE ddl_db2.t (id INT UNSIGNED PRIMARY KEY, s ENUM('lo','hi'), n TINYINT UNSIGNED, "
        "name VARCHAR(20) CHARACTER SET utf8mb4)"
    )
    server.execute("INSERT INTO ddl_db2.t VALUES (4294967295, 'hi', 255, 'zoë')")
    server.execute("ALTER TABLE ddl_db2.t ADD COLUMN extra INT FIRST")
    server.execute("INSERT INTO ddl_db2.t VALUES (-1, 1, 'lo', 1, 'a')")
    inst = make(server, "ddl_db2", MemoryMetaManager(), start=StartSpec(position=str(start)))
    inst.subscribe(stop_at="head")
    entries = drain(inst)
    inst.close()
    assert [e.after for e in entries if isinstance(e, RowChange)] == [
        {"id": 4294967295, "s": "hi", "n": 255, "name": "zoë"},
        {"extra": -1, "id": 1, "s": "lo", "n": 1, "name": "a"},
    ]
    ddl = [e for e in entries if isinstance(e, DdlEntry)]
    assert [d.table for d in ddl] == ["t", "t"]
    changes = [e for e in entries if isinstance(e, RowChange)]
    assert changes[0].primary_key == ("id",)


def test_follow_mode_delivers_new_changes_and_reports_lag(mariadb: Any, database: str) -> None:
    mariadb.execute(f"CREATE TABLE `{database}`.f (id INT PRIMARY KEY)")
    inst = make(mariadb, database, MemoryMetaManager())
    inst.subscribe()  # no stop position: follow the binlog
    try:
        mariadb.execute(f"INSERT INTO `{database}`.f VALUES (1)")
        got: list[Entry] = []
        deadline = time.monotonic() + 20
        while not any(isinstance(e, RowChange) for e in got):
            assert time.monotonic() < deadline
            batch = inst.get_without_ack(10, timeout=1)
            if batch.id is not None:
                got.extend(batch.entries)
                inst.ack(batch.id)
        assert inst.cursor is not None and inst.cursor.included is False
        while inst.lag_seconds != 0.0:  # a heartbeat says the reader waits at the head
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert not inst.done
    finally:
        inst.close()


def test_ack_loses_a_cursor_race_and_keeps_the_batch(
    mariadb: Any, database: str, workload: BinlogPosition
) -> None:
    from airflow_provider_binlog.canal.errors import MetaConflictError

    meta = MemoryMetaManager()
    inst = make(mariadb, database, meta, start=StartSpec(position=str(workload)))
    inst.subscribe(stop_at="head")
    batch = inst.get_without_ack(20, timeout=5)
    assert batch.id is not None and batch.ack_point is not None
    intruder, version = meta.get_cursor(inst.identity)  # someone else moves the cursor meanwhile
    assert intruder is not None
    meta.set_cursor(inst.identity, intruder, version)
    with pytest.raises(MetaConflictError):
        inst.ack(batch.id)
    assert inst.store.outstanding == (batch.id,)
    assert batch.id in meta.marks(inst.identity)
    inst.close()


SIZED_COLUMNS = (
    "id INT PRIMARY KEY, d DECIMAL(12,2), d0 DECIMAL, b8 BIT(8), b1 BIT, b64 BIT(64), "
    "dt DATETIME(3), ts TIMESTAMP(6) NULL, tm TIME(2), u BIGINT UNSIGNED"
)


def test_schemas_from_ddl_and_information_schema_map_like_the_table_map(mariadb: Any, database: str) -> None:
    """A CREATE TABLE read from the stream, and the same table from ``information_schema``, give
    every column the lake type its TABLE_MAP gives (DECIMAL precision/scale, BIT length, fsp): a
    chunk holding only the DDL creates the lake table, and the rows after it must fit."""
    from airflow_provider_binlog.canal.schema import SchemaHistory
    from airflow_provider_binlog.lake.types import map_columns

    start = head(mariadb)
    mariadb.execute(f"CREATE TABLE `{database}`.sized ({SIZED_COLUMNS})")
    mariadb.execute(
        f"INSERT INTO `{database}`.sized VALUES (1, 1234567890.12, 7, b'101', b'1', b'1', "
        "'2026-01-02 03:04:05.678', '2026-01-02 03:04:05.678901', '12:34:56.78', 18446744073709551615)"
    )
    inst = make(mariadb, database, MemoryMetaManager(), start=StartSpec(position=str(start)))
    inst.subscribe(stop_at="head")
    entries = drain(inst)
    inst.close()
    ddl = [e for e in entries if isinstance(e, DdlEntry) and e.table == "sized"]
    change = next(e for e in entries if isinstance(e, RowChange) and e.table == "sized")
    assert len(ddl) == 1 and ddl[0].table_schema is not None and change.table_schema is not None

    def lake_types(columns: Any) -> list[tuple[str, str]]:
        return [(c.name, c.type.sql) for c in map_columns(columns)]

    expected = lake_types(change.table_schema.columns)
    assert expected == [
        ("id", "int"), ("d", "decimal(12,2)"), ("d0", "decimal(10,0)"), ("b8", "bigint"),
        ("b1", "bigint"), ("b64", "decimal(20,0)"), ("dt", "timestamp_ntz"), ("ts", "timestamp"),
        ("tm", "bigint"), ("u", "decimal(20,0)"),
    ]  # fmt: skip
    assert lake_types(ddl[0].table_schema.columns) == expected
    info = SchemaHistory(None, None, mariadb.connect).from_information_schema(database, "sized")
    assert info is not None and lake_types(info.columns) == expected
    assert [(c.precision, c.scale, c.fsp) for c in info.columns] == [
        (c.precision, c.scale, c.fsp) for c in change.table_schema.columns
    ]
