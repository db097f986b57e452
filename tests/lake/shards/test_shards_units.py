"""Pure units of the sharded-sources rules (lake/shards/shards.py, canal/routing.shared_targets)."""

from __future__ import annotations

import pytest

from airflow_provider_binlog.canal.routing import shared_targets
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.options import TargetOptions, option_columns
from airflow_provider_binlog.lake.shards import shards

SHARDED = TargetOptions(shard_column="_shard", shard_value="{table}")


@pytest.mark.parametrize(
    ("routes", "shared"),
    [
        ({"shop.orders_*": "lake.shop.orders"}, {"lake.shop.orders": ["shop.orders_*"]}),
        ({"shop.orders_??": "lake.shop.orders"}, {"lake.shop.orders": ["shop.orders_??"]}),
        ({"shop.*": "lake.shop.{table}"}, {}),
        ({"*.orders": "lake.x.{table}"}, {"lake.x.{table}": ["*.orders"]}),  # schemas collide
        ({"*.orders": "lake.{schema}.{table}"}, {}),
        ({"a.t": "lake.s.T", "b.t": "lake.s.t"}, {"lake.s.T": ["a.t", "b.t"]}),  # one target, any case
        ({"a.t": "lake.s.t", "b.t": "lake.s.u"}, {}),
    ],
)
def test_shared_targets(routes: dict[str, str], shared: dict[str, list[str]]) -> None:
    assert shared_targets(routes) == shared


def test_check_routes_refuses_collisions_without_a_shard_column() -> None:
    routes = {"shop.orders_*": "lake.shop.orders"}
    with pytest.raises(
        ConfigurationError, match=r"'shop.orders_\*' all fill the lake table 'lake.shop.orders'"
    ):
        shards.check_routes(routes, None)
    with pytest.raises(ConfigurationError, match="does not tell their tables apart"):
        shards.check_routes(routes, TargetOptions(shard_column="_shard", shard_value="{destination}"))
    shards.check_routes(routes, SHARDED)
    shards.check_routes(routes, {"lake.shop.orders": SHARDED})
    shards.check_routes(routes, TargetOptions(unique_keys=True))
    shards.check_routes(routes, TargetOptions(append_only=True))
    with pytest.raises(ConfigurationError, match="may only use"):
        shards.check_routes({"a.b": "lake.a.b"}, TargetOptions(shard_column="_s", shard_value="{server}"))
    with pytest.raises(ConfigurationError, match=r"\{schema\} and \{table\}"):
        shards.check_routes({"a.t": "lake.s.t", "b.t": "lake.s.t"}, SHARDED)


def test_fill_bind_and_values() -> None:
    assert shards.fill("{destination}-{table}", destination="d{x}") == "d{{x}}-{table}"
    opts = TargetOptions(shard_column="_shard", shard_value="{connection}/{destination}/{table}")
    bound = shards.bind(opts, "dest", "mysql_1")
    assert bound.shard_value == "mysql_1/dest/{table}"
    assert bound.table_properties == {
        shards.SHARD_COLUMN_PROPERTY: "_shard",
        shards.WRITER_PREFIX + "dest": bound.shard_value,
    }
    assert shards.bind(bound, "dest") is bound  # idempotent
    shard = shards.shard_of(bound)
    assert shard is not None and shard.value("shop", "orders_01") == "mysql_1/dest/orders_01"
    with pytest.raises(ConfigurationError, match=r"\{connection\} is not known here"):
        shards.shard_of(shards.bind(opts, "dest"))
    plain = shards.bind(TargetOptions(), "d")  # no shard column: the writer line alone
    assert plain == TargetOptions(table_properties={shards.WRITER_PREFIX + "d": ""})
    assert shards.bind(plain, "d") is plain
    assert [c.name for c in option_columns(bound)] == ["_shard"]
    assert shards.shard_keys(("id",), bound) == ("id", "_shard")
    assert shards.shard_keys(("id",), TargetOptions()) == ("id",)


def test_scope() -> None:
    bound = shards.bind(SHARDED, "d")
    assert shards.scope_sql(bound, "shop", "o'1", 3, "x", "T") == "`_shard` = 'o\\'1'"
    assert shards.scope_sql(TargetOptions(), "shop", "o", 1, "x", "T") is None
    with pytest.raises(LakeError, match=r"TRUNCATE of shop\.o cannot be applied to the lake table T"):
        shards.scope_sql(TargetOptions(unique_keys=True), "shop", "o", 1, "TRUNCATE", "T")
    per_destination = shards.bind(TargetOptions(shard_column="_s", shard_value="{destination}"), "d")
    assert shards.scope_sql(per_destination, "shop", "o", 1, "x", "T") == "`_s` = 'd'"
    with pytest.raises(LakeError, match="put \\{table\\} into shard_value"):
        shards.scope_sql(per_destination, "shop", "o", 2, "x", "T")


def test_writers_problem() -> None:
    one = {shards.SHARD_COLUMN_PROPERTY: "_s", shards.WRITER_PREFIX + "one": "one"}
    mine = shards.bind(TargetOptions(shard_column="_s", shard_value="{destination}"), "two")
    assert shards.writers_problem(one, "T", "two", mine) is None
    assert "destinations two and one write the same shard values" in str(
        shards.writers_problem(
            one, "T", "two", shards.bind(TargetOptions(shard_column="_s", shard_value="one"), "two")
        )
    )
    assert "has the shard column '_s'" in str(shards.writers_problem(one, "T", "two", TargetOptions()))
    plain = {shards.WRITER_PREFIX + "one": ""}
    assert "destinations two and one both write" in str(
        shards.writers_problem(plain, "T", "two", TargetOptions())
    )
    assert shards.writers_problem(plain, "T", "one", TargetOptions()) is None
    assert shards.writers_problem(plain, "T", "two", TargetOptions(unique_keys=True)) is None
    assert "has no shard column" in str(shards.writers_problem({}, "T", "two", mine))


def test_regex_sources_route_and_collide() -> None:
    """``shop.orders_[0-9]+`` is canal's regex on schema.table: it routes the tables it matches whole
    (not orders_x, not other schemas), is in the include filter as it is, and several tables into one
    target need a shard column (its literal schema lets {table} alone tell them apart)."""
    from airflow_provider_binlog.canal.routing import Routes

    routes = Routes({"shop.orders_[0-9]+": "lake.shop.orders", "shop.*": "lake.shop.{table}"})
    assert routes.target_for("shop", "orders_07") == "lake.shop.{table}".format(
        table="orders_07"
    )  # glob first
    only = Routes({"shop\\.orders_[0-9]+": "lake.shop.orders"})
    assert only.target_for("shop", "orders_07") == "lake.shop.orders"
    assert only.target_for("SHOP", "ORDERS_12") == "lake.shop.orders"
    assert only.target_for("shop", "orders_x") is None and only.target_for("crm", "orders_1") is None
    assert only.target_for("shop", "_orders_1_gho") is None
    assert only.filter().matches("shop", "orders_3") and not only.filter().matches("shop", "orders_")
    assert only.exact == {}
    assert shared_targets(only.routes) == {"lake.shop.orders": ["shop\\.orders_[0-9]+"]}
    with pytest.raises(ConfigurationError, match="all fill the lake table"):
        shards.check_routes(only.routes, None)
    shards.check_routes(only.routes, SHARDED)
    with pytest.raises(ConfigurationError, match="invalid source regex"):
        Routes({"shop.orders_[0-9": "lake.shop.orders"})
