"""``lake/spark/table_facts.table_facts`` against real local Spark + Iceberg: one call reads what the JVM
table answers field by field (location, partitioning, sort order, properties, columns, format
version, current snapshot), for a partitioned and sorted table and a plain one, before and after
its first snapshot."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.spark.java_maps import string_map
from airflow_provider_binlog.lake.spark.table_facts import table_facts
from airflow_provider_binlog.lake.spark.table_schema import columns_of

pytestmark = pytest.mark.spark


def _one_by_one(spark: Any, table: Any) -> dict[str, Any]:
    current = table.currentSnapshot()
    return {
        "root": str(table.location()).rstrip("/"),
        "unpartitioned": bool(table.spec().isUnpartitioned()),
        "unsorted": bool(table.sortOrder().isUnsorted()),
        "properties": string_map(spark, table.properties()),
        "columns": columns_of(spark, table.schema()),
        "format_version": int(spark._jvm.org.apache.iceberg.TableUtil.formatVersion(table)),
        "snapshot_id": None if current is None else int(current.snapshotId()),
    }


def _facts(spark: Any, table: Any) -> dict[str, Any]:
    f = table_facts(spark, table)
    return {name: getattr(f, name) for name in _one_by_one(spark, table)}


def test_the_facts_are_what_the_table_answers_field_by_field(spark: Any) -> None:
    namespace = f"lake.f{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    plain, shaped = f"{namespace}.plain", f"{namespace}.shaped"
    spark.sql(
        f"CREATE TABLE {plain} (id bigint NOT NULL, `v é` string, d decimal(12, 3)) USING iceberg "
        "TBLPROPERTIES ('format-version'='3', 'note'='a, b=\"c\"')"
    )
    spark.sql(
        f"CREATE TABLE {shaped} (id bigint, day date) USING iceberg PARTITIONED BY (days(day)) "
        "TBLPROPERTIES ('format-version'='2')"
    )
    spark.sql(f"ALTER TABLE {shaped} WRITE ORDERED BY id")
    for name in (plain, shaped):
        table = commits.load_iceberg_table(spark, name)
        before = _facts(spark, table)
        assert before == _one_by_one(spark, table) and before["snapshot_id"] is None
    table = commits.load_iceberg_table(spark, plain)
    facts = _facts(spark, table)
    assert facts["unpartitioned"] and facts["unsorted"] and facts["format_version"] == 3
    assert facts["properties"]["note"] == 'a, b="c"'
    assert [(c.name, c.type, c.optional) for c in facts["columns"].fields] == [
        ("id", "long", False),
        ("v é", "string", True),
        ("d", "decimal(12, 3)", True),
    ]
    shaped_facts = _facts(spark, commits.load_iceberg_table(spark, shaped))
    assert not shaped_facts["unpartitioned"] and not shaped_facts["unsorted"]
    assert shaped_facts["format_version"] == 2
    spark.sql(f"INSERT INTO {plain} VALUES (1, 'x', 1.5)")
    table.refresh()
    after = _facts(spark, table)
    assert after == _one_by_one(spark, table) and after["snapshot_id"] is not None
