"""``columns=`` holds in snapshots and re-snapshots too (issue #14), through BinlogToSparkOperator
against real MariaDB, ZooKeeper and Spark + Iceberg.

Table ``t (id, a, b, c, d)`` is routed with ``columns='db.t:id/b/c'``; ``u`` has no column rules.
After every run the lake table of ``t`` has exactly the columns ``id, b, c`` and equals the source
projected on them, value by value (a column outside the selection loaded by a snapshot would never be
updated by later merges: stale values); ``u`` equals its source whole.

* ``snapshot="initial"``, then writes (including updates of unselected columns only), then a run;
* re-snapshots in a run: ``ALTER TABLE t MODIFY b INT`` (a type the lake cannot widen) and
  statement-format DML with ``on_schema_change={"statement_dml": "resnapshot"}``; then statement DML
  under the default policy stops the run and ``binlog-cdc resnapshot --columns`` is the remedy.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_harness import lake_verify, make_context

from airflow_provider_binlog.canal.sql.operations import SourceOperationError
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.lake.sql import parse_name, quote_parts
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SELECTED = ["id", "b", "c"]


class Source:
    def __init__(self, mariadb: MariaDbServer, warehouse: str) -> None:
        self.mariadb, self.warehouse = mariadb, warehouse
        tag = uuid.uuid4().hex[:8]
        self.db, self.dest = f"cs_{tag}", f"cs-{tag}"
        (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
        self.head = f"{file}:{pos}"
        self.conn = mariadb.connect()
        self.conn.autocommit(True)
        self.runs = 0
        self.sql(
            f"CREATE DATABASE `{self.db}`",
            f"CREATE TABLE `{self.db}`.t (id INT PRIMARY KEY, a VARCHAR(20), b VARCHAR(10), c INT, d TEXT)",
            f"CREATE TABLE `{self.db}`.u (id INT PRIMARY KEY, v INT)",
        )

    @property
    def columns(self) -> str:
        return f"{self.db}.t:id/b/c"

    @property
    def tables(self) -> dict[str, str]:
        return {f"{self.db}.t": f"lake.{self.db}.t", f"{self.db}.u": f"lake.{self.db}.u"}

    def sql(self, *statements: str, binlog_format: str = "ROW") -> None:
        with self.conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_format = '{binlog_format}'")
            for s in statements:
                cur.execute(s)
            cur.execute("SET SESSION binlog_format = 'ROW'")

    def run(self, **kwargs: Any) -> dict[str, Any]:
        self.runs += 1
        op = BinlogToSparkOperator(
            task_id="load", destination=self.dest, tables=self.tables, columns=self.columns,
            warehouse=self.warehouse, spark_master="local[2]", stop_spark=False, **kwargs,
        )  # fmt: skip
        return op.execute(make_context(run_id=f"r{self.runs}"))

    def assert_equal(self, spark: Any) -> None:
        """``t``'s lake table: exactly the selected columns, equal to the source projected on them;
        ``u``'s: equal to the source."""
        frame = spark.table(quote_parts(parse_name(f"lake.{self.db}.t")))
        assert frame.columns == SELECTED, frame.columns
        lake = [tuple(r) for r in frame.orderBy("id").collect()]
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT id, b, c FROM `{self.db}`.t ORDER BY id")
            source = [tuple(r) for r in cur.fetchall()]
        assert lake == source
        assert source, "the test should hold rows"
        diffs = lake_verify(self.mariadb, spark, {f"{self.db}.u": f"lake.{self.db}.u"})
        assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)

    def close(self) -> None:
        self.sql(f"DROP DATABASE IF EXISTS `{self.db}`")
        self.conn.close()


@pytest.fixture
def src(mariadb: MariaDbServer, spark_warehouse: str, conns: dict[str, str]) -> Iterator[Source]:
    s = Source(mariadb, spark_warehouse)
    try:
        yield s
    finally:
        s.close()


