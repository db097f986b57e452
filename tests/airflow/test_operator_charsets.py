"""Legacy charsets through BinlogToSparkOperator against real MariaDB, ZooKeeper and Spark + Iceberg.

Most legacy schemas declare ``DEFAULT CHARSET=utf8`` (``utf8mb3``): a TEXT column of such a table,
created or re-created in the stream, is text in the lake on every path (the schema history's
version of the CREATE and the row events agree), through DROP + CREATE (also with new columns of
other types under the same routed name) and through a replay after a kill between the lake table's
creation and its first data commit. After every run each lake table equals its source value by value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_harness import mysql_uri
from test_operator_ddl import Harness

from airflow_provider_binlog import faults
from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.lake.sql import quote_parts

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TEXT = "naïve café ☕ Grüße"


@pytest.fixture(params=["full", "minimal"])
def server(request: pytest.FixtureRequest) -> MariaDbServer:
    return request.getfixturevalue("mariadb" if request.param == "full" else "mariadb_minimal")


@pytest.fixture
def harness(
    server: MariaDbServer, spark: Any, spark_warehouse: str, conns: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Harness]:  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CHARSETS", mysql_uri(server))
    h = Harness(server, spark, spark_warehouse, "mysql_charsets")
    h.sql(f"CREATE DATABASE `{h.db}`")
    try:
        yield h
    finally:
        h.close()


def _types(h: Harness, table: str) -> dict[str, str]:
    name = quote_parts(("lake", h.db, table))
    h.spark.catalog.refreshTable(name)
    return {f.name: f.dataType.simpleString() for f in h.spark.table(name).schema.fields}


def test_utf8_text_created_and_recreated_in_the_stream(harness: Harness) -> None:
    h, db = harness, harness.db
    h.sql(
        f"CREATE TABLE {db}.legacy (id INT PRIMARY KEY, body TEXT, title VARCHAR(20)) DEFAULT CHARSET=utf8",
        f"INSERT INTO {db}.legacy VALUES (1, %r, 'one'), (2, NULL, 'two')" % TEXT,
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.t VALUES (1, 1), (2, 2)",
    )
    h.run()
    h.assert_equal("legacy")
    h.assert_equal("t")
    assert _types(h, "legacy")["body"] == "string"

    # DROP + CREATE in the stream, with the table options legacy dumps write
    h.sql(
        f"INSERT INTO {db}.legacy VALUES (3, 'gone', 'x')",
        f"DROP TABLE {db}.legacy",
        f"CREATE TABLE {db}.legacy (id INT PRIMARY KEY, body MEDIUMTEXT, note TEXT CHARACTER SET utf8, "
        "n NATIONAL VARCHAR(5)) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci",
        f"INSERT INTO {db}.legacy VALUES (4, %r, 'n4', 'ü'), (5, 'five', NULL, NULL)" % TEXT,
        # a routed name re-created with new columns of other types (the README: the lake table restarts)
        f"DROP TABLE {db}.t",
        f"CREATE TABLE {db}.t (id VARCHAR(20) PRIMARY KEY, name TEXT, qty INT)",
        f"INSERT INTO {db}.t VALUES ('a', %r, 3), ('b', 'bee', NULL)" % TEXT,
    )
    h.run()
    h.assert_equal("legacy")
    h.assert_equal("t")
    assert _types(h, "legacy")["body"] == "string" and _types(h, "t")["name"] == "string"
    h.sql(f"UPDATE {db}.t SET name = 'changed' WHERE id = 'b'", f"DELETE FROM {db}.legacy WHERE id = 5")
    h.run()
    h.assert_equal("legacy")
    h.assert_equal("t")


def test_replay_after_a_kill_between_creation_and_first_commit(harness: Harness) -> None:
    h, db = harness, harness.db
    h.sql(f"CREATE TABLE {db}.seed (id INT PRIMARY KEY)", f"INSERT INTO {db}.seed VALUES (1)")
    h.run()
    h.sql(
        f"CREATE TABLE {db}.legacy (id INT PRIMARY KEY, body TEXT) DEFAULT CHARSET=utf8",
        f"INSERT INTO {db}.legacy VALUES (1, %r)" % TEXT,
        f"DROP TABLE {db}.legacy",
        f"CREATE TABLE {db}.legacy (id INT PRIMARY KEY, body TEXT, k INT) DEFAULT CHARSET=utf8",
        f"INSERT INTO {db}.legacy VALUES (2, %r, 2)" % TEXT,
    )
    os.environ[faults.ENV] = "lake_commit=raise@1"  # the lake table exists, no data commit yet
    faults.reset()
    try:
        with pytest.raises(Exception, match="lake_commit"):
            h.run()
    finally:
        os.environ.pop(faults.ENV, None)
        faults.reset()
    h.run()
    h.assert_equal("legacy")
    h.sql(f"INSERT INTO {db}.legacy VALUES (3, 'three', 3)")
    h.run()
    h.assert_equal("legacy")


def test_the_stops_remedy_keeps_the_snapshot(harness: Harness) -> None:
    """The remedy of a stop (drop the lake table, run with ``snapshot="when_needed"``) snapshots the
    table at the head; the replay of the batches the stop left un-acked then holds changes and DDL
    from before the snapshot's start (rows of the table before a DROP + CREATE with other column
    types, the CREATE itself, an ALTER), which must not act on it again: lake == source."""
    h, db = harness, harness.db
    h.sql(
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.t VALUES (1, 1)",
        f"CREATE TABLE {db}.seed (id INT PRIMARY KEY)",
        f"INSERT INTO {db}.seed VALUES (1)",
    )
    h.run()
    h.sql(
        f"INSERT INTO {db}.t VALUES (2, 2)",
        f"DROP TABLE {db}.t",
        f"CREATE TABLE {db}.t (id VARCHAR(20) PRIMARY KEY, name TEXT, qty INT)",
        f"INSERT INTO {db}.t VALUES ('a', %r, 3), ('b', 'bee', NULL)" % TEXT,
        f"CREATE TABLE {db}.legacy (id INT PRIMARY KEY, body TEXT) DEFAULT CHARSET=utf8",
        f"INSERT INTO {db}.legacy VALUES (1, %r), (2, 'two')" % TEXT,
        f"ALTER TABLE {db}.legacy ADD COLUMN k INT NOT NULL DEFAULT 5",
        f"INSERT INTO {db}.legacy VALUES (3, 'three', 3)",
        f"INSERT INTO {db}.seed VALUES (2)",
    )
    os.environ[faults.ENV] = "lake_commit=raise@1"  # the stop: nothing of these changes committed
    faults.reset()
    try:
        with pytest.raises(Exception, match="lake_commit"):
            h.run()
    finally:
        os.environ.pop(faults.ENV, None)
        faults.reset()
    for table in ("t", "legacy"):  # the remedy as written
        h.spark.sql(f"DROP TABLE IF EXISTS {quote_parts(('lake', db, table))}")
    h.start = None  # type: ignore[assignment]  # the cursor says where the binlog goes on
    h.run(snapshot="when_needed")
    for table in ("t", "legacy", "seed"):
        h.assert_equal(table)
    h.sql(
        f"UPDATE {db}.legacy SET body = 'again' WHERE id = 2",
        f"INSERT INTO {db}.legacy VALUES (4, 'f', 4)",
        f"UPDATE {db}.t SET qty = 9 WHERE id = 'a'",
    )
    h.run()
    for table in ("t", "legacy", "seed"):
        h.assert_equal(table)


def test_resnapshot_in_a_namespace_the_lake_does_not_have_yet(harness: Harness) -> None:
    """CREATE TABLE then an ALTER that needs a re-snapshot, in one run, before the lake has the
    table's namespace: the re-snapshot creates it; lake == source."""
    h, db = harness, harness.db
    h.sql(
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10))",
        f"INSERT INTO {db}.t VALUES (1, '12'), (2, ' 7')",
        f"ALTER TABLE {db}.t MODIFY a INT",
        f"INSERT INTO {db}.t VALUES (3, 3)",
    )
    h.run()
    h.assert_equal("t")
    h.sql(f"UPDATE {db}.t SET a = 4 WHERE id = 1")
    h.run()
    h.assert_equal("t")


