"""TRUNCATE / DROP / ADD / REORGANIZE / EXCHANGE PARTITION through BinlogToSparkOperator against real
MariaDB, ZooKeeper and Spark + Iceberg (FULL and MINIMAL ``binlog_row_metadata``).

On RANGE / LIST / RANGE COLUMNS tables whose partitioning the schema history knows (created in the
stream, or bootstrapped from ``information_schema``), the lake deletes exactly the rows of the
partitions at the statement's place, with rows before and after it in the same run: after each run
the lake equals the source value by value and no table was re-snapshotted. A HASH table's TRUNCATE
PARTITION and an EXCHANGE PARTITION still re-snapshot (both tables of the exchange), exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import test_operator_ddl
from airflow_harness import make_context
from test_operator_ddl import Harness

from airflow_provider_binlog.lake.options import TargetOptions
from airflow_provider_binlog.lake.types import TypeOptions
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]

server = test_operator_ddl.server  # the FULL and MINIMAL binlog_row_metadata servers
harness = test_operator_ddl.harness


def _key(row: dict[str, Any]) -> Any:
    return row["id"]


def _resnapshotted(summary: dict[str, Any]) -> list[str]:
    return sorted(r["source"] for r in summary.get("resnapshots", []))


def test_partition_ops_in_the_stream_delete_exactly_without_resnapshot(harness: Harness) -> None:
    h, db = harness, harness.db
    h.sql(
        f"CREATE TABLE {db}.r (id INT, v INT, s VARCHAR(10), PRIMARY KEY (id, v)) PARTITION BY RANGE (v) ("
        "PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20), "
        "PARTITION p2 VALUES LESS THAN (30))",
        f"CREATE TABLE {db}.l (id INT, c INT, d DATE, PRIMARY KEY (id, c)) PARTITION BY LIST (c) ("
        "PARTITION a VALUES IN (1, 2), PARTITION b VALUES IN (3, 4), PARTITION z VALUES IN (-5))",
        f"CREATE TABLE {db}.rc (id INT, d DATE, PRIMARY KEY (id, d)) PARTITION BY RANGE COLUMNS (d) ("
        "PARTITION y23 VALUES LESS THAN ('2024-01-01'), PARTITION y24 VALUES LESS THAN ('2025-01-01'), "
        "PARTITION ymax VALUES LESS THAN (MAXVALUE))",
        f"INSERT INTO {db}.r VALUES (1, -4, 'a'), (2, 9, 'b'), (3, 10, 'c'), (4, 19, 'd'), (5, 25, 'e')",
        f"INSERT INTO {db}.l VALUES (1, 1, '2020-01-01'), (2, 3, NULL), (3, 4, '2021-02-03'), (4, -5, NULL)",
        f"INSERT INTO {db}.rc VALUES (1, '2023-12-31'), (2, '2024-01-01'), (3, '2024-12-31'), "
        "(4, '2025-01-01')",
    )
    summary = h.run()
    for t in ("r", "l", "rc"):
        h.assert_equal(t)

    # one run: rows before and after each statement, new partitions, reorganized ones
    h.sql(
        f"UPDATE {db}.r SET s = 'c2' WHERE id = 3",
        f"ALTER TABLE {db}.r TRUNCATE PARTITION p1",
        f"INSERT INTO {db}.r VALUES (3, 11, 'again'), (6, 15, 'new')",  # the same partition, after it
        f"UPDATE {db}.r SET s = 'b2' WHERE id = 2",
        f"INSERT INTO {db}.l VALUES (5, 3, '2022-01-01')",
        f"ALTER TABLE {db}.l DROP PARTITION b",
        f"INSERT INTO {db}.l VALUES (6, 2, NULL)",
        f"ALTER TABLE {db}.r ADD PARTITION (PARTITION p3 VALUES LESS THAN (40))",
        f"INSERT INTO {db}.r VALUES (7, 35, 'p3'), (8, 39, 'p3')",
        f"ALTER TABLE {db}.r TRUNCATE PARTITION p3",
        f"INSERT INTO {db}.r VALUES (9, 30, 'p3 again')",
        f"INSERT INTO {db}.r VALUES (10, 21, 'p2a'), (11, 27, 'p2b')",
        f"ALTER TABLE {db}.r REORGANIZE PARTITION p2 INTO (PARTITION p2a VALUES LESS THAN (24), "
        "PARTITION p2b VALUES LESS THAN (30))",
        f"ALTER TABLE {db}.r TRUNCATE PARTITION p2b",
        f"ALTER TABLE {db}.rc TRUNCATE PARTITION y23, ymax",
        f"INSERT INTO {db}.rc VALUES (5, '2023-06-01')",
    )
    summary = h.run()
    assert not _resnapshotted(summary), summary.get("resnapshots")
    for t in ("r", "l", "rc"):
        h.assert_equal(t)
    _, r = h.source("r")
    assert sorted(r) == [1, 2, 3, 6, 9, 10], sorted(r)  # the test deletes something

    # across runs: after the history's bootstrap point (its version from information_schema)
    h.sql(
        f"ALTER TABLE {db}.r DROP PARTITION p0, p2a",
        f"ALTER TABLE {db}.l TRUNCATE PARTITION a, z",
        f"INSERT INTO {db}.l VALUES (7, 1, '2024-05-05')",
    )
    summary = h.run()
    assert not _resnapshotted(summary), summary.get("resnapshots")
    for t in ("r", "l", "rc"):
        h.assert_equal(t)


class _Bootstrapped(Harness):
    """A destination first started with ``snapshot="initial"`` (tables made before it)."""

    def run(self, **kwargs: Any) -> dict[str, Any]:
        self.try_number += 1
        op = BinlogToSparkOperator(
            task_id="load", destination=self.dest, tables={f"{self.db}.*": f"lake.{self.db}.{{table}}"},
            snapshot="initial", warehouse=self.warehouse, spark_master="local[2]", stop_spark=False,
            mysql_conn_id=self.mysql_conn_id, **kwargs,
        )  # fmt: skip
        return op.execute(make_context(try_number=self.try_number))


@pytest.fixture
def bootstrapped(harness: Harness) -> Iterator[_Bootstrapped]:
    h = harness
    h.__class__ = _Bootstrapped
    yield h  # type: ignore[misc]


def test_partitioning_bootstrapped_from_information_schema(bootstrapped: _Bootstrapped) -> None:
    h, db = bootstrapped, bootstrapped.db
    h.sql(
        f"CREATE TABLE {db}.b (id INT, k INT, t DATETIME, PRIMARY KEY (id, k, t)) "
        "PARTITION BY RANGE COLUMNS (k, t) ("
        "PARTITION p0 VALUES LESS THAN (10, '2024-01-01 00:00:00'), "
        "PARTITION p1 VALUES LESS THAN (10, MAXVALUE), PARTITION p2 VALUES LESS THAN (MAXVALUE, MAXVALUE))",
        f"INSERT INTO {db}.b VALUES (1, 5, '2030-01-01'), (2, 10, '2023-12-31 23:59:59'), "
        "(3, 10, '2024-01-01'), (4, 11, '2000-01-01'), (5, 10, '2035-05-05 05:05:05')",
    )
    summary = h.run()
    h.assert_equal("b")
    h.sql(
        f"ALTER TABLE {db}.b TRUNCATE PARTITION p1",
        f"INSERT INTO {db}.b VALUES (6, 10, '2024-06-01 12:00:00')",
        f"ALTER TABLE {db}.b DROP PARTITION p0",
        f"INSERT INTO {db}.b VALUES (7, 9, '2020-01-01')",
    )
    summary = h.run()
    assert not _resnapshotted(summary), summary.get("resnapshots")
    h.assert_equal("b")
    _, rows = h.source("b")
    assert sorted(rows) == [4, 6, 7], sorted(rows)


def test_hash_truncate_and_exchange_resnapshot_exactly(harness: Harness) -> None:
    h, db = harness, harness.db
    h.sql(
        f"CREATE TABLE {db}.h (id INT PRIMARY KEY, v INT) PARTITION BY HASH (id) PARTITIONS 3",
        f"CREATE TABLE {db}.e (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) ("
        "PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN MAXVALUE)",
        f"CREATE TABLE {db}.x (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.h VALUES (1, 1), (2, 2), (3, 3), (4, 4)",
        f"INSERT INTO {db}.e VALUES (1, 1), (150, 2)",
        f"INSERT INTO {db}.x VALUES (7, 70), (8, 80)",
    )
    h.run()
    h.sql(
        f"ALTER TABLE {db}.h TRUNCATE PARTITION p0",
        f"INSERT INTO {db}.h VALUES (6, 6)",
        f"ALTER TABLE {db}.e EXCHANGE PARTITION p0 WITH TABLE {db}.x",
        f"INSERT INTO {db}.x VALUES (9, 90)",
    )
    summary = h.run()
    assert _resnapshotted(summary) == [f"{db}.e", f"{db}.h", f"{db}.x"], summary.get("resnapshots")
    for t in ("h", "e", "x"):
        h.assert_equal(t)
    _, x = h.source("x")
    assert sorted(x) == [1, 9], sorted(x)


def test_a_partial_date_in_the_partitioning_column_stops_then_the_remedy(harness: Harness) -> None:
    """A partial date (``2024-05-00``) is NULL in the lake (``zero_dates="null"``, chosen; by default
    it stops before) but lies in a middle RANGE partition in MariaDB: the lake cannot tell its
    partition, so the run stops naming the remedy, which works."""
    nulls = TargetOptions(types=TypeOptions(zero_dates="null"))
    h, db = harness, harness.db
    h.sql(
        "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'",  # no NO_ZERO_IN_DATE: partial dates are taken
        f"CREATE TABLE {db}.d (id INT, d DATE, PRIMARY KEY (id, d)) PARTITION BY RANGE COLUMNS (d) ("
        "PARTITION p0 VALUES LESS THAN ('2024-01-01'), PARTITION p1 VALUES LESS THAN (MAXVALUE))",
        f"INSERT INTO {db}.d VALUES (1, '2023-01-01'), (2, '2024-05-00'), (3, '2024-06-01')",
    )
    h.run(target_options=nulls)
    h.sql(f"ALTER TABLE {db}.d TRUNCATE PARTITION p1")
    with pytest.raises(Exception, match="partial or invalid") as stopped:
        h.run(target_options=nulls)
    assert 'on_schema_change={"partition": "resnapshot"}' in str(stopped.value), str(stopped.value)
    summary = h.run(on_schema_change={"partition": "resnapshot"}, target_options=nulls)
    assert _resnapshotted(summary) == [f"{db}.d"], summary.get("resnapshots")
    _, source = h.source("d")
    _, lake = h.lake("d")
    assert sorted(source) == sorted(lake) == [1], (sorted(source), sorted(lake))
