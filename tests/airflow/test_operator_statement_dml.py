"""Statement-format DML on routed tables through BinlogToSparkOperator into Iceberg (real MariaDB,
ZooKeeper, Spark).

* Default (``statement_dml="fail"``): the run stops with the table, the statement, its ``file:pos``
  and the remedies, the cursor unchanged; a ``binlog-cdc resnapshot`` of the table then lets the
  next run through (the statement is covered by the table's new mark) and the lake equals the source
  value by value.
* ``on_schema_change={"statement_dml": "resnapshot"}``: one run over statement-format UPDATE, DELETE
  and INSERT..SELECT mixed with row-format writes on two tables (one transaction holding both)
  re-snapshots each table at its statement and ends with the lake equal to the source; statement
  DML on a table that is not routed changes nothing.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_harness import lake_verify, make_context, meta_manager

from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.sql.operations import ResnapshotNeeded, SourceOperationError
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]


class Source:
    def __init__(self, mariadb: MariaDbServer, warehouse: str) -> None:
        self.mariadb, self.warehouse = mariadb, warehouse
        tag = uuid.uuid4().hex[:8]
        self.db, self.dest = f"sd_{tag}", f"sd-{tag}"
        (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
        self.start = f"{file}:{pos}"
        self.conn = mariadb.connect()
        self.conn.autocommit(True)
        self.runs = 0
        self.sql(
            f"CREATE DATABASE `{self.db}`",
            f"CREATE TABLE `{self.db}`.t (id INT PRIMARY KEY, v INT, s VARCHAR(40))",
            f"CREATE TABLE `{self.db}`.w (id INT PRIMARY KEY, v INT)",
            f"CREATE TABLE `{self.db}`.x (id INT PRIMARY KEY, v INT)",  # never routed
        )

    @property
    def tables(self) -> dict[str, str]:
        return {f"{self.db}.t": f"lake.{self.db}.t", f"{self.db}.w": f"lake.{self.db}.w"}

    def sql(self, *statements: str, binlog_format: str = "ROW") -> None:
        with self.conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_format = '{binlog_format}'")
            for s in statements:
                cur.execute(s)
            cur.execute("SET SESSION binlog_format = 'ROW'")

    def run(self, **kwargs: Any) -> dict[str, Any]:
        self.runs += 1
        op = BinlogToSparkOperator(
            task_id="load", destination=self.dest, tables=self.tables, start_from=self.start,
            warehouse=self.warehouse, spark_master="local[2]", stop_spark=False, **kwargs,
        )  # fmt: skip
        return op.execute(make_context(run_id=f"r{self.runs}"))

    def assert_equal(self, spark: Any) -> None:
        diffs = lake_verify(self.mariadb, spark, self.tables)
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


def _cursor(zookeeper: ZooKeeperServer, zk_chroot: str, dest: str) -> Any:
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        cursor = meta.get_cursor(ClientIdentity(dest, 1001)).value
        return None if cursor is None else cursor.binlog_position
    finally:
        meta.client.stop()
        meta.client.close()


def test_default_stops_then_the_cli_resnapshot_lets_the_next_run_through(
    src: Source, spark: Any, mariadb: MariaDbServer, zookeeper: ZooKeeperServer, zk_chroot: str,
    spark_warehouse: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from airflow_provider_binlog import cli

    db = src.db
    src.sql(*(f"INSERT INTO `{db}`.t VALUES ({i}, {i}, 'r{i}')" for i in range(1, 6)),
            f"INSERT INTO `{db}`.w VALUES (1, 1), (2, 2)")  # fmt: skip
    src.run()
    src.assert_equal(spark)
    before = _cursor(zookeeper, zk_chroot, src.dest)
    statement = f"UPDATE `{db}`.t SET v = v * 10, s = 'stmt' WHERE id > 2"
    src.sql(statement, binlog_format="STATEMENT")  # the first change after the cursor
    src.sql(f"INSERT INTO `{db}`.t VALUES (6, 6, 'r6')", f"UPDATE `{db}`.w SET v = 20 WHERE id = 2")

    with pytest.raises(SourceOperationError) as failed:
        src.run()
    err = failed.value
    message = str(err)
    assert not isinstance(err, ResnapshotNeeded)
    assert err.table == f"{db}.t" and err.statement == statement and err.target == f"lake.{db}.t"
    assert re.search(rf"at {re.escape(str(err.position))}\b", message), message
    for part in (
        f"{db}.t", statement, "statement format", "binlog_format=ROW",
        f"binlog-cdc resnapshot --destination {src.dest} --table {db}.t --target lake.{db}.t",
        'on_schema_change={"statement_dml": "resnapshot"}',
    ):  # fmt: skip
        assert part in message, (part, message)
    assert _cursor(zookeeper, zk_chroot, src.dest) == before  # nothing moved
    assert before is not None and before < err.position
    with pytest.raises(SourceOperationError):  # the same again: blocked until the remedy
        src.run()
    assert _cursor(zookeeper, zk_chroot, src.dest) == before

    # the remedy the message names, as a human runs it
    monkeypatch.setenv("SD_PASSWORD", mariadb.repl_password)
    zk = zookeeper.hosts + zk_chroot
    argv = [
        "resnapshot", "--host", mariadb.host, "--port", str(mariadb.port), "--user", mariadb.repl_user,
        "--password-env", "SD_PASSWORD", "--destination", src.dest, "--zookeeper", zk,
        "--table", f"{db}.t", "--target", f"lake.{db}.t", "--warehouse", spark_warehouse,
        "--spark-master", "local[2]",
    ]  # fmt: skip
    capsys.readouterr()  # what the runs printed
    assert cli.main(argv) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["source"] == f"{db}.t" and done["rows"] == 6
    src.sql(f"UPDATE `{db}`.t SET v = 7 WHERE id = 1")  # after the re-snapshot: merged as usual
    summary = src.run()
    assert "resnapshots" not in summary  # the statement is covered by the new mark, not re-snapshotted
    src.assert_equal(spark)
    assert _cursor(zookeeper, zk_chroot, src.dest) > err.position


def test_resnapshot_option_one_run_over_statements_mixed_with_rows(src: Source, spark: Any) -> None:
    db = src.db
    src.sql(*(f"INSERT INTO `{db}`.t VALUES ({i}, {i}, 'r{i}')" for i in range(1, 11)),
            *(f"INSERT INTO `{db}`.w VALUES ({i}, {i})" for i in range(1, 11)),
            f"INSERT INTO `{db}`.x VALUES (100, 100), (101, 101)")  # fmt: skip
    src.run(on_schema_change={"statement_dml": "resnapshot"})
    src.assert_equal(spark)

    src.sql(f"UPDATE `{db}`.t SET v = 0 WHERE id = 1", f"DELETE FROM `{db}`.w WHERE id = 1")
    src.sql(f"UPDATE `{db}`.t SET v = v + 100 WHERE id BETWEEN 2 AND 4",
            f"UPDATE `{db}`.x SET v = 0", f"DELETE FROM `{db}`.x WHERE id = 101",  # not routed: ignored
            binlog_format="STATEMENT")  # fmt: skip
    src.sql(f"INSERT INTO `{db}`.t VALUES (11, 11, 'r11')", f"UPDATE `{db}`.w SET v = -2 WHERE id = 2")
    # one transaction: row events (UUID() is unsafe for statements: logged as rows in MIXED), a
    # statement-format DELETE between them, and rows of the other table
    src.sql("BEGIN", f"UPDATE `{db}`.t SET s = UUID() WHERE id = 5",
            f"DELETE FROM `{db}`.w WHERE id BETWEEN 3 AND 4",
            f"INSERT INTO `{db}`.t VALUES (12, 12, UUID())", f"UPDATE `{db}`.w SET v = 50 WHERE id = 5",
            "COMMIT", binlog_format="MIXED")  # fmt: skip
    src.sql(f"INSERT INTO `{db}`.w SELECT id + 1000, v FROM `{db}`.x", binlog_format="STATEMENT")
    src.sql(f"UPDATE `{db}`.t SET v = 99 WHERE id = 12", f"INSERT INTO `{db}`.w VALUES (12, 12)")
    summary = src.run(on_schema_change={"statement_dml": "resnapshot"})
    src.assert_equal(spark)
    swapped = sorted(r["source"] for r in summary.get("resnapshots", []))
    assert f"{db}.t" in swapped and f"{db}.w" in swapped, summary.get("resnapshots")
    assert f"{db}.x" not in swapped

    src.sql(f"DELETE FROM `{db}`.t WHERE id = 12", f"UPDATE `{db}`.w SET v = 1 WHERE id = 1000 + 100")
    later = src.run(on_schema_change={"statement_dml": "resnapshot"})
    assert "resnapshots" not in later  # nothing is re-snapshotted twice
    src.assert_equal(spark)
