"""Iceberg's JDBC catalog on a real PostgreSQL (issue #16): everything the lake does, and commits
that lose a race to another writer.

The catalog is registered at runtime in the test session's Spark (one JVM, one SparkContext), on a
fresh PostgreSQL database per test. Another writer is a second ``JdbcCatalog`` instance in the same
JVM, committing to the same table behind the session's cached view of it (what a writer in another
process does; ``tests/lake/test_concurrent_writers.py`` runs real separate processes).
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
from airflow_provider_binlog.canal.snapshot.resnapshot import mark_key
from airflow_provider_binlog.dev.services import PostgresServer
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.resnapshot import RESNAPSHOT, LakeResnapshot, namespace_tables
from airflow_provider_binlog.lake.spark.session import jdbc_catalog_conf
from airflow_provider_binlog.lake.write.merge import ChangeMerger, TargetOptions, merge_batch

from .model import SourceTable, all_type_columns, read_table

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture
def jdbc_catalog(spark: Any, postgres: PostgresServer, catalog_database: str, tmp_path: Path) -> str:
    """A JDBC catalog (Iceberg's default caching on) on a fresh database, registered in ``spark``."""
    name = "jdbc_" + uuid.uuid4().hex[:8]
    conf = jdbc_catalog_conf(
        postgres.jdbc_url(catalog_database), postgres.user, postgres.password, str(tmp_path / "wh"), name
    )
    for key, value in conf.items():
        spark.conf.set(key, value)
    return name


def _other_writer(spark: Any, postgres: PostgresServer, database: str, catalog: str, warehouse: str) -> Any:
    """A second JdbcCatalog on the same database (its own view of each table: another writer)."""
    jvm = spark._jvm
    props = jvm.java.util.HashMap()
    for key, value in {
        "uri": postgres.jdbc_url(database), "jdbc.user": postgres.user, "jdbc.password": postgres.password,
        "warehouse": warehouse, "jdbc.schema-version": "V1",
    }.items():  # fmt: skip
        props.put(key, value)
    other = jvm.org.apache.iceberg.jdbc.JdbcCatalog()
    other.setConf(spark._jsc.hadoopConfiguration())
    other.initialize(catalog, props)
    return other


def _other_delete_all(spark: Any, other: Any, table: str) -> None:
    """The other writer deletes every row of ``namespace.table`` (a real commit removing data files)."""
    jvm = spark._jvm
    t = other.loadTable(jvm.org.apache.iceberg.catalog.TableIdentifier.parse(table))
    t.newDelete().deleteFromRowFilter(jvm.org.apache.iceberg.expressions.Expressions.alwaysTrue()).commit()


COLUMNS = (ColumnDef("id", T.LONG), ColumnDef("v", T.VARCHAR, collation=45))


def _inserts(ids: range, v: str) -> list[RowChange]:
    return [_change(i, Op.INSERT, None, {"id": i, "v": v}) for i in ids]


def _latest_snapshot(spark: Any, table: str) -> int:
    return int(spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at DESC").first()[0])


def _change(n: int, op: Op, before: dict[str, Any] | None, after: dict[str, Any] | None) -> RowChange:
    schema = TableSchema("db", "t", COLUMNS, ("id",))
    pos = BinlogPosition("mysql-bin.000001", 1000 + 10 * n)
    end = BinlogPosition(pos.file, pos.pos + 10)
    return RowChange("dest", "db", "t", op, before, after, ("id",), pos, end, None, 1_700_000_000,
                     OrderKey(1, pos.pos, -1, 0), schema)  # fmt: skip


def test_the_merge_model_check_time_travel_and_drop_on_the_jdbc_catalog(
    spark: Any, jdbc_catalog: str, postgres: PostgresServer, catalog_database: str
) -> None:
    """Random inserts, key-changing updates, deletes, TRUNCATEs and ADD COLUMNs merged in batches:
    the table equals the model value for value, a re-applied batch is skipped by its mark, the
    namespace lists, old snapshots read back, and the table lives in PostgreSQL (not on disk)."""
    rng = random.Random(16)
    src = SourceTable("shop", "orders", all_type_columns(), rng)
    target = f"{jdbc_catalog}.shop.orders"
    opts = TargetOptions(count_changes=True)
    merger = ChangeMerger(spark, "dest", {"shop.orders": target}, opts, max_rows=40)
    first_snapshot = None
    for _round in range(3):
        n = rng.randint(30, 50)
        forced = {rng.randrange(5, n): src.truncate, rng.randrange(n): src.add_column,
                  rng.randrange(n): lambda: src.update(change_key=True)}  # fmt: skip
        entries = [e for e in (forced.get(i, src.random_op)() for i in range(n)) if e is not None]
        half = len(entries) // 2
        for batch in (entries[:half], entries[half:]):
            merger.merge(batch, batch[-1].end_position)
            again = merge_batch(spark, "dest", {"shop.orders": target}, batch, batch[-1].end_position)
            assert again[target].commits == 0 and again[target].skipped == len(batch)
        expected = src.expected()
        columns = [c.cdef.name for c in src.all_columns]
        actual = read_table(spark, target, columns)
        assert actual == expected
        if first_snapshot is None:
            first_snapshot = (
                _latest_snapshot(spark, target),
                len(expected),
            )
    merger.close()
    assert [r[0] for r in spark.sql(f"SHOW NAMESPACES IN {jdbc_catalog}").collect()] == ["shop"]
    assert namespace_tables(spark, (jdbc_catalog, "shop")) == ["orders"]
    snapshot_id, rows_then = first_snapshot
    assert spark.sql(f"SELECT count(*) FROM {target} VERSION AS OF {snapshot_id}").first()[0] == rows_then
    mark = commits.read_mark(spark, target, "dest")
    assert mark is not None and mark.end_position == entries[-1].end_position
    listed = postgres.execute("SELECT table_namespace, table_name FROM iceberg_tables", catalog_database)
    assert listed == [("shop", "orders")]
    spark.sql(f"DROP TABLE {target}")
    assert postgres.execute("SELECT count(*) FROM iceberg_tables", catalog_database) == [("0",)]


@pytest.mark.parametrize("same_columns", [True, False], ids=["overwrite", "create-or-replace"])
def test_a_resnapshot_swap_on_the_jdbc_catalog(spark: Any, jdbc_catalog: str, same_columns: bool) -> None:
    """The re-snapshot's staging table and its swap (an overwrite, or CREATE OR REPLACE ... AS SELECT
    when the columns differ) carry the destination's mark; the old rows stay readable by snapshot."""
    target = f"{jdbc_catalog}.db.t"
    merge_batch(spark, "dest", {"db.t": target}, _inserts(range(5), "old"))
    before = _latest_snapshot(spark, target)
    cols = COLUMNS
    if not same_columns:
        cols = (*cols, ColumnDef("extra", T.LONG))
    schema = TableSchema("db", "t", cols, ("id",))
    swap = LakeResnapshot(spark, "dest", "db.t", target)
    attempt = uuid.uuid4().hex[:12]
    swap.prepare(attempt, schema)
    start = BinlogPosition("mysql-bin.000002", 4)
    after = [{"id": i, "v": "new", "extra": i} for i in range(3, 9)]
    rows = [
        RowChange("dest", "db", "t", Op.INSERT, None, a, ("id",), start, start, None, 1_700_000_000,
                  OrderKey(0, 1, -1, a["id"]), schema)
        for a in after
    ]  # fmt: skip
    swap.load(attempt, rows)
    swap.swap(attempt, start)
    assert swap.swapped(attempt)
    mark = commits.read_mark(spark, target, "dest")
    assert mark is not None and mark.order_key == mark_key(start)
    got = sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {target}").collect())
    assert got == [(i, "new") for i in range(3, 9)]
    assert spark.sql(f"SELECT count(*) FROM {target} VERSION AS OF {before}").first()[0] == 5
    summary = spark.sql(f"SELECT summary FROM {target}.snapshots ORDER BY committed_at DESC").first()[0]
    assert summary[RESNAPSHOT] == attempt
    swap.drop_staging(attempt)
    assert namespace_tables(spark, (jdbc_catalog, "db")) == ["t"]
    swap.close()


def test_a_merge_behind_another_writers_commit_is_retried_with_its_mark(
    spark: Any, jdbc_catalog: str, postgres: PostgresServer, catalog_database: str, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """Another writer commits to the table after this session last read it: the MERGE fails
    validation for real, is retried once on the table as it is now, and commits with its mark; the
    other writer's delete stays."""
    target = f"{jdbc_catalog}.db.t"
    merge_batch(spark, "dest", {"db.t": target}, _inserts(range(4), "a"))
    other = _other_writer(spark, postgres, catalog_database, jdbc_catalog, str(tmp_path / "wh"))
    with ChangeMerger(spark, "dest", {"db.t": target}) as merger:
        merger.load_marks()  # this session reads the table now (as a merger does at its first fold)
        _other_delete_all(spark, other, "db.t")  # and the other writer commits after that
        before = commits.conflicts_retried
        batch = [_change(10, Op.UPDATE, {"id": 1, "v": "a"}, {"id": 1, "v": "b"}),
                 _change(11, Op.DELETE, {"id": 2, "v": "a"}, None),
                 _change(12, Op.INSERT, None, {"id": 7, "v": "c"})]  # fmt: skip
        counts = merger.merge(batch, batch[-1].end_position)
    assert commits.conflicts_retried == before + 1
    assert any("commit conflict on" in r.getMessage() and "ValidationException" in r.getMessage()
               for r in caplog.records)  # fmt: skip
    assert counts[target].commits == 1
    got = sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {target}").collect())
    assert got == [(1, "b"), (7, "c")]  # the other writer emptied the table, then the batch applied
    mark = commits.read_mark(spark, target, "dest")
    assert mark is not None and mark.order_key == batch[-1].order_key
    assert mark.end_position == batch[-1].end_position


def test_a_commit_that_landed_despite_its_error_is_not_applied_again(spark: Any, jdbc_catalog: str) -> None:
    """A commit whose outcome the catalog could not tell (CommitStateUnknownException) but which is
    in the table: the mark read inside the retry says so, and the append is not run twice."""
    target = f"{jdbc_catalog}.db.t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {jdbc_catalog}.db")
    spark.sql(f"CREATE TABLE {target} (id BIGINT) USING iceberg")
    at = BinlogPosition("mysql-bin.000001", 500)
    props = commits.mark_properties("dest", OrderKey(1, 500, -1, 0), at, None, None)
    runs = []

    def append_then_lose_the_answer() -> None:
        runs.append(1)
        spark.sql(f"INSERT INTO {target} VALUES (1), (2)")
        raise RuntimeError("org.apache.iceberg.exceptions.CommitStateUnknownException: connection reset")

    done = commits.commit(spark, target, props, append_then_lose_the_answer, "mysql-bin.000001:500")
    assert done is False and runs == [1]
    assert spark.table(target).count() == 2
    mark = commits.read_mark(spark, target, "dest")
    assert mark is not None and mark.order_key == OrderKey(1, 500, -1, 0)


def test_a_conflict_past_the_bound_fails_naming_table_and_changes(spark: Any, jdbc_catalog: str) -> None:
    """A conflict that does not go away fails after the attempts, naming the table and the changes'
    range; nothing was committed."""
    target = f"{jdbc_catalog}.db.t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {jdbc_catalog}.db")
    spark.sql(f"CREATE TABLE {target} (id BIGINT) USING iceberg")
    props = commits.mark_properties("dest", OrderKey(1, 9, -1, 0), None, None, None)
    runs = []

    def always_conflicts() -> None:
        runs.append(1)
        raise RuntimeError("org.apache.iceberg.exceptions.ValidationException: Found conflicting files")

    with pytest.raises(commits.CommitConflictError) as caught:
        commits.commit(spark, target, props, always_conflicts, "mysql-bin.000001:4 to mysql-bin.000001:9",
                       retry=commits.CommitRetry(attempts=3, wait=0.01))  # fmt: skip
    assert len(runs) == 3
    text = str(caught.value)
    assert target in text and "mysql-bin.000001:4 to mysql-bin.000001:9" in text and "3 attempts" in text
    assert commits.read_mark(spark, target, "dest") is None
