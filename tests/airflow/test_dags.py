"""``airflow dags test`` of the example DAGs against the real MariaDB, ZooKeeper and Spark.

Each run is a subprocess with env-var connections (as in :mod:`airflow_provider_binlog.dev.demo`);
the lake is then read through a catalog registered in this process's Spark and compared with
MariaDB value by value (:func:`~airflow_provider_binlog.lake.verify.verify.verify_tables`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import (
    AIRFLOW,
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


# ------------------------------------------------------------------------------------ asset events

CONSUMER = "example_binlog_lake_consumer"
ORDERS_URI = "iceberg://lake/shop/orders"

_DB_STATE = """
import json, sys
from sqlalchemy import select
from airflow.models.asset import AssetEvent
from airflow.models.dag import DagModel
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session

dag_id, task_id = sys.argv[1:3]
with create_session() as s:
    events = [
        {"id": e.id, "uri": e.asset.uri, "extra": e.extra, "dag_id": e.source_dag_id,
         "run_id": e.source_run_id, "aliases": sorted(a.name for a in e.source_aliases)}
        for e in s.scalars(select(AssetEvent).order_by(AssetEvent.id))
    ]
    _, due = DagModel.dags_needing_dagruns(s)
    xcom = s.scalars(
        select(XComModel).where(XComModel.dag_id == dag_id, XComModel.task_id == task_id,
                                XComModel.key == "return_value").order_by(XComModel.timestamp.desc())
    ).first()
    summary = XComModel.deserialize_value(xcom) if xcom is not None else None
    print(json.dumps({"events": events, "due": sorted(due), "summary": summary}, default=str))
"""


def _db_state(env: dict[str, str], dag_id: str = "", task_id: str = "") -> dict[str, Any]:
    """Asset events, the asset-triggered DAGs the scheduler would start now, and the latest
    summary (XCom) of ``dag_id.task_id``, read from the Airflow database of ``env``."""
    proc = subprocess.run(
        [sys.executable, "-c", _DB_STATE, dag_id, task_id],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _airflow(env: dict[str, str], *args: str) -> None:
    proc = subprocess.run([AIRFLOW, *args], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def _snapshot_id(spark: Any, table: str) -> int:
    """The current snapshot of a lake table (read through a catalog of this process)."""
    return int(
        spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    )


@pytest.mark.timeout(1800)  # four `airflow dags test` runs, three starting Spark
def test_asset_events_for_committed_tables_and_the_downstream_dag(
    shop: Shop,
    dag_env: Any,
    zookeeper: ZooKeeperServer,
    zk_chroot: str,
    spark: Any,
    tmp_path: Path,
) -> None:
    """A load that committed changes emits one event per table it committed to, its extra holding
    the run's counts, end position and snapshot id, and the consumer DAG scheduled on the orders
    table becomes due and reads that extra; a load that merged nothing (every change already in the
    lake) emits none; a ``{table}`` route's tables get events through the load's alias."""
    env = dag_env(shop.start_from)
    _airflow(
        env, "dags", "reserialize"
    )  # the consumer in the database, unpaused: paused DAGs are never queued
    _airflow(env, "dags", "unpause", CONSUMER)
    known = {e["id"] for e in _db_state(env)["events"]}
    shop.changes(150)

    run = run_dag(env, "example_binlog_incremental", tmp_path / "incremental.log")
    assert run.succeeded, run.tail()
    state = _db_state(env, "example_binlog_incremental", "merge_into_lake")
    summary = state["summary"]
    new = [e for e in state["events"] if e["id"] not in known]
    committed = {t for t, counts in summary["tables"].items() if counts["commits"]}
    assert committed == {"lake.shop.customers", "lake.shop.products", "lake.shop.orders"}, summary["tables"]
    assert sorted(e["uri"] for e in new) == sorted("iceberg://" + t.replace(".", "/") for t in committed)
    catalog = warehouse_catalog(spark, tmp_path / "warehouse")
    for event in new:
        table = event["extra"]["table"]
        point = summary["read_point"]  # every table the run committed to is at the run's read point
        read_point = {"tag": point["point_tag"], "moving_tag": point["tag"], "position": point["position"]}
        assert event["extra"] == {
            "destination": "shop", "table": table, **summary["tables"][table],
            "start": summary["start"], "end": summary["end"], "snapshot_id": summary["snapshots"][table],
            "read_point": read_point,
        }, event  # fmt: skip
        assert event["extra"]["snapshot_id"] == str(_snapshot_id(spark, catalog + table[len("lake") :]))
        assert event["dag_id"] == "example_binlog_incremental" and event["aliases"] == []
    assert CONSUMER in state["due"], state["due"]  # the scheduler would start it now

    consumer = run_dag(env, CONSUMER, tmp_path / "consumer.log")
    assert consumer.succeeded, consumer.tail()
    orders = next(e["extra"] for e in new if e["uri"] == ORDERS_URI)
    line = (
        f"lake.shop.orders changed: +{orders['inserted']} ~{orders['updated']} -{orders['deleted']} by "
        f"destination shop up to {summary['end']}; read it AS OF snapshot {orders['snapshot_id']}"
    )
    assert line in consumer.log, consumer.tail()

    # the same changes again (cursor forgotten, so the load starts over): the lake holds them all
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        meta.delete_cursor(SHOP)
    finally:
        meta.client.stop()
        meta.client.close()
    known = {e["id"] for e in state["events"]}
    again = run_dag(env, "example_binlog_incremental", tmp_path / "again.log")
    assert again.succeeded, again.tail()
    state = _db_state(env, "example_binlog_incremental", "merge_into_lake")
    assert state["summary"]["end"] == summary["end"], state["summary"]
    assert not any(c["commits"] for c in state["summary"]["tables"].values()), state["summary"]["tables"]
    assert "snapshots" not in state["summary"]
    assert [e for e in state["events"] if e["id"] not in known] == [], "a load that merged nothing emitted"

    # a {table} route (the backfill DAG's targets): events through the load's alias
    known = {e["id"] for e in state["events"]}
    conf = {
        "start_from": shop.start_from,
        "stop_at": "head",
        "targets": {"shop.ord*": "lake.shop_bf.{table}"},
    }
    backfill = run_dag(env, "example_binlog_backfill", tmp_path / "backfill.log", conf=conf)
    assert backfill.succeeded, backfill.tail()
    state = _db_state(env, "example_binlog_backfill", "backfill")
    (event,) = [e for e in state["events"] if e["id"] not in known]
    assert event["uri"] == "iceberg://lake/shop_bf/orders"
    assert event["aliases"] == ["binlog-cdc:example_binlog_backfill.backfill"], event
    extra = event["extra"]
    assert extra["snapshot_id"] == str(_snapshot_id(spark, f"{catalog}.shop_bf.orders")), extra
    assert extra["inserted"] > 0 and extra["end"] == state["summary"]["end"], extra


# ------------------------------------------------------------------------------------ idle intervals

_TASK_STATES = """
import json, sys
from sqlalchemy import select
from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.utils.session import create_session

