"""DDL in the lake through BinlogToSparkOperator against real MariaDB, ZooKeeper and Spark + Iceberg.

Each class of DDL the lake applies (ADD COLUMN with a constant or implicit default, RENAME COLUMN,
DROP COLUMN, MODIFY to a wider or a rewritten type, DROP TABLE, DROP + CREATE) with rows before and
after it, in one run and split across runs; after every run each lake table equals its source value
by value. A crash between a DDL action and its mark, then a retry, converges. A statement the lake
cannot apply exactly stops the run with the table, the statement, its ``file:pos`` and the way
forward, the cursor before it. Run on a FULL and a MINIMAL ``binlog_row_metadata`` server.
"""

from __future__ import annotations

import decimal
import logging
import os
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_harness import make_context, meta_manager, mysql_uri

from airflow_provider_binlog import faults
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.sql.operations import ResnapshotNeeded, SourceOperationError
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.lake.sql import quote_parts
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture(params=["full", "minimal"])
def server(request: pytest.FixtureRequest) -> MariaDbServer:
    return request.getfixturevalue("mariadb" if request.param == "full" else "mariadb_minimal")


def _norm(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return v.normalize() if v == v.to_integral_value() else v
    if isinstance(v, bytes | bytearray):
        return bytes(v)
    return v


class Harness:
    def __init__(self, server: MariaDbServer, spark: Any, warehouse: str, mysql_conn_id: str) -> None:
        self.server, self.spark, self.warehouse = server, spark, warehouse
        tag = uuid.uuid4().hex[:8]
        self.db = f"dd_{tag}"
        self.dest = f"ddl-{tag}"
        (file, pos, *_), *_ = server.execute("SHOW MASTER STATUS")
        self.start = f"{file}:{pos}"
        self.conn = server.connect()
        self.conn.autocommit(True)
        self.try_number = 0
        self.exclude: list[str] = []
        self.mysql_conn_id = mysql_conn_id

    def sql(self, *statements: str) -> None:
        with self.conn.cursor() as cur:
            for s in statements:
                cur.execute(s)

    def run(self, **kwargs: Any) -> dict[str, Any]:
        self.try_number += 1
        op = BinlogToSparkOperator(
            task_id="load", destination=self.dest, tables={f"{self.db}.*": f"lake.{self.db}.{{table}}"},
            exclude=self.exclude or None, start_from=self.start, warehouse=self.warehouse,
            spark_master="local[2]", stop_spark=False, mysql_conn_id=self.mysql_conn_id, **kwargs,
        )  # fmt: skip
        return op.execute(make_context(try_number=self.try_number))

    def source(self, table: str) -> tuple[list[str], dict[Any, dict[str, Any]]]:
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{self.db}`.`{table}`")
            names = [d[0] for d in cur.description]
            found = [dict(zip(names, map(_norm, r), strict=True)) for r in cur.fetchall()]
        rows = {row["id"]: row for row in found}
        return names, rows

    def lake(self, table: str) -> tuple[list[str], dict[Any, dict[str, Any]]]:
        name = quote_parts(("lake", self.db, table))
        self.spark.catalog.refreshTable(name)
        frame = self.spark.table(name)
        names = frame.columns
        return names, {r["id"]: {n: _norm(r[n]) for n in names} for r in frame.collect()}

    def assert_equal(self, table: str) -> None:
        names, rows = self.source(table)
        lake_names, lake_rows = self.lake(table)
        assert sorted(n.lower() for n in lake_names) == sorted(n.lower() for n in names), (table, lake_names)
        assert sorted(lake_rows) == sorted(rows), (table, sorted(lake_rows), sorted(rows))
        for key, row in rows.items():
            for name, value in row.items():
                got = lake_rows[key][name]
                assert got == value, (table, key, name, got, value)

    def assert_empty_or_missing(self, table: str) -> None:
        name = quote_parts(("lake", self.db, table))
        if self.spark.catalog.tableExists(name):
            self.spark.catalog.refreshTable(name)
            assert self.spark.table(name).count() == 0

    def close(self) -> None:
        self.sql(f"DROP DATABASE IF EXISTS `{self.db}`")
        self.conn.close()


@pytest.fixture
def harness(
    server: MariaDbServer, spark: Any, spark_warehouse: str, conns: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Harness]:  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_DDL", mysql_uri(server))
    h = Harness(server, spark, spark_warehouse, "mysql_ddl")
    h.sql(f"CREATE DATABASE `{h.db}`")
    try:
        yield h
    finally:
        h.close()


def _cursor(zookeeper: ZooKeeperServer, zk_chroot: str, dest: str) -> BinlogPosition | None:
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        cursor = meta.get_cursor(ClientIdentity(dest, 1001)).value
        return None if cursor is None else cursor.binlog_position
    finally:
        meta.client.stop()
        meta.client.close()


def test_ddl_classes_in_one_run_and_across_runs(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    h, db = harness, harness.db
    h.sql(
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT, b VARCHAR(20), d DECIMAL(10,2))",
        f"INSERT INTO {db}.t VALUES (1, -5, 'one', 1.25), (2, 7, 'two', NULL), (3, NULL, NULL, 3.5)",
        f"CREATE TABLE {db}.u (id INT PRIMARY KEY, v VARCHAR(10))",
        f"INSERT INTO {db}.u VALUES (1, 'old'), (2, 'old')",
        f"CREATE TABLE {db}.w (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.w VALUES (1, 1), (2, 2)",
    )
    h.run()
    for table in ("t", "u", "w"):
        h.assert_equal(table)

    # one run: rows before and after each statement
    h.sql(
        f"INSERT INTO {db}.t VALUES (4, 40, 'four', 4.5)",
        f"ALTER TABLE {db}.t ADD COLUMN x INT NOT NULL DEFAULT 7 AFTER a",
        f"ALTER TABLE {db}.t ADD COLUMN y VARCHAR(5) NOT NULL",
        f"INSERT INTO {db}.t (id, a, x, y, b, d) VALUES (5, 50, 8, 'five', 'five', 5.5)",
        f"UPDATE {db}.t SET b = 'ONE' WHERE id = 1",
        f"ALTER TABLE {db}.t RENAME COLUMN b TO b2",
        f"UPDATE {db}.t SET b2 = 'TWO' WHERE id = 2",
        f"ALTER TABLE {db}.t MODIFY d DECIMAL(12,4)",
        f"INSERT INTO {db}.t (id, a, x, y, b2, d) VALUES (6, 60, 9, 'six', 'six', 6.1234)",
        "SET SESSION sql_mode = ''",  # not strict: MySQL clamps a = -5 to 0 (strict refuses the ALTER)
        f"ALTER TABLE {db}.t MODIFY a BIGINT UNSIGNED",
        f"INSERT INTO {db}.t (id, a, x, y, b2, d) VALUES (7, 18446744073709551615, 1, 's', 's', 7)",
        f"DROP TABLE {db}.u",
        f"CREATE TABLE {db}.u (id INT PRIMARY KEY, z DATE, v BIGINT)",
        f"INSERT INTO {db}.u VALUES (3, '2024-02-29', 3)",
        f"DROP TABLE {db}.w",
    )
    caplog.set_level(logging.INFO)
    h.run()
    # the run's log names the DDL it applied, table by table, with the statement and its position
    applied = [
        r.getMessage() for r in caplog.records if r.name == "airflow_provider_binlog.lake.write.statements"
    ]
    said = "\n".join(applied)
    assert f"lake.{db}.t: added column `x`, existing rows set to 7 (the statement at mysql-bin." in said, said
    assert f"ALTER TABLE {db}.t ADD COLUMN x INT NOT NULL DEFAULT 7 AFTER a)" in said, said
    assert f"lake.{db}.t: renamed column `b` to `b2`" in said, said
    assert f"lake.{db}.t: changed the type of `d` to" in said, said
    h.assert_equal("t")
    h.assert_equal("u")
    h.assert_empty_or_missing("w")

    # across runs: the statement ends one run, its rows come in the next
    h.sql(
        f"ALTER TABLE {db}.t DROP COLUMN x",
        f"ALTER TABLE {db}.t ADD COLUMN c VARCHAR(5) DEFAULT 'hi' FIRST",
    )
    h.run()
    h.assert_equal("t")
    h.sql(
        f"INSERT INTO {db}.t (id, c, a, y, b2, d) VALUES (8, 'c8', 80, 'e', 'e', 8)",
        f"ALTER TABLE {db}.t MODIFY a VARCHAR(30)",
        f"UPDATE {db}.t SET a = CONCAT(a, '!') WHERE id = 8",
        f"CREATE TABLE {db}.w (id INT PRIMARY KEY, v VARCHAR(3))",
        f"INSERT INTO {db}.w VALUES (9, 'new')",
    )
    h.run()
    h.assert_equal("t")
    h.assert_equal("w")


def test_crash_between_ddl_action_and_mark_converges(harness: Harness) -> None:
    h, db = harness, harness.db
    h.sql(
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT, d DECIMAL(6,1))",
        f"INSERT INTO {db}.t VALUES (1, -1, 1.5), (2, 2, NULL)",
    )
    h.run()
    h.sql(
        "SET SESSION sql_mode = ''",  # a = -1 becomes 0
        f"ALTER TABLE {db}.t ADD COLUMN x INT DEFAULT 3, MODIFY a INT UNSIGNED, MODIFY d DECIMAL(8,3)",
        f"INSERT INTO {db}.t VALUES (3, 3, 2.125, 4)",
    )
    for nth in (1, 2, 3):  # after the ADD, after the first rewrite, after the second: no mark yet
        os.environ[faults.ENV] = f"ddl_action=raise@{nth}"
        faults.reset()
        try:
            with pytest.raises(Exception, match="ddl_action"):
                h.run()
        finally:
            os.environ.pop(faults.ENV, None)
            faults.reset()
    h.run()
    h.assert_equal("t")


def test_stops_name_table_statement_position_and_remedy(
    harness: Harness, zookeeper: ZooKeeperServer, zk_chroot: str
) -> None:
    h, db = harness, harness.db
    h.sql(
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT)",
        f"CREATE TABLE {db}.p (id INT PRIMARY KEY, a INT)",
        f"INSERT INTO {db}.t VALUES (1, 1)",
        f"INSERT INTO {db}.p VALUES (1, 1)",
    )
    h.run()
    before = _cursor(zookeeper, zk_chroot, h.dest)
    h.sql(
        f"INSERT INTO {db}.t VALUES (2, 2)",
        f"ALTER TABLE {db}.p ADD COLUMN ts DATETIME DEFAULT '2020-01-02 03:04:05', ADD COLUMN n INT",
        f"INSERT INTO {db}.p (id, a) VALUES (2, 2)",
        f"INSERT INTO {db}.t VALUES (3, 3)",
    )
    # "fail" for a class: the run stops at the statement, the cursor before it
    with pytest.raises(SourceOperationError) as failed:
        h.run(on_schema_change={"add_column": "fail"})
    err = failed.value
    message = str(err)
    assert not isinstance(err, ResnapshotNeeded)
    assert err.table == f"{db}.p" and "ADD COLUMN ts DATETIME" in err.statement, message
    assert f"{db}.p" in message and "ADD COLUMN ts DATETIME" in message, message
    assert re.search(rf"at {re.escape(str(err.position))}\b", message), message
    assert 'on_schema_change={"add_column": "evolve"}' in message, message
    assert f"binlog-cdc resnapshot --destination {h.dest} --table {db}.p" in message, message
    assert err.target == f"lake.{db}.p", err.target
    after = _cursor(zookeeper, zk_chroot, h.dest)
    assert after is not None and after <= err.position, (before, after, err.position)
    # the option the message names lets it through, value by value
    h.run()
    h.assert_equal("t")
    h.assert_equal("p")

    # an expression default cannot be known: by default the table is re-snapshotted at that point
    h.sql(
        f"ALTER TABLE {db}.p ADD COLUMN made DATETIME DEFAULT CURRENT_TIMESTAMP",
        f"INSERT INTO {db}.p (id, a) VALUES (3, 3)",
        f"INSERT INTO {db}.t VALUES (4, 4)",
    )
    with pytest.raises(SourceOperationError) as stopped:  # asked not to re-snapshot: "fail"
        h.run(on_schema_change={"add_column": "fail"})
    message = str(stopped.value)
    assert "CURRENT_TIMESTAMP" in message and "expression" in message, message
    assert 'on_schema_change={"add_column": "resnapshot"}' in message, message
    h.run()  # the default: re-snapshot
    h.assert_equal("t")
    h.assert_equal("p")
