"""``lake/spark/java_maps.string_map`` against the real JVM: what one call reads equals what iterating the
map key by key reads, for text that breaks a naive ``{k=v, ...}`` parse, for a commit's summary with
its mark, and for a table's properties."""

from __future__ import annotations

import uuid
from typing import Any

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import OrderKey
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.spark.java_maps import string_map

AWKWARD = {
    "plain": "value",
    "": "empty key",
    "empty": "",
    "separators": "a, b=c}, {d=e",
    "quotes and escapes": '"x" \\ \\" \'y\'',
    "lines": "one\ntwo\r\n\tthree",
    "unicode": "é ß 中文 \U0001f600",
    "gtid set": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:11-18,0-1-9",
    "control": "\x00\x01\x1f",
}


def one_by_one(jmap: Any) -> dict[str, str]:
    return {str(k): str(jmap.get(k)) for k in jmap.keySet()}


def test_awkward_text_reads_exactly(spark: Any) -> None:
    jmap = spark._jvm.java.util.HashMap()
    for k, v in AWKWARD.items():
        jmap.put(k, v)
    assert string_map(spark, jmap) == AWKWARD == one_by_one(jmap)
    assert string_map(spark, spark._jvm.java.util.HashMap()) == {}


def test_a_commits_summary_and_a_tables_properties(spark: Any) -> None:
    name = f"lake.maps.t_{uuid.uuid4().hex[:8]}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.maps")
    spark.sql(f"CREATE TABLE {name} (id bigint) USING iceberg TBLPROPERTIES ('note'='a, b=c')")
    props = commits.mark_properties(
        "dest, with=odd {chars}",
        OrderKey(3, 1234, -1, 7),
        BinlogPosition("mysql-bin.000003", 1234),
        BinlogPosition("mysql-bin.000003", 2048),
        "0-1-99",
    )
    with commits.commit_properties(spark, props):
        spark.sql(f"INSERT INTO {name} VALUES (1), (2)")
    table = commits.load_iceberg_table(spark, name)
    assert table is not None
    summary = table.currentSnapshot().summary()
    read = string_map(spark, summary)
    assert read == one_by_one(summary)
    assert {k: read[k] for k in props} == dict(props)
    assert read["added-records"] == "2"
    properties = string_map(spark, table.properties())
    assert properties == one_by_one(table.properties()) and properties["note"] == "a, b=c"
    mark = commits.read_mark(spark, name, "dest, with=odd {chars}")
    assert mark is not None
    assert mark.order_key == OrderKey(3, 1234, -1, 7)
    assert mark.end_position == BinlogPosition("mysql-bin.000003", 2048)
    assert mark.gtid == "0-1-99" and mark.snapshot_id == int(table.currentSnapshot().snapshotId())
