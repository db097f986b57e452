"""The drain's before-image columns (``drain/before_images.py``): the key the fold uses, or whole
images wherever anything else may read them. Pure code."""

from __future__ import annotations

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType
from airflow_provider_binlog.drain.before_images import key_columns_only
from airflow_provider_binlog.lake.options import options_for
from airflow_provider_binlog.lake.routes import TargetRoutes
from airflow_provider_binlog.lake.write.merge import TargetOptions

T = ColumnType
COLUMNS = (ColumnDef("id", T.LONG), ColumnDef("code", T.VARCHAR), ColumnDef("v", T.LONG))
KEYED = TableSchema("db", "t", COLUMNS, ("id",))
UNKEYED = TableSchema("db", "u", COLUMNS, ())
APPEND = TargetOptions(append_only=True)


def routes(schema: str, table: str) -> str | None:
    return None if table == "skipped" else f"lake.ns.{table}"


def test_the_primary_key_or_the_targets_key_columns() -> None:
    policy = key_columns_only(routes, None)
    assert policy("db", "t", KEYED) == ("id",)
    policy = key_columns_only(routes, TargetOptions(key_columns=("code",)))
    assert policy("db", "t", KEYED) == ("code",)
    policy = key_columns_only(routes, {"lake.ns.u": TargetOptions(key_columns=("code", "id"))})
    assert policy("db", "u", UNKEYED) == ("code", "id")
    assert policy("db", "t", KEYED) == ("id",)  # another target's options are not this one's


def test_the_options_are_the_mergers() -> None:
    """The policy finds a target's options as the merger does (``lake/options.py:options_for``, by
    the quoted name and parts ``lake/routes.py:TargetRoutes`` keeps)."""
    options = {"`lake`.`ns`.`t`": TargetOptions(key_columns=("code",)), "lake.ns.u": APPEND}
    merger_routes = TargetRoutes()
    for table in ("t", "u"):
        merger_routes.add(f"db.{table}", f"lake.ns.{table}")
    found = {parts[-1]: options_for(options, quoted, parts) for quoted, parts in merger_routes.parts.items()}
    assert found == {"t": TargetOptions(key_columns=("code",)), "u": APPEND}
    policy = key_columns_only(routes, options)
    assert (policy("db", "t", KEYED), policy("db", "u", KEYED)) == (("code",), None)


def test_whole_images_where_more_than_the_key_is_read() -> None:
    assert key_columns_only(routes, APPEND)("db", "t", KEYED) is None
    assert key_columns_only(routes, {"lake.ns.t": APPEND})("db", "t", KEYED) is None
    assert key_columns_only(routes, {"a..b": APPEND})("db", "t", KEYED) is None  # the merger refuses the key
    policy = key_columns_only(routes, None)
    assert policy("db", "u", UNKEYED) is None  # no key: the fold says so, with whole images
    assert policy("db", "skipped", KEYED) is None  # not routed
    assert policy("db", "_t_gho", KEYED) is None  # an online schema-change tool's shadow table
