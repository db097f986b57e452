"""canal filter syntax: anchored, case-insensitive regexes, black list, column lists."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_binlog.canal.filter import TableFilter, split_patterns, suspicious_patterns
from airflow_provider_binlog.errors import ConfigurationError


@pytest.mark.parametrize(
    ("include", "name", "expected"),
    [
        ("", "any.thing", True),
        (".*\\..*", "shop.orders", True),
        ("shop\\..*", "shop.orders", True),
        ("shop\\..*", "SHOP.Orders", True),  # case-insensitive
        ("shop\\..*", "shopping.orders", False),
        ("shop\\.orders", "shop.orders_archive", False),  # anchored at the end
        ("shop\\.orders", "myshop.orders", False),  # anchored at the start
        ("shop\\.orders,shop\\.items", "shop.items", True),
        ("shop\\.orders_\\d+", "shop.orders_12", True),
        ("shop\\.orders_\\d{1,2}", "shop.orders_12", True),  # comma inside {m,n} is not a separator
        ("shop\\.orders_\\d{1,2}", "shop.orders_123", False),
    ],
)
def test_include(include: str, name: str, expected: bool) -> None:
    schema, table = name.split(".")
    assert TableFilter(include=include).matches(schema, table) is expected


def test_black_list_wins() -> None:
    f = TableFilter(include="shop\\..*", exclude="shop\\.tmp_.*,shop\\.audit")
    assert f.matches("shop", "orders")
    assert not f.matches("shop", "tmp_x")
    assert not f.matches("shop", "AUDIT")
    assert not f.matches("other", "orders")


def test_unescaped_dot_mistake(caplog: pytest.LogCaptureFixture) -> None:
    """``shop.*`` reads as "tables of shop" but the '.' matches any character."""
    with caplog.at_level(logging.WARNING):
        wrong = TableFilter(include="shop.*")
    assert wrong.matches("shop", "orders")
    assert wrong.matches("shopping", "orders")  # the surprise
    assert wrong.matches("shop_archive", "orders")
    assert "unescaped '.'" in caplog.text
    sneaky = TableFilter(include="shop.order.*")
    assert sneaky.matches("shop_order", "x")  # schema shop_order, table x
    right = TableFilter(include="shop\\..*")
    assert not right.matches("shopping", "orders")
    assert suspicious_patterns("shop.*,shop\\..*,.*\\..*,shop.orders,[.]x") == ["shop.*", "shop.orders"]


def test_database_level_statement_matches_schema_dot() -> None:
    assert TableFilter(include="shop\\..*").matches("shop", None)
    assert not TableFilter(include="shop\\.orders").matches("shop", None)


def test_columns_keep_and_drop_keep_primary_key() -> None:
    f = TableFilter(columns="shop.orders:id/amount", exclude_columns="shop.customers:ssn")
    row = {"id": 1, "amount": 2, "note": "x", "Secret": 3}
    assert f.project("shop", "orders", row, primary_key=("id",)) == {"id": 1, "amount": 2}
    assert f.project("SHOP", "ORDERS", {"ID": 1, "Note": 2}, primary_key=("ID",)) == {"ID": 1}
    # the primary key stays even when not listed
    assert f.project("shop", "orders", {"k": 1, "amount": 2}, primary_key=("k",)) == {"k": 1, "amount": 2}
    assert f.project("shop", "customers", {"id": 1, "ssn": "x"}, ("id",)) == {"id": 1}
    assert f.project("shop", "other", row) == row
    assert f.project("shop", "orders", None) is None


def test_split_and_errors() -> None:
    assert split_patterns(" a\\.b , ,c\\.d{1,2} ") == ["a\\.b", "c\\.d{1,2}"]
    with pytest.raises(ConfigurationError, match="invalid filter pattern"):
        TableFilter(include="shop\\.(")
    with pytest.raises(ConfigurationError, match=r"schema\.table:col1/col2"):
        TableFilter(columns="orders")