with create_session() as s:
    run = s.scalars(select(DagRun).where(DagRun.dag_id == sys.argv[1]).order_by(DagRun.id.desc())).first()
    tis = s.scalars(
        select(TaskInstance).where(TaskInstance.dag_id == run.dag_id, TaskInstance.run_id == run.run_id)
    )
    print(json.dumps({"run": str(run.state), "tasks": {t.task_id: str(t.state) for t in tis}}))
"""


@pytest.mark.timeout(600)  # one `airflow dags test` run, no Spark
def test_an_idle_interval_is_skipped_not_failed(
    shop: Shop, dag_env: Any, zookeeper: ZooKeeperServer, zk_chroot: str, tmp_path: Path
) -> None:
    """No change after the cursor for the sensor's whole timeout: the sensor and the load are
    skipped and the DAG run succeeds (it failed with ``AirflowSensorTimeout`` and an
    ``upstream_failed`` load, red in the grid); the cursor stays where it was."""
    head = shop.head()
    env = dag_env(head, BINLOG_CDC_WAIT_TIMEOUT="2")
    run = run_dag(env, "example_binlog_incremental", tmp_path / "idle.log")
    assert run.succeeded, run.tail()
    proc = subprocess.run(
        [sys.executable, "-c", _TASK_STATES, "example_binlog_incremental"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads(proc.stdout.strip().splitlines()[-1])
    assert state == {
        "run": "success", "tasks": {"wait_for_changes": "skipped", "merge_into_lake": "skipped"},
    }, (state, run.tail())  # fmt: skip
    assert "an idle interval, skipped (on_timeout='skip')" in run.log, run.tail()
    assert "AirflowSensorTimeout" not in run.log, run.tail()
    meta = meta_manager(zookeeper, zk_chroot)
    try:  # the sensor pinned the start as the cursor, nothing moved it
        cursor = meta.get_cursor(SHOP).value
        assert cursor is not None and str(cursor.binlog_position) == head
    finally:
        meta.client.stop()
        meta.client.close()
