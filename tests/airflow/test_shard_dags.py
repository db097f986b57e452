"""The sharded-sources example DAGs (``dags/example_binlog_shards.py``) through ``airflow dags test``
against three MariaDB servers (the session's and two of this module's), ZooKeeper and Spark: the
mapped DAG (one task per connection, ``.expand``) and the sequential one (one task, every shard in
turn) each fill one lake table equal to the union of the three sources, with the connection id as
the shard column, value by value. And the collision error when the DAG is parsed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import mysql_uri, run_dag, warehouse_catalog

from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.dev.shard_runs import ORDERS_DDL, ShardWriter
from airflow_provider_binlog.errors import ConfigurationError

COLUMNS = ("id", "customer", "amount", "note", "updated")
CONNS = ("mysql_shard_0", "mysql_shard_1", "mysql_shard_2")


@pytest.fixture(scope="module")
def more_servers() -> Iterator[list[MariaDbServer]]:
    started: list[MariaDbServer] = []
    try:
        for server_id in (52, 53):
            started.append(MariaDbServer(server_id=server_id).start())
        yield started
    finally:
        for server in started:
            server.stop()


def test_colliding_routes_fail_when_the_dag_is_parsed() -> None:
    """Two tables of one destination into one target without a shard column: the operator's
    constructor (DAG parse time) refuses it naming the sources and the remedy; with a shard column
    telling the tables apart, or unique_keys, it is accepted."""
    from airflow_provider_binlog.lake.options import TargetOptions
    from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

    with pytest.raises(
        ConfigurationError, match=r"'shop.orders_\*' all fill the lake table 'lake.shop.orders'.*shard_column"
    ):
        BinlogToSparkOperator(task_id="t", destination="d", tables={"shop.orders_*": "lake.shop.orders"})
    with pytest.raises(ConfigurationError, match=r"'shop\.a', 'shop\.b' all fill the lake table"):
        BinlogToSparkOperator(
            task_id="t", destination="d", tables={"shop.a": "lake.s.t", "shop.b": "lake.s.t"}
        )
    with pytest.raises(ConfigurationError, match="does not tell their tables apart"):
        BinlogToSparkOperator(
            task_id="t", destination="d", tables={"shop.orders_*": "lake.shop.orders"},
            target_options=TargetOptions(shard_column="_shard", shard_value="{destination}"),
        )  # fmt: skip
    BinlogToSparkOperator(
        task_id="t", destination="d", tables={"shop.orders_*": "lake.shop.orders"},
        target_options={"lake.shop.orders": TargetOptions(shard_column="_shard", shard_value="{table}")},
    )  # fmt: skip
    BinlogToSparkOperator(
        task_id="t", destination="d", tables={"shop.orders_*": "lake.shop.orders"},
        target_options=TargetOptions(unique_keys=True),
    )  # fmt: skip


def _lake(spark: Any, table: str) -> dict[tuple[str, int], tuple[Any, ...]]:
    spark.catalog.refreshTable(table)
    out: dict[tuple[str, int], tuple[Any, ...]] = {}
    for r in spark.sql(f"SELECT _shard, {', '.join(COLUMNS)} FROM {table}").collect():
        assert (r[0], r[1]) not in out, f"duplicate key {(r[0], r[1])}"
        out[(r[0], r[1])] = tuple(r[1:])
    return out


def _union(servers: list[MariaDbServer], db: str) -> dict[tuple[str, int], tuple[Any, ...]]:
    out = {}
    for conn_id, server in zip(CONNS, servers, strict=True):
        for row in server.execute(f"SELECT {', '.join(COLUMNS)} FROM `{db}`.orders"):
            out[(conn_id, row[0])] = tuple(row)
    return out


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.timeout(2400)  # four `airflow dags test` runs, six Spark starts
def test_mapped_and_sequential_shard_dags(
    mariadb: MariaDbServer, more_servers: list[MariaDbServer], dag_env: Any, spark: Any, tmp_path: Path
) -> None:
    servers = [mariadb, *more_servers]
    db = "shards_" + uuid.uuid4().hex[:6]
    writers = []
    for i, server in enumerate(servers):
        server.execute(f"CREATE DATABASE `{db}`")
        server.execute(ORDERS_DDL.format(table=f"`{db}`.orders"))
        writer = ShardWriter(lambda s=server: s.connect(db), ["orders"], seed=50 + i)
        for _ in range(30):
            writer.step()
        writers.append(writer)
    env = dag_env(
        BINLOG_CDC_SHARD_CONNS=",".join(CONNS),
        BINLOG_CDC_SHARD_SOURCE=f"{db}.orders",
        **{f"AIRFLOW_CONN_{c.upper()}": mysql_uri(s) for c, s in zip(CONNS, servers, strict=True)},
    )
    catalog = warehouse_catalog(spark, tmp_path / "warehouse")
    try:
        first = run_dag(env, "example_binlog_shards_mapped", tmp_path / "mapped-1.log", timeout=900)
        assert first.succeeded, first.tail()
        assert "orders-mysql_shard_2" in first.log, first.tail()  # the rendered destination
        for w in writers:  # changes after the snapshots: read from each binlog
            for _ in range(20):
                w.step()
        second = run_dag(env, "example_binlog_shards_mapped", tmp_path / "mapped-2.log", timeout=900)
        assert second.succeeded, second.tail()
        expected = _union(servers, db)
        lake = _lake(spark, f"{catalog}.shop.orders_sharded")
        assert lake == expected
        ids = [{k[1] for k in expected if k[0] == c} for c in CONNS]
        assert ids[0] & ids[1] & ids[2], "the shards' keys must overlap"

        sequential = run_dag(
            env, "example_binlog_shards_sequential", tmp_path / "sequential.log", timeout=900
        )
        assert sequential.succeeded, sequential.tail()
        assert _lake(spark, f"{catalog}.shop.orders_sharded_seq") == expected
    finally:
        for w in writers:
            w.stop()
        for server in servers:
            server.execute(f"DROP DATABASE IF EXISTS `{db}`")
