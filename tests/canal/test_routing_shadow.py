"""Shadow, changelog and parked tables of gh-ost and pt-online-schema-change are no lake tables under
glob routes (:data:`airflow_provider_binlog.canal.routing.SHADOW_TABLE`), unless asked for; the copy
tables of routed names are read (for the lake copy, :mod:`airflow_provider_binlog.canal.online_copy`)."""

from __future__ import annotations

import pytest

from airflow_provider_binlog.canal.routing import Routes, is_shadow_table

SHADOWS = ("_t_gho", "_t_ghc", "_t_del", "_t_20240101120000_del", "_t_new", "__t_old", "_Orders_GHO")
COPIES = ("_t_gho", "_t_new", "_Orders_GHO")
NOT_SHADOWS = ("t", "t_new", "_t", "orders_old", "_t_newer", "x_t_gho")


@pytest.mark.parametrize("name", SHADOWS)
def test_shadow_tables_are_not_taken_by_a_glob(name: str) -> None:
    assert is_shadow_table(name)
    routes = Routes({"d.*": "lake.d.{table}"})
    assert routes.target_for("d", name) is None
    # the changelog and parked tables are not even read; the copy tables are (for the lake copy
    # swapped in at the cut-over, canal.online_copy), never routed
    assert routes.filter().matches("d", name) == (name in COPIES)


@pytest.mark.parametrize(
    "routes", [{"d.*": "lake.d.{table}"}, {"d.t": "lake.d.t"}, {"d.t*": "lake.d.x_{table}"}]
)
def test_the_copy_tables_of_routed_names_are_read(routes: dict[str, str]) -> None:
    flt = Routes(routes).filter()
    assert flt.matches("d", "_t_gho") and flt.matches("d", "_t_new")
    assert (
        not flt.matches("d", "_t_ghc") and not flt.matches("d", "_t_del") and not flt.matches("d", "_t_old")
    )
    assert not flt.matches("e", "_t_gho")
    assert flt.matches("d", "_u_gho") == ("d.*" in routes)  # only copies of routed names


@pytest.mark.parametrize("name", NOT_SHADOWS)
def test_other_names_are(name: str) -> None:
    assert not is_shadow_table(name)
    routes = Routes({"d.*": "lake.d.{table}"})
    assert routes.target_for("d", name) == f"lake.d.{name}"
    assert routes.filter().matches("d", name)


def test_ways_to_load_them_anyway() -> None:
    exact = Routes({"d.*": "lake.d.{table}", "d._t_new": "lake.d.t_copy"})
    assert exact.target_for("d", "_t_new") == "lake.d.t_copy" and exact.filter().matches("d", "_t_new")
    assert exact.target_for("d", "_t_gho") is None
    named = Routes({"d._*_gho": "lake.d.{table}"})
    assert named.target_for("d", "_t_gho") == "lake.d._t_gho" and named.filter().matches("d", "_t_gho")
    every = Routes({"d.*": "lake.d.{table}"}, shadow_tables=True)
    assert every.target_for("d", "_t_ghc") == "lake.d._t_ghc" and every.filter().matches("d", "_t_ghc")


def test_shadow_skipped_names_the_target_a_glob_would_give() -> None:
    routes = Routes({"d.*": "lake.d.{table}", "d.x_old": "lake.d.exact"}, exclude=["d._gone_old"])
    assert routes.shadow_skipped("d", "_audit_old") == "lake.d._audit_old"
    assert routes.shadow_skipped("d", "t") is None  # routed
    assert routes.shadow_skipped("e", "_audit_old") is None  # no route either way
    assert routes.shadow_skipped("d", "_gone_old") is None  # excluded
    assert Routes({"d.*": "lake.d.{table}"}, shadow_tables=True).shadow_skipped("d", "_audit_old") is None
    assert Routes({"d._*_old": "lake.d.{table}"}).shadow_skipped("d", "_audit_old") is None  # asked for
    assert Routes({r"d\.a.*": "lake.d.{table}"}).shadow_skipped("d", "_a_new") is None
    assert Routes({r"d\._a.*": "lake.d.{table}"}).shadow_skipped("d", "_a_new") == "lake.d._a_new"
