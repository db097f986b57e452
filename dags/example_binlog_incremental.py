"""Scheduled incremental load: wait for changes of the shop tables, then merge them into Iceberg.

Connections: ``mysql_default`` (the source, a user with REPLICATION SLAVE, REPLICATION CLIENT and
SELECT) and ``zookeeper_default`` (cursors and HA). ``BINLOG_CDC_START_FROM`` (a ``file:pos``,
``gtid:...`` or timestamp) says where a destination without a cursor starts (default: the head);
``BINLOG_CDC_SNAPSHOT=initial`` first loads the rows the tables already have (the operator's
``snapshot``, default ``never``); ``BINLOG_CDC_DEFERRABLE=1`` makes the sensor wait in the
triggerer; ``BINLOG_CDC_CATALOG_CONN_ID`` names a ``postgres`` connection that makes ``lake`` an
Iceberg JDBC catalog (default: the Hadoop catalog).

An interval without changes is a normal one: the sensor waits ``BINLOG_CDC_WAIT_TIMEOUT`` seconds
(default 600, within the 15-minute schedule), then is skipped (``on_timeout="skip"``) and the load
with it; the DAG run succeeds. A real failure (credentials, a purged cursor) still fails the sensor.
"""

from __future__ import annotations

import datetime
import os

import pendulum
from airflow.sdk import DAG

from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator
from airflow_provider_binlog.sensors.binlog import BinlogEventSensor

DESTINATION = os.environ.get("BINLOG_CDC_DESTINATION", "shop")
TABLES = {
    "shop.customers": "lake.shop.customers",
    "shop.products": "lake.shop.products",
    "shop.orders": "lake.shop.orders",
}
START_FROM = os.environ.get("BINLOG_CDC_START_FROM") or None
WAIT_TIMEOUT = float(os.environ.get("BINLOG_CDC_WAIT_TIMEOUT") or 600)

with DAG(
    dag_id="example_binlog_incremental",
    schedule="*/15 * * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": datetime.timedelta(seconds=30)},
    tags=["binlog-cdc", "example"],
    doc_md=__doc__,
) as dag:
    wait = BinlogEventSensor(
        task_id="wait_for_changes",
        destination=DESTINATION,
        tables=TABLES,
        start_from=START_FROM,
        min_changes=1,
        poke_interval=10,
        timeout=WAIT_TIMEOUT,
        on_timeout="skip",  # an idle interval is skipped, not failed
        deferrable=os.environ.get("BINLOG_CDC_DEFERRABLE", "") == "1",
    )
    load = BinlogToSparkOperator(
        task_id="merge_into_lake",
        destination=DESTINATION,
        tables=TABLES,
        start_from=START_FROM,
        stop_at="head",
        snapshot=os.environ.get("BINLOG_CDC_SNAPSHOT") or "never",
        catalog_conn_id=os.environ.get("BINLOG_CDC_CATALOG_CONN_ID") or None,
    )
    wait >> load
