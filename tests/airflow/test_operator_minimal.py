"""``binlog_row_metadata=MINIMAL``: the lake equals the source as with FULL metadata, through
BinlogToSparkOperator against real MariaDB, ZooKeeper and Spark + Iceberg (issue 42).

With MINIMAL metadata a TABLE_MAP carries no names, keys or charsets: the schema history (the DDL in
the stream, else ``information_schema``) supplies them. Each case runs on a FULL and a MINIMAL server
and compares the lake with the source value by value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from airflow_harness import mysql_uri
from test_operator_ddl import Harness

from airflow_provider_binlog.dev.services import MariaDbServer

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture(params=["full", "minimal"])
def server(request: pytest.FixtureRequest) -> MariaDbServer:
    return request.getfixturevalue("mariadb" if request.param == "full" else "mariadb_minimal")


@pytest.fixture
def harness(
    server: MariaDbServer, spark: Any, spark_warehouse: str, conns: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Harness]:  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_MINIMAL", mysql_uri(server))
    h = Harness(server, spark, spark_warehouse, "mysql_minimal")
    h.sql(f"CREATE DATABASE `{h.db}`")
    try:
        yield h
    finally:
        h.close()


def test_mariadb_json_text_is_kept_as_written(harness: Harness) -> None:
    """A MariaDB JSON column is a LONGTEXT: the lake holds the source's text exactly, spacing and
    key order included (it was parsed and re-serialized with MINIMAL metadata)."""
    h, db = harness, harness.db
    h.sql(
        f"CREATE TABLE `{db}`.j (id INT PRIMARY KEY, doc JSON, note TEXT)",
        f"""INSERT INTO `{db}`.j VALUES (1, '["a", "b",1]', 'x'), (2, '{{"z":1,  "a" : [true,null]}}', NULL),
            (3, NULL, 'n'), (4, 'null', ''), (5, '1.50', 'num')""",
    )
    h.run()
    h.assert_equal("j")
    h.sql(
        f"""UPDATE `{db}`.j SET doc = '{{ "k":"é" }}' WHERE id = 2""",
        f"""INSERT INTO `{db}`.j VALUES (6, '[1,2 ,3]', 'after')""",
    )
    h.run()
    h.assert_equal("j")
    _, rows = h.lake("j")
    assert rows[1]["doc"] == '["a", "b",1]'
