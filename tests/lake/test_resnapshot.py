"""A table re-snapshot at a binlog point (issue #14): real MariaDB, Spark and Iceberg.

A lake table made to diverge on purpose (rows changed with ``sql_log_bin=0``, which the binlog never
sees) is re-snapshotted while writers change it and another table; then a binlog drain keeps both
exact. Failpoints before and after the swap, then a retry; the drain path (a ResnapshotNeeded raised
while folding) ends with the lake equal to the source.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_binlog import faults
from airflow_provider_binlog.binlog.client import ReplicationClient
from airflow_provider_binlog.canal.meta import MemoryMetaManager, MetaManager
from airflow_provider_binlog.canal.snapshot.resnapshot import mark_key, resnapshot_key
from airflow_provider_binlog.drain.resnapshot import resnapshot
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.resnapshot import RESNAPSHOT, LakeResnapshot
from airflow_provider_binlog.lake.sql import parse_name, quote_parts
from airflow_provider_binlog.lake.verify.verify import verify_tables

from .test_snapshot import Writer, _config, _fill, _snapshot, incremental

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _diverge(mariadb: Any, database: str, table: str) -> None:
    """Change rows without writing the binlog: the lake can never learn of it from the stream."""
    conn = mariadb.connect(database)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"UPDATE {table} SET v = 'ghost' WHERE id % 5 = 0")
            cur.execute(f"DELETE FROM {table} WHERE id % 7 = 0")
            cur.execute(f"INSERT INTO {table} (id, v, n) VALUES (900001, 'unseen', 1), (900002, 'unseen', 2)")
    finally:
        conn.close()


def _diffs(mariadb: Any, database: str, spark: Any, tables: dict[str, str]) -> dict[str, Any]:
    conn = mariadb.connect(database)
    try:
        return {d.source: d for d in verify_tables(conn, spark, tables)}
    finally:
        conn.close()


def _assert_equal(mariadb: Any, database: str, spark: Any, tables: dict[str, str]) -> None:
    for diff in _diffs(mariadb, database, spark, tables).values():
        assert diff.equal, diff.describe()
        assert diff.source_rows > 0


def _setup(
    mariadb: Any, database: str, spark: Any, meta: MetaManager | None = None
) -> tuple[Any, MetaManager, dict[str, str]]:
    """Tables t (diverged in the lake) and u, snapshotted and drained, then t diverged."""
    _fill(mariadb, database, "t", 900)
    _fill(mariadb, database, "u", 300)
    config = _config(mariadb, database)
    meta = meta or MemoryMetaManager()
    tables = {f"{database}.t": f"lake.{database}.t", f"{database}.u": f"lake.{database}.u"}
    _snapshot(config, meta, mariadb, database, spark, tables, chunk_size=400)
    incremental(config, meta, spark, tables)
    _assert_equal(mariadb, database, spark, tables)
    _diverge(mariadb, database, "t")
    mariadb.execute(f"UPDATE `{database}`.u SET v = 'seen' WHERE id < 10")
    incremental(config, meta, spark, tables)
    diffs = _diffs(mariadb, database, spark, tables)
    assert not diffs[f"{database}.t"].equal and diffs[f"{database}.u"].equal
    return config, meta, tables


def _resnapshot(config: Any, meta: MetaManager, mariadb: Any, database: str, spark: Any, table: str) -> Any:
    return resnapshot(
        meta, config.identity, ReplicationClient(config.source), lambda: mariadb.connect(database), spark,
        f"{database}.{table}", f"lake.{database}.{table}", chunk_size=250,
    )  # fmt: skip


def _swaps(spark: Any, target: str) -> list[str]:
    name = quote_parts(parse_name(target))
    spark.sql(f"REFRESH TABLE {name}")  # another process may have committed
    rows = spark.sql(f"SELECT summary['{RESNAPSHOT}'] AS a FROM {name}.snapshots").collect()
    return [r.a for r in rows if r.a]


def test_diverged_table_resnapshotted_under_writes_then_drained(
    mariadb: Any, database: str, spark: Any
) -> None:
    config, meta, tables = _setup(mariadb, database, spark)
    target = f"lake.{database}.t"
    with (
        Writer(mariadb, database, "t", 900, seed=11, max_ops=400) as wt,
        Writer(mariadb, database, "u", 300, seed=12, max_ops=400) as wu,
    ):
        result = _resnapshot(config, meta, mariadb, database, spark, "t")
        during = (wt.ops, wu.ops)
    assert during[0] > 10 and during[1] > 10, during
    assert result.chunks >= 4 and not result.resumed
    mark = commits.read_mark(spark, quote_parts(parse_name(target)), "snap")
    assert mark is not None and mark.order_key == mark_key(result.start)
    assert _swaps(spark, target) == [result.attempt]
    prog = meta.get_json(config.identity, resnapshot_key(f"{database}.t")).value
    assert prog["status"] == "done" and prog["start"] == str(result.start)
    # no staging table is left
    assert LakeResnapshot(spark, "snap", f"{database}.t", target).leftovers() == []
    # the drain skips t's changes up to S, applies the rest; u goes on as before
    incremental(config, meta, spark, tables)
    _assert_equal(mariadb, database, spark, tables)
    mariadb.execute(f"UPDATE `{database}`.t SET v = 'later' WHERE id % 3 = 0")
    mariadb.execute(f"DELETE FROM `{database}`.u WHERE id % 4 = 0")
    incremental(config, meta, spark, tables)
    _assert_equal(mariadb, database, spark, tables)


@pytest.mark.parametrize("where", ["resnapshot_before_swap", "resnapshot_after_swap"])
def test_failpoint_at_the_swap_then_retry_converges(
    mariadb: Any, database: str, spark: Any, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    config, meta, tables = _setup(mariadb, database, spark)
    source, target = f"{database}.t", f"lake.{database}.t"
    quoted = quote_parts(parse_name(target))
    before = commits.read_mark(spark, quoted, "snap")
    monkeypatch.setenv(faults.ENV, f"{where}=raise@1")
    faults.reset()
    with pytest.raises(faults.InjectedFault):
        _resnapshot(config, meta, mariadb, database, spark, "t")
    monkeypatch.delenv(faults.ENV)
    prog = meta.get_json(config.identity, resnapshot_key(source)).value
    assert prog["status"] == "swapping"
    swapper = LakeResnapshot(spark, "snap", source, target)
    assert swapper.leftovers() == [prog["attempt"]]  # the staging table is there until the end
    if where == "resnapshot_before_swap":
        assert commits.read_mark(spark, quoted, "snap") == before and _swaps(spark, target) == []
        assert not _diffs(mariadb, database, spark, tables)[source].equal  # untouched
    else:
        assert _swaps(spark, target) == [prog["attempt"]]
    mariadb.execute(f"UPDATE `{database}`.t SET v = 'between' WHERE id < 40")
    result = _resnapshot(config, meta, mariadb, database, spark, "t")
    assert result.resumed and result.attempt == prog["attempt"] and result.chunks == 0
    assert _swaps(spark, target) == [prog["attempt"]]  # swapped exactly once
    assert swapper.leftovers() == []
    incremental(config, meta, spark, tables)
    _assert_equal(mariadb, database, spark, tables)


def test_killed_attempt_left_over_then_new_attempt_after_the_mark_moved(
    mariadb: Any, database: str, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attempt stopped while loading, then a drain that moved t's mark past its S: the next
    re-snapshot cannot swap at that S (the mark would go back); it starts a new attempt at a new S and
    drops the old staging table."""
    config, meta, tables = _setup(mariadb, database, spark)
    source, target = f"{database}.t", f"lake.{database}.t"
    monkeypatch.setenv(faults.ENV, "snapshot_after_load=raise@2")
    faults.reset()
    with pytest.raises(faults.InjectedFault):
        _resnapshot(config, meta, mariadb, database, spark, "t")
    monkeypatch.delenv(faults.ENV)
    first = meta.get_json(config.identity, resnapshot_key(source)).value
    assert first["status"] == "loading" and first["pending"]["chunk"] == 2
    mariadb.execute(f"UPDATE `{database}`.t SET v = 'moved' WHERE id < 30")
    incremental(config, meta, spark, tables)
    result = _resnapshot(config, meta, mariadb, database, spark, "t")
    assert not result.resumed and result.attempt != first["attempt"]
    assert LakeResnapshot(spark, "snap", source, target).leftovers() == []
    incremental(config, meta, spark, tables)
    _assert_equal(mariadb, database, spark, tables)


def test_changed_columns_replace_the_table(mariadb: Any, database: str, spark: Any) -> None:
    """A column whose type the lake cannot widen (INT -> VARCHAR), changed without the binlog's
    knowledge of the rows: the swap replaces the table with the source's current columns."""
    config, meta, tables = _setup(mariadb, database, spark)
    mariadb.execute(f"ALTER TABLE `{database}`.t MODIFY n VARCHAR(30), DROP COLUMN j")
    mariadb.execute(f"UPDATE `{database}`.t SET n = CONCAT('n', id) WHERE id % 2 = 0")
    result = _resnapshot(config, meta, mariadb, database, spark, "t")
    fields = {f.name: f.dataType.simpleString() for f in spark.table(f"lake.{database}.t").schema.fields}
    assert fields["n"] == "string" and "j" not in fields
    assert _swaps(spark, f"lake.{database}.t") == [result.attempt]
    incremental(config, meta, spark, tables)
    _assert_equal(mariadb, database, spark, tables)
