"""Initial snapshot into Iceberg under concurrent writes, then the binlog: lake equals source.

Real MariaDB and Spark; a writer thread inserts, updates (also keys) and deletes for the whole
snapshot. Kill and resume: ``binlog-cdc snapshot`` in a subprocess SIGKILLed at the
``snapshot_after_load`` / ``snapshot_before_load`` failpoints, then started again.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from airflow_provider_binlog import faults
from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.instance import CanalInstance, InstanceConfig
from airflow_provider_binlog.canal.meta import MemoryMetaManager, MetaManager
from airflow_provider_binlog.canal.snapshot import initial as snapshot_module
from airflow_provider_binlog.canal.snapshot.initial import Snapshot, table_key
from airflow_provider_binlog.canal.snapshot.position import consistent_start
from airflow_provider_binlog.lake.native import file_append
from airflow_provider_binlog.lake.snapshot import LakeChunkLoader, chunk_commits
from airflow_provider_binlog.lake.verify.verify import verify_tables
from airflow_provider_binlog.lake.write.merge import ChangeMerger, TargetOptions

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _config(mariadb: Any, database: str) -> InstanceConfig:
    src = ReplicationConfig(
        host=mariadb.host, port=mariadb.port, user=mariadb.repl_user, password=mariadb.repl_password,
        heartbeat_period=1.0,
    )  # fmt: skip
    return InstanceConfig(destination="snap", source=src, filter=TableFilter(include=f"{database}\\..*"))


class Writer:
    """Random inserts / updates (also of the key) / deletes on ``table`` until stopped or
    ``max_ops`` statements (a bounded drain afterwards)."""

    def __init__(
        self, mariadb: Any, database: str, table: str, next_id: int, seed: int, max_ops: int = 3000
    ) -> None:
        self.conn = mariadb.connect(database)
        self.table = table
        self.next_id = next_id
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.ops = 0
        self.max_ops = max_ops
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
        self.conn.close()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            with self.conn.cursor() as cur:
                while not self.stop.is_set() and self.ops < self.max_ops:
                    r = self.rng.random()
                    k = self.rng.randrange(1, self.next_id)
                    if r < 0.35:
                        self.next_id += 1
                        hole = self.rng.randrange(1, self.next_id)  # maybe a deleted key, maybe read already
                        key = self.rng.choice([self.next_id, hole])
                        sql = f"INSERT IGNORE INTO {self.table} (id, v, n) VALUES (%s, %s, %s)"
                        cur.execute(sql, (key, f"i{self.ops}", self.ops))
                    elif r < 0.7:
                        cur.execute(
                            f"UPDATE {self.table} SET v = %s, n = n + 1 WHERE id = %s", (f"u{self.ops}", k)
                        )
                    elif r < 0.8:
                        cur.execute(f"UPDATE IGNORE {self.table} SET id = %s WHERE id = %s", (k + 500_000, k))
                    else:
                        cur.execute(f"DELETE FROM {self.table} WHERE id = %s", (k,))
                    self.ops += 1
                    time.sleep(0.002)
        except Exception as exc:  # surfaced by __exit__
            self.error = exc


def _fill(mariadb: Any, database: str, table: str, n: int) -> None:
    mariadb.execute(
        f"CREATE TABLE `{database}`.{table} (id INT PRIMARY KEY, v VARCHAR(40), n BIGINT, "
        "d DECIMAL(12,4), ts TIMESTAMP(6) NULL DEFAULT CURRENT_TIMESTAMP(6), j JSON)"
    )
    values = ", ".join(
        f"({i}, 'v{i}', {i}, {i}.5, '2024-01-01 00:00:00.{i:06d}', '{{\"k\": {i}}}')" for i in range(1, n + 1)
    )
    mariadb.execute(f"INSERT INTO `{database}`.{table} (id, v, n, d, ts, j) VALUES {values}")


def incremental(
    config: InstanceConfig, meta: MetaManager, spark: Any, tables: dict[str, str],
    options: TargetOptions | None = None,
) -> int:  # fmt: skip
    """One drain from the cursor to the head into the lake (what the operator does)."""
    inst = CanalInstance(config, meta)
    n = 0
    with inst, ChangeMerger(spark, config.destination, tables, options) as merger:
        inst.subscribe(stop_at="head")
        pending: list[int] = []
        last = None
        deadline = time.monotonic() + 120
        while not (not pending and inst.done):
            assert time.monotonic() < deadline
            batch = inst.get_without_ack(2000, timeout=0.5)
            if batch.id is not None:
                pending.append(batch.id)
                for e in batch.entries:
                    merger.add(e)
                    n += 1
                last = batch.entries[-1].end_position
                continue
            if pending:
                merger.finish(end_position=last)
                for b in pending:
                    inst.ack(b)
                pending = []
    return n


def _snapshot(
    config: InstanceConfig, meta: MetaManager, mariadb: Any, database: str, spark: Any,
    tables: dict[str, str], keys: dict[str, Any] | None = None, chunk_size: int = 400,
    options: TargetOptions | None = None,
) -> Any:  # fmt: skip
    loader = LakeChunkLoader(spark, config.destination, tables, options)
    try:
        snap = Snapshot(
            meta, config.identity, ReplicationClient(config.source), lambda: mariadb.connect(database),
            {s: (keys or {}).get(s) for s in tables}, loader, chunk_size=chunk_size,
        )  # fmt: skip
        return snap.run()
    finally:
        loader.close()


def _verify(mariadb: Any, database: str, spark: Any, tables: dict[str, str], keys: Any = None) -> None:
    conn = mariadb.connect(database)
    try:
        for diff in verify_tables(conn, spark, tables, keys):
            assert diff.equal, diff.describe()
            assert diff.source_rows > 0
    finally:
        conn.close()


def test_snapshot_under_concurrent_writes_then_binlog(
    mariadb: Any, database: str, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(mariadb, database, "t", 1500)
    config = _config(mariadb, database)
    meta = MemoryMetaManager()
    tables = {f"{database}.t": f"lake.{database}.t"}
    starts: list[Any] = []

    def recorded_start(*args: Any) -> Any:
        starts.append(consistent_start(*args))
        return starts[-1]

    # S is the binlog position of a consistent snapshot (its meaning: test_snapshot_position.py)
    monkeypatch.setattr(snapshot_module, "consistent_start", recorded_start)
    appended: list[bool] = []
    real_append = file_append.append

    def append(*args: Any) -> bool:
        appended.append(real_append(*args))
        return appended[-1]

    monkeypatch.setattr(file_append, "append", append)  # the chunks: data files the driver wrote
    with Writer(mariadb, database, "t", 1500, seed=1) as writer:
        result = _snapshot(config, meta, mariadb, database, spark, tables)
        ops_during = writer.ops
    assert result.cursor_set and ops_during > 20
    assert starts == [result.start]
    table = result.tables[f"{database}.t"]
    assert table.chunks >= 4 and appended == [True] * table.chunks
    cursor = meta.get_cursor(config.identity).value
    assert cursor is not None and cursor.included and cursor.binlog_position == result.start
    incremental(config, meta, spark, tables)
    _verify(mariadb, database, spark, tables)
    # later changes flow on top of the snapshot
    mariadb.execute(f"UPDATE `{database}`.t SET v = 'later' WHERE id % 7 = 0")
    mariadb.execute(f"DELETE FROM `{database}`.t WHERE id % 11 = 0")
    incremental(config, meta, spark, tables)
    _verify(mariadb, database, spark, tables)


def test_composite_key_and_keyless_table(mariadb: Any, database: str, spark: Any) -> None:
    mariadb.execute(
        f"CREATE TABLE `{database}`.comp (a INT, b VARCHAR(10), c DATETIME(3), v INT, PRIMARY KEY (a, b, c))"
    )
    mariadb.execute(f"CREATE TABLE `{database}`.nopk (id BIGINT NOT NULL, v VARCHAR(20))")
    rows = ", ".join(
        f"({i % 13}, 'b{i % 7}', '2024-01-01 00:00:{i % 60:02d}.{i % 1000:03d}', {i})" for i in range(600)
    )
    mariadb.execute(f"INSERT IGNORE INTO `{database}`.comp VALUES {rows}")
    mariadb.execute(
        f"INSERT INTO `{database}`.nopk VALUES " + ", ".join(f"({i}, 'n{i}')" for i in range(150))
    )
    config = _config(mariadb, database)
    meta = MemoryMetaManager()
    tables = {f"{database}.comp": f"lake.{database}.comp", f"{database}.nopk": f"lake.{database}.nopk"}
    keys = {f"{database}.nopk": ("id",)}
    options = {f"lake.{database}.nopk": TargetOptions(key_columns=("id",))}
    stop = threading.Event()

    def write() -> None:
        conn = mariadb.connect(database)
        i = 0
        with conn.cursor() as cur:
            while not stop.is_set() and i < 400:  # bounded: the table must not run empty
                cur.execute("UPDATE comp SET v = v + 1 WHERE a = %s AND b = %s", (i % 13, f"b{i % 7}"))
                if i % 10 == 0:
                    cur.execute("DELETE FROM comp WHERE a = %s AND v %% 5 = 0 LIMIT 1", (i % 13,))
                cur.execute("UPDATE nopk SET v = %s WHERE id = %s", (f"w{i}", i % 150))
                cur.execute("INSERT INTO nopk VALUES (%s, 'new')", (1000 + i,))
                i += 1
                time.sleep(0.003)
        conn.close()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        result = _snapshot(
            config, meta, mariadb, database, spark, tables, keys, chunk_size=100, options=options
        )
    finally:
        stop.set()
        thread.join(30)
    assert result.tables[f"{database}.comp"].chunks >= 2
    incremental(config, meta, spark, tables, options)  # type: ignore[arg-type]
    _verify(mariadb, database, spark, tables, {f"{database}.nopk": ["id"]})


def test_cli_snapshot_sigkilled_twice_resumes_then_binlog(
    mariadb: Any, database: str, spark: Any, spark_warehouse: str, tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """``binlog-cdc snapshot`` in a subprocess, SIGKILLed right after a chunk's Iceberg commit
    (before its progress write), then again just before the next chunk's load, under concurrent
    writes, as the replication user (no lock privilege); the third start finishes in process, no
    chunk is loaded twice, and the binlog run from the hand-over makes the lake equal the source."""
    from airflow_provider_binlog import cli
    from airflow_provider_binlog.canal.meta import FileMetaManager
    from airflow_provider_binlog.canal.meta.model import ClientIdentity

    _fill(mariadb, database, "k", 1000)
    monkeypatch.setenv("SNAP_PASSWORD", mariadb.repl_password)
    source, target = f"{database}.k", f"lake.{database}.k"
    argv = [
        "snapshot", "--host", mariadb.host, "--port", str(mariadb.port), "--user", mariadb.repl_user,
        "--password-env", "SNAP_PASSWORD", "--destination", "snap", "--meta-dir", str(tmp_path / "meta"),
        "--tables", f"{source}={target}", "--chunk-size", "300", "--warehouse", spark_warehouse,
        "--spark-master", "local[1]",
    ]  # fmt: skip
    meta = FileMetaManager(str(tmp_path / "meta"))
    ident = ClientIdentity("snap", 1001)
    with Writer(mariadb, database, "k", 1000, seed=3, max_ops=600):
        # killed after chunk 2 is in the lake, before its progress; then, having learnt that chunk 2
        # is committed, before chunk 3 is loaded
        for spec, done, pending, commits in (
            ("snapshot_after_load=kill@2", 1, 2, [1, 2]),
            ("snapshot_before_load=kill@1", 2, 3, [1, 2]),
        ):
            log = tmp_path / "killed.log"
            with open(log, "wb") as out:
                proc = subprocess.run(
                    [sys.executable, "-m", "airflow_provider_binlog.cli", *argv],
                    env={**os.environ, faults.ENV: spec}, stdout=out, stderr=subprocess.STDOUT,
                    timeout=600, check=False,
                )  # fmt: skip
            assert proc.returncode == -signal.SIGKILL, log.read_text()[-3000:]
            assert mariadb.repl_password not in log.read_text()
            prog = meta.get_json(ident, table_key(source)).value
            assert (prog["chunk"], prog["pending"]["chunk"]) == (done, pending), prog
            assert chunk_commits(spark, target, "snap") == commits
            assert meta.get_cursor(ident).value is None  # no hand-over before the end
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    summary = json.loads(out)
    assert summary["cursor_set"] and summary["tables"][source]["rows"] > 0
    assert mariadb.repl_password not in out
    prog = meta.get_json(ident, table_key(source)).value
    assert prog["status"] == "done" and prog["loads"][:3] == [1, 2, 3]
    assert chunk_commits(spark, target, "snap") == prog["loads"] == sorted(set(prog["loads"]))
    mariadb.execute(f"UPDATE `{database}`.k SET v = 'after' WHERE id < 50")
    incremental(_config(mariadb, database), meta, spark, {source: target})
    _verify(mariadb, database, spark, {source: target})


def test_cli_snapshot_waits_for_the_running_node_then_names_its_holder(
    mariadb: Any, zookeeper: Any, zk_chroot: str, zk_client: Any, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """With ``--zookeeper`` the CLI is the destination's one consumer: held by someone else, it
    fails after ``--running-timeout`` naming the holder, before reading or writing anything."""
    from airflow_provider_binlog import cli
    from airflow_provider_binlog.canal.ha import RunningNode
    from airflow_provider_binlog.canal.meta.model import ClientIdentity

    monkeypatch.setenv("SNAP_PASSWORD", mariadb.repl_password)
    argv = [
        "snapshot", "--host", mariadb.host, "--port", str(mariadb.port), "--user", mariadb.repl_user,
        "--password-env", "SNAP_PASSWORD", "--destination", "held", "--zookeeper",
        zookeeper.hosts + zk_chroot, "--running-timeout", "0.5", "--tables", "a.b=lake.a.b",
    ]  # fmt: skip
    client_node = "/otter/canal/destinations/held/1001"
    with RunningNode(zk_client, ClientIdentity("held", 1001), label="dags/load/try-3") as node:
        node.acquire()
        _, epoch = zk_client.get(f"{client_node}/provider/epoch")  # the holder's fencing token
        assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "being consumed by" in err and "dags/load/try-3" in err and "waited 0.5s" in err, err
    # nothing written: no cursor, marks or snapshot records, and the holder's epoch untouched
    assert zk_client.get_children(client_node) == ["provider"]
    assert zk_client.get_children(f"{client_node}/provider") == ["epoch"]
    assert zk_client.get(f"{client_node}/provider/epoch")[1].version == epoch.version
