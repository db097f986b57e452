"""Crash matrix: SIGKILL the operator's process at chosen points, rerun, compare lake with source.

One scenario, on one destination that every scenario continues (the cursor and the lake carry
over, so each scenario costs the same)::

    a writer thread changes the shop tables (small and large transactions, key changes,
        delete + re-insert) for the whole kill phase
    kill phase: k runs of a drain, each in its own process (as an Airflow task runs), each
        SIGKILLed at a kill point it is certain to reach (see below)
    writer stopped; one run without a kill point (it must succeed)
    with ``maintain``: after each killed run, Iceberg maintenance as a user runs it (full expiry,
        compaction, delete-file and manifest rewrites, orphan removal: :mod:`.user_maintenance`)
    check: the lake table merged from ``shop.orders`` equals it value by value (:mod:`..lake.verify.verify`),
        and the append-only change log of ``shop.ledger`` holds every row change the writer made
        exactly once (count equal, no (position, key, op) twice, newest image per key equal to the
        source row): nothing lost, nothing doubled

How kill points are chosen. Before each run the writer is paused and the harness itself writes at
least ``fresh_ledger`` row changes of ``shop.ledger`` (counted exactly, from the server's affected
rows). The previous run has ended and this one has not started, so all of them lie after the
previous run's stop point and before this run's: the run reads them whatever the machine's speed.
That fixes lower bounds on the hits it makes (:func:`certain_hits`): a batch holds at most
``BATCH_SIZE`` entries and every batch is acked, so ``drain`` and ``ack`` are hit at least
``ceil(L / BATCH_SIZE)`` times for ``L`` fresh ledger changes; a chunk is committed once it holds
``commit_rows`` row images and a batch adds at most ``BATCH_SIZE`` (every change of an append-only
target is an image), so ``before_commit``, ``after_commit``, ``after_ack``, the ledger's
``merge_table``, its ``mark_tag`` (after its commit, before its mark's tag moves) and its
``file_written`` (the driver writes the ledger's chunk as a data file,
:mod:`..lake.native.file_append`; the other tables' MERGEs by the driver hit it too,
:mod:`..lake.native.position_delta`) are hit at least ``ceil(L / (commit_rows + BATCH_SIZE))`` times. A
kill point is the ``n``-th hit of a failpoint with ``n`` drawn within that bound, so every planned
kill happens; one that does not is an error (the bound, or the drain, changed). The kinds take
turns in a seeded order (every kind once per ``len(KINDS)`` kills): the eight failpoints (drain,
before_commit, merge_table, file_written, mark_tag, after_commit, ack, after_ack: see :mod:`..faults`) and
``timer``, a kill at a random moment mid-run: the first ``drain`` hit (the first batch read)
starts a timer of a random delay that SIGKILLs the process wherever it is (reading, starting
Spark, inside a MERGE, acking); should the run reach its last certain ``after_ack`` hit first, the
kill lands there.

Used by ``tests/faults/test_crash_matrix.py`` (the CI setting) and ``bench/reliability.py``
(larger settings); the per-run process is ``python -m airflow_provider_binlog.dev.crash child SPEC``.
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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pymysql

from airflow_provider_binlog.dev import demo_data
from airflow_provider_binlog.faults import ENV, KILL_MARK

FAILPOINTS = (
    "drain", "before_commit", "merge_table", "file_written", "mark_tag", "after_commit", "ack", "after_ack",
)  # fmt: skip
TIMER = "timer"
KINDS = (*FAILPOINTS, TIMER)
TIMER_STARTS_AT = "drain"  # a timer kill's timer starts at the first hit of this failpoint
TIMER_LANDS_BY = "after_ack"  # ... and the kill lands at the n-th hit of this one at the latest
TIMER_MAX_DELAY = 6.0  # seconds (about the time a kill-phase run takes from its first batch on)
BATCH_SIZE = 20
COMMIT_ROWS = 100
# fresh ledger changes before each kill-phase run: >= 2 commits and >= 7 batches it must make
FRESH_LEDGER = COMMIT_ROWS + BATCH_SIZE + 1
SUMMARY_MARK = "CRASH-SUMMARY "
LEDGER_DDL = """
    CREATE TABLE IF NOT EXISTS `shop`.`ledger` (
        id INT PRIMARY KEY,
        account VARCHAR(20) NOT NULL,
        amount DECIMAL(12, 2) NOT NULL,
        note VARCHAR(64),
        updated DATETIME(6) NOT NULL
    )"""
ROUTED = ("orders", "ledger")


def certain_hits(ledger_changes: int, commit_rows: int = COMMIT_ROWS) -> dict[str, int]:
    """Hits per kill-point kind that a run reading at least ``ledger_changes`` changes of the
    append-only ``shop.ledger`` (ones that no earlier run committed) is certain to make (see the
    module docstring)."""
    batches = -(-ledger_changes // BATCH_SIZE)
    commits = -(-ledger_changes // (commit_rows + BATCH_SIZE))
    hits = {"drain": batches, "ack": batches}
    per_commit = (
        "before_commit",
        "merge_table",
        "file_written",
        "mark_tag",
        "after_commit",
        "after_ack",
        TIMER,
    )
    hits |= dict.fromkeys(per_commit, commits)
    return hits


@dataclass(frozen=True)
class KillPoint:
    """Where a run is killed: the ``nth`` hit of failpoint ``kind``, or (``kind`` ``timer``)
    ``delay`` seconds after the first hit of ``TIMER_STARTS_AT``, at the latest at the ``nth`` hit
    of ``TIMER_LANDS_BY`` (a batch is read before any commit, so the timer starts before that)."""

    kind: str
    nth: int = 1
    delay: float = 0.0

    def __str__(self) -> str:
        if self.kind == TIMER:
            return f"{TIMER}({TIMER_STARTS_AT}@1+{self.delay:.2f}s|{TIMER_LANDS_BY}@{self.nth})"
        return f"{self.kind}@{self.nth}"

    @property
    def failpoints(self) -> str:
        """The ``BINLOG_CDC_FAILPOINTS`` value that kills there."""
        if self.kind == TIMER:
            return f"{TIMER_STARTS_AT}=kill@1+{self.delay:.3f},{TIMER_LANDS_BY}=kill@{self.nth}"
        return f"{self.kind}=kill@{self.nth}"

    @classmethod
    def random(cls, rng: random.Random, kind: str, hits: Mapping[str, int]) -> KillPoint:
        """A point of ``kind`` within the ``hits`` the run is certain to make (a timer lands by
        the last of them)."""
        if kind == TIMER:
            return cls(kind, hits[kind], round(rng.uniform(0.0, TIMER_MAX_DELAY), 3))
        return cls(kind, rng.randint(1, hits[kind]))


@dataclass
class RunResult:
    """One operator process: where it was to be killed, whether it was (and where the kill
    landed, as its failpoint wrote it), its summary if it finished."""

    point: KillPoint | None
    returncode: int
    seconds: float
    log: Path
    summary: dict[str, Any] | None = None
    landed: str | None = None
    maintenance: str = ""  # what the user's maintenance ran after this run, before the next

    @property
    def killed(self) -> bool:
        """Killed by its kill point (a SIGKILL that no failpoint announced is not counted)."""
        return self.returncode == -signal.SIGKILL and self.landed is not None

    @property
    def timer_note(self) -> str:
        """`` (at after_ack)`` for a timer kill that landed at ``TIMER_LANDS_BY``, else ``""``."""
        timer = self.point is not None and self.point.kind == TIMER
        return (
            f" (at {TIMER_LANDS_BY})"
            if timer and (self.landed or "").startswith(f"{TIMER_LANDS_BY}@")
            else ""
        )

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

    def fill(self, ledger_changes: int, max_steps: int = 1000) -> int:
        """Steps until at least ``ledger_changes`` changes of ``shop.ledger`` were made; returns
        how many were (exactly, as the server counted them)."""
        before, steps = self.ledger_changes, 0
        while self.ledger_changes - before < ledger_changes:
            if steps == max_steps:
                raise RuntimeError(f"{steps} workload steps made fewer than {ledger_changes} ledger changes")
            self.step()
            steps += 1
        return self.ledger_changes - before


class Writer(threading.Thread):
    """Runs :meth:`Workload.step` every ``interval`` seconds, at most ``steps`` times, until
    :meth:`stop` (a bounded backlog keeps every run short); :meth:`paused` hands the workload to
    the caller between two steps."""

    def __init__(self, workload: Workload, interval: float, steps: int) -> None:
        super().__init__(name="crash-writer", daemon=True)
        self.workload, self.interval, self.steps = workload, interval, steps
        self._stop_event = threading.Event()
        self._turn = threading.Lock()  # held by whoever uses the workload
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for _ in range(self.steps):
                if self._stop_event.wait(self.interval):
                    return
                with self._turn:
                    self.workload.step()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    @contextlib.contextmanager
    def paused(self) -> Iterator[Workload]:
        """The workload, with no step of this thread running until the block ends."""
        with self._turn:
            yield self.workload

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
    """One drain run in this process, as the operator's task would run it: connections from
    ``AIRFLOW_CONN_MYSQL_DEFAULT`` / ``AIRFLOW_CONN_ZOOKEEPER_DEFAULT``, the log on stdout."""
    import logging

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
    from airflow_provider_binlog.drain.wiring import source_from_uri
    from airflow_provider_binlog.lake.spark.session import create_session
    from airflow_provider_binlog.lake.write.merge import TargetOptions

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(message)s")
    for noisy in ("py4j", "kazoo"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    source = source_from_uri(os.environ["AIRFLOW_CONN_MYSQL_DEFAULT"], "AIRFLOW_CONN_MYSQL_DEFAULT")
    zookeeper = ZooKeeperConfig.from_uri(
        os.environ["AIRFLOW_CONN_ZOOKEEPER_DEFAULT"], "AIRFLOW_CONN_ZOOKEEPER_DEFAULT"
    )
    routes = Routes(spec.routes)
    limits = Limits(batch_size=BATCH_SIZE, max_rows_per_commit=spec.commit_rows)
    label = f"crash_matrix/load/{run_id}/try-{try_number}"
    settings = RunSettings(
        run_id=run_id, label=label, try_number=try_number, limits=limits, running_timeout=120
    )
    config = InstanceConfig(
        spec.destination,
        source,
        routes.filter(),
        start=parse_point(spec.start_from),
        **store_capacity(limits),
    )
    wiring = Wiring(zookeeper)
    try:
        summary = Drain(
            wiring.instance(config, label), routes, settings,
            spark=lambda: create_session(
                app_name=f"binlog-cdc-{spec.destination}", master=spec.spark_master, warehouse=spec.warehouse
            ),
            connect=lambda: source_connection(source),
            target_options={spec.target("ledger"): TargetOptions(append_only=True, metadata_columns=True)},
        ).run("head")  # fmt: skip
    finally:
        wiring.close()
    print(SUMMARY_MARK + json.dumps(summary), flush=True)


def run_once(
    spec: RunSpec, env: Mapping[str, str], log: Path, point: KillPoint | None, try_number: int = 1,
    timeout: float = 600,
) -> RunResult:  # fmt: skip
    """One operator run in its own process group, killed at ``point`` (``None``: not killed)."""
    env = {k: v for k, v in env.items() if k != ENV}
    if point is not None:
        env[ENV] = point.failpoints
    args = [sys.executable, "-m", __name__, "child", json.dumps(asdict(spec)), "crash", str(try_number)]
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):  # a killed run's Spark JVM must not outlive it
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    summary = landed = None
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(SUMMARY_MARK):
            summary = json.loads(line[len(SUMMARY_MARK) :])
        elif line.startswith(KILL_MARK):
            landed = line[len(KILL_MARK) :]
    return RunResult(point, proc.returncode, time.monotonic() - started, log, summary, landed)


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
    :param fresh_ledger: ledger changes the harness writes before each kill-phase run (the hits
        a run is certain to make follow from them: :func:`certain_hits`).
    """

    spec: RunSpec
    env: Mapping[str, str]
    workdir: Path
    conn: pymysql.Connection
    spark: Any
    catalog: str
    verify: Callable[[dict[str, str]], list[str]]
    seed: int = 1
    # the writer's steps come on top of the fresh changes: 20 over 16 s (40 before those came)
    writer_interval: float = 0.8
    writer_steps: int = 20
    fresh_ledger: int = FRESH_LEDGER
    log: Callable[[str], None] = print
    results: list[ScenarioResult] = field(default_factory=list)
    maintain: Callable[[random.Random], str] | None = None
    """Called after each killed run, before the next: Iceberg maintenance as a user runs it on the
    lake tables (:func:`.user_maintenance.random_round`); returns what it ran, for the report. Its
    random draws come from their own seeded generator (the kill points stay those of the seed)."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.maintenance_rng = random.Random(self.seed + 1)
        self.workload = Workload(self.conn, self.seed)
        self._turns: list[str] = []

    def scenario(self, kills: int) -> ScenarioResult:
        """Kill phase of ``kills`` runs, each killed at its kill point, then a clean run and the
        checks.

        :raises RuntimeError: a run that was not killed at its kill point (it ended first or
            failed), or a clean run that failed; the message names the seed and the run's log.
        """
        index = len(self.results) + 1
        writer = Writer(self.workload, self.writer_interval, self.writer_steps)  # the workload's user
        runs: list[RunResult] = []
        writer.start()
        try:
            for n in range(1, kills + 1):
                with writer.paused() as workload:  # after the last run ended, before this one starts
                    fresh = workload.fill(self.fresh_ledger)
                hits = certain_hits(fresh, self.spec.commit_rows)
                point = KillPoint.random(self.rng, self._next_kind(), hits)
                run = self._run(index, n, point)
                runs.append(run)
                if not run.killed:
                    raise RuntimeError(
                        f"crash matrix seed {self.seed}, scenario {index}: run {n} was not killed at "
                        f"{point}, within the {hits[point.kind]} hits that a run reading {fresh} new "
                        f"ledger changes is certain to make (exit {run.returncode}); log {run.log}:\n"
                        + run.tail()
                    )
                if self.maintain is not None:  # between the kill and the retry
                    run.maintenance = self.maintain(self.maintenance_rng)
        finally:
            writer.stop()
        final = self._run(index, kills + 1, None, replace(self.spec, commit_rows=20 * COMMIT_ROWS))
        runs.append(final)
        if final.returncode != 0:
            raise RuntimeError(
                f"crash matrix seed {self.seed}, scenario {index}: the clean run failed "
                f"(exit {final.returncode}); log {final.log}:\n" + final.tail()
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

    def _next_kind(self) -> str:
        """The kinds take turns, in a new seeded order every ``len(KINDS)`` kills."""
        if not self._turns:
            self._turns = self.rng.sample(KINDS, len(KINDS))
        return self._turns.pop()

    def _run(self, index: int, n: int, point: KillPoint | None, spec: RunSpec | None = None) -> RunResult:
        log = self.workdir / f"scenario{index:02d}-run{n:02d}.log"
        return run_once(spec or self.spec, self.env, log, point, try_number=n)

    @staticmethod
    def describe(result: ScenarioResult) -> str:
        points = ", ".join(
            f"{r.point}{r.timer_note}" + (f" then {r.maintenance}" if r.maintenance else "")
            for r in result.runs
            if r.point is not None
        )
        verdict = "DIVERGED: " + "; ".join(result.diffs) if result.diverged else "lake == source"
        return (
            f"scenario {result.index}: {len(result.kills)} kills [{points}], "
            f"{result.changes_written} changes, {sum(r.seconds for r in result.runs):.0f} s; {verdict}"
        )

    def report(self) -> str:
        """Kills per kind of kill point (timer kills: how many landed at ``TIMER_LANDS_BY``),
        divergences."""
        by_kind = dict.fromkeys(KINDS, 0)
        late_timers = 0
        for res in self.results:
            for r in res.kills:
                assert r.point is not None
                by_kind[r.point.kind] += 1
                late_timers += bool(r.timer_note)
        kills = sum(by_kind.values())
        diverged = sum(r.diverged for r in self.results)
        kinds = ", ".join(f"{k} {v}" for k, v in by_kind.items())
        late = f" ({late_timers} of them at {TIMER_LANDS_BY}, before the timer fired)" if late_timers else ""
        return (
            f"crash matrix (seed {self.seed}): {len(self.results)} scenarios, {kills} kills ({kinds}{late}), "
            f"{diverged} divergences"
        )


def _main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "child":
        _child(RunSpec(**json.loads(argv[1])), argv[2], int(argv[3]))
        return 0
    print("usage: python -m airflow_provider_binlog.dev.crash child SPEC_JSON RUN_ID TRY", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
