"""``airflow dags test`` of both example DAGs against the real MariaDB, ZooKeeper and Spark.

Each run is a subprocess with env-var connections (as in :mod:`airflow_provider_binlog.dev.demo`);
the lake is then read through a catalog registered in this process's Spark and compared with
MariaDB value by value (:func:`~airflow_provider_binlog.lake.verify.verify_tables`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from airflow_harness import (
    SHOP_TABLES,
    Shop,
    in_catalog,
    lake_verify,
    meta_manager,
    run_dag,
    warehouse_catalog,
)

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SHOP = ClientIdentity("shop", 1001)


def _assert_equal(mariadb: MariaDbServer, spark: Any, tables: dict[str, str]) -> None:
    diffs = lake_verify(mariadb, spark, tables)
    assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
    assert all(d.source_rows > 0 for d in diffs), [d.describe() for d in diffs]


def _copy_schema(mariadb: MariaDbServer, source: str, target: str) -> None:
    """``target`` := a copy of every table of ``source`` now (the source as of this moment)."""
    mariadb.execute(f"DROP DATABASE IF EXISTS `{target}`")
    mariadb.execute(f"CREATE DATABASE `{target}`")
    for (table,) in mariadb.execute(
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (source,)
    ):
        mariadb.execute(f"CREATE TABLE `{target}`.`{table}` LIKE `{source}`.`{table}`")
        mariadb.execute(f"INSERT INTO `{target}`.`{table}` SELECT * FROM `{source}`.`{table}`")


@pytest.mark.timeout(1800)  # two `airflow dags test` runs, each starting Spark
def test_incremental_then_backfill_dags(
    shop: Shop,
    dag_env: Any,
    mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer,
    zk_chroot: str,
    spark: Any,
    tmp_path: Path,
) -> None:
    """The incremental DAG loads everything up to the head; the backfill DAG (conf: start, stop,
    targets) rebuilds the tables as they were at a past position, under its own destination,
    without moving the live cursor."""
    shop.changes(200)
    middle = shop.head()
    _copy_schema(mariadb, "shop", "shop_at_middle")
    shop.changes(120)
    env = dag_env(shop.start_from)

    run = run_dag(env, "example_binlog_incremental", tmp_path / "incremental.log")
    assert run.succeeded, run.tail()
    assert run.summary("shop"), run.tail()
    catalog = warehouse_catalog(spark, tmp_path / "warehouse")
    _assert_equal(mariadb, spark, in_catalog(SHOP_TABLES, catalog))

    meta = meta_manager(zookeeper, zk_chroot)
    try:
        cursor = meta.get_cursor(SHOP).value
        assert cursor is not None and cursor.binlog_position is not None
        head = BinlogPosition.parse(shop.head())
        assert cursor.binlog_position <= head
        (record,) = meta.runs(SHOP).values()
        assert record["state"] == "success" and record["end"] == str(cursor.binlog_position)

        conf = {
            "start_from": shop.start_from,
            "stop_at": middle,
            "targets": {"shop.*": "lake.shop_backfill.{table}"},
        }
        backfill = run_dag(env, "example_binlog_backfill", tmp_path / "backfill.log", conf=conf)
        assert backfill.succeeded, backfill.tail()
        assert meta.get_cursor(SHOP).value == cursor, "a backfill moved the live cursor"
        destinations = meta.client.get_children("/otter/canal/destinations")
        assert any(d.startswith("backfill-") for d in destinations), destinations
    finally:
        meta.client.stop()
        meta.client.close()
    middle_tables = {
        f"shop_at_middle.{t}": f"{catalog}.shop_backfill.{t}" for t in ("customers", "products", "orders")
    }
    try:
        _assert_equal(mariadb, spark, middle_tables)
    finally:
        mariadb.execute("DROP DATABASE IF EXISTS shop_at_middle")
    done = [line for line in backfill.log.splitlines() if ": done," in line]
    assert done and middle.split(":")[0] in done[0], backfill.tail()
