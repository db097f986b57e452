"""DDL parsing and the position-keyed schema history (no server needed)."""

from __future__ import annotations

import pytest

from airflow_provider_binlog.binlog.constants import ColumnType
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.ddl import parse_ddl
from airflow_provider_binlog.canal.meta import ClientIdentity, MemoryMetaManager
from airflow_provider_binlog.canal.schema import SchemaHistory


@pytest.mark.parametrize(
    ("sql", "kind", "tables"),
    [
        ("BEGIN", None, None),
        ("COMMIT", None, None),
        ("INSERT INTO t VALUES (1)", None, None),
        ("CREATE DATABASE shop", "other", ()),
        ("create table if not exists `shop`.`t` (id int primary key)", "create", (("shop", "t"),)),
        ("/* x */ ALTER TABLE t ADD COLUMN c INT", "alter", (("db", "t"),)),
        ("DROP TABLE IF EXISTS a, shop.b", "drop", (("db", "a"), ("shop", "b"))),
        ("RENAME TABLE a TO b", "rename", (("db", "a"),)),
        ("TRUNCATE TABLE t", "truncate", (("db", "t"),)),
        ("truncate t", "truncate", (("db", "t"),)),
    ],
)
def test_classify(sql: str, kind: str | None, tables: tuple[tuple[str, str], ...] | None) -> None:
    stmt = parse_ddl(sql, "db")
    if kind is None:
        assert stmt is None
    else:
        assert stmt is not None and stmt.kind == kind and stmt.tables == tables


def test_create_columns_and_key() -> None:
    stmt = parse_ddl(
        "CREATE TABLE t (id BIGINT UNSIGNED NOT NULL, `na,me` VARCHAR(20) DEFAULT 'a,b', "
        "e ENUM('x','y''z'), s SET('p','q'), d DECIMAL(10,2), PRIMARY KEY (id), KEY k (`na,me`(5)))",
        "db",
    )
    assert stmt is not None
    assert [c.name for c in stmt.columns] == ["id", "na,me", "e", "s", "d"]
    assert stmt.columns[0].unsigned and stmt.columns[2].labels == ("x", "y'z")
    assert stmt.primary_key == ("id",)


def pos(n: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", n)


def test_history_follows_add_drop_modify_rename_and_persists() -> None:
    meta = MemoryMetaManager()
    client = ClientIdentity("d")
    h = SchemaHistory(meta, client)
    h.apply_ddl(parse_ddl("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10))", "s"), pos(100))  # type: ignore[arg-type]
    h.apply_ddl(parse_ddl("ALTER TABLE t ADD COLUMN b INT UNSIGNED AFTER id", "s"), pos(200))  # type: ignore[arg-type]
    h.apply_ddl(parse_ddl("ALTER TABLE t DROP COLUMN a", "s"), pos(300))  # type: ignore[arg-type]
    h.apply_ddl(parse_ddl("ALTER TABLE t CHANGE b bb BIGINT, RENAME COLUMN id TO k", "s"), pos(400))  # type: ignore[arg-type]

    def names(n: int) -> tuple[str, ...]:
        found = h.at("s", "t", (1, n))
        assert found is not None and found[0] is not None
        return found[0].column_names

    assert h.at("s", "t", (1, 99)) is None
    assert names(150) == ("id", "a")
    assert names(250) == ("id", "b", "a")
    assert names(350) == ("id", "b")
    assert names(450) == ("k", "bb")
    v = h.at("s", "t", (1, 450))
    assert v is not None and v[0] is not None
    assert v[0].primary_key == ("k",) and v[0].columns[1].type == ColumnType.LONGLONG
    # re-reading the same DDL keeps the recorded version; a fresh history loads from the meta store
    h.apply_ddl(parse_ddl("ALTER TABLE t ADD COLUMN zzz INT", "s"), pos(200))  # type: ignore[arg-type]
    again = SchemaHistory(meta, client)
    assert [k for k, _, _ in again.versions("s", "t")] == [(1, 100), (1, 200), (1, 300), (1, 400)]
    found = again.at("s", "t", (1, 250))
    assert found is not None and found[0] is not None and found[0].column_names == ("id", "b", "a")


def test_history_rename_and_drop_table() -> None:
    h = SchemaHistory()
    h.apply_ddl(parse_ddl("CREATE TABLE a (id INT)", "s"), pos(10))  # type: ignore[arg-type]
    h.apply_ddl(parse_ddl("RENAME TABLE a TO b", "s"), pos(20))  # type: ignore[arg-type]
    assert h.at("s", "a", (1, 25)) == (None, "ddl")
    found = h.at("s", "b", (1, 25))
    assert found is not None and found[0] is not None and found[0].table == "b"
    h.apply_ddl(parse_ddl("ALTER TABLE b RENAME TO c, ADD COLUMN x INT", "s"), pos(30))  # type: ignore[arg-type]
    found = h.at("s", "c", (1, 35))
    assert found is not None and found[0] is not None and found[0].column_names == ("id", "x")
    h.apply_ddl(parse_ddl("DROP TABLE c", "s"), pos(40))  # type: ignore[arg-type]
    assert h.at("s", "c", (1, 45)) == (None, "ddl")
