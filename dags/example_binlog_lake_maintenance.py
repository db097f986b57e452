"""Lake maintenance of the shop tables, scheduled on their assets: runs after loads committed to them.

Every load already keeps its tables' metadata bounded and compacts them when their metadata says a
compaction is due (``BinlogToSparkOperator(maintenance=True)``, the light policy). This DAG runs the
full default policy (orphan file removal too, at most weekly per table) in its own task, after the
loads that changed the tables (``schedule`` on the tables' assets: the incremental load,
:mod:`example_binlog_incremental`, emits them). On a healthy table it costs one metadata read; the
task's XCom and log say per table what ran and why (files rewritten and added, bytes, snapshots
expired, seconds). The task declares the tables as inlets and has no outlets: maintenance changes no
row, so nothing downstream of the tables runs again for it (and this DAG does not schedule itself).
``BINLOG_CDC_MAINTENANCE_POLICY`` overrides policy fields (``keep_snapshots=100,snapshot_age=3600``).
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Asset

from airflow_provider_binlog.operators.maintenance import BinlogLakeMaintenanceOperator

TABLES = ["lake.shop.customers", "lake.shop.products", "lake.shop.orders"]

with DAG(
    dag_id="example_binlog_lake_maintenance",
    # any of the tables changed (an asset expression: one run for several loads' events)
    schedule=(
        Asset("iceberg://lake/shop/customers")
        | Asset("iceberg://lake/shop/products")
        | Asset("iceberg://lake/shop/orders")
    ),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["binlog-cdc", "example"],
    doc_md=__doc__,
) as dag:
    BinlogLakeMaintenanceOperator(
        task_id="maintain_lake_tables",
        tables=TABLES,
        policy=os.environ.get("BINLOG_CDC_MAINTENANCE_POLICY") or True,
        catalog_conn_id=os.environ.get("BINLOG_CDC_CATALOG_CONN_ID") or None,
    )
