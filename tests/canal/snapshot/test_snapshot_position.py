"""The snapshot start position without a server: which statements run, in which order, per flavor.

MariaDB's side is also tested live (tests/lake/test_snapshot.py); no MySQL server runs here, so its
path (a brief FLUSH TABLES WITH READ LOCK) is checked against a scripted cursor.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pymysql
import pytest

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.snapshot.position import SNAPSHOT_STATUS_SQL, consistent_start
from airflow_provider_binlog.canal.snapshot.values import SnapshotError
from airflow_provider_binlog.canal.verify_source import VerifyPositionError, open_snapshot

MARIADB_STATUS = [("Binlog_snapshot_file", "mysql-bin.000007"), ("Binlog_snapshot_position", "4242")]


class ScriptedConnection:
    """A pymysql-like connection answering each statement from ``answers`` (rows or an exception)
    and recording what ran."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.ran: list[str] = []
        self.closed = False
        self._rows: list[Any] = []

    def cursor(self) -> ScriptedConnection:
        return self

    def __enter__(self) -> ScriptedConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str, args: Any = None) -> None:
        self.ran.append(sql)
        answer = self.answers.get(sql, [])
        if isinstance(answer, BaseException):
            raise answer
        self._rows = list(answer)

    def fetchall(self) -> list[Any]:
        return self._rows

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def close(self) -> None:
        self.closed = True


def test_mariadb_start_is_the_consistent_snapshot_position_without_a_lock() -> None:
    conn = ScriptedConnection({SNAPSHOT_STATUS_SQL: MARIADB_STATUS})
    assert consistent_start(lambda: conn, "repl@db:3306") == BinlogPosition("mysql-bin.000007", 4242)
    assert conn.ran == ["START TRANSACTION WITH CONSISTENT SNAPSHOT", SNAPSHOT_STATUS_SQL, "COMMIT"]
    assert conn.closed


def test_mysql_start_is_read_under_a_brief_global_read_lock() -> None:
    conn = ScriptedConnection({"SHOW MASTER STATUS": [("binlog.000003", 157, "", "", "")]})
    assert consistent_start(lambda: conn, "repl@db:3306") == BinlogPosition("binlog.000003", 157)
    lock = conn.ran.index("FLUSH TABLES WITH READ LOCK")
    assert conn.ran[lock + 1 :] == ["SHOW MASTER STATUS", "UNLOCK TABLES"]
    assert conn.ran[lock - 1].startswith("SET SESSION lock_wait_timeout")
    assert conn.closed


def test_mysql_84_reads_the_head_with_show_binary_log_status_under_the_lock() -> None:
    syntax = pymysql.err.ProgrammingError(1064, "You have an error in your SQL syntax")
    conn = ScriptedConnection(
        {"SHOW MASTER STATUS": syntax, "SHOW BINARY LOG STATUS": [("binlog.000009", 11, "", "", "")]}
    )
    assert consistent_start(lambda: conn, "repl@db:3306") == BinlogPosition("binlog.000009", 11)
    assert conn.ran[-1] == "UNLOCK TABLES"


def test_mysql_without_reload_refuses_with_the_fix() -> None:
    denied = pymysql.err.OperationalError(1227, "Access denied; you need the RELOAD privilege")
    conn = ScriptedConnection({"FLUSH TABLES WITH READ LOCK": denied})
    with pytest.raises(SnapshotError) as err:
        consistent_start(lambda: conn, "repl@db:3306")
    text = str(err.value)
    assert "repl@db:3306" in text and "RELOAD" in text and "Grant RELOAD" in text
    assert "SHOW MASTER STATUS" not in conn.ran and conn.closed


def test_mysql_lock_wait_timeout_says_what_blocks() -> None:
    timeout = pymysql.err.OperationalError(1205, "Lock wait timeout exceeded")
    conn = ScriptedConnection({"FLUSH TABLES WITH READ LOCK": timeout})
    with pytest.raises(SnapshotError, match="waited 10s behind running statements"):
        consistent_start(lambda: conn, "repl@db:3306")


def test_the_lock_is_released_when_the_head_cannot_be_read() -> None:
    lost = pymysql.err.OperationalError(2013, "Lost connection")
    conn = ScriptedConnection({"SHOW MASTER STATUS": lost})
    with pytest.raises(pymysql.err.OperationalError):
        consistent_start(lambda: conn, "repl@db:3306")
    assert conn.ran[-1] == "UNLOCK TABLES" and conn.closed


def test_binary_logging_off() -> None:
    conn = ScriptedConnection({})  # no snapshot status, no master status
    with pytest.raises(SnapshotError, match="binary logging is off on repl@db:3306"):
        consistent_start(lambda: conn, "repl@db:3306")


def test_verify_read_on_mysql_starts_its_transaction_inside_the_lock() -> None:
    conn = ScriptedConnection({"SHOW MASTER STATUS": [("binlog.000004", 99, "", "", "")]})
    assert open_snapshot(conn, "repl@db:3306") == BinlogPosition("binlog.000004", 99)
    lock = conn.ran.index("FLUSH TABLES WITH READ LOCK")
    assert conn.ran[lock + 1 :] == [
        "START TRANSACTION WITH CONSISTENT SNAPSHOT",
        "SHOW MASTER STATUS",
        "UNLOCK TABLES",
    ]
    assert "ROLLBACK" in conn.ran[:lock]


