"""A sustained load: a writer at a fixed rate into the demo ``shop`` tables while drain runs
(:class:`~airflow_provider_binlog.drain.run.Drain`, what the operator runs) drain it again and
again, as scheduled runs would; the lag after each run says whether the drains keep up.

::

    report = run_load(mariadb, zookeeper, warehouse, rate=300, runs=8)
    print("\\n".join(report.lines()))
    assert report.equal

One scenario::

    recreate the shop schema, write warmup changes, warm-up run (Spark starts, tables are created)
    writer thread: demo changes at `rate` statements/s, transactions of 1-5 statement groups
    `runs` times (or for `duration` s): drain run (drains to the head seen at its start), then
                  the lag; the next run starts `interval` s after the previous one started (at once
                  when it took longer)
    stop the writer, one more run, then every lake table is compared with its source value by value

**Lag** after a run: the wall clock at the run's end minus the commit time of the transaction the
cursor stands on (the binlog header's time, whole seconds, so +-1 s). A run drains to the head it saw
at its start, so while the writer never pauses the lag is about the run's own time plus what the
writer wrote during the pause before it. It stays bounded as long as a run merges changes faster
than the writer makes them: each run then has about as much to do as the one before, instead of
more and more.

Runs share one SparkSession (``stop_spark=False``), as a long-lived worker would; the first run's
Spark start is in the warm-up. The meta store is ZooKeeper (a fresh chroot per scenario). Used by
``tests/faults/test_load.py`` (a small setting) and the reliability benchmark.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_binlog.dev import demo_data
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer

STATEMENTS_PER_GROUP = 1.55  # demo_data.generate_changes: mean statements per loop step


class RateWriter:
    """Writes demo changes (:func:`~.demo_data.generate_changes`) at ``rate`` statements per second
    on its own thread until :meth:`stop`; each statement changes at most one row.

    :param mariadb: the server holding the ``shop`` schema.
    :param rate: statements per second.
    :param seed: first random seed (one more per write).
    :param tick: seconds between writes; each write catches up with the rate.
    """

    def __init__(self, mariadb: MariaDbServer, rate: float, seed: int = 1000, tick: float = 0.05) -> None:
        self.mariadb = mariadb
        self.rate = rate
        self.seed = seed
        self.tick = tick
        self.written = 0
        self.seconds = 0.0
        self._stop = threading.Event()
        self._wrote = threading.Event()  # the first statements are committed (or the writer failed)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="rate-writer", daemon=True)

    def start(self, timeout: float = 30.0) -> RateWriter:
        """Start writing and return once the first statements are committed, so a run started
        next has changes before its stop point (re-raises the writer's error)."""
        self._thread.start()
        self._wrote.wait(timeout)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> int:
        """Stop writing; return how many statements were written (re-raises the writer's error)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(60)
        if self._error is not None:
            raise self._error
        return self.written

    def _run(self) -> None:
        try:
            conn = self.mariadb.connect()
            started = time.monotonic()
            try:
                while not self._stop.wait(self.tick):
                    due = self.rate * (time.monotonic() - started) - self.written
                    if due >= STATEMENTS_PER_GROUP:
                        self.seed += 1
                        counts = demo_data.generate_changes(
                            conn, math.floor(due / STATEMENTS_PER_GROUP), seed=self.seed
                        )
                        self.written += sum(counts.values())
                        self._wrote.set()
            finally:
                self.seconds = time.monotonic() - started
                conn.close()
        except BaseException as exc:
            self._error = exc
            self._wrote.set()


@dataclass(frozen=True)
class RunFigures:
    """One operator run under load.

    :param run: its number (0: warm-up, before the writer started).
    :param changes: row changes it merged.
    :param seconds: wall time of ``execute`` (Spark start included when it started one).
    :param lag: seconds between the run's end and the commit time of the cursor's transaction.
    :param written: statements the writer had committed by the run's end.
    """

    run: int
    changes: int
    seconds: float
    lag: float
    written: int

    def line(self) -> str:
        return (
            f"run {self.run:2d}: {self.changes:6d} changes in {self.seconds:5.1f} s, lag {self.lag:5.1f} s, "
            f"writer total {self.written}"
        )


@dataclass
class LoadReport:
    """What :func:`run_load` measured."""

    rate: float
    warmup: RunFigures
    runs: list[RunFigures]
    final: RunFigures
    written: int
    writer_seconds: float
    diffs: list[Any] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        """Every lake table equals its source table after the final run."""
        return bool(self.diffs) and all(d.equal for d in self.diffs)

    def lines(self) -> list[str]:
        achieved = self.written / self.writer_seconds if self.writer_seconds else 0.0
        return [
            f"writer: {self.written} statements in {self.writer_seconds:.1f} s = {achieved:.0f}/s "
            f"(asked {self.rate:g}/s)",
            self.warmup.line() + " (warm-up)",
            *(r.line() for r in self.runs),
            self.final.line() + " (after the writer stopped)",
            *(d.describe() for d in self.diffs),
        ]


def run_load(
    mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer,
    warehouse: str,
    *,
    rate: float = 300.0,
    runs: int = 6,
    duration: float | None = None,
    interval: float = 0.0,
    warmup_changes: int = 300,
    max_rows_per_commit: int = 200_000,
    spark_master: str = "local[2]",
    seed: int = 1000,
) -> LoadReport:
    """Run the scenario of the module docstring; return the per-run figures and the final diffs.

    :param mariadb: the source; its ``shop`` schema is dropped and recreated.
    :param zookeeper: the meta store (a fresh chroot per call).
    :param warehouse: the Iceberg warehouse (used when this call starts Spark; a running session keeps
        its own); targets are ``lake.load_<random>.<table>``.
    :param rate: writer statements per second.
    :param runs: drain runs while the writer runs (at least).
    :param duration: if given, runs go on until this many seconds passed since the writer started.
    :param interval: seconds from one run's start to the next one's (0: back to back).
    :param warmup_changes: changes written before the warm-up run.
    :param max_rows_per_commit: the drain's setting (the operator's of the same name).
    :param spark_master: Spark master when this call starts Spark.
    :param seed: the writer's first random seed.
    """
    from airflow_provider_binlog.binlog.client import ReplicationConfig
    from airflow_provider_binlog.canal.instance import InstanceConfig
    from airflow_provider_binlog.canal.positions.points import parse_point
    from airflow_provider_binlog.canal.routing import Routes
    from airflow_provider_binlog.drain import (
        Drain,
        Limits,
        RunSettings,
        Wiring,
        ZooKeeperConfig,
        source_connection,
        store_capacity,
    )
    from airflow_provider_binlog.lake.spark.session import create_session
    from airflow_provider_binlog.lake.verify.verify import verify_tables

    ns = f"load_{uuid.uuid4().hex[:8]}"
    destination = ns.replace("_", "-")
    chroot = "/" + ns
    tables = {f"shop.{t}": f"lake.{ns}.{t}" for t in demo_data.TABLES}
    conn = mariadb.connect()
    try:
        start = demo_data.recreate_schema(conn)
        demo_data.generate_changes(conn, warmup_changes, seed=seed - 1)
    finally:
        conn.close()
    source = ReplicationConfig(
        host=mariadb.host, port=mariadb.port, user=mariadb.repl_user, password=mariadb.repl_password,
        origin="the load test's source",
    )  # fmt: skip
    routes = Routes(tables)
    limits = Limits(max_rows_per_commit=max_rows_per_commit)
    config = InstanceConfig(
        destination, source, routes.filter(), start=parse_point(start), **store_capacity(limits)
    )
    wiring = Wiring(
        ZooKeeperConfig(zookeeper.hosts, chroot=chroot, timeout=10, origin="the load test's ZooKeeper")
    )

    def start_spark() -> Any:
        return create_session(
            app_name=f"binlog-cdc-{destination}", master=spark_master, warehouse=warehouse, catalog="lake"
        )

    def one_run(n: int) -> RunFigures:
        run_id = f"load_{n}"
        settings = RunSettings(run_id=run_id, label=f"load/{run_id}", limits=limits, stop_spark=False)
        began = time.monotonic()
        drain = Drain(
            wiring.instance(config, settings.label), routes, settings, spark=start_spark,
            connect=lambda: source_connection(source),
        )  # fmt: skip
        summary = drain.run("head")
        seconds = time.monotonic() - began
        cursor = wiring.meta_manager().get_cursor(config.identity).value
        lag = time.time() - cursor.timestamp / 1000 if cursor is not None and cursor.timestamp else math.nan
        return RunFigures(n, int(summary["changes"]), seconds, lag, writer.written)

    writer = RateWriter(mariadb, rate, seed=seed)
    try:
        warmup = one_run(0)
        writer.start()
        writing = time.monotonic()
        figures: list[RunFigures] = []
        while len(figures) < runs or (duration and time.monotonic() - writing < duration):
            began = time.monotonic()
            figures.append(one_run(len(figures) + 1))
            time.sleep(max(0.0, interval - (time.monotonic() - began)))
        written = writer.stop()
        final = one_run(len(figures) + 1)
        spark = create_session(master=spark_master, warehouse=warehouse)
        conn = mariadb.connect()
        try:
            diffs = verify_tables(conn, spark, tables)
        finally:
            conn.close()
    finally:
        with contextlib.suppress(Exception):  # already stopped unless a run failed
            writer.stop()
        wiring.close()
    return LoadReport(rate, warmup, figures, final, written, writer.seconds, diffs)
