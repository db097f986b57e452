"""Exactly-once through Iceberg maintenance run between a crash and its retry (issue #43): the
operator's process SIGKILLed after the lake commit and before the ack (``after_commit``), or after
a commit and before its mark's tag moved (``mark_tag``), then the user's own maintenance on both
lake tables (full expiry ``retain_last => 1``, ``rewrite_data_files``, ``rewrite_position_delete_files``,
``rewrite_manifests``, orphan removal), then the retry: the keyed table equals its source value by
value and the append-only change log of ``shop.ledger`` holds each change exactly once. Real
MariaDB, ZooKeeper, Spark + Iceberg; the runs are :mod:`airflow_provider_binlog.dev.crash`'s."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import Shop, in_catalog, mysql_uri, warehouse_catalog, zookeeper_uri

from airflow_provider_binlog.dev import user_maintenance
from airflow_provider_binlog.dev.crash import (
    FRESH_LEDGER,
    KillPoint,
    RunSpec,
    Workload,
    check_ledger_log,
    run_once,
)
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.lake.verify.verify import verify_tables

pytestmark = [pytest.mark.integration, pytest.mark.spark]


# (kill point, maintenance between the kill and the retry)
SCENARIOS = [
    (KillPoint("after_commit", 1), ["expire"]),
    (KillPoint("after_commit", 2), ["rewrite_data", "expire"]),
    (KillPoint("mark_tag", 1), ["rewrite_data", "rewrite_deletes", "expire"]),
    (
        KillPoint("after_commit", 1),
        ["rewrite_deletes", "rewrite_manifests", "rewrite_data", "remove_orphans", "expire"],
    ),
    (KillPoint("mark_tag", 2), ["rewrite_manifests", "rewrite_data", "expire", "remove_orphans"]),
]


def test_a_crash_then_maintenance_then_the_retry_applies_each_change_once(
    shop: Shop, mariadb: MariaDbServer, zookeeper: ZooKeeperServer, zk_chroot: str, spark: Any, tmp_path: Path
) -> None:
    ns = f"maint_{uuid.uuid4().hex[:8]}"
    warehouse = tmp_path / "warehouse"
    spec = RunSpec(f"maint-{ns}", ns, str(warehouse), shop.start_from)
    env = {
        **os.environ,
        "AIRFLOW_CONN_MYSQL_DEFAULT": mysql_uri(mariadb),
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zookeeper_uri(zookeeper, zk_chroot),
    }
    catalog = warehouse_catalog(spark, warehouse)
    orders, ledger = f"{catalog}.{ns}.orders", f"{catalog}.{ns}.ledger"
    workload = Workload(shop.conn, seed=43)
    workload.fill(FRESH_LEDGER)
    first = run_once(spec, env, tmp_path / "run00.log", None)
    assert first.returncode == 0, first.tail()
    logged = spark.sql(f"SELECT count(*) FROM {ledger}").first()[0]  # the ledger's earlier changes too
    counted = workload.ledger_changes
    for i, (point, maintenance) in enumerate(SCENARIOS, 1):
        workload.fill(FRESH_LEDGER)
        killed = run_once(spec, env, tmp_path / f"run{i:02d}-killed.log", point)
        assert killed.killed, f"scenario {i}: not killed at {point}:\n{killed.tail()}"
        user_maintenance.run(spark, [orders, ledger], maintenance)
        retry = run_once(spec, env, tmp_path / f"run{i:02d}-retry.log", None, try_number=2)
        assert retry.returncode == 0, f"scenario {i}: the retry failed:\n{retry.tail()}"
        conn = mariadb.connect()
        try:
            diffs = [
                d.describe()
                for d in verify_tables(
                    conn, spark, in_catalog({"shop.orders": spec.target("orders")}, catalog)
                )
                if not d.equal
            ]
        finally:
            conn.close()
        expected = logged + workload.ledger_changes - counted
        problems = diffs + check_ledger_log(spark, ledger, shop.conn, expected)
        assert not problems, f"scenario {i} ({point}, then {maintenance}): {problems}"