def test_verify_read_without_reload_names_its_own_remedy() -> None:
    denied = pymysql.err.OperationalError(1227, "Access denied; you need the RELOAD privilege")
    conn = ScriptedConnection({"FLUSH TABLES WITH READ LOCK": denied})
    with pytest.raises(VerifyPositionError) as err:
        open_snapshot(conn, "repl@db:3306")
    text = str(err.value)
    assert "repl@db:3306" in text and "the read's binlog position" in text and "--at-cursor" in text
    assert "START TRANSACTION WITH CONSISTENT SNAPSHOT" not in conn.ran[1:]


class ScriptedChunkConnection(ScriptedConnection):
    """What :class:`ChunkReader` calls on its connection besides cursors."""

    def autocommit(self, value: bool) -> None:
        pass


def _reader(conn: ScriptedConnection) -> Any:
    from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
    from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
    from airflow_provider_binlog.binlog.constants import ColumnType
    from airflow_provider_binlog.canal.snapshot.initial import ChunkReader

    ts = TableSchema("s", "t", (ColumnDef("id", ColumnType.LONG),), ("id",))
    client = ReplicationClient(ReplicationConfig(host="db", port=3306, user="repl", password="x"))
    return ChunkReader(client, lambda: conn, ts, chunk_size=10)


def _select_index(ran: list[str]) -> int:
    return next(i for i, sql in enumerate(ran) if sql.startswith("SELECT"))


def test_mariadb_chunk_is_read_inside_a_consistent_snapshot_at_its_low_watermark() -> None:
    conn = ScriptedChunkConnection(
        {
            SNAPSHOT_STATUS_SQL: MARIADB_STATUS,
            "SELECT `id` FROM `s`.`t` ORDER BY `id` LIMIT 10": [(1,), (2,)],
            "SHOW MASTER STATUS": [("mysql-bin.000007", 4242, "", "")],
        }
    )
    chunk = _reader(conn).read(1, None)
    assert chunk.low == chunk.high == BinlogPosition("mysql-bin.000007", 4242) and chunk.final
    assert sorted(chunk.rows) == [(1,), (2,)]
    at = _select_index(conn.ran)
    assert conn.ran[at - 2 : at] == ["START TRANSACTION WITH CONSISTENT SNAPSHOT", SNAPSHOT_STATUS_SQL]
    assert conn.ran[at + 1 :] == ["COMMIT", "SHOW MASTER STATUS"]


def test_mysql_chunk_low_watermark_is_the_head_before_the_select() -> None:
    conn = ScriptedChunkConnection({"SHOW MASTER STATUS": [("binlog.000003", 157, "", "", "")]})
    chunk = _reader(conn).read(1, None)
    assert chunk.low == BinlogPosition("binlog.000003", 157) and not chunk.rows
    at = _select_index(conn.ran)
    assert conn.ran[at - 1] == "SHOW MASTER STATUS" and conn.ran[at + 1 :] == ["SHOW MASTER STATUS"]
    assert "START TRANSACTION WITH CONSISTENT SNAPSHOT" not in conn.ran


# --------------------------------------------------------------------------- live (MariaDB)


@pytest.mark.integration
def test_a_consistent_snapshot_sees_exactly_the_transactions_before_its_position(
    mariadb: Any, database: str
) -> None:
    """Four writers commit one-row transactions while the test opens consistent snapshots: each
    snapshot's row count equals the number of inserts the binlog holds before its position, as the
    replication user (SELECT, REPLICATION SLAVE, BINLOG MONITOR: no lock privilege)."""
    from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
    from airflow_provider_binlog.binlog.rows import RowsEvent
    from airflow_provider_binlog.canal.snapshot.position import consistent_read

    mariadb.execute(f"CREATE TABLE `{database}`.w (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    begin = BinlogPosition(str(file), int(pos))
    stop = threading.Event()

    def write() -> None:
        conn = mariadb.connect(database)
        with conn.cursor() as cur:
            while not stop.is_set():
                cur.execute("INSERT INTO w (v) VALUES (1)")
        conn.close()

    writers = [threading.Thread(target=write, daemon=True) for _ in range(4)]
    for t in writers:
        t.start()
    seen: list[tuple[BinlogPosition, int]] = []
    reader = mariadb.connect(database, user=mariadb.repl_user)
    try:
        with reader.cursor() as cur:
            while len(seen) < 40:
                at = consistent_read(cur)
                cur.execute("SELECT COUNT(*) FROM w")
                (count,) = cur.fetchone()
                cur.execute("COMMIT")
                assert at is not None
                seen.append((at, int(count)))
                time.sleep(0.01)
    finally:
        stop.set()
        for t in writers:
            t.join(30)
        reader.close()
    src = ReplicationConfig(
        host=mariadb.host, port=mariadb.port, user=mariadb.repl_user, password=mariadb.repl_password
    )
    client = ReplicationClient(src)
    inserts: list[BinlogPosition] = []
    with client.dump(begin, stop_at=client.head_position()) as stream:
        for event in stream:
            body = event.body
            if isinstance(body, RowsEvent) and body.table_map is not None and body.table_map.table == "w":
                inserts.append(event.position)
    assert len({count for _, count in seen}) > 10, "the writers did not run during the snapshots"
    for at, count in seen:
        assert count == sum(1 for p in inserts if p < at), f"snapshot at {at} saw {count} rows"
