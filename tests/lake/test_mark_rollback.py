"""A lake table a human rolled back to before its destination's mark tag (issue #43): the next run
stops naming the table, the tag and the remedy, and the remedy as the message words it (``binlog-cdc
resnapshot`` of that one table) makes the lake equal to the source again, after which runs go on.
Real MariaDB, Spark and Iceberg."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_provider_binlog.canal.meta import FileMetaManager
from airflow_provider_binlog.lake import commits

from .test_resnapshot import _assert_equal, _diffs
from .test_snapshot import _config, _fill, _snapshot, incremental

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_rollback_before_the_tag_stops_and_the_resnapshot_it_names_repairs(
    mariadb: Any, database: str, spark: Any, spark_warehouse: str, tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from airflow_provider_binlog import cli

    meta = FileMetaManager(str(tmp_path / "meta"))
    _fill(mariadb, database, "t", 300)
    config = _config(mariadb, database)
    source, target = f"{database}.t", f"lake.{database}.t"
    tables = {source: target}
    _snapshot(config, meta, mariadb, database, spark, tables, chunk_size=400)
    incremental(config, meta, spark, tables)
    table = commits.load_iceberg_table(spark, target)
    table.refresh()
    before = int(table.currentSnapshot().snapshotId())
    mariadb.execute(f"UPDATE `{database}`.t SET v = 'after' WHERE id < 50")
    mariadb.execute(f"DELETE FROM `{database}`.t WHERE id BETWEEN 60 AND 70")
    incremental(config, meta, spark, tables)  # the cursor passes these; the tag moves past `before`
    _assert_equal(mariadb, database, spark, tables)
    spark.sql(f"CALL lake.system.rollback_to_snapshot('{database}.t', {before})")  # a human's undo
    mariadb.execute(f"UPDATE `{database}`.t SET v = 'later' WHERE id BETWEEN 100 AND 110")
    with pytest.raises(commits.MarkDivergedError) as raised:
        incremental(config, meta, spark, tables)
    text = str(raised.value)
    assert f"`{database}`.`t`" in text or target in text, text
    assert commits.mark_tag("snap") in text and "binlog-cdc resnapshot" in text
    assert not _diffs(mariadb, database, spark, tables)[source].equal  # the rollback lost changes
    # the remedy, as the message words it
    monkeypatch.setenv("SNAP_PASSWORD", mariadb.repl_password)
    argv = [
        "resnapshot", "--host", mariadb.host, "--port", str(mariadb.port), "--user", mariadb.repl_user,
        "--password-env", "SNAP_PASSWORD", "--destination", "snap", "--meta-dir", str(tmp_path / "meta"),
        "--table", source, "--target", target, "--chunk-size", "300", "--warehouse", spark_warehouse,
        "--spark-master", "local[1]",
    ]  # fmt: skip
    assert cli.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["target"]
    mariadb.execute(f"UPDATE `{database}`.t SET v = 'resumed' WHERE id BETWEEN 200 AND 210")
    incremental(config, meta, spark, tables)
    _assert_equal(mariadb, database, spark, tables)
    table.refresh()
    tagged = table.refs().get(commits.mark_tag("snap"))
    assert tagged is not None and int(tagged.snapshotId()) == int(table.currentSnapshot().snapshotId())
