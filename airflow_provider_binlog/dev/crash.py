"""Crash matrix: SIGKILL the operator's process at random points, rerun, compare lake with source.

One scenario, on one destination that every scenario continues (the cursor and the lake carry
over, so each scenario costs the same)::

    a writer thread changes the shop tables (small and large transactions, key changes,
        delete + re-insert) for the whole kill phase
    kill phase: k runs of BinlogToSparkOperator.execute, each in its own process (as an Airflow task
        runs), each SIGKILLed at a random kill point -- a failpoint hit (drain, before_commit,
        merge_table, after_commit, ack, after_ack: see :mod:`..faults`) or a timer (a random delay
        after the run started reading: anywhere in the drain, Spark start, a MERGE or an ack)
    writer stopped; one run without a kill point (it must succeed)
    check: the lake table merged from ``shop.orders`` equals it value by value (:mod:`..lake.verify`),
        and the append-only change log of ``shop.ledger`` holds every row change the writer made
        exactly once (count equal, no (position, key, op) twice, newest image per key equal to the
        source row): nothing lost, nothing doubled

A kill point that was not reached (the run finished first) is reported as such and does not count
as a kill. Used by ``tests/faults/test_crash_matrix.py`` (the CI setting) and
``bench/reliability.py`` (larger settings); the per-run process is ``python -m
airflow_provider_binlog.dev.crash child SPEC``.
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
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pymysql

from airflow_provider_binlog.dev import demo_data

FAILPOINTS = ("drain", "before_commit", "merge_table", "after_commit", "ack", "after_ack")
# how many hits a failpoint typically gets in one kill-phase run (batches of BATCH_SIZE, commits of
# COMMIT_ROWS, 2 targets): the n-th hit is drawn from 1..this
_TYPICAL_HITS = {
    "drain": 8,
    "before_commit": 2,
    "merge_table": 4,
    "after_commit": 2,
    "ack": 8,
    "after_ack": 2,
}
BATCH_SIZE = 20
COMMIT_ROWS = 100
SUMMARY_MARK = "CRASH-SUMMARY "
READING_MARK = ": reading "  # the operator's "destination X: reading A .. B" line
LEDGER_DDL = """
    CREATE TABLE IF NOT EXISTS `shop`.`ledger` (
        id INT PRIMARY KEY,
        account VARCHAR(20) NOT NULL,
        amount DECIMAL(12, 2) NOT NULL,
        note VARCHAR(64),
        updated DATETIME(6) NOT NULL
    )"""
ROUTED = ("orders", "ledger")


@dataclass(frozen=True)
class KillPoint:
    """Where a run is killed: the ``nth`` hit of ``failpoint``, or ``delay`` seconds after it
    started reading (``failpoint`` ``None``)."""

    failpoint: str | None
    nth: int = 1
    delay: float = 0.0

    def __str__(self) -> str:
        return f"{self.failpoint}@{self.nth}" if self.failpoint else f"timer+{self.delay:.2f}s"

    @property
    def kind(self) -> str:
        return self.failpoint or "timer"

    @classmethod
    def random(cls, rng: random.Random) -> KillPoint:
        if rng.random() < 0.3:
            return cls(None, delay=rng.uniform(0.2, 8.0))
        name = rng.choice(FAILPOINTS)
        return cls(name, nth=rng.randint(1, _TYPICAL_HITS[name]))


@dataclass
class RunResult:
    """One operator process: where it was to be killed, whether it was, its summary if it finished."""

    point: KillPoint | None
    returncode: int
    seconds: float
    log: Path
    summary: dict[str, Any] | None = None

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    def tail(self, lines: int = 25) -> str:
        return "\n".join(line[:300] for line in self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class ScenarioResult:
    index: int
    runs: list[RunResult]
    changes_written: int
    diffs: list[str] = field(default_factory=list)  # empty when lake == source

    @property
    def kills(self) -> list[RunResult]:
        return [r for r in self.runs if r.point is not None and r.killed]

    @property
    def diverged(self) -> bool:
        return bool(self.diffs)


# ---------------------------------------------------------------------------------------- workload


class Workload:
    """Random changes to the ``shop`` tables, counting the row changes of ``shop.ledger``.

    Besides the demo generator's small transactions: multi-row inserts, updates and deletes of the
    ledger, an order's primary-key change, a delete and re-insert of one key in one transaction, and
    large transactions (a few hundred rows over two tables) that span several batches.
    """

    def __init__(self, conn: pymysql.Connection, seed: int) -> None:
        self.conn = conn
        self.rng = random.Random(seed)
        self.ledger_changes = 0
        self.changes = 0
        with conn.cursor() as cur:
            cur.execute(LEDGER_DDL)
            cur.execute("SELECT COALESCE(MAX(id), 0) FROM shop.ledger")
            self.next_id = int(cur.fetchone()[0]) + 1
            cur.execute("SELECT LEAST(COALESCE(MIN(id), 0), 0) FROM shop.orders")
            self.moved_id = int(cur.fetchone()[0]) - 1  # orders whose key changes get these

    def _ledger_rows(self, n: int) -> list[tuple[Any, ...]]:
        rows = []
        for _ in range(n):
            amount = f"{self.rng.uniform(-500, 500):.2f}"
            note = self.rng.choice([None, "refund", "fee", "transfer \N{EURO SIGN}"])
            rows.append((self.next_id, f"acct-{self.rng.randint(1, 40)}", amount, note))
            self.next_id += 1
        return rows

    def _ledger(self, cur: Any, sql: str, args: Any = None) -> None:
        self.ledger_changes += cur.execute(sql, args)

    def step(self) -> None:
        """One transaction (or a few small ones) of a randomly chosen kind."""
        rng, cur = self.rng, self.conn.cursor()
        roll = rng.random()
        live = self.next_id - 1
        if roll < 0.35:
            self.changes += sum(
                demo_data.generate_changes(self.conn, rng.randint(3, 15), rng.randrange(1 << 30)).values()
            )
            return
        self.conn.begin()
        before = self.ledger_changes
        if roll < 0.6 or live < 1:
            for row in self._ledger_rows(rng.randint(1, 30)):
                self._ledger(cur, "INSERT INTO shop.ledger VALUES (%s, %s, %s, %s, NOW(6))", row)
        elif roll < 0.75:
            lo = rng.randint(1, live)
            self._ledger(cur, "UPDATE shop.ledger SET amount = amount + 1, updated = NOW(6) "
                              "WHERE id BETWEEN %s AND %s", (lo, lo + rng.randint(0, 40)))  # fmt: skip
        elif roll < 0.85:
            lo = rng.randint(1, live)
            self._ledger(
                cur, "DELETE FROM shop.ledger WHERE id BETWEEN %s AND %s", (lo, lo + rng.randint(0, 5))
            )
        elif roll < 0.9:  # an order's key changes; a deleted ledger key comes back
            self.changes += cur.execute(
                "UPDATE shop.orders SET id = %s WHERE id = %s", (self.moved_id, rng.randint(1, 400))
            )
            self.moved_id -= 1
            key = rng.randint(1, live)
            self._ledger(cur, "DELETE FROM shop.ledger WHERE id = %s", (key,))
            self._ledger(cur, "INSERT INTO shop.ledger VALUES (%s, 'acct-back', 1.00, NULL, NOW(6))", (key,))
        else:  # a large transaction over two tables (a few hundred rows: several batches)
            lo = rng.randint(1, 200)
            self.changes += cur.execute(
                "UPDATE shop.orders SET amount = amount + 0.01 WHERE id BETWEEN %s AND %s", (lo, lo + 150)
            )
            self._ledger(cur, "UPDATE shop.ledger SET note = %s WHERE id BETWEEN %s AND %s",
                         (f"batch {rng.randrange(1000)}", lo, lo + 150))  # fmt: skip
        self.conn.commit()
        self.changes += self.ledger_changes - before


class Writer(threading.Thread):
    """Runs :meth:`Workload.step` every ``interval`` seconds, at most ``steps`` times, until
    :meth:`stop` (a bounded backlog keeps every run short)."""

    def __init__(self, workload: Workload, interval: float, steps: int) -> None:
        super().__init__(name="crash-writer", daemon=True)
        self.workload, self.interval, self.steps = workload, interval, steps
        self._stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for _ in range(self.steps):
                if self._stop_event.wait(self.interval):
                    return
                self.workload.step()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        if self.error is not None:
            raise RuntimeError(f"the crash-matrix writer failed: {self.error!r}") from self.error


# ---------------------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunSpec:
    """What the child process runs (JSON on its command line; connections come from the env)."""

    destination: str
    namespace: str
    warehouse: str
    start_from: str
    spark_master: str = "local[2]"
    commit_rows: int = COMMIT_ROWS

    @property
    def routes(self) -> dict[str, str]:
        """Two of the shop tables (a commit costs one MERGE per target: two keep a run short)."""
        return {f"shop.{t}": self.target(t) for t in ROUTED}

    def target(self, table: str) -> str:
        return f"lake.{self.namespace}.{table}"


def _child(spec: RunSpec, run_id: str, try_number: int) -> None:
    from airflow_provider_binlog.lake.merge import TargetOptions
    from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

    op = BinlogToSparkOperator(
        task_id="load", destination=spec.destination, tables=spec.routes, start_from=spec.start_from,
        warehouse=spec.warehouse, spark_master=spec.spark_master, batch_size=BATCH_SIZE,
        max_rows_per_commit=spec.commit_rows, running_timeout=120,
        target_options={spec.target("ledger"): TargetOptions(append_only=True, metadata_columns=True)},
    )  # fmt: skip
    ti = SimpleNamespace(dag_id="crash_matrix", task_id="load", try_number=try_number, run_id=run_id)
    summary = op.execute({"ti": ti, "run_id": run_id})  # type: ignore[typeddict-item]
    print(SUMMARY_MARK + json.dumps(summary), flush=True)


def run_once(
    spec: RunSpec, env: Mapping[str, str], log: Path, point: KillPoint | None, try_number: int = 1,
    timeout: float = 600,
) -> RunResult:  # fmt: skip
    """One operator run in its own process group, killed at ``point`` (``None``: not killed)."""
    env = {k: v for k, v in env.items() if k != "BINLOG_CDC_FAILPOINTS"}
    if point is not None and point.failpoint:
        env["BINLOG_CDC_FAILPOINTS"] = f"{point.failpoint}=kill@{point.nth}"
    args = [sys.executable, "-m", __name__, "child", json.dumps(asdict(spec)), "crash", str(try_number)]
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            if point is not None and point.failpoint is None:
                _kill_after_reading(proc, log, point.delay, started + timeout)
            proc.wait(timeout=max(1.0, timeout - (time.monotonic() - started)))
        finally:
            with contextlib.suppress(ProcessLookupError):  # a killed run's Spark JVM must not outlive it
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text(errors="replace")
    summary = None
    for line in text.splitlines():
        if line.startswith(SUMMARY_MARK):
            summary = json.loads(line[len(SUMMARY_MARK) :])
    return RunResult(point, proc.returncode, time.monotonic() - started, log, summary)


def _kill_after_reading(proc: subprocess.Popen[bytes], log: Path, delay: float, deadline: float) -> None:
    """SIGKILL ``proc`` ``delay`` seconds after its log says it started reading."""
    while proc.poll() is None and time.monotonic() < deadline:
        if READING_MARK in log.read_text(errors="replace"):
            time.sleep(delay)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            return
        time.sleep(0.05)


# ---------------------------------------------------------------------------------------- checks


def check_ledger_log(
    spark: Any, log_table: str, conn: pymysql.Connection, expected_changes: int
) -> list[str]:
    """Problems with the append-only log of ``shop.ledger`` ([] when it holds each change once)."""
    problems = []
    total = spark.sql(f"SELECT count(*) FROM {log_table}").first()[0]
    if total != expected_changes:
        problems.append(f"{log_table}: {total} logged changes, the writer made {expected_changes}")
    doubled = spark.sql(
        f"SELECT _cdc_position, id, _cdc_op, count(*) AS n FROM {log_table} "
        "GROUP BY _cdc_position, id, _cdc_op HAVING count(*) > 1"
    ).collect()
    if doubled:
        problems.append(f"{log_table}: changes applied twice: " + ", ".join(
            f"{r['_cdc_position']} id={r['id']} {r['_cdc_op']} x{r['n']}" for r in doubled[:10]))  # fmt: skip
    # the newest logged image of every key that still exists equals the source row
    latest = spark.sql(
        f"SELECT id, account, amount, note FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY "
        "split(_cdc_position, ':')[0] DESC, cast(split(_cdc_position, ':')[1] AS bigint) DESC) AS rn "
        f"FROM {log_table}) WHERE rn = 1 AND _cdc_op <> 'delete'"
    ).collect()
    with conn.cursor() as cur:
        cur.execute("SELECT id, account, amount, note FROM shop.ledger")
        source = {int(r[0]): tuple(r[1:]) for r in cur.fetchall()}
    logged = {int(r["id"]): (r["account"], r["amount"], r["note"]) for r in latest}
    if logged != source:
        wrong = sorted(k for k in source.keys() | logged.keys() if source.get(k) != logged.get(k))
        problems.append(f"{log_table}: the newest logged image differs from the source for ids {wrong[:20]}")
    return problems


# ---------------------------------------------------------------------------------------- matrix


@dataclass
class CrashMatrix:
    """Scenarios on one destination (see the module docstring).

    :param conn: an autocommit ``utf8mb4`` connection to the source with the ``shop`` schema (the
        writer's; the checks use it after the writer stopped).
    :param env: the child processes' environment (``AIRFLOW_CONN_MYSQL_DEFAULT``,
        ``AIRFLOW_CONN_ZOOKEEPER_DEFAULT``).
    :param verify: ``verify(tables)`` -> list of difference descriptions (``[]``: equal), with the
        lake read fresh (an uncached catalog on the warehouse); ``tables`` maps source -> target.
    :param spark: reads the ledger log; ``catalog``: the name under which ``verify``/``spark`` see
        the warehouse.
    """

    spec: RunSpec
    env: Mapping[str, str]
    workdir: Path
    conn: pymysql.Connection
    spark: Any
    catalog: str
    verify: Callable[[dict[str, str]], list[str]]
    seed: int = 1
    writer_interval: float = 0.4
    writer_steps: int = 40
    log: Callable[[str], None] = print
    results: list[ScenarioResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.workload = Workload(self.conn, self.seed)

    def scenario(self, kills: int, max_attempts: int | None = None) -> ScenarioResult:
        """Kill phase of ``kills`` actual kills (at most ``max_attempts`` runs), then a clean run
        and the checks."""
        index = len(self.results) + 1
        for _ in range(3):  # something to drain before the first kill
            self.workload.step()
        writer = Writer(
            self.workload, self.writer_interval, self.writer_steps
        )  # the only user of the workload meanwhile
        runs: list[RunResult] = []
        writer.start()
        try:
            attempts = max_attempts or kills * 3
            while sum(r.killed for r in runs) < kills and len(runs) < attempts:
                point = KillPoint.random(self.rng)
                run = self._run(index, len(runs) + 1, point)
                runs.append(run)
                if not run.killed and run.returncode != 0:
                    raise RuntimeError(
                        f"scenario {index}: run at kill point {point} failed without a kill "
                        f"(exit {run.returncode}); log {run.log}:\n{run.tail()}"
                    )
        finally:
            writer.stop()
        final = self._run(index, len(runs) + 1, None, replace(self.spec, commit_rows=20 * COMMIT_ROWS))
        runs.append(final)
        if final.returncode != 0:
            raise RuntimeError(
                f"scenario {index}: the clean run failed (exit {final.returncode}); log {final.log}:\n"
                + final.tail()
            )
        result = ScenarioResult(index, runs, self.workload.changes)
        self.workload.changes = 0
        tables = {"shop.orders": f"{self.catalog}.{self.spec.namespace}.orders"}
        result.diffs = self.verify(tables) + check_ledger_log(
            self.spark,
            f"{self.catalog}.{self.spec.namespace}.ledger",
            self.conn,
            self.workload.ledger_changes,
        )
        self.results.append(result)
        self.log(self.describe(result))
        return result

    def _run(self, index: int, n: int, point: KillPoint | None, spec: RunSpec | None = None) -> RunResult:
        log = self.workdir / f"scenario{index:02d}-run{n:02d}.log"
        return run_once(spec or self.spec, self.env, log, point, try_number=n)

    @staticmethod
    def describe(result: ScenarioResult) -> str:
        points = ", ".join(
            f"{r.point}{'' if r.killed else ' (not reached)'}" for r in result.runs if r.point is not None
        )
        verdict = "DIVERGED: " + "; ".join(result.diffs) if result.diverged else "lake == source"
        return (
            f"scenario {result.index}: {len(result.kills)} kills [{points}], "
            f"{result.changes_written} changes, {sum(r.seconds for r in result.runs):.0f} s; {verdict}"
        )

    def report(self) -> str:
        """Kill points tried per kind, kills, divergences."""
        by_kind: dict[str, list[int]] = {}
        for res in self.results:
            for r in res.runs:
                if r.point is not None:
                    tried = by_kind.setdefault(r.point.kind, [0, 0])
                    tried[0] += 1
                    tried[1] += r.killed
        kills = sum(len(r.kills) for r in self.results)
        diverged = sum(r.diverged for r in self.results)
        kinds = ", ".join(f"{k} {v[1]}/{v[0]}" for k, v in sorted(by_kind.items()))
        return (
            f"crash matrix (seed {self.seed}): {len(self.results)} scenarios, {kills} kills "
            f"(killed/tried per kill point: {kinds}), {diverged} divergences"
        )


def _main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "child":
        _child(RunSpec(**json.loads(argv[1])), argv[2], int(argv[3]))
        return 0
    print("usage: python -m airflow_provider_binlog.dev.crash child SPEC_JSON RUN_ID TRY", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
