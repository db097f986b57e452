"""The table re-snapshot inside a drain run and from the CLI (issue #14): real MariaDB, Spark, Iceberg.

* the drain path: the merger raises ResnapshotNeeded for one table at a DDL entry in the middle of a
  run (through the fold, as the DDL policy does); the run re-snapshots that table and goes on, with
  writes to it and to another table throughout; afterwards both lake tables equal their sources;
* the CLI, SIGKILLed right after the swap, then started again: swapped once, lake equal to source.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from airflow_provider_binlog import faults
from airflow_provider_binlog.canal.change import DdlEntry
from airflow_provider_binlog.canal.instance import CanalInstance
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.routing import Routes
from airflow_provider_binlog.canal.snapshot.resnapshot import resnapshot_key
from airflow_provider_binlog.canal.sql.operations import ResnapshotNeeded
from airflow_provider_binlog.drain.loop import Limits
from airflow_provider_binlog.drain.run import Drain, RunSettings
from airflow_provider_binlog.lake.write.merge import ChangeMerger

from .test_resnapshot import _assert_equal, _diffs, _setup, _swaps
from .test_snapshot import Writer, incremental

pytestmark = [pytest.mark.integration, pytest.mark.spark]

MARKER = "resnapshot-me"


def _raise_at_marked_ddl(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Make the merger's fold raise ResnapshotNeeded at a DDL entry whose statement holds
    :data:`MARKER`, unless the target's mark covers it (what the DDL policy's fold does)."""
    raised: list[Any] = []
    fold = ChangeMerger._fold

    def marked_fold(self: ChangeMerger, target: str, entries: list[Any]) -> None:
        mark = self.marks.get(target)
        for e in entries:
            if type(e) is DdlEntry and MARKER in e.sql and (mark is None or not mark.covers(e.order_key)):
                raised.append(e.position)
                raise ResnapshotNeeded(
                    f"{e.schema}.{e.table}", e.sql, e.position, "re-snapshot", target=self.display(target)
                )
        fold(self, target, entries)

    monkeypatch.setattr(ChangeMerger, "_fold", marked_fold)
    return raised


def test_drain_resnapshots_a_table_mid_run(
    mariadb: Any, database: str, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, meta, tables = _setup(mariadb, database, spark)  # lake t diverged, u exact
    raised = _raise_at_marked_ddl(monkeypatch)
    routes = Routes(tables)
    limits = Limits(batch_size=200, max_rows_per_commit=500)

    def run() -> dict[str, Any]:
        instance = CanalInstance(config, meta)
        return Drain(
            instance, routes, RunSettings(limits=limits, snapshot_chunk_size=200, stop_spark=False),
            spark=lambda: spark, connect=lambda: mariadb.connect(database),
        ).run("head")  # fmt: skip

    with (
        Writer(mariadb, database, "t", 900, seed=21, max_ops=300),
        Writer(mariadb, database, "u", 300, seed=22, max_ops=300),
    ):
        mariadb.execute(f"UPDATE `{database}`.t SET v = 'before' WHERE id < 50")
        mariadb.execute(f"ALTER TABLE `{database}`.t COMMENT '{MARKER}'")
        mariadb.execute(f"UPDATE `{database}`.t SET v = 'after' WHERE id < 60")
        mariadb.execute(f"UPDATE `{database}`.u SET v = 'after' WHERE id < 60")
        summary = run()
    assert len(raised) == 1, raised
    (done,) = summary["resnapshots"]
    assert done["source"] == f"{database}.t" and done["rows"] > 0
    assert summary["tables"], summary
    # everything after the stop point too, with the re-snapshot's mark in place
    summary = run()
    assert "resnapshots" not in summary and len(raised) == 1
    _assert_equal(mariadb, database, spark, tables)
    prog = meta.get_json(config.identity, resnapshot_key(f"{database}.t")).value
    assert prog["status"] == "done"
    # later changes flow on; a re-read of the DDL (a cursor before it) is skipped by the mark
    mariadb.execute(f"DELETE FROM `{database}`.t WHERE id % 9 = 0")
    incremental(config, meta, spark, tables)
    _assert_equal(mariadb, database, spark, tables)


def test_cli_resnapshot_killed_after_the_swap_then_again(
    mariadb: Any, database: str, spark: Any, spark_warehouse: str, tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from airflow_provider_binlog import cli
    from airflow_provider_binlog.canal.meta import FileMetaManager

    meta = FileMetaManager(str(tmp_path / "meta"))
    config, _, tables = _setup(mariadb, database, spark, meta=meta)
    source, target = f"{database}.t", f"lake.{database}.t"
    monkeypatch.setenv("SNAP_PASSWORD", mariadb.repl_password)
    argv = [
        "resnapshot", "--host", mariadb.host, "--port", str(mariadb.port), "--user", mariadb.repl_user,
        "--password-env", "SNAP_PASSWORD", "--destination", "snap", "--meta-dir", str(tmp_path / "meta"),
        "--table", source, "--target", target, "--chunk-size", "300", "--warehouse", spark_warehouse,
        "--spark-master", "local[1]",
    ]  # fmt: skip
    log = tmp_path / "killed.log"
    with open(log, "wb") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "airflow_provider_binlog.cli", *argv],
            env={**os.environ, faults.ENV: "resnapshot_after_swap=kill@1"}, stdout=out,
            stderr=subprocess.STDOUT, timeout=600, check=False,
        )  # fmt: skip
    text = log.read_text()
    assert proc.returncode == -signal.SIGKILL, text[-3000:]
    assert faults.KILL_MARK in text and mariadb.repl_password not in text
    prog = meta.get_json(ClientIdentity("snap", 1001), resnapshot_key(source)).value
    assert prog["status"] == "swapping"
    assert _swaps(spark, target) == [prog["attempt"]]
    assert cli.main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["attempt"] == prog["attempt"] and summary["resumed"] and summary["chunks"] == 0
    assert _swaps(spark, target) == [prog["attempt"]]
    incremental(config, meta, spark, tables)
    _assert_equal(mariadb, database, spark, tables)
    assert all(d.equal for d in _diffs(mariadb, database, spark, tables).values())
