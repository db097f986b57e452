"""What a run's lineage says of its sources (pure Python, no Spark): the source tables of a chunk and
their columns' binlog types (:mod:`airflow_provider_binlog.lake.verify.describe`; the lake side, read from
Iceberg, is checked by ``tests/airflow/test_operator_lineage.py``), and one Spark test: the lake side
read from the Iceberg table says what ``DESCRIBE TABLE EXTENDED`` says."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
from airflow_provider_binlog.lake.commits import CommittedMark
from airflow_provider_binlog.lake.options import TargetOptions
from airflow_provider_binlog.lake.pending import Pending
from airflow_provider_binlog.lake.verify.describe import (
    chunk_sources,
    describe_run,
    describe_statement,
    describe_table,
    source_columns,
    source_type,
)

A1 = TableSchema("db", "a", (ColumnDef("id", T.LONG),), ("id",))
A2 = TableSchema("db", "a", (ColumnDef("id", T.LONG), ColumnDef("note", T.VARCHAR)), ("id",))
B = TableSchema("db", "b", (ColumnDef("id", T.LONGLONG, unsigned=True),), ("id",))


def _change(n: int, schema: TableSchema) -> RowChange:
    pos = BinlogPosition("mysql-bin.000001", 100 + 10 * n)
    return RowChange(
        "dest", schema.schema, schema.table, Op.INSERT, None, {"id": n}, ("id",), pos,
        BinlogPosition(pos.file, pos.pos + 10), None, 1_700_000_000, OrderKey(1, pos.pos, -1, 0), schema,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (ColumnDef("c", T.LONG), "LONG"),
        (ColumnDef("c", T.LONG, unsigned=True), "LONG UNSIGNED"),
        (ColumnDef("c", T.NEWDECIMAL, precision=12, scale=2), "NEWDECIMAL(12,2)"),
        (ColumnDef("c", T.NEWDECIMAL, precision=10, scale=None, unsigned=True), "NEWDECIMAL(10,0) UNSIGNED"),
        (ColumnDef("c", T.VARCHAR), "VARCHAR"),
        (ColumnDef("c", T.DATETIME2, fsp=3), "DATETIME2"),
    ],
)
def test_source_type(column: ColumnDef, expected: str) -> None:
    assert source_type(column) == expected


def test_source_columns_in_table_order() -> None:
    assert source_columns(A2) == [["id", "LONG"], ["note", "VARCHAR"]]


@pytest.mark.parametrize("append_only", [False, True])
def test_chunk_sources_newest_schema_per_source(append_only: bool) -> None:
    pending = Pending.new(TargetOptions(append_only=append_only), None)
    pending.add([_change(0, A1), _change(1, B), _change(2, A2)], "lake.db.t")
    found = chunk_sources(pending)
    assert found == {"db.a": A2, "db.b": B}


def test_chunk_sources_leave_out_what_the_lake_holds() -> None:
    """Changes the table's mark covers (an earlier attempt committed them) name no source."""
    mark = CommittedMark(OrderKey(1, 100, -1, 0), BinlogPosition("mysql-bin.000001", 100), None, None, 1)
    pending = Pending.new(TargetOptions(), mark)
    pending.add([_change(0, A1), _change(1, B)], "lake.db.t")
    assert chunk_sources(pending) == {"db.b": B}
    pending = Pending.new(TargetOptions(), mark)
    pending.add([_change(0, A1)], "lake.db.t")
    assert chunk_sources(pending) == {}


@pytest.mark.spark
def test_the_lake_side_is_what_describe_says(spark: Any) -> None:
    """Every mapped type, option columns and a partition spec: the Iceberg table's location and the
    resolved columns equal ``DESCRIBE TABLE EXTENDED``'s (which came first and stays the fallback)."""
    import random
    import uuid

    from airflow_provider_binlog.lake.write.merge import merge_batch

    from ..model import SourceTable, all_type_columns

    src = SourceTable("db", "every type", all_type_columns(), random.Random(3))
    batch = [src.insert() for _ in range(5)]
    target = f"lake.`d{uuid.uuid4().hex[:6]}`.`odd.name`"
    opts = TargetOptions(metadata_columns=True, soft_delete=True, partition_by=("bucket(4, id)",))
    merge_batch(spark, "dest", {"db.every type": target}, batch, batch[-1].end_position, options=opts)
    fast, statement = describe_table(spark, target), describe_statement(spark, target)
    assert fast == statement
    assert fast["location"] and len(fast["columns"]) == len(src.all_columns) + 4  # +op, ts, position, deleted


@pytest.mark.spark
def test_a_run_is_described_on_a_pool_as_one_by_one(spark: Any) -> None:
    """``describe_run`` with a merger's pool (``TargetRunner.map``, as the drain's finish calls it)
    gives what it gives describing the tables one by one, in the tables' order."""
    import uuid

    from airflow_provider_binlog.lake.write.runner import TargetRunner

    namespace = f"d{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{namespace}")
    sources: dict[str, dict[str, TableSchema]] = {}
    for i in range(5):
        target = f"lake.{namespace}.t{i}"
        columns = ", ".join(f"c{k} int" for k in range(i + 1))
        spark.sql(f"CREATE TABLE {target} (id bigint, {columns}) USING iceberg")
        sources[target] = {f"db.t{i}": A1 if i % 2 else B}
    runner = TargetRunner(spark, 3, committed=lambda target, mark: None)
    try:
        pooled = describe_run(spark, sources, [("db.whole", f"lake.{namespace}.t0")], runner.map)
    finally:
        runner.close()
    alone = describe_run(spark, sources, [("db.whole", f"lake.{namespace}.t0")])
    assert pooled == alone
    assert list(pooled) == sorted(sources)
    assert [len(d["columns"]) for d in pooled.values()] == [2, 3, 4, 5, 6]
    assert pooled[f"lake.{namespace}.t0"]["sources"] == {"db.t0": source_columns(B), "db.whole": None}
