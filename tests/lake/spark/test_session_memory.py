"""The Spark driver's direct memory stays flat over MERGEs into format-version 3 tables.

Iceberg 1.10's vectorized reader leaked one Arrow vector per batch of a MERGE's read (the row lineage
columns, apache/iceberg#17241): a long drain's driver failed with ``Cannot reserve ... bytes of
direct buffer memory``. The product's sessions read row by row (``lake/spark/session.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Entry, Op, OrderKey, RowChange
from airflow_provider_binlog.lake.native import position_delta
from airflow_provider_binlog.lake.spark.session import VECTORIZATION
from airflow_provider_binlog.lake.write.merge import merge_batch

pytestmark = pytest.mark.spark

ROWS = 200_000
MERGES = 8
CHUNK_MB = 4  # the pooled arenas (netty) that Arrow's buffers come from grow by 4 MiB chunks


def _direct_bytes(spark: Any) -> int:
    jvm = spark.sparkContext._jvm
    kind = jvm.java.lang.Class.forName("java.lang.management.BufferPoolMXBean")
    for pool in jvm.java.lang.management.ManagementFactory.getPlatformMXBeans(kind):
        if pool.getName() == "direct":
            return int(pool.getMemoryUsed())
    raise AssertionError("the JVM has no direct buffer pool")


def _change(schema: TableSchema, op: Op, seq: int, before: Any, after: Any) -> RowChange:
    pos = BinlogPosition("mysql-bin.000001", 4 + seq * 10)
    return RowChange(
        "dest", "db", "t", op, before, after, ("id",), pos, BinlogPosition(pos.file, pos.pos + 10),
        f"0-1-{seq}", 1_700_000_000, OrderKey(1, pos.pos, -1, 0), schema,
    )  # fmt: skip


def test_merges_into_a_v3_table_keep_the_drivers_direct_memory_flat(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert spark.conf.get(VECTORIZATION) == "false"
    monkeypatch.setenv(position_delta.POSITION_DELTA_ENV, "off")  # every MERGE is Spark's
    columns = (ColumnDef("id", T.LONG), ColumnDef("v", T.VARCHAR, collation=45, charset="utf-8"))
    schema = TableSchema("db", "t", columns, ("id",))
    target = "lake.session_memory.t"
    seq = 0
    base: list[Entry] = []
    for i in range(ROWS):
        seq += 1
        base.append(_change(schema, Op.INSERT, seq, None, {"id": i, "v": "a"}))
    merge_batch(spark, "dest", {"db.t": target}, base, base[-1].end_position)
    used = []
    for m in range(MERGES):
        batch: list[Entry] = []
        for i in range(m, ROWS, 8):  # keys spread over the whole table: every data file is read
            seq += 1
            batch.append(_change(schema, Op.UPDATE, seq, {"id": i, "v": "a"}, {"id": i, "v": f"m{m}"}))
        counts = merge_batch(spark, "dest", {"db.t": target}, batch, batch[-1].end_position)
        assert counts[target].updated == len(batch)
        used.append(_direct_bytes(spark))
    rows = dict(spark.sql(f"SELECT v, count(*) FROM {target} GROUP BY v").collect())
    assert rows == {f"m{m}": ROWS // 8 for m in range(MERGES)}  # each key updated once
    # Iceberg 1.10's vectorized reads grew it by 4 MiB a MERGE here (16 MiB over four MERGEs)
    grown = (used[-1] - used[1]) / (1 << 20)
    assert grown <= 2 * CHUNK_MB, f"direct memory grew {grown:.1f} MiB over {MERGES - 2} MERGEs: {used}"
