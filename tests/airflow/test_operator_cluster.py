"""BinlogToSparkOperator on a Spark standalone cluster whose worker cannot see the driver's files.

The master and the worker come from the PySpark installation (:class:`~airflow_provider_binlog.dev.
topology.SparkStandalone`); the worker runs in its own mount namespace with a private ``/tmp`` and
sees only the shared directory the warehouses live in. The operator runs through ``airflow dags
test`` (its own process and JVM, as an Airflow task does) with ``spark://...`` as master and the
cluster's settings in ``$SPARK_CONF_DIR/spark-defaults.conf`` (executor memory 512m, one core), while
a writer changes the shop tables at random; then a second run after the writer stopped, and the
lake must equal the source value by value; a killed run's staging area is removed by the next run.
Once with the Hadoop catalog, once with Iceberg's JDBC catalog on PostgreSQL through the topology of
``docker/topology.env``. That staging in the driver's ``/tmp`` fails on this cluster is asserted in
``tests/lake/test_cluster.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import SHOP_TABLES, Shop, in_catalog, lake_verify, run_dag, warehouse_catalog

from airflow_provider_binlog.dev import demo_data
from airflow_provider_binlog.dev.services import MariaDbServer, PostgresServer, ZooKeeperServer
from airflow_provider_binlog.dev.topology import (
    LOOPBACK_DRIVER,
    SETTINGS,
    LocalTopology,
    SparkStandalone,
    load_settings,
    write_spark_defaults,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]
REPO = Path(__file__).resolve().parents[2]


class Writer(threading.Thread):
    """Random shop changes in small transactions until stopped (at most ``limit`` seconds)."""

    def __init__(self, mariadb: MariaDbServer, seed: int, limit: float = 300.0) -> None:
        super().__init__(name="shop-writer", daemon=True)
        self.mariadb, self.seed, self.limit = mariadb, seed, limit
        self.stop = threading.Event()
        self.rounds = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        conn = self.mariadb.connect()
        deadline = time.monotonic() + self.limit
        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                demo_data.generate_changes(conn, 15, seed=self.seed + self.rounds)
                self.rounds += 1
                self.stop.wait(0.2)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            conn.close()


def _spark_conf_dir(path: Path) -> str:
    conf = {**LOOPBACK_DRIVER, "spark.executor.memory": "512m", "spark.cores.max": "1"}
    conf["spark.sql.shuffle.partitions"] = "2"
    write_spark_defaults(conf, path)
    return str(path)


def _apps(cluster: SparkStandalone) -> list[str]:
    state = cluster.state()
    return [a.get("name", "") for a in state.get("activeapps", []) + state.get("completedapps", [])]


def _drain_live(
    shop: Shop,
    mariadb: MariaDbServer,
    env: dict[str, str],
    cluster: SparkStandalone,
    warehouse: Path,
    logs: Path,
) -> None:
    """Two operator runs (``airflow dags test``) on ``cluster``, the first while a writer changes the
    shop tables; the staging folder empty after each, a killed run's leftover removed by the next."""
    shop.changes(100)
    writer = Writer(mariadb, seed=1601)
    writer.start()
    try:
        first = run_dag(env, "example_binlog_incremental", logs / "first.log", timeout=700)
    finally:
        writer.stop.set()
        writer.join(60)
    assert writer.error is None, writer.error
    assert first.succeeded, first.tail()
    assert first.summary("shop"), first.tail()
    assert "binlog-cdc-shop" in _apps(cluster), cluster.state()
    staging = warehouse / "_binlog_cdc_staging" / "shop"
    assert staging.is_dir() and not any(staging.iterdir()), list(staging.iterdir())
    assert writer.rounds >= 1, "the writer wrote nothing while the first run drained"

    # what a killed run would have left, and another destination's area: the next run removes the
    # first only
    orphan = staging / f"{int(time.time() * 1000) - 60_000:013d}-{uuid.uuid4().hex}"
    (orphan / "piece").mkdir(parents=True)
    (orphan / "piece" / "part-0.parquet").write_bytes(b"PAR1")
    other = warehouse / "_binlog_cdc_staging" / "other" / f"{0:013d}-{uuid.uuid4().hex}"
    other.mkdir(parents=True)

    second = run_dag(env, "example_binlog_incremental", logs / "second.log", timeout=700)
    assert second.succeeded, second.tail()
    assert "removed 1 staging area(s)" in second.log, second.tail()
    assert not orphan.exists() and other.is_dir()
    assert not any(staging.iterdir())


