"""Sharded sources: ``orders`` on several MySQL/MariaDB servers (one Airflow connection each) merged
into ONE Iceberg table, whose shard column ``_shard`` (the connection id) is part of its key, so
rows of different servers with the same ``id`` are different rows.

Two DAGs on the same shards:

* ``example_binlog_shards_mapped``: one mapped task per connection (``.expand(mysql_conn_id=...)``),
  each its own destination (``orders-<connection id>``: its cursor, marks and running node), all
  merging into ``lake.shop.orders_sharded`` at once (Iceberg's commit conflicts between them are
  retried with each destination's mark read again);
* ``example_binlog_shards_sequential``: one task reading the shards one after another into
  ``lake.shop.orders_sharded_seq`` (destinations ``orders-seq-<connection id>``), one Spark session.

Each destination starts with a snapshot of its shard (``snapshot="initial"``), then follows its
binlog. Environment: ``BINLOG_CDC_SHARD_CONNS`` (comma-separated connection ids, default
``mysql_shard_0,mysql_shard_1,mysql_shard_2``), ``BINLOG_CDC_SHARD_SOURCE`` (the source table on
every shard, default ``shop.orders``), ``BINLOG_CDC_CATALOG_CONN_ID`` as in the incremental example
(a JDBC catalog is the production choice for writers at once; the default Hadoop catalog serialises
them through one machine).
"""

from __future__ import annotations

import datetime
import os
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_provider_binlog.lake.options import TargetOptions
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

SHARDS = [
    c.strip()
    for c in os.environ.get("BINLOG_CDC_SHARD_CONNS", "mysql_shard_0,mysql_shard_1,mysql_shard_2").split(",")
]
SOURCE = os.environ.get("BINLOG_CDC_SHARD_SOURCE", "shop.orders")
CATALOG_CONN_ID = os.environ.get("BINLOG_CDC_CATALOG_CONN_ID") or None
SHARDED = TargetOptions(shard_column="_shard", shard_value="{connection}")
DEFAULTS: dict[str, Any] = {"retries": 2, "retry_delay": datetime.timedelta(seconds=30)}

with DAG(
    dag_id="example_binlog_shards_mapped",
    schedule="*/15 * * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULTS,
    tags=["binlog-cdc", "example", "shards"],
    doc_md=__doc__,
) as mapped:
    BinlogToSparkOperator.partial(
        task_id="merge_shard",
        destination="orders-{{ task.mysql_conn_id }}",
        tables={SOURCE: "lake.shop.orders_sharded"},
        target_options=SHARDED,
        snapshot="initial",
        catalog_conn_id=CATALOG_CONN_ID,
    ).expand(mysql_conn_id=SHARDS)


with DAG(
    dag_id="example_binlog_shards_sequential",
    schedule="*/15 * * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULTS,
    tags=["binlog-cdc", "example", "shards"],
    doc_md=__doc__,
) as sequential:

    @task(task_id="merge_all_shards")
    def merge_all_shards(**context: Any) -> dict[str, Any]:
        """Each shard's destination in turn, one Spark session for all (stopped after the last)."""
        summaries = {}
        inner = {k: v for k, v in context.items() if k != "outlet_events"}  # no assets of its own
        for i, conn_id in enumerate(SHARDS):
            load = BinlogToSparkOperator(
                task_id=f"shard_{i}",
                destination=f"orders-seq-{conn_id}",
                mysql_conn_id=conn_id,
                tables={SOURCE: "lake.shop.orders_sharded_seq"},
                target_options=SHARDED,
                snapshot="initial",
                catalog_conn_id=CATALOG_CONN_ID,
                stop_spark=i == len(SHARDS) - 1,
            )
            summaries[conn_id] = load.execute(inner)  # type: ignore[arg-type]
        return summaries

    merge_all_shards()
