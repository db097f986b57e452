"""A destination's committed mark read from a table (``lake/commits.mark_of``, walked in the JVM by
``MarkReader``, ``lake/spark/jvm_helpers.py``) against real local Spark + Iceberg: the newest snapshot of
that destination behind other writers' snapshots, not another destination's, nor a snapshot of it
without an order key; none past ``max_depth`` snapshots; a table without snapshots has none."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import OrderKey
from airflow_provider_binlog.lake import commits

pytestmark = pytest.mark.spark


def _insert(spark: Any, name: str, value: int, properties: dict[str, str] | None) -> None:
    if properties is None:
        spark.sql(f"INSERT INTO {name} VALUES ({value})")
        return
    with commits.commit_properties(spark, properties):
        spark.sql(f"INSERT INTO {name} VALUES ({value})")


def test_the_newest_mark_of_the_destination_behind_other_writers(spark: Any) -> None:
    name = f"lake.marks.t_{uuid.uuid4().hex[:8]}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.marks")
    spark.sql(f"CREATE TABLE {name} (id bigint) USING iceberg")
    table = commits.load_iceberg_table(spark, name)
    assert commits.mark_of(spark, table, "dest é") is None  # no snapshot yet
    mine = [
        commits.mark_properties(
            "dest é", OrderKey(3, n, -1, 0), BinlogPosition("b.000003", n), None, "0-1-" + str(n)
        )
        for n in (100, 200)
    ]
    other = commits.mark_properties("other", OrderKey(9, 9, -1, 0), BinlogPosition("b.000009", 9), None, None)
    _insert(spark, name, 1, mine[0])
    _insert(spark, name, 2, mine[1])
    kept = int(commits.load_iceberg_table(spark, name).currentSnapshot().snapshotId())
    _insert(spark, name, 3, other)
    _insert(spark, name, 4, None)  # a writer without marks
    _insert(spark, name, 5, {**mine[1], commits.ORDER_KEY: ""})  # names the destination, no order key
    mark = commits.mark_of(spark, table, "dest é")  # the table loaded before: refreshed first
    assert mark is not None
    assert mark.snapshot_id == kept and mark.order_key == OrderKey(3, 200, -1, 0)
    assert mark.position == BinlogPosition("b.000003", 200) and mark.gtid == "0-1-200"
    assert mark.end_position is None
    theirs = commits.mark_of(spark, table, "other")
    assert theirs is not None and theirs.order_key == OrderKey(9, 9, -1, 0) and theirs.gtid is None
    assert commits.mark_of(spark, table, "nobody") is None
    assert commits.mark_of(spark, table, "dest é", max_depth=3) is None  # 3 newer snapshots first
    assert commits.mark_of(spark, table, "dest é", max_depth=4) == mark
