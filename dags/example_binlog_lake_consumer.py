"""Downstream of the lake: runs when a load committed changes to ``lake.shop.orders``.

Scheduled on the table's asset (``iceberg://lake/shop/orders``), which the incremental load
(:mod:`example_binlog_incremental`) declares and a load with a ``{table}`` route reaches through its
alias: a load that merged nothing into the table emits no event, so this DAG does not run for it.
The event's ``extra`` holds that load's counts for the table, its binlog range and the Iceberg
snapshot id the commit made (see :mod:`airflow_provider_binlog.operators.assets`); the task reads
the table as of that snapshot (here it only reports what it would read). Run by hand, it takes the
table's latest event.
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import DAG, Asset, task

ORDERS = Asset("iceberg://lake/shop/orders")

with DAG(
    dag_id="example_binlog_lake_consumer",
    schedule=[ORDERS],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["binlog-cdc", "example"],
    doc_md=__doc__,
) as dag:

    @task(inlets=[ORDERS])
    def report_orders_commit(
        triggering_asset_events: Any = None, inlet_events: Any = None
    ) -> list[dict[str, Any]]:
        """The events that triggered this run (or, run by hand, the latest one), one line each."""
        events = list((triggering_asset_events or {}).get(ORDERS, []))
        if not events and inlet_events is not None and inlet_events[ORDERS]:
            events = [inlet_events[ORDERS][-1]]
        seen = []
        for event in events:
            extra = dict(event.extra)
            print(
                f"lake.shop.orders changed: +{extra.get('inserted', 0)} ~{extra.get('updated', 0)} "
                f"-{extra.get('deleted', 0)} by destination {extra.get('destination')} up to "
                f"{extra.get('end')}; read it AS OF snapshot {extra.get('snapshot_id')}"
            )
            seen.append(extra)
        return seen

    report_orders_commit()
