"""OpenLineage: the operator's ``get_openlineage_facets_on_complete`` (:mod:`..operators.lineage`).

The integration test runs the example incremental DAG with ``airflow dags test`` and the OpenLineage
provider's own listener configured with its file transport, against the harness's MariaDB, ZooKeeper
and local Spark, and reads the COMPLETE event the listener wrote. The rest are unit tests of the
pure functions building the datasets from a run's summary.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import SHOP_TABLES, Shop, run_dag, warehouse_catalog

from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.operators.lineage import (
    location_dataset,
    operator_lineage,
    row_count,
    source_namespace,
)

JOB = "example_binlog_incremental.merge_into_lake"


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _done_line(log: str) -> tuple[int, dict[str, dict[str, int]]]:
    """The changes and per-table counts of the operator's ``destination shop: done`` line."""
    line = next(x for x in log.splitlines() if "destination shop: done" in x)
    changes = int(re.search(r"done, (\d+) changes", line).group(1))  # type: ignore[union-attr]
    totals = ast.literal_eval(re.search(r"; (\{'lake\..*\}); seconds", line).group(1))  # type: ignore[union-attr]
    return changes, totals


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.timeout(900)
def test_complete_event_names_sources_and_lake_tables(
    shop: Shop, dag_env: Any, mariadb: MariaDbServer, spark: Any, tmp_path: Path
) -> None:
    """The listener's COMPLETE event of the load task: the three source tables as inputs (MySQL
    naming, the source's columns), the three Iceberg tables as outputs named by their warehouse
    location, with the lake columns, each table's merged row changes and identity column lineage;
    no credential of the source connection anywhere in the events."""
    shop.changes(150)
    events_file = tmp_path / "openlineage.jsonl"
    transport = {"type": "file", "log_file_path": str(events_file), "append": True}
    env = dag_env(shop.start_from, AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(transport))
    run = run_dag(env, "example_binlog_incremental", tmp_path / "dag.log")
    assert run.succeeded, run.tail()
    changes, totals = _done_line(run.log)
    assert changes > 0

    text = events_file.read_text()
    assert mariadb.repl_password not in text and f"{mariadb.repl_user}:" not in text
    complete = [e for e in _events(events_file) if e["job"]["name"] == JOB and e["eventType"] == "COMPLETE"]
    assert len(complete) == 1, [(e["job"]["name"], e["eventType"]) for e in _events(events_file)]
    event = complete[0]

    namespace = f"mysql://{mariadb.host}:{mariadb.port}"
    source_columns = {
        t: [
            name
            for (name,) in mariadb.execute(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'shop' "
                "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                (t.split(".")[1],),
            )
        ]
        for t in SHOP_TABLES
    }
    inputs = {(d["namespace"], d["name"]): d for d in event["inputs"]}
    assert set(inputs) == {(namespace, t) for t in SHOP_TABLES}
    for source, columns in source_columns.items():
        fields = inputs[(namespace, source)]["facets"]["schema"]["fields"]
        assert [f["name"] for f in fields] == columns
        assert all(f["type"] for f in fields)

    catalog = warehouse_catalog(spark, tmp_path / "warehouse")
    outputs = {d["facets"]["symlinks"]["identifiers"][0]["name"]: d for d in event["outputs"]}
    assert set(outputs) == set(SHOP_TABLES.values())
    merged = 0
    for source, target in SHOP_TABLES.items():
        out = outputs[target]
        table_dir = (tmp_path / "warehouse" / Path(*target.split(".")[1:])).resolve()
        assert (out["namespace"], out["name"]) == ("file", str(table_dir))
        assert (table_dir / "metadata").is_dir()
        lake = spark.table(f"{catalog}.{target.split('.', 1)[1]}").schema
        assert [(f["name"], f["type"]) for f in out["facets"]["schema"]["fields"]] == [
            (f.name, f.dataType.simpleString()) for f in lake.fields
        ]
        counts = totals[target]
        rows = out["outputFacets"]["outputStatistics"]["rowCount"]
        assert rows == counts["inserted"] + counts["updated"] + counts["deleted"] > 0
        merged += rows
        assert out["facets"]["version"]["datasetVersion"] == str(
            spark.sql(f"SELECT snapshot_id FROM {catalog}.{target.split('.', 1)[1]}.snapshots "
                      "ORDER BY committed_at DESC LIMIT 1").first()[0]
        )  # fmt: skip
        lineage = out["facets"]["columnLineage"]["fields"]
        assert set(lineage) == set(source_columns[source])
        for column, field in lineage.items():
            (found,) = field["inputFields"]
            assert (found["namespace"], found["name"], found["field"]) == (namespace, source, column)
            assert found["transformations"] == [{"type": "DIRECT", "subtype": "IDENTITY"}]
    assert merged == changes  # every row change the run read went to one of them


# ---- unit tests of the pure functions ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("/wh/shop/orders", ("file", "/wh/shop/orders")),
        ("file:/wh/shop/orders", ("file", "/wh/shop/orders")),
        ("file:///wh/shop/orders", ("file", "/wh/shop/orders")),
        ("file://localhost/wh/t", ("file", "/wh/t")),
        ("file://nas1/wh/t", ("file://nas1", "/wh/t")),
        ("s3://bucket/wh/shop/orders", ("s3://bucket", "wh/shop/orders")),
        ("s3a://bucket/wh/t", ("s3://bucket", "wh/t")),
        ("s3n://bucket/wh/t", ("s3://bucket", "wh/t")),
        ("gs://bucket/wh/t", ("gs://bucket", "wh/t")),
        ("hdfs://namenode:8020/wh/t", ("hdfs://namenode:8020", "/wh/t")),
        ("abfss://c@svc.dfs.core.windows.net/wh/t", ("abfss://c@svc.dfs.core.windows.net", "wh/t")),
        ("oss://bucket/wh/t", ("oss://bucket", "/wh/t")),
    ],
)
def test_location_dataset(location: str, expected: tuple[str, str]) -> None:
    assert location_dataset(location) == expected