def test_a_retry_settles_an_attempt_whose_namespace_is_gone(harness: Harness) -> None:
    """A run killed inside the re-snapshot leaves an unfinished attempt; with the lake namespace
    gone meanwhile (the state the missing-namespace failure left), the retry's settling of leftovers
    finds nothing to drop and the re-snapshot completes: lake == source."""
    h, db = harness, harness.db
    h.sql(
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10))",
        f"INSERT INTO {db}.t VALUES (1, '12'), (2, ' 7')",
        f"ALTER TABLE {db}.t MODIFY a INT",
        f"INSERT INTO {db}.t VALUES (3, 3)",
    )
    os.environ[faults.ENV] = "snapshot_before_load=raise@1"  # the attempt loading, no chunk yet
    faults.reset()
    try:
        with pytest.raises(Exception, match="snapshot_before_load"):
            h.run()
    finally:
        os.environ.pop(faults.ENV, None)
        faults.reset()
    namespace = quote_parts(("lake", db))
    for row in h.spark.sql(f"SHOW TABLES IN {namespace}").collect():
        h.spark.sql(f"DROP TABLE {quote_parts(('lake', db, row.tableName))}")
    h.spark.sql(f"DROP NAMESPACE {namespace}")
    h.run()
    h.assert_equal("t")
