"""operators/assets.py on its own (pure code, the Task SDK's real event accessors): asset names,
the outlets a load declares, and which events a run's summary makes (the run against the real
services is in ``test_dags.py``)."""

from __future__ import annotations

from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG, Asset, AssetAlias
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.operators.assets import (
    committed_tables,
    emit_events,
    lake_outlets,
    table_asset,
)
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

COUNTS = {"inserted": 3, "updated": 2, "deleted": 1, "upserted": 4, "appended": 0, "truncated": 0}


def _summary() -> dict[str, Any]:
    return {
        "destination": "shop",
        "start": "mysql-bin.000001:4",
        "end": "mysql-bin.000001:900",
        "tables": {
            "lake.shop.orders": {**COUNTS, "skipped": 0, "commits": 1},
            "lake.shop.customers": {**COUNTS, "skipped": 6, "commits": 0},  # an earlier attempt's commit
            "lake.shop.idle": {**COUNTS, "skipped": 0, "commits": 0},
            "lake.shop.again": {**COUNTS, "skipped": 4, "commits": 0},  # read again, announced before
            "lake.shop.x_1": {**COUNTS, "skipped": 0, "commits": 2},
        },
        "resnapshots": [
            {"target": "lake.shop.products", "rows": 10, "start": "mysql-bin.000001:500", "gone": False},
            {"target": "lake.shop.gone", "rows": 0, "start": "mysql-bin.000001:600", "gone": True},
        ],
        "committed_earlier": ["lake.shop.customers", "lake.shop.held"],  # a failed attempt's commits
        "snapshots": {
            "lake.shop.orders": "8419940643595983211",
            "lake.shop.x_1": "8419940643595983212",
            "lake.shop.products": "8419940643595983213",
            "lake.shop.customers": "8419940643595983214",
        },
    }


def test_names() -> None:
    assert table_asset("lake.shop.orders").uri == "iceberg://lake/shop/orders"
    assert table_asset("lake.a.b.t").uri == "iceberg://lake/a/b/t"
    assert table_asset("lake.`we ird`.t").uri == "iceberg://lake/we%20ird/t"


def test_outlets_declared_by_the_operator() -> None:
    with DAG("d", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        op = BinlogToSparkOperator(
            task_id="load",
            destination="shop",
            tables={"shop.orders": "lake.shop.orders", "shop.x_*": "lake.shop.{table}"},
        )
        templated = BinlogToSparkOperator(task_id="bf", destination="b", tables="{{ params.t }}")  # type: ignore[arg-type]
    assert op.outlets == [Asset("iceberg://lake/shop/orders"), AssetAlias("binlog-cdc:d.load")]
    assert templated.outlets == [AssetAlias("binlog-cdc:d.bf")]
    assert lake_outlets({"a.t": "lake.a.t", "b.t": "lake.a.t"}, "d", "t")[:-1] == [
        Asset("iceberg://lake/a/t")
    ]
    with pytest.raises(ConfigurationError):
        lake_outlets({"a.t": "just_a_name"}, "d", "t")


def test_events_only_for_committed_tables() -> None:
    summary = _summary()
    tables = committed_tables(summary)
    # customers: its changes were committed by a failed attempt (no event then), skipped by this one
    assert set(tables) == {
        "lake.shop.orders", "lake.shop.customers", "lake.shop.held", "lake.shop.x_1", "lake.shop.products"
    }  # fmt: skip
    assert tables["lake.shop.held"] == {
        "destination": "shop", "table": "lake.shop.held",
        "start": "mysql-bin.000001:4", "end": "mysql-bin.000001:900",
    }  # fmt: skip
    customers_extra = tables["lake.shop.customers"]
    assert customers_extra["skipped"] == 6 and customers_extra["snapshot_id"] == "8419940643595983214"
    assert tables["lake.shop.orders"] == {
        "destination": "shop", "table": "lake.shop.orders", **COUNTS, "skipped": 0, "commits": 1,
        "start": "mysql-bin.000001:4", "end": "mysql-bin.000001:900", "snapshot_id": "8419940643595983211",
    }  # fmt: skip
    assert tables["lake.shop.products"]["resnapshot"] == {"rows": 10, "start": "mysql-bin.000001:500"}

    orders, customers = Asset("iceberg://lake/shop/orders"), Asset("iceberg://lake/shop/customers")
    products, alias = Asset("iceberg://lake/shop/products"), AssetAlias("binlog-cdc:d.load")
    events = OutletEventAccessors()
    idle, again = Asset("iceberg://lake/shop/idle"), Asset("iceberg://lake/shop/again")
    keep, missed = emit_events([orders, customers, idle, again, products, alias], events, summary)
    assert keep == [orders, customers, products, alias] and missed == []
    assert events[customers].extra == tables["lake.shop.customers"]
    assert events[orders].extra == tables["lake.shop.orders"]
    assert events[products].extra["snapshot_id"] == "8419940643595983213"
    held, dynamic = sorted(events[alias].asset_alias_events, key=lambda e: e.dest_asset_key.uri)
    assert held.dest_asset_key.uri == "iceberg://lake/shop/held" and "snapshot_id" not in held.extra
    assert dynamic.dest_asset_key.uri == "iceberg://lake/shop/x_1"
    assert dynamic.extra["snapshot_id"] == "8419940643595983212"

    events = OutletEventAccessors()
    keep, missed = emit_events([orders], events, summary)  # no alias: the others cannot be emitted
    assert keep == [orders]
    assert sorted(missed) == ["lake.shop.customers", "lake.shop.held", "lake.shop.products", "lake.shop.x_1"]

    nothing = {
        **summary, "tables": {"lake.shop.orders": {**COUNTS, "commits": 0}}, "resnapshots": [],
        "committed_earlier": [],
    }  # fmt: skip
    events = OutletEventAccessors()
    keep, missed = emit_events([orders, customers, alias], events, nothing)
    assert keep == [alias] and missed == [] and events[alias].asset_alias_events == []


def test_events_name_the_read_point() -> None:
    """Each event of a table the run's read point covers names its tag and position (the summary's
    ``read_point``, lake/read_point.py); a table it does not cover gets none."""
    summary = _summary()
    summary["read_point"] = {
        "tag": "binlog-cdc-read-shop", "point_tag": "binlog-cdc-read-shop@mysql-bin.000001:931",
        "position": "mysql-bin.000001:931", "moved": True,
        "tables": {"lake.shop.orders": "8419940643595983211", "lake.shop.idle": "8419940643595983215"},
    }  # fmt: skip
    tables = committed_tables(summary)
    assert tables["lake.shop.orders"]["read_point"] == {
        "tag": "binlog-cdc-read-shop@mysql-bin.000001:931", "moving_tag": "binlog-cdc-read-shop",
        "position": "mysql-bin.000001:931",
    }  # fmt: skip
    assert "read_point" not in tables["lake.shop.x_1"] and "lake.shop.idle" not in tables
