"""DDL parsing and the position-keyed schema history (no server needed)."""

from __future__ import annotations

import pytest

from airflow_provider_binlog.binlog.constants import ColumnType
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.meta import ClientIdentity, MemoryMetaManager
from airflow_provider_binlog.canal.schema import SchemaHistory
from airflow_provider_binlog.canal.sql.ddl import parse_ddl


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


def test_sized_types_from_ddl_keep_their_size_through_the_stored_history() -> None:
    """DECIMAL precision/scale, BIT length and fractional seconds decide the lake type; a DDL
    version and its stored JSON keep them (a DECIMAL(12,2) is not a decimal(1,0))."""
    from airflow_provider_binlog.canal.schema import column_from_json, column_to_json, spec_to_column
    from airflow_provider_binlog.lake.types import map_column

    stmt = parse_ddl(
        "CREATE TABLE t (d DECIMAL(12,2), d0 NUMERIC, d5 DEC(5), b BIT(12), b0 BIT, b64 BIT(64), "
        "dt DATETIME(3), tm TIME, f FLOAT(7,3))",
        "db",
    )
    assert stmt is not None
    cols = [spec_to_column(c, None, None) for c in stmt.columns]
    assert [(c.precision, c.scale, c.fsp) for c in cols] == [
        (12, 2, None), (10, 0, None), (5, 0, None), (None, None, None), (None, None, None),
        (None, None, None), (None, None, 3), (None, None, 0), (None, None, None),
    ]  # fmt: skip
    assert [c.meta for c in cols[:6]] == [12 << 8 | 2, 10 << 8, 5 << 8, 1 << 8 | 4, 1, 8 << 8]
    assert [map_column(c).sql for c in cols] == [
        "decimal(12,2)", "decimal(10,0)", "decimal(5,0)", "bigint", "bigint", "decimal(20,0)",
        "timestamp_ntz", "bigint", "float",
    ]  # fmt: skip
    assert [column_from_json(column_to_json(c)) for c in cols] == cols
    legacy = {k: v for k, v in column_to_json(cols[0]).items() if k not in ("precision", "scale", "meta")}
    assert column_from_json(legacy).precision is None  # versions stored before sizes were kept
