"""Sharded sources harness: one destination per MySQL/MariaDB server, each run a process of its own
(as a mapped Airflow task runs), all merging into one Iceberg table of a JDBC catalog (PostgreSQL),
killed at random moments and run again. Used by ``tests/drain/test_shards_live.py`` and
``bench/shards.py``.

A run is ``python -m airflow_provider_binlog.dev.shard_runs child SPEC_JSON``; the source's URI
(with its password) comes from the environment variable :data:`SOURCE_ENV`, the catalog's password
from :data:`CATALOG_PASSWORD_ENV`, never from the command line. The run prints
:data:`SUMMARY_MARK` + the drain's summary as its last line.

:class:`ShardWriter` changes one server's ``orders`` tables (inserts, updates, key changes,
deletes) with keys that overlap the other servers' (every server counts ids from 1).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pymysql

SOURCE_ENV = "BINLOG_CDC_SHARD_SOURCE"
CATALOG_PASSWORD_ENV = "BINLOG_CDC_SHARD_CATALOG_PASSWORD"
SUMMARY_MARK = "SHARD SUMMARY "

ORDERS_DDL = (
    "CREATE TABLE {table} (id INT PRIMARY KEY, customer INT NOT NULL, amount DECIMAL(10,2), "
    "note VARCHAR(40), updated DATETIME(6))"
)


@dataclass(frozen=True)
class ShardSpec:
    """One destination's run.

    :param destination: its name (its cursor lives under it in ``meta_dir``).
    :param connection: the connection id the shard value's ``{connection}`` names.
    :param routes: source -> lake table.
    :param start_from: where a destination without a cursor starts (``file:pos``).
    :param catalog: the JDBC catalog's name; ``catalog_uri``, ``catalog_user``, ``warehouse`` its settings.
    :param shard_column: ``None``: no shard column.
    """

    destination: str
    connection: str
    routes: dict[str, str]
    start_from: str
    meta_dir: str
    catalog: str
    catalog_uri: str
    catalog_user: str
    warehouse: str
    shard_column: str | None = "_shard"
    shard_value: str = "{destination}"
    batch_size: int = 2000
    commit_rows: int = 50_000
    spark_master: str = "local[1]"
    driver_memory: str = "600m"


def _child(spec: ShardSpec) -> None:
    import logging

    from airflow_provider_binlog.canal.instance import InstanceConfig
    from airflow_provider_binlog.canal.positions.points import parse_point
    from airflow_provider_binlog.canal.routing import Routes
    from airflow_provider_binlog.drain import (
        Drain,
        Limits,
        RunSettings,
        Wiring,
        source_connection,
        store_capacity,
    )
    from airflow_provider_binlog.drain.wiring import source_from_uri
    from airflow_provider_binlog.lake.shards.shards import bind_options, check_routes
    from airflow_provider_binlog.lake.spark.session import create_session, jdbc_catalog_conf
    from airflow_provider_binlog.lake.write.merge import TargetOptions

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(message)s")
    for noisy in ("py4j", "kazoo"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    source = source_from_uri(os.environ[SOURCE_ENV], SOURCE_ENV)
    routes = Routes(spec.routes)
    options = TargetOptions(shard_column=spec.shard_column, shard_value=spec.shard_value)
    check_routes(spec.routes, options)
    limits = Limits(batch_size=spec.batch_size, max_rows_per_commit=spec.commit_rows)
    label = f"shards/{spec.destination}/{os.getpid()}"
    settings = RunSettings(
        run_id=f"r{os.getpid()}", label=label, try_number=1, limits=limits, running_timeout=60
    )
    config = InstanceConfig(
        spec.destination,
        source,
        routes.filter(),
        start=parse_point(spec.start_from),
        **store_capacity(limits),
    )
    conf = jdbc_catalog_conf(
        spec.catalog_uri, spec.catalog_user, os.environ[CATALOG_PASSWORD_ENV], spec.warehouse, spec.catalog
    )
    conf.update({"spark.driver.memory": spec.driver_memory, "spark.sql.shuffle.partitions": "2"})
    wiring = Wiring(meta_dir=spec.meta_dir)
    try:
        summary = Drain(
            wiring.instance(config, label), routes, settings,
            spark=lambda: create_session(
                app_name=f"binlog-cdc-{spec.destination}", master=spec.spark_master, catalog=spec.catalog,
                conf=conf,
            ),
            connect=lambda: source_connection(source),
            target_options=bind_options(options, spec.destination, spec.connection),
        ).run("head")  # fmt: skip
    finally:
        wiring.close()
    print(SUMMARY_MARK + json.dumps(summary, default=str), flush=True)


@dataclass
class ShardRun:
    """How one run ended: ``returncode`` (negative: killed), its summary (``None`` unless it finished)."""

    spec: ShardSpec
    returncode: int
    seconds: float
    log: Path
    summary: dict[str, Any] | None
    killed_after: float | None = None

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def start_run(spec: ShardSpec, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start one run in its own process group (its Spark JVM with it)."""
    args = [sys.executable, "-m", __name__, "child", json.dumps(asdict(spec))]
    with open(log, "ab") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def finish_run(
    spec: ShardSpec, proc: subprocess.Popen[bytes], log: Path, started: float, kill_after: float | None,
    timeout: float = 900,
) -> ShardRun:  # fmt: skip
    """Wait for a run (SIGKILL its group ``kill_after`` seconds after ``started``), bounded by ``timeout``."""
    deadline = started + timeout
    killed = None
    while proc.poll() is None:
        now = time.monotonic()
        if kill_after is not None and now - started >= kill_after:
            killed = now - started
            break
        if now > deadline:
            break
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):  # a killed run's Spark JVM must not outlive it
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    summary = None
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(SUMMARY_MARK):
            summary = json.loads(line[len(SUMMARY_MARK) :])
    return ShardRun(spec, proc.returncode, time.monotonic() - started, log, summary, killed)


