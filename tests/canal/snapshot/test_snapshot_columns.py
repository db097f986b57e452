"""Column rules in the chunked snapshot reader (real MariaDB): with the filter's projection the
SELECT reads the kept columns only, the binlog images a chunk is reconciled with are projected on
them, and the chunk's changes carry the projected schema (the lake table's columns)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.snapshot.initial import (
    Chunk,
    ChunkReader,
    chunk_changes,
    column_projection,
    table_schema,
)

pytestmark = pytest.mark.integration


def test_no_column_rules_no_projection() -> None:
    assert column_projection(None) is None
    assert column_projection(TableFilter(include="s\\..*")) is None
    assert column_projection(TableFilter(columns="s.t:id/a")) is not None
    assert column_projection(TableFilter(exclude_columns="s.t:a")) is not None


def test_reader_reads_and_reconciles_the_kept_columns_only(mariadb: Any, database: str) -> None:
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, a INT, b VARCHAR(10), c INT)")
    mariadb.execute(f"CREATE TABLE `{database}`.o (id INT PRIMARY KEY, a INT, b VARCHAR(10))")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1, 1, 'one', 10), (2, 2, 'two', 20)")
    cfg = ReplicationConfig(
        host=mariadb.host, port=mariadb.port, user=mariadb.repl_user, password=mariadb.repl_password
    )
    client = ReplicationClient(cfg)

    def connect() -> Any:
        return mariadb.connect(database)

    flt = TableFilter(columns=f"{database}.t:id/b", exclude_columns=f"{database}.o:b")
    project = column_projection(flt)
    full = table_schema(connect, database, "t")
    reader = ChunkReader(client, connect, full, chunk_size=10, project=project)
    other = ChunkReader(client, connect, table_schema(connect, database, "o"), chunk_size=10, project=project)
    try:
        assert reader.ts.column_names == ("id", "b") and other.ts.column_names == ("id", "a")
        chunk = reader.read(1, None)
        assert chunk.final and chunk.rows == {(1,): {"id": 1, "b": "one"}, (2,): {"id": 2, "b": "two"}}
        sql, _ = reader._select(None)
        assert "`a`" not in sql and "`c`" not in sql, sql

        # binlog changes inside a chunk's window: the reconciled rows hold the kept columns only
        low = client.head_position()
        mariadb.execute(f"INSERT INTO `{database}`.t VALUES (3, 3, 'three', 30)")
        mariadb.execute(f"UPDATE `{database}`.t SET b = 'ONE', c = 11 WHERE id = 1")
        mariadb.execute(f"DELETE FROM `{database}`.t WHERE id = 2")
        high = client.head_position()
        window = Chunk(2, dict(chunk.rows), None, True, low, high)
        assert reader._reconcile(window, None, None) == 3
        assert window.rows == {(1,): {"id": 1, "b": "ONE"}, (3,): {"id": 3, "b": "three"}}

        changes = chunk_changes("d", reader.ts, reader.keys, window, timestamp=0)
        assert {tuple(c.table_schema.column_names) for c in changes if c.table_schema} == {("id", "b")}
        assert [c.after for c in changes] == [{"id": 1, "b": "ONE"}, {"id": 3, "b": "three"}]
    finally:
        reader.close()
        other.close()

    # without a projection the reader is unchanged: every column
    whole = ChunkReader(client, connect, full, chunk_size=10)
    try:
        assert whole.ts is full
        assert whole.read(1, None).rows[(1,)] == {"id": 1, "a": 1, "b": "ONE", "c": 11}
    finally:
        whole.close()