def test_location_and_namespace_refuse_what_names_nothing() -> None:
    with pytest.raises(ValueError, match="location"):
        location_dataset("")
    with pytest.raises(ValueError, match="no host"):
        source_namespace(None, 3306)
    assert source_namespace("db.internal", None) == "mysql://db.internal:3306"
    assert source_namespace("127.0.0.1", 33061) == "mysql://127.0.0.1:33061"


def test_row_count() -> None:
    counts = {"inserted": 3, "updated": 2, "deleted": 1, "upserted": 4, "skipped": 9, "commits": 2}
    assert row_count(counts) == 6
    assert row_count({"appended": 7, "commits": 1}) == 7
    assert row_count(None, loaded=5) == 5


SUMMARY: dict[str, Any] = {
    "tables": {
        "lake.shop.orders": {"inserted": 3, "updated": 1, "deleted": 1, "upserted": 4, "commits": 1},
        "lake.shop.all": {"inserted": 2, "commits": 1},
    },
    "snapshots": {"lake.shop.orders": 8812345678901234567},
    "resnapshots": [
        {"source": "shop.items", "target": "lake.shop.items", "rows": 40, "gone": False},
        {"source": "shop.old", "target": "lake.shop.old", "rows": 0, "gone": True},
    ],
    "lineage": {
        "lake.shop.orders": {
            "location": "s3a://lake/wh/shop/orders",
            "columns": [["id", "bigint"], ["total", "decimal(12,2)"], ["_binlog_op", "string"]],
            "sources": {"shop.orders": [["id", "LONGLONG"], ["total", "NEWDECIMAL(12,2)"]]},
        },
        "lake.shop.all": {
            "location": "file:/wh/shop/all",
            "columns": [["id", "int"], ["note", "string"]],
            "sources": {"shop.a": [["id", "LONG"]], "shop.b": [["id", "LONG"], ["note", "VARCHAR"]]},
        },
        "lake.shop.items": {
            "location": "/wh/shop/items",
            "columns": [["id", "int"]],
            "sources": {"shop.items": None},
        },
    },
}


def _json(lineage: Any) -> dict[str, Any]:
    from openlineage.client.serde import Serde

    return {
        "inputs": [json.loads(Serde.to_json(d)) for d in lineage.inputs],
        "outputs": [json.loads(Serde.to_json(d)) for d in lineage.outputs],
    }


def test_operator_lineage_from_a_summary() -> None:
    ns = "mysql://db:3306"
    got = _json(operator_lineage(SUMMARY, ns))
    inputs = {d["name"]: d for d in got["inputs"]}
    assert sorted(inputs) == ["shop.a", "shop.b", "shop.items", "shop.orders"]
    assert {d["namespace"] for d in got["inputs"]} == {ns}
    assert [f["name"] for f in inputs["shop.b"]["facets"]["schema"]["fields"]] == ["id", "note"]
    total = inputs["shop.orders"]["facets"]["schema"]["fields"][1]
    assert (total["name"], total["type"]) == ("total", "NEWDECIMAL(12,2)")
    assert "schema" not in inputs["shop.items"].get("facets", {})  # a re-snapshot: no columns at hand

    outputs = {(d["namespace"], d["name"]): d for d in got["outputs"]}
    assert set(outputs) == {
        ("s3://lake", "wh/shop/orders"), ("file", "/wh/shop/all"), ("file", "/wh/shop/items")
    }  # fmt: skip
    orders = outputs[("s3://lake", "wh/shop/orders")]
    assert orders["outputFacets"]["outputStatistics"]["rowCount"] == 5
    assert orders["facets"]["symlinks"]["identifiers"] == [
        {"namespace": "s3://lake", "name": "lake.shop.orders", "type": "TABLE"}
    ]
    assert [(f["name"], f["type"]) for f in orders["facets"]["schema"]["fields"]] == [
        ("id", "bigint"), ("total", "decimal(12,2)"), ("_binlog_op", "string")
    ]  # fmt: skip
    assert set(orders["facets"]["columnLineage"]["fields"]) == {"id", "total"}  # not _binlog_op
    assert orders["facets"]["version"]["datasetVersion"] == "8812345678901234567"
    assert "version" not in outputs[("file", "/wh/shop/all")]["facets"]
    both = outputs[("file", "/wh/shop/all")]["facets"]["columnLineage"]["fields"]
    assert [f["name"] for f in both["id"]["inputFields"]] == ["shop.a", "shop.b"]
    assert [f["name"] for f in both["note"]["inputFields"]] == ["shop.b"]
    items = outputs[("file", "/wh/shop/items")]
    assert items["outputFacets"]["outputStatistics"]["rowCount"] == 40
    assert "columnLineage" not in items["facets"]
    assert all("lake.shop.old" not in json.dumps(d) for d in got["outputs"])


def test_operator_lineage_of_a_run_that_committed_nothing() -> None:
    lineage = operator_lineage({"tables": {}, "changes": 0}, "mysql://db:3306")
    assert (lineage.inputs, lineage.outputs) == ([], [])
    lineage = operator_lineage(None, "mysql://db:3306")  # no XCom (do_xcom_push=False)
    assert (lineage.inputs, lineage.outputs) == ([], [])
