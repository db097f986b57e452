"""A piece whose keys no row of the table can hold is inserted instead of merged
(``lake/native/new_keys.py``), against real local Spark + Iceberg: the same table as the MERGE leaves, the
marks and counts of the MERGE, the MERGE wherever a staged key may be in the table, and a writer that
commits a key of the range between the check and the insert makes the insert conflict and the retry merge."""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_binlog.canal.change import Entry, Op
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.native import file_append, new_keys
from airflow_provider_binlog.lake.write.merge import ChangeMerger, TargetOptions, merge_batch

from ..write.test_merge import _end, _row, _simple_table

pytestmark = pytest.mark.spark


def _target() -> str:
    return f"lake.t{uuid.uuid4().hex[:8]}.t"


def _inserts(schema: Any, keys: range, n: int, value: str = "x") -> list[Entry]:
    return [_row(schema, Op.INSERT, n + i, None, {"id": k, "v": f"{value}{k}"}) for i, k in enumerate(keys)]


@pytest.fixture(params=["driver", "spark"])
def inserted(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The targets an insert wrote to (the real functions run): by a data file the driver writes
    (``lake/native/file_append.py``) or, with it off, by Spark; no insert took the other way."""
    calls: list[str] = []
    ways: list[str] = []
    real_spark, real_file = new_keys.insert, new_keys.insert_file

    def by_spark(spark: Any, target: str, *args: Any) -> None:
        calls.append(target.replace("`", ""))
        ways.append("spark")
        real_spark(spark, target, *args)

    def by_file(spark: Any, table: Any, target: str, *args: Any, **kwargs: Any) -> bool:
        done = True  # an attempt that raised (a conflict) counts, as Spark's does
        try:
            done = real_file(spark, table, target, *args, **kwargs)
        finally:
            if done:
                calls.append(target.replace("`", ""))
                ways.append("driver")
        return done

    monkeypatch.setattr(new_keys, "insert", by_spark)
    monkeypatch.setattr(new_keys, "insert_file", by_file)
    monkeypatch.setenv(file_append.FILE_APPEND_ENV, "on" if request.param == "driver" else "off")
    monkeypatch.setenv(commits.RETRY_ENV, "attempts=3,wait=0,max_wait=0")
    yield calls
    assert set(ways) <= {request.param}


def _contents(spark: Any, target: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.table(target).collect())


@pytest.mark.parametrize(
    "options",
    [
        TargetOptions(),
        TargetOptions(soft_delete=True, metadata_columns=True, count_changes=True),
    ],
    ids=["default", "soft-delete-meta-counted"],
)
def test_new_keys_leave_the_table_the_merge_leaves(
    spark: Any, inserted: list[str], monkeypatch: pytest.MonkeyPatch, options: TargetOptions
) -> None:
    schema = _simple_table()
    fast, slow = _target(), _target()
    first = _inserts(schema, range(1, 51), 0)
    # new keys above the table's, a delete of a key the chunk inserted (no row in the table) and
    # an update of a new key; then a chunk with an update of an old key (merged)
    second = [
        *_inserts(schema, range(100, 120), 100),
        _row(schema, Op.DELETE, 130, {"id": 101, "v": "x101"}, None),
        _row(schema, Op.UPDATE, 131, {"id": 102, "v": "x102"}, {"id": 102, "v": "y"}),
    ]
    third = [_row(schema, Op.UPDATE, 140, {"id": 5, "v": "x5"}, {"id": 5, "v": "z"})]
    results: dict[str, list[Any]] = {fast: [], slow: []}
    for target, env in ((slow, "off"), (fast, "on")):
        monkeypatch.setenv(new_keys.NEW_KEYS_ENV, env)
        for batch in (first, second, third):
            counts = merge_batch(spark, "dest", {"db.t": target}, batch, _end(batch), options)
            results[target].append(counts[target].as_dict())
    assert inserted == [fast, fast]  # the first chunk made the table (no snapshot: no row), the third merged
    assert results[fast] == results[slow]
    assert _contents(spark, fast) == _contents(spark, slow)
    mark, other = commits.read_mark(spark, fast, "dest"), commits.read_mark(spark, slow, "dest")
    assert mark is not None and other is not None
    assert dataclasses.replace(other, snapshot_id=mark.snapshot_id) == mark


def test_a_key_that_may_be_in_the_table_is_merged(spark: Any, inserted: list[str]) -> None:
    schema = _simple_table()
    target = _target()
    tables = {"db.t": target}
    for n, keys in ((0, range(1, 11)), (20, range(100, 111))):  # two data files: 1..10, 100..110
        batch = _inserts(schema, keys, n)
        merge_batch(spark, "dest", tables, batch, _end(batch))
    assert inserted == [target, target]
    batch = _inserts(schema, range(50, 60), 40)  # between the files' bounds: no file can hold them
    merge_batch(spark, "dest", tables, batch, _end(batch))
    assert inserted == [target] * 3
    batch = _inserts(schema, range(105, 115), 60, "y")  # 105..110 are rows of the table: merged
    merge_batch(spark, "dest", tables, batch, _end(batch))
    assert inserted == [target] * 3
    rows = dict(tuple(r) for r in spark.table(target).collect())
    assert len(rows) == 10 + 10 + 15 and rows[105] == "y105" and rows[114] == "y114" and rows[100] == "x100"


@pytest.mark.parametrize("table_before", ["rows", "no-snapshot"])
def test_a_writer_within_the_range_after_the_check_makes_the_insert_conflict(
    spark: Any, inserted: list[str], monkeypatch: pytest.MonkeyPatch, table_before: str
) -> None:
    """Another writer commits key 205 after the check saw none: the insert is refused (validated
    from the checked snapshot, or for a table without one from its first), the retry plans again
    and merges, so the staged row replaces it as the MERGE would have."""
    schema = _simple_table()
    target = _target()
    tables = {"db.t": target}
    if table_before == "rows":
        batch = _inserts(schema, range(1, 11), 0)
        merge_batch(spark, "dest", tables, batch, _end(batch))
    del inserted[:]
    real, checks = new_keys.untouched_snapshot, []

    def check_then_write(*args: Any) -> int | None:
        found = real(*args)
        checks.append(found)
        if len(checks) == 1:
            spark.sql(f"INSERT INTO {target} VALUES (205, 'other')")
        return found

    monkeypatch.setattr(new_keys, "untouched_snapshot", check_then_write)
    before = commits.conflicts_retried
    batch = _inserts(schema, range(200, 210), 20, "y")
    with ChangeMerger(spark, "dest", tables) as merger:
        counts = merger.merge(batch, _end(batch))[target]
    # the retry saw the other writer's file
    assert checks[0] == (new_keys.EMPTY if table_before == "no-snapshot" else checks[0]) and checks[1] is None
    assert checks[0] is not None and inserted == [target] and commits.conflicts_retried == before + 1
    assert counts.commits == 1
    rows = dict(tuple(r) for r in spark.table(target).collect())
    assert rows[205] == "y205" and len(rows) == (20 if table_before == "rows" else 10)
    # the refused attempt's file is gone: every data file in the folder is one a snapshot holds
    table = commits.load_iceberg_table(spark, target)
    assert table is not None
    folder = file_append.filesystem_of(str(table.location()))[1] + "/data"
    on_disk = {f"{folder}/{n}" for n in os.listdir(folder) if n.endswith(".parquet")}
    held = {
        file_append.filesystem_of(r[0])[1]
        for r in spark.sql(f"SELECT file_path FROM {target}.all_data_files").collect()
    }
    assert on_disk == held
    mark = commits.read_mark(spark, target, "dest")
    assert mark is not None and mark.order_key == batch[-1].order_key


def test_the_insert_sql_fills_what_the_merge_inserts() -> None:
    """Pure: the insert's columns are the MERGE's INSERT clause, identifiers quoted."""
    from airflow_provider_binlog.lake.write import merge_sql

    query, columns = merge_sql.new_keys_sql("v`1", ["id", "a b"], soft_delete=True, with_meta=True)
    assert columns == ["id", "a b", "_cdc_op", "_cdc_ts", "_cdc_position", "_cdc_deleted"]
    assert query == (
        "SELECT s.`id` AS `id`, s.`a b` AS `a b`, s.`_cdc_op` AS `_cdc_op`, s.`_cdc_ts` AS `_cdc_ts`, "
        "s.`_cdc_position` AS `_cdc_position`, false AS `_cdc_deleted` FROM `v``1` s "
        "WHERE s.`_cdc_action` = 'U'"
    )
    assert merge_sql.key_range_predicate({"id": (1, 9), "k`": (-5, 5)}) == (
        "`id` >= 1 AND `id` <= 9 AND `k``` >= -5 AND `k``` <= 5"
    )


def test_the_range_filter_is_the_expression_icebergs_builders_make(spark: Any) -> None:
    """Built from Iceberg's JSON in one call: the same expression as ``Expressions.and`` of
    ``greaterThanOrEqual`` and ``lessThanOrEqual`` per ranged column (names as the table spells
    them), and none for a column that is not an int or long one, or a range past a long."""
    from airflow_provider_binlog.lake.spark.java_classes import java_class, java_static
    from airflow_provider_binlog.lake.spark.table_schema import Columns, Field

    schema = Columns(
        (Field(1, "Id", "int", False), Field(2, "k é", "long", True), Field(3, "s", "string", True))
    )
    ranges = {"id": (-3, 2**31 - 1), "K É": (-(2**40), 2**62)}
    built = new_keys.range_filter(spark, schema, ranges)
    e = java_class(spark, "org.apache.iceberg.expressions.Expressions")
    both = getattr(e, "and")
    expected = both(
        both(e.greaterThanOrEqual("Id", -3), e.lessThanOrEqual("Id", 2**31 - 1)),
        both(e.greaterThanOrEqual("k é", -(2**40)), e.lessThanOrEqual("k é", 2**62)),
    )
    to_json = java_static(spark, "org.apache.iceberg.expressions.ExpressionParser", "toJson")
    assert str(to_json(built)) == str(to_json(expected))
    assert str(built.toString()) == str(expected.toString())
    assert new_keys.range_filter(spark, schema, {"s": (1, 2)}) is None
    assert new_keys.range_filter(spark, schema, {"id": (1, 2), "k é": (0, 2**63)}) is None
    assert new_keys.range_filter(spark, schema, {"missing": (1, 2)}) is None
