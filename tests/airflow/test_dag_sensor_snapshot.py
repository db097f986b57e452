"""The README's first pattern (a sensor, then the load with ``snapshot="initial"``) under
``airflow dags test``, on a source that already has rows: the sensor runs first and pins the head as
the cursor; the load still snapshots the rows from before that point. Then more changes and runs;
after each the lake equals the source value by value.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import Shop, in_catalog, lake_verify, meta_manager, run_dag, warehouse_catalog

from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DAG_FILE = """
import pendulum
from airflow.sdk import DAG

from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator
from airflow_provider_binlog.sensors.binlog import BinlogEventSensor

TABLES = {{"shop.orders": "lake.shop.orders", "shop.customers": "lake.shop.customers"}}
with DAG(dag_id="{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    wait = BinlogEventSensor(task_id="wait", destination="{destination}", tables=TABLES, poke_interval=1,
                             timeout=300)
    load = BinlogToSparkOperator(task_id="load", destination="{destination}", tables=TABLES,
                                 snapshot="initial")
    wait >> load
"""

TABLES = {"shop.orders": "lake.shop.orders", "shop.customers": "lake.shop.customers"}


@pytest.mark.timeout(1800)  # three `airflow dags test` runs, each starting Spark
def test_sensor_then_initial_snapshot_on_existing_rows(
    shop: Shop, dag_env: Any, mariadb: MariaDbServer, zookeeper: ZooKeeperServer, zk_chroot: str,
    spark: Any, tmp_path: Path,
) -> None:  # fmt: skip
    shop.changes(300)
    tag = uuid.uuid4().hex[:8]
    dag_id, destination = f"readme_pattern_{tag}", f"readme-{tag}"
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / f"{dag_id}.py").write_text(DAG_FILE.format(dag_id=dag_id, destination=destination))
    env = dag_env(AIRFLOW__CORE__DAGS_FOLDER=str(dags))
    ident = ClientIdentity(destination, 1001)
    meta = meta_manager(zookeeper, zk_chroot)
    writes: list[BaseException] = []

    def write_once_pinned() -> None:
        """The changes the waiting sensor sees: written once it pinned the cursor (no timing)."""
        try:
            deadline = time.monotonic() + 300
            while meta.get_cursor(ident).value is None:
                assert time.monotonic() < deadline, "the sensor never pinned a cursor"
                time.sleep(0.2)
            shop.changes(20)
        except BaseException as exc:
            writes.append(exc)

    catalog = warehouse_catalog(spark, tmp_path / "warehouse")
    try:
        writer = threading.Thread(target=write_once_pinned)
        writer.start()
        first = run_dag(env, dag_id, tmp_path / "run1.log")
        writer.join(300)
        assert not writes, writes
        assert first.succeeded, first.tail()
        assert "snapshotting them" in first.log, first.tail()
        for n in (2, 3):
            diffs = lake_verify(mariadb, spark, in_catalog(TABLES, catalog))
            assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
            assert all(d.source_rows > 0 for d in diffs), [d.describe() for d in diffs]
            shop.changes(40)  # the next round's sensor finds them at its first poke
            run = run_dag(env, dag_id, tmp_path / f"run{n}.log")
            assert run.succeeded, run.tail()
            assert "snapshotting them" not in run.log, run.tail()
        diffs = lake_verify(mariadb, spark, in_catalog(TABLES, catalog))
        assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
    finally:
        meta.client.stop()
        meta.client.close()