VERIFY_JDBC = textwrap.dedent(
    """
    import os, sys
    from airflow_provider_binlog.drain.wiring import source_connection, source_from_uri
    from airflow_provider_binlog.lake.spark.session import create_session, jdbc_catalog_conf
    from airflow_provider_binlog.lake.verify.verify import verify_tables

    e = os.environ
    conf = jdbc_catalog_conf(e["CATALOG_URI"], e["CATALOG_USER"], e["CATALOG_PASSWORD"], e["WAREHOUSE"])
    spark = create_session("verify-jdbc", master="local[1]", conf=conf)
    conn = source_connection(source_from_uri(e["SOURCE_URI"], "the test source"))
    tables = {f"shop.{t}": f"lake.shop.{t}" for t in ("customers", "products", "orders")}
    diffs = verify_tables(conn, spark, tables)
    for d in diffs:
        print(("EQUAL " if d.equal and d.source_rows > 0 else "DIFFERS ") + d.describe())
    spark.stop()
    sys.exit(0 if all(d.equal and d.source_rows > 0 for d in diffs) else 1)
    """
)


def _assert_lake_equals_source(mariadb: MariaDbServer, spark: Any, catalog: str) -> None:
    diffs = lake_verify(mariadb, spark, in_catalog(SHOP_TABLES, catalog))
    assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
    assert all(d.source_rows > 0 for d in diffs), [d.describe() for d in diffs]


@pytest.mark.timeout(1500)  # two `airflow dags test` runs, each starting a driver on the cluster
def test_operator_drains_a_live_workload_through_the_isolated_cluster(
    shop: Shop, dag_env: Any, mariadb: MariaDbServer, spark: Any, tmp_path: Path
) -> None:
    """Hadoop catalog: the warehouse (and the staging under it) is the one directory the worker shares."""
    shared = tmp_path / "shared"
    warehouse = shared / "warehouse"
    warehouse.mkdir(parents=True)
    cluster = SparkStandalone(tmp_path / "spark", isolate_worker=True, shared=(str(shared),)).start()
    try:
        env = dag_env(
            shop.start_from,
            BINLOG_CDC_SPARK_MASTER=cluster.url,
            BINLOG_CDC_WAREHOUSE=str(warehouse),
            SPARK_CONF_DIR=_spark_conf_dir(tmp_path / "conf"),
        )
        _drain_live(shop, mariadb, env, cluster, warehouse, tmp_path)
    finally:
        cluster.stop()
    _assert_lake_equals_source(mariadb, spark, warehouse_catalog(spark, warehouse))


@pytest.mark.timeout(1500)
def test_the_same_with_the_jdbc_catalog_through_the_compose_topology(
    shop: Shop,
    dag_env: Any,
    mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer,
    zk_chroot: str,
    postgres: PostgresServer,
    catalog_database: str,
    tmp_path: Path,
) -> None:
    """Iceberg's JDBC catalog on PostgreSQL, the topology of ``docker/topology.env`` (what the compose
    file runs) brought up by :class:`LocalTopology` on the harness's services: the operator gets the
    catalog from the ``iceberg_catalog`` connection and the driver settings from its
    ``spark-defaults.conf``."""
    topology = LocalTopology(
        load_settings(SETTINGS), tmp_path / "topology", mariadb=mariadb, zookeeper=zookeeper,
        postgres=postgres, catalog_database=catalog_database,
        catalog_login=(postgres.user, postgres.password), zk_chroot=zk_chroot,
    ).up()  # fmt: skip
    try:
        env = dag_env(shop.start_from, **topology.airflow_env())
        assert env["BINLOG_CDC_CATALOG_CONN_ID"] == "iceberg_catalog"
        warehouse = Path(env["BINLOG_CDC_WAREHOUSE"])
        assert topology.spark is not None
        _drain_live(shop, mariadb, env, topology.spark, warehouse, tmp_path)
    finally:
        topology.down()
    tables = postgres.execute(
        "SELECT catalog_name, table_namespace, table_name FROM iceberg_tables", catalog_database
    )
    assert sorted(tables) == [("lake", "shop", t) for t in ("customers", "orders", "products")]
    # the JDBC catalog keys its tables by catalog name: read them as `lake` in a process of their own
    # (this process's `lake` is the harness's Hadoop catalog)
    env = {
        **os.environ, "SOURCE_URI": mariadb.airflow_uri(), "CATALOG_URI": postgres.jdbc_url(catalog_database),
        "CATALOG_USER": postgres.user, "CATALOG_PASSWORD": postgres.password, "WAREHOUSE": str(warehouse),
    }  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", VERIFY_JDBC],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        cwd=str(REPO),
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert proc.stdout.count("EQUAL ") == 3, proc.stdout[-4000:]