def run_all(
    specs: list[ShardSpec], envs: list[dict[str, str]], logs: list[Path], kill_after: list[float | None]
) -> list[ShardRun]:
    """Run one process per spec at the same time; each is killed after its ``kill_after`` seconds."""
    started = time.monotonic()
    procs = [start_run(s, e, log) for s, e, log in zip(specs, envs, logs, strict=True)]
    return [
        finish_run(s, p, log, started, k) for s, p, log, k in zip(specs, procs, logs, kill_after, strict=True)
    ]


# ---- writers -----------------------------------------------------------------------------------------


@dataclass
class ShardWriter:
    """Random changes to ``tables`` of one server, from a thread (``start``/``stop``) or in steps.

    :param connect: opens an autocommit connection to the server's database.
    :param tables: table names, each with ids counted from 1 (overlapping the other servers').
    """

    connect: Any
    tables: list[str]
    seed: int
    interval: float = 0.0
    changes: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.next_id = dict.fromkeys(self.tables, 1)
        self.conn = self.connect()

    def step(self, size: int = 5) -> None:
        """One transaction of up to ``size`` changes on one table."""
        rng, table = self.rng, self.rng.choice(self.tables)
        with self.conn.cursor() as cur:
            cur.execute("BEGIN")
            for _ in range(size):
                kind = rng.choices(["insert", "update", "key", "delete"], [50, 30, 5, 15])[0]
                if kind == "insert" or self.next_id[table] < 5:
                    key = self.next_id[table]
                    self.next_id[table] += 1
                    cur.execute(
                        f"INSERT INTO `{table}` (id, customer, amount, note, updated) "
                        "VALUES (%s, %s, %s, %s, NOW(6))",
                        (key, rng.randint(1, 99), rng.randint(0, 10**6) / 100, f"n{rng.randint(0, 999)}"),
                    )
                else:
                    key = rng.randint(1, self.next_id[table] - 1)
                    if kind == "update":
                        cur.execute(
                            f"UPDATE `{table}` SET amount = %s, note = %s, updated = NOW(6) WHERE id = %s",
                            (rng.randint(0, 10**6) / 100, f"u{rng.randint(0, 999)}", key),
                        )
                    elif kind == "key":
                        new = self.next_id[table]
                        self.next_id[table] += 1
                        cur.execute(f"UPDATE `{table}` SET id = %s WHERE id = %s", (new, key))
                    else:
                        cur.execute(f"DELETE FROM `{table}` WHERE id = %s", (key,))
                self.changes += cur.rowcount
            cur.execute("COMMIT")

    def start(self) -> None:
        def loop() -> None:
            try:
                while not self._stop.is_set():
                    self.step()
                    if self.interval:
                        self._stop.wait(self.interval)
            except BaseException as exc:  # reported by stop()
                self.error = exc

        self._thread = threading.Thread(target=loop, name=f"shard-writer-{self.seed}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError("the shard writer did not stop within the bound")
        self.conn.close()
        if self.error is not None:
            raise self.error


def binlog_head(conn: pymysql.Connection) -> str:
    """The server's head ``file:pos`` (where a destination reading everything after it starts)."""
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    assert row is not None, "binary logging is off"
    return f"{row[0]}:{row[1]}"


def _main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "child":
        _child(ShardSpec(**json.loads(argv[1])))
        return 0
    print("usage: python -m airflow_provider_binlog.dev.shard_runs child SPEC_JSON", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
