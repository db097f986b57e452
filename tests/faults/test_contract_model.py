"""The randomized live model check of the source-operation contract (issue #14).

DML, XA (commit, rollback, one phase, one held prepared across a stop point), every DDL class the
contract covers, partition maintenance and statement-format writes, interleaved by a seed, written
to a real MariaDB and loaded by ``BinlogToSparkOperator`` into Iceberg over several runs, each run
crashed at random ``raise`` failpoints and retried until it completes; after every completed run
each lake table must equal its source table (columns and values) and no lake table may exist for a
table that was never routed. Details: :mod:`contract_model`.

CI setting: 8 rounds of 10 operations of seed ``CI_SEED``. ``BINLOG_CDC_CONTRACT_SEED`` replays
another seed, ``BINLOG_CDC_CONTRACT_SEED=random`` draws one;
``BINLOG_CDC_CONTRACT_ROUNDS`` / ``BINLOG_CDC_CONTRACT_OPS`` make a longer run;
``BINLOG_CDC_CONTRACT_SWAPS=0`` leaves out RENAME TABLE, gh-ost and pt-osc swaps (on since that work
landed); ``BINLOG_CDC_CONTRACT_STATEMENT_RESNAPSHOT=1`` uses the statement-DML remedy by option (off
until that work landed). The seed is printed first and named in every failure.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from typing import Any

import pymysql
import pytest
from contract_model import ENV_OPS, ENV_ROUNDS, ENV_SEED, Runs, Workload, database
from figures import FIGURES

from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROUNDS = int(os.environ.get(ENV_ROUNDS, "8"))
#: the seed a plain run (CI) replays: a red CI must mean the product changed, not a new draw; new
#: draws with BINLOG_CDC_CONTRACT_SEED=random (seeds that passed on 2026-11-24: 1, 5, 166455, 209773,
#: 233017, 798142 at 25 x 12, 1048548)
CI_SEED = 1048548
OPS = int(os.environ.get(ENV_OPS, "10"))


def test_contract_model(
    mariadb: MariaDbServer, zookeeper: ZooKeeperServer, zk_chroot: str, spark: Any, spark_warehouse: str,
    conns: dict[str, str],
) -> None:  # fmt: skip
    chosen = os.environ.get(ENV_SEED) or str(CI_SEED)
    seed = random.randrange(1 << 20) if chosen == "random" else int(chosen)
    print(f"\ncontract model: seed {seed} ({ENV_SEED}={seed} replays it), {ROUNDS} rounds x {OPS} operations")
    started = time.monotonic()
    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    with database(mariadb) as (db, start):
        workload = Workload(mariadb, db, seed, log)
        runs = Runs(workload, spark, spark_warehouse, zookeeper, zk_chroot, start, uuid.uuid4().hex[:8], log)

        def failed(what: str) -> str:
            ops = "\n".join(workload.ops_log[-80:])
            return f"contract model seed {seed}, round {workload.round}: {what}\nthe last statements:\n{ops}"

        try:
            workload.create()
            plan = workload.schedule(ROUNDS, OPS)
            runs.complete()
            problems = runs.check()
            assert not problems, failed("\n".join(problems))
            for number, ops in enumerate(plan, 1):
                workload.round = number
                workload.resolve_held()
                workload.resnapshotted = set()
                log(f"round {number}: {', '.join(ops)}")
                heads: list[tuple[int, str]] = []
                for i, op in enumerate(ops):
                    try:
                        workload.do(op)
                    except pymysql.err.Error as exc:  # the workload's own statement, not a run
                        raise AssertionError(failed(f"the workload's {op} failed: {exc}")) from exc
                    if workload.statement_pending is None:
                        heads.append((i, workload.head()))
                try:
                    if heads and runs.rng.random() < 0.4:  # a run to a point inside the round first
                        i, point = runs.rng.choice(heads)
                        log(f"    run to {point} (after operation {i + 1})")
                        runs.complete(stop_at=point)
                    if workload.statement_pending is not None:
                        runs.statement_stop()
                    else:
                        runs.complete()
                except AssertionError as exc:
                    raise AssertionError(failed(str(exc))) from exc
                except Exception as exc:
                    raise AssertionError(failed(f"a run failed: {type(exc).__name__}: {exc}")) from exc
                problems = runs.check()
                assert not problems, failed("\n".join(problems))
                log(f"    lake == source ({len(runs.routed)} tables)")
        finally:
            workload.close()
    s = runs.stats
    ops_done = ", ".join(f"{k} {v}" for k, v in sorted(workload.counts.items()))
    crash_points = ", ".join(f"{k} {v}" for k, v in sorted(s.crash_points.items())) or "none"
    figure = (
        f"contract model (seed {seed}): {ROUNDS} rounds, {sum(workload.counts.values())} operations "
        f"({ops_done}); {s.runs} runs, {s.completed} completed, {s.crashes} crashes ({crash_points}), "
        f"{s.not_reached} failpoints not reached, {s.maintenance} maintenance rounds before a retry, "
        f"{s.stops} statement-DML stops ({s.covered} passed, "
        f"covered by a re-snapshot), {s.generations} destinations, "
        f"{s.checks} checks ({s.missing_empty} times an empty table without lake table), 0 divergences, "
        f"{time.monotonic() - started:.0f} s"
    )
    FIGURES.append(figure)
    print(figure)
    assert s.crashes > 0, f"seed {seed}: no run crashed ({figure})"


def test_xa_held_over_a_statement_stop_and_its_remedy(
    mariadb: MariaDbServer, zookeeper: ZooKeeperServer, zk_chroot: str, spark: Any, spark_warehouse: str,
    conns: dict[str, str],
) -> None:  # fmt: skip
    """The sequence the model reaches by chance, made certain: an XA transaction prepared before a
    statement-format write and committed after the remedy's runs (the new destination's snapshot
    starts after its XA PREPARE)."""
    with database(mariadb) as (db, start):
        workload = Workload(mariadb, db, 7, print)
        tag = uuid.uuid4().hex[:8]
        runs = Runs(workload, spark, spark_warehouse, zookeeper, zk_chroot, start, tag, print)
        try:
            workload.create()
            runs.complete(first_failpoint=False)
            assert workload.op_xa_hold()
            held = workload.held
            assert held is not None
            table = next(t for t in ("t0", "t1") if t != held.table)
            workload.statement_pending = (table, workload._statement(table) or "")
            workload.round = 1
            runs.statement_stop()
            assert not runs.check()
            workload.round = 2
            workload.resolve_held("COMMIT")
            runs.complete(first_failpoint=False)
            problems = runs.check()
            assert not problems, "\n".join(problems)
        finally:
            workload.close()