def _rows(db: str, ids: range) -> list[str]:
    return [f"INSERT INTO `{db}`.t VALUES ({i}, 'a{i}', '{i}', {i * 10}, 'd{i}')" for i in ids]


def test_initial_snapshot_loads_the_selected_columns_only(src: Source, spark: Any) -> None:
    db = src.db
    src.sql(*_rows(db, range(1, 8)), f"INSERT INTO `{db}`.u VALUES (1, 1), (2, 2)")
    src.run(snapshot="initial", snapshot_chunk_size=3)  # several chunks
    src.assert_equal(spark)

    src.sql(
        *_rows(db, range(8, 10)),
        f"UPDATE `{db}`.t SET a = 'changed', d = 'changed' WHERE id = 1",  # unselected columns only
        f"UPDATE `{db}`.t SET b = '22', a = 'x' WHERE id = 2",
        f"DELETE FROM `{db}`.t WHERE id = 3",
        f"UPDATE `{db}`.u SET v = 20 WHERE id = 2",
    )
    src.run(snapshot="initial")
    src.assert_equal(spark)


def test_resnapshots_in_a_run_and_by_the_cli_keep_the_selection(
    src: Source, spark: Any, mariadb: MariaDbServer, zookeeper: ZooKeeperServer, zk_chroot: str,
    spark_warehouse: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from airflow_provider_binlog import cli

    db = src.db
    src.sql(*_rows(db, range(1, 6)), f"INSERT INTO `{db}`.u VALUES (1, 1)")
    src.run(start_from=src.head)
    src.assert_equal(spark)

    # a type the lake cannot widen (VARCHAR -> INT) of a selected column: re-snapshot in the run
    src.sql(
        f"ALTER TABLE `{db}`.t MODIFY b INT",
        *_rows(db, range(6, 8)),
        f"UPDATE `{db}`.t SET b = 11, a = 'y' WHERE id = 1",
    )
    second = src.run(start_from=src.head)
    assert [r["source"] for r in second.get("resnapshots", [])] == [f"{db}.t"], second.get("resnapshots")
    src.assert_equal(spark)

    # statement-format DML, the resnapshot policy
    src.sql(f"UPDATE `{db}`.t SET c = c + 100, a = 'stmt' WHERE id > 2", binlog_format="STATEMENT")
    src.sql(f"UPDATE `{db}`.t SET c = 5 WHERE id = 1", f"UPDATE `{db}`.u SET v = 10 WHERE id = 1")
    third = src.run(start_from=src.head, on_schema_change={"statement_dml": "resnapshot"})
    assert [r["source"] for r in third.get("resnapshots", [])] == [f"{db}.t"], third.get("resnapshots")
    src.assert_equal(spark)

    # statement-format DML, the default policy: the run stops; the CLI with --columns is the remedy
    src.sql(f"DELETE FROM `{db}`.t WHERE id = 2", f"UPDATE `{db}`.t SET b = b * 2, d = 'z'",
            binlog_format="STATEMENT")  # fmt: skip
    with pytest.raises(SourceOperationError):
        src.run(start_from=src.head)
    monkeypatch.setenv("CS_PASSWORD", mariadb.repl_password)
    argv = [
        "resnapshot", "--host", mariadb.host, "--port", str(mariadb.port), "--user", mariadb.repl_user,
        "--password-env", "CS_PASSWORD", "--destination", src.dest,
        "--zookeeper", zookeeper.hosts + zk_chroot, "--table", f"{db}.t", "--target", f"lake.{db}.t",
        "--columns", src.columns, "--warehouse", spark_warehouse, "--spark-master", "local[2]",
    ]  # fmt: skip
    capsys.readouterr()
    assert cli.main(argv) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["source"] == f"{db}.t" and done["rows"] == 6, done
    src.sql(f"UPDATE `{db}`.t SET b = 1, a = 'after' WHERE id = 1")
    fourth = src.run(start_from=src.head)
    assert "resnapshots" not in fourth
    src.assert_equal(spark)
