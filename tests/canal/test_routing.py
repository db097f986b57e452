"""Routing: placeholders filled as single quoted parts, refused names, exclude=, column rules (pure)."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType
from airflow_provider_binlog.canal.filter import TableFilter, as_glob
from airflow_provider_binlog.canal.names import name_text, parse_name, quote_parts
from airflow_provider_binlog.canal.routing import Routes
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.lake.sql import check_target

GLOB = {"db.*": "lake.{schema}.{table}"}


@pytest.mark.parametrize(
    ("table", "target", "parts"),
    [
        ("orders", "lake.db.orders", ("lake", "db", "orders")),
        ("z.w", "lake.db.`z.w`", ("lake", "db", "z.w")),
        ("x`;drop", "lake.db.`x``;drop`", ("lake", "db", "x`;drop")),
        ("a b", "lake.db.`a b`", ("lake", "db", "a b")),
        (" lead", "lake.db.` lead`", ("lake", "db", " lead")),
        ("{table}", "lake.db.`{table}`", ("lake", "db", "{table}")),
    ],
)
def test_placeholders_fill_one_part(table: str, target: str, parts: tuple[str, ...]) -> None:
    got = Routes(GLOB).target_for("db", table)
    assert got == target
    assert parse_name(got) == parts


def test_placeholder_inside_a_part_and_in_backticks() -> None:
    r = Routes({"db.*": "lake.db.raw_{table}", "x.*": "lake.`{schema}.{table}`.t"})
    assert parse_name(r.target_for("db", "z.w") or "") == ("lake", "db", "raw_z.w")
    assert parse_name(r.target_for("x", "a`b") or "") == ("lake", "x.a`b", "t")


def test_no_collisions_between_sources() -> None:
    """Before, ``db.`z.w``` became namespace ``db.z`` table ``w``, the same as table ``w`` routed into
    ``lake.db.z``; and table ``z`` was the directory of that namespace."""
    r = Routes({"db.*": "lake.db.{table}", "other.*": "lake.db.z.{table}"})
    names = {
        (s, t): parse_name(r.target_for(s, t) or "") for s, t in [("db", "z.w"), ("other", "w"), ("db", "z")]
    }
    assert names[("db", "z.w")] == ("lake", "db", "z.w")
    assert names[("other", "w")] == ("lake", "db", "z", "w")
    assert names[("db", "z")] == ("lake", "db", "z")
    assert len(set(names.values())) == 3


def test_round_trip_of_names() -> None:
    for parts in [("a",), ("lake", "db", "a.b`c"), ("l", "", " x "), ("l", "$x_1", "é")]:
        assert parse_name(name_text(parts)) == parts
        assert parse_name(quote_parts(parts)) == parts


def test_exact_routes_win_and_quoted_sources() -> None:
    r = Routes({"db.*": "lake.db.{table}", "db.`z.w`": "lake.db.zw", "DB.Orders": "lake.o.orders"})
    assert r.target_for("db", "z.w") == "lake.db.zw"
    assert r.target_for("db", "orders") == "lake.o.orders"  # case-insensitive, exact first
    assert r.target_for("db", "other") == "lake.db.other"
    assert r.target_for("dbx", "other") is None
    f = r.filter()
    assert f.matches("db", "z.w") and not f.matches("dbx", "y")


@pytest.mark.parametrize(
    ("source", "target", "problem"),
    [
        ("db", "shop.orders", "expected 'schema.table'"),
        ("db.t.x", "lake.a.b", "expected 'schema.table'"),
        ("db.t", "lake.{x}.t", "may only use {schema} and {table}"),
        ("db.t", "lake.{table!r}.t", "may only use"),
        ("db.t", "lake.`a.t", "unbalanced backtick"),
    ],
)
def test_bad_routes(source: str, target: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem if problem != "db" else None):
        Routes({source: target})


def test_check_target() -> None:
    assert check_target("lake.{schema}.{table}", "db.*") == ("lake", "schema", "table")
    assert check_target("lake.db.`a.{table}`", "db.*") == ("lake", "db", "a.table")
    with pytest.raises(ConfigurationError, match="needs a namespace"):
        check_target("{table}", "db.*")


@pytest.mark.parametrize(
    ("schema", "table", "why"),
    [
        ("db", "a/b", "'/'"),
        ("db", ".", "directory step"),
        ("db", "..", "directory step"),
        ("db", "tab\tx", "control character"),
        ("db", "é" * 128, "more than 255 bytes"),
        ("db.z", "w", "holds a '.'"),
    ],
)
def test_refused_names(schema: str, table: str, why: str) -> None:
    r = Routes({"*.*": "lake.{schema}.{table}"})
    reason = r.refusal(schema, table)
    assert reason is not None and why in reason and "exclude=" in reason
    assert r.target_for(schema, table) is None
    key = name_text((schema, table))
    assert key in reason
    # the fix the message names works: excluded, the table is neither routed nor refused
    fixed = Routes({"*.*": "lake.{schema}.{table}"}, exclude=[key])
    assert fixed.refusal(schema, table) is None and fixed.target_for(schema, table) is None
    assert not fixed.filter().matches(schema, table)
    assert fixed.target_for("db", "ok") == "lake.db.ok"


def _ts(schema: str, table: str, names: list[str], pk: tuple[str, ...]) -> TableSchema:
    cols = tuple(ColumnDef(n, ColumnType.LONG) for n in names)
    return TableSchema(schema, table, cols, pk)


def test_refused_table_stops_at_its_row_change_with_the_position() -> None:
    f = Routes({"db.*": "lake.db.{table}"}).filter()
    assert f.matches("db", "a/b")  # read, so that it is reported, not dropped
    with pytest.raises(ConfigurationError, match=r"db\.`a/b`.*exclude=.*mysql-bin\.000003:1234"):
        f.table_schema(_ts("db", "a/b", ["id"], ("id",)), "mysql-bin.000003:1234")
    ok = _ts("db", "fine", ["id"], ("id",))
    assert f.table_schema(ok, "x") is ok


@pytest.mark.parametrize(
    ("exclude", "excluded", "kept"),
    [
        ("db.tmp_*", [("db", "tmp_1"), ("DB", "TMP_x")], [("db", "orders"), ("dbx", "tmp_1")]),
        (["db.`z.w`"], [("db", "z.w")], [("db", "z"), ("db.z", "w"), ("db", "zxw")]),
        ("db.audit", [("db", "audit")], [("dbXaudit", ""), ("db", "audits")]),
        ("db\\.tmp_.*, db\\.log_\\d+", [("db", "tmp_a"), ("db", "log_12")], [("db", "log_x")]),
        ("*.`x``;drop`", [("a", "x`;drop"), ("b", "x`;drop")], [("a", "x")]),
        ("db.order?", [("db", "orders"), ("db", "order1")], [("db", "order"), ("db", "orders2")]),
    ],
)
def test_exclude(
    exclude: str | list[str], excluded: list[tuple[str, str]], kept: list[tuple[str, str]]
) -> None:
    r = Routes({"*.*": "lake.{schema}.{table}"}, exclude=exclude)
    f = r.filter()
    for schema, table in excluded:
        assert r.excluded(schema, table) and r.target_for(schema, table) is None, (schema, table)
        assert not f.matches(schema, table), (schema, table)
    for schema, table in kept:
        assert f.matches(schema, table), (schema, table)


def test_glob_or_regex() -> None:
    assert as_glob("shop.tmp_*") == ("shop", "tmp_*")
    assert as_glob("shop.`z.w`") == ("shop", "z.w")
    assert as_glob("shop\\..*") is None
    assert as_glob("shop.tmp_.*") is None  # three parts: canal's (sloppy) regex, as canal reads it
    assert as_glob("(a|b)\\.c") is None


def test_glob_exclude_is_not_fooled_by_dots() -> None:
    """As a regex on 'schema.table', 'a.*' would also drop table c of schema 'a.b'."""
    f = TableFilter(exclude="a.*")
    assert not f.matches("a", "b.c")
    assert f.matches("a.b", "c")


def test_columns_project_the_schema() -> None:
    f = Routes({"db.*": "lake.db.{table}"}).filter("db.t:id/b")
    ts = _ts("db", "t", ["id", "a", "b", "c"], ("id",))
    got = f.table_schema(ts, "f:4")
    assert got.column_names == ("id", "b")
    assert f.table_schema(ts) is got  # once per schema object
    other = _ts("db", "u", ["id", "a"], ("id",))
    assert f.table_schema(other) is other
    assert f.project("db", "t", {"id": 1, "a": 2, "b": 3, "c": 4}, ("id",)) == {"id": 1, "b": 3}


def test_columns_must_hold_the_key(caplog: pytest.LogCaptureFixture) -> None:
    f = TableFilter(columns="db.t:a/b")
    with pytest.raises(
        ConfigurationError, match=r"db\.t leave out its primary-key column\(s\) id at f:4.*db\.t:id/a/b"
    ):
        f.table_schema(_ts("db", "t", ["id", "a", "b"], ("id",)), "f:4")
    with pytest.raises(ConfigurationError, match="primary-key"):
        TableFilter(exclude_columns="db.t:id").table_schema(_ts("db", "t", ["id", "a"], ("id",)))
    with caplog.at_level(logging.WARNING):
        TableFilter(columns="db.t:id/nope").table_schema(_ts("db", "t", ["id", "a"], ("id",)))
    assert "no column(s) nope" in caplog.text
    with pytest.raises(ConfigurationError, match="no columns"):
        TableFilter(columns="db.t:")
