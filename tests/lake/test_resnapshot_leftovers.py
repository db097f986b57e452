"""No re-snapshot staging table outlives its use (issue #14): real MariaDB, Spark and Iceberg.

Found by the contract model (seed 233017): a drain run crashed right after a re-snapshot's swap;
the swap's mark covers the statement that asked for it, so the retry never re-snapshots the table
again and nobody dropped ``{table}__resnapshot_{attempt}``. And a run crashed before the swap whose
table is then renamed away: the retry's re-snapshot is ``gone`` and used to leave the staging table.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_binlog import faults
from airflow_provider_binlog.canal.instance import CanalInstance
from airflow_provider_binlog.canal.routing import Routes
from airflow_provider_binlog.canal.snapshot.resnapshot import resnapshot_key
from airflow_provider_binlog.drain.loop import Limits
from airflow_provider_binlog.drain.run import Drain, RunSettings
from airflow_provider_binlog.lake.resnapshot import LakeResnapshot, namespace_tables

from .test_resnapshot import _assert_equal, _setup, _swaps
from .test_resnapshot_run import MARKER, _raise_at_marked_ddl

pytestmark = [pytest.mark.integration, pytest.mark.spark]

KILLED = "0123456789ab"  # a staging table of an earlier killed attempt whose record was overwritten


def _run(config: Any, meta: Any, mariadb: Any, database: str, spark: Any, tables: dict[str, str]) -> Any:
    return Drain(
        CanalInstance(config, meta), Routes(tables),
        RunSettings(limits=Limits(batch_size=200, max_rows_per_commit=500), snapshot_chunk_size=200,
                    stop_spark=False),
        spark=lambda: spark, connect=lambda: mariadb.connect(database),
    ).run("head")  # fmt: skip


def _crash(monkeypatch: pytest.MonkeyPatch, where: str, run: Any) -> None:
    monkeypatch.setenv(faults.ENV, f"{where}=raise@1")
    faults.reset()
    try:
        with pytest.raises(faults.InjectedFault):
            run()
    finally:
        monkeypatch.delenv(faults.ENV)
        faults.reset()


def test_run_crashed_after_the_swap_leaves_no_staging_table(
    mariadb: Any, database: str, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, meta, tables = _setup(mariadb, database, spark)
    source, target = f"{database}.t", f"lake.{database}.t"
    raised = _raise_at_marked_ddl(monkeypatch)
    # a user table whose name only looks like a staging table is never touched
    spark.sql(f"CREATE TABLE lake.`{database}`.`t__resnapshot_backup` (id INT) USING iceberg")
    mariadb.execute(f"ALTER TABLE `{database}`.t COMMENT '{MARKER}'")
    mariadb.execute(f"UPDATE `{database}`.t SET v = 'after' WHERE id < 60")

    def run() -> Any:
        return _run(config, meta, mariadb, database, spark, tables)

    _crash(monkeypatch, "resnapshot_after_swap", run)
    prog = meta.get_json(config.identity, resnapshot_key(source)).value
    assert prog["status"] == "swapping" and prog["source"] == source
    swapper = LakeResnapshot(spark, "snap", source, target)
    assert _swaps(spark, target) == [prog["attempt"]]
    assert swapper.leftovers() == [prog["attempt"]]
    spark.sql(
        f"CREATE TABLE {swapper.staging(KILLED)} USING iceberg AS SELECT * FROM {swapper.target} LIMIT 0"
    )
    assert swapper.leftovers() == sorted([prog["attempt"], KILLED])

    summary = run()
    assert len(raised) == 1 and "resnapshots" not in summary  # the mark at S covers the statement
    assert swapper.leftovers() == []
    assert "t__resnapshot_backup" in namespace_tables(spark, ("lake", database))
    prog = meta.get_json(config.identity, resnapshot_key(source)).value
    assert prog["status"] == "done"
    assert _swaps(spark, target) == [prog["attempt"]]  # swapped once
    _assert_equal(mariadb, database, spark, tables)
    with pytest.raises(ValueError, match="12 lowercase hex"):
        swapper.staging("backup")


def test_run_crashed_before_the_swap_then_table_renamed_away(
    mariadb: Any, database: str, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, meta, tables = _setup(mariadb, database, spark)
    source, target = f"{database}.t", f"lake.{database}.t"
    raised = _raise_at_marked_ddl(monkeypatch)
    mariadb.execute(f"ALTER TABLE `{database}`.t COMMENT '{MARKER}'")

    def run() -> Any:
        return _run(config, meta, mariadb, database, spark, tables)

    _crash(monkeypatch, "resnapshot_before_swap", run)
    first = meta.get_json(config.identity, resnapshot_key(source)).value
    assert first["status"] == "swapping" and _swaps(spark, target) == []
    swapper = LakeResnapshot(spark, "snap", source, target)
    assert swapper.leftovers() == [first["attempt"]]
    mariadb.execute(f"RENAME TABLE `{database}`.t TO `{database}`.t_away")  # out of the routes

    summary = run()
    assert len(raised) == 2, raised
    (done,) = summary["resnapshots"]
    assert done["gone"] and done["source"] == source
    assert swapper.leftovers() == []
    prog = meta.get_json(config.identity, resnapshot_key(source)).value
    assert prog["attempt"] == first["attempt"] and prog["status"] == "abandoned"
    assert _swaps(spark, target) == []  # the lake table is left as it is
