"""Crash matrix (issue #8): the operator's process SIGKILLed at chosen points, rerun, lake == source.

The scenarios are :mod:`airflow_provider_binlog.dev.crash`'s: a writer changes the ``shop`` tables
while runs are killed at failpoints (drain, before_commit, merge_table, file_written,
mark_tag, after_commit, ack, after_ack) or at a random moment mid-run (a timer); then a clean run;
the lake table of ``shop.orders`` is compared with its source value by value, and the append-only
change log of ``shop.ledger`` must hold each change once. Each kill point lies within the hits its run is
certain to make (the harness writes a known amount of changes before each run), so every planned
kill happens on any machine, fast or slow, and the kinds take turns (all nine in every nine
kills). After each kill, Iceberg maintenance as a user runs it on both lake tables, a random round
of full expiry (``retain_last => 1``), compaction, delete-file and manifest rewrites and orphan
removal (:mod:`airflow_provider_binlog.dev.user_maintenance`; ``BINLOG_CDC_CRASH_MAINTENANCE=off``:
none), so each retry finds its crashed run's marks only where no maintenance can remove them.

CI setting: 5 scenarios x 4 kills (20 kills). ``BINLOG_CDC_CRASH_SCENARIOS``,
``BINLOG_CDC_CRASH_KILLS`` and ``BINLOG_CDC_CRASH_SEED`` change it (``bench/reliability.py`` runs
larger settings). The seed is in every failure message and in the figures, so a failing sequence
of kill points can be replayed.
"""

from __future__ import annotations

import functools
import os
import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import Shop, in_catalog, mysql_uri, warehouse_catalog, zookeeper_uri
from figures import FIGURES

from airflow_provider_binlog.dev import user_maintenance
from airflow_provider_binlog.dev.crash import KINDS, CrashMatrix, RunSpec
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.lake.verify.verify import verify_tables

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SCENARIOS = int(os.environ.get("BINLOG_CDC_CRASH_SCENARIOS", "5"))
KILLS = int(os.environ.get("BINLOG_CDC_CRASH_KILLS", "4"))
MAINTENANCE_ENV = "BINLOG_CDC_CRASH_MAINTENANCE"  # off: no maintenance between a kill and its retry


def test_crash_matrix(
    shop: Shop, mariadb: MariaDbServer, zookeeper: ZooKeeperServer, zk_chroot: str, spark: Any, tmp_path: Path
) -> None:
    seed = int(os.environ.get("BINLOG_CDC_CRASH_SEED") or random.randrange(1 << 20))
    ns = f"crash_{uuid.uuid4().hex[:8]}"
    warehouse = tmp_path / "warehouse"
    spec = RunSpec(f"crash-{ns}", ns, str(warehouse), shop.start_from)
    env = {
        **os.environ,
        "AIRFLOW_CONN_MYSQL_DEFAULT": mysql_uri(mariadb),
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zookeeper_uri(zookeeper, zk_chroot),
    }
    catalog = warehouse_catalog(spark, warehouse)

    def verify(tables: dict[str, str]) -> list[str]:
        conn = mariadb.connect()
        try:
            diffs = verify_tables(conn, spark, in_catalog(tables, catalog))
        finally:
            conn.close()
        return [d.describe() for d in diffs if not d.equal]

    lake = [f"{catalog}.{ns}.{t}" for t in ("orders", "ledger")]
    maintain = None
    if os.environ.get(MAINTENANCE_ENV, "on").lower() not in ("off", "0", "false"):
        maintain = functools.partial(user_maintenance.random_round, spark, lake)
    matrix = CrashMatrix(spec, env, tmp_path, shop.conn, spark, catalog, verify, seed=seed, maintain=maintain)
    for _ in range(SCENARIOS):
        result = matrix.scenario(KILLS)  # raises (naming the seed) when a run outlives its kill point
        assert not result.diverged, f"seed {seed}: {matrix.describe(result)}"
    report = matrix.report()
    FIGURES.append(report)
    kills = [r for res in matrix.results for r in res.kills]
    planned = SCENARIOS * KILLS
    assert len(kills) == planned, f"seed {seed}: {len(kills)} kills, {planned} planned; {report}"
    kinds = {r.point.kind for r in kills if r.point is not None}
    assert len(kinds) == min(len(KINDS), planned), f"seed {seed}: kills at too few kinds of points: {report}"
