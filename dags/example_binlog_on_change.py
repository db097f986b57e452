"""Event-driven load: the shop tables' changes start the load (an asset watcher, no schedule).

The asset ``binlog-cdc://shop_on_change`` is watched by :class:`BinlogWatchTrigger` in the
triggerer: every ``BINLOG_CDC_WATCH_POLL`` seconds (default 30) it looks for committed changes of
the routed tables after the destination's cursor and what it reported last, and fires one asset
event per new range (``from``/``to`` positions, per-table counts in the event's ``extra["payload"]``), which
starts this DAG. Commits made while a load runs give at most one more run (``max_active_runs=1``;
the watcher reports nothing while the load holds the destination). A destination without a cursor
runs once at once (its ``snapshot="initial"``, if set, then loads the rows already there).

Connections and settings as :mod:`example_binlog_incremental` (``BINLOG_CDC_START_FROM``,
``BINLOG_CDC_SNAPSHOT``, ``BINLOG_CDC_CATALOG_CONN_ID``); its own destination and lake namespace, so
both examples can run side by side.
"""

from __future__ import annotations

import datetime
import os

import pendulum
from airflow.sdk import DAG, Asset, AssetWatcher

from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator
from airflow_provider_binlog.triggers.watch import BinlogWatchTrigger

DESTINATION = "shop_on_change"
TABLES = {
    "shop.customers": "lake.shop_on_change.customers",
    "shop.products": "lake.shop_on_change.products",
    "shop.orders": "lake.shop_on_change.orders",
}
START_FROM = os.environ.get("BINLOG_CDC_START_FROM") or None

SHOP_CHANGES = Asset(
    "binlog-cdc://shop_on_change",
    watchers=[
        AssetWatcher(
            name="shop_on_change_binlog",
            trigger=BinlogWatchTrigger(
                destination=DESTINATION,
                tables=TABLES,
                start_from=START_FROM,
                name="shop_on_change_binlog",
                poll_interval=float(os.environ.get("BINLOG_CDC_WATCH_POLL") or 30),
            ),
        )
    ],
)

with DAG(
    dag_id="example_binlog_on_change",
    schedule=[SHOP_CHANGES],  # no clock: the watcher's events start the runs
    max_active_runs=1,  # events while a run is queued or running go to one next run
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    tags=["binlog-cdc", "example"],
    doc_md=__doc__,
    default_args={"retries": 2, "retry_delay": datetime.timedelta(seconds=30)},
) as dag:
    BinlogToSparkOperator(
        task_id="merge_into_lake",
        destination=DESTINATION,
        tables=TABLES,
        start_from=START_FROM,  # stop_at: the head at the task's start (the default)
        snapshot=os.environ.get("BINLOG_CDC_SNAPSHOT") or "never",
        catalog_conn_id=os.environ.get("BINLOG_CDC_CATALOG_CONN_ID") or None,
    )
