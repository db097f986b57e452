"""``airflow dags test`` of the backfill DAG with a list of intervals (issue #22) against the real
MariaDB, ZooKeeper and Spark: with ``{interval}`` in the targets each interval is its own mapped
run on its own tables (the first equals the source at its end; the second holds exactly the rows
its interval left, at their values then); with shared targets the contiguous intervals run as one,
equal to the source at the last end. Refusals are unit-tested on the planner."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import Shop, lake_verify, run_dag, warehouse_catalog

from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.operators.backfill import expand_range, label, plan_backfill

TABLES = ("customers", "products", "orders")


def _now(mariadb: MariaDbServer) -> float:
    return float(mariadb.execute("SELECT UNIX_TIMESTAMP(NOW(6))")[0][0])


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat()


def _copy_schema(mariadb: MariaDbServer, source: str, target: str) -> None:
    mariadb.execute(f"DROP DATABASE IF EXISTS `{target}`")
    mariadb.execute(f"CREATE DATABASE `{target}`")
    for (table,) in mariadb.execute(
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (source,)
    ):
        mariadb.execute(f"CREATE TABLE `{target}`.`{table}` LIKE `{source}`.`{table}`")
        mariadb.execute(f"INSERT INTO `{target}`.`{table}` SELECT * FROM `{source}`.`{table}`")


def _instant_between_writes(mariadb: MariaDbServer) -> float:
    """An instant strictly after every transaction so far and before the next (commit times are
    whole seconds)."""
    time.sleep(1.1)
    t = _now(mariadb)
    time.sleep(1.1)
    return t


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.timeout(1800)
def test_backfill_dag_runs_intervals(
    shop: Shop, dag_env: Any, mariadb: MariaDbServer, spark: Any, tmp_path: Path
) -> None:
    shop.changes(200)
    t1 = _instant_between_writes(mariadb)
    _copy_schema(mariadb, "shop", "shop_at_t1")
    shop.changes(150)
    t2 = _instant_between_writes(mariadb)
    _copy_schema(mariadb, "shop", "shop_at_t2")
    shop.changes(50)  # after both intervals: in neither lake
    env = dag_env(shop.start_from)
    intervals = [[shop.start_from, _iso(t1)], [_iso(t1), _iso(t2)]]
    try:
        apart = {"intervals": intervals, "targets": {"shop.*": "lake.bf_{interval}.{table}"}}
        run = run_dag(env, "example_binlog_backfill", tmp_path / "apart.log", conf=apart)
        assert run.succeeded, run.tail()
        assert run.log.count(": done,") == 2, run.tail()
        catalog = warehouse_catalog(spark, tmp_path / "warehouse")
        first, second = label(shop.start_from), label(_iso(t1))
        diffs = lake_verify(mariadb, spark, {f"shop_at_t1.{t}": f"{catalog}.bf_{first}.{t}" for t in TABLES})
        assert all(d.equal and d.source_rows > 0 for d in diffs), "\n".join(d.describe() for d in diffs)
        diffs = lake_verify(mariadb, spark, {f"shop_at_t2.{t}": f"{catalog}.bf_{second}.{t}" for t in TABLES})
        for d in diffs:  # interval 2 alone: the rows it wrote, as they were at t2; nothing else
            assert not d.extra and not d.different and d.lake_rows > 0, d.describe()
        assert sum(d.lake_rows for d in diffs) < sum(d.source_rows for d in diffs)

        shared = {"intervals": intervals, "targets": {"shop.*": "lake.bf_all.{table}"}}
        run = run_dag(env, "example_binlog_backfill", tmp_path / "shared.log", conf=shared)
        assert run.succeeded, run.tail()
        assert run.log.count(": done,") == 1, run.tail()
        diffs = lake_verify(mariadb, spark, {f"shop_at_t2.{t}": f"{catalog}.bf_all.{t}" for t in TABLES})
        assert all(d.equal and d.source_rows > 0 for d in diffs), "\n".join(d.describe() for d in diffs)
    finally:
        for db in ("shop_at_t1", "shop_at_t2"):
            mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")


def test_plan_maps_intervals_and_merges_shared_targets() -> None:
    a, b, c = "2026-11-21T10:00:00+00:00", "2026-11-21T11:00:00Z", "2026-11-21T12:00:00+00:00"
    apart = plan_backfill("r", {"shop.*": "lake.bf_{interval}.{table}"}, [[a, b], {"start": b, "end": c}])
    assert [(r["destination"], r["tables"]["shop.*"], r["start_from"], r["stop_at"]) for r in apart] == [
        ("backfill-r-20261121t100000", "lake.bf_20261121t100000.{table}", a, b),
        ("backfill-r-20261121t110000", "lake.bf_20261121t110000.{table}", b, c),
    ]
    (merged,) = plan_backfill("r", {"shop.*": "lake.bf.{table}"}, [[a, b], [b, c]])
    assert (merged["start_from"], merged["stop_at"]) == (a, c)
    with pytest.raises(ValueError, match="not contiguous"):
        plan_backfill("r", {"shop.*": "lake.bf.{table}"}, [[a, b], ["2026-11-21T11:30:00Z", c]])
    (one,) = plan_backfill("r", {"shop.*": "lake.x.{table}"}, start_from="mysql-bin.000003:4", stop_at="")
    assert one == {
        "destination": "backfill-r", "tables": {"shop.*": "lake.x.{table}"},
        "start_from": "mysql-bin.000003:4", "stop_at": "head",
    }  # fmt: skip
    (window,) = plan_backfill("r", {"shop.*": "lake.x.{table}"}, [], data_interval=(a, c))
    assert (window["start_from"], window["stop_at"]) == (a, c)
    with pytest.raises(ValueError, match="nothing to backfill"):
        plan_backfill("r", {"shop.*": "lake.x.{table}"}, [], data_interval=(a, a))
    assert expand_range(a, "2026-11-21T12:30:00+00:00", 3600) == [
        (a, "2026-11-21T11:00:00+00:00"),
        ("2026-11-21T11:00:00+00:00", c),
        (c, "2026-11-21T12:30:00+00:00"),
    ]


def test_start_from_takes_a_recorded_run_summary_as_object_or_json() -> None:
    """The README's "``start_from``: ... a run's summary": the DAG's param accepts the XCom summary
    as an object or as its JSON text (the trigger form's text field), and the plan hands the
    operator the summary itself (``parse_point`` reads its ``end``)."""
    import copy
    import runpy

    from airflow_provider_binlog.canal.positions.points import parse_point

    summary = {
        "destination": "shop", "start": "mysql-bin.000003:4", "end": "mysql-bin.000003:9120",
        "tables": {"lake.shop.orders": {"commits": 1}}, "snapshots": {"lake.shop.orders": "84199"},
    }  # fmt: skip
    dag = runpy.run_path(str(Path(__file__).parents[2] / "dags" / "example_binlog_backfill.py"))["dag"]
    for given in (summary, json.dumps(summary), "mysql-bin.000003:4"):
        params = copy.deepcopy(dag.params)
        params.update({"start_from": given})
        assert params.validate()["start_from"] == given  # the schema takes it: no ParamValidationError
        (run,) = plan_backfill("r", {"shop.*": "lake.x.{table}"}, start_from=given, stop_at="head")
        expected = "mysql-bin.000003:4" if given == "mysql-bin.000003:4" else "mysql-bin.000003:9120"
        assert parse_point(run["start_from"]).position == expected
    (run,) = plan_backfill("r", {"shop.*": "lake.x.{table}"}, [[json.dumps(summary), "head"]])
    assert run["start_from"] == summary and run["destination"] == "backfill-r-mysql_bin_000003_9120"
    with pytest.raises(ValueError, match="no valid JSON"):
        plan_backfill("r", {"shop.*": "lake.x.{table}"}, start_from='{"end": ')
