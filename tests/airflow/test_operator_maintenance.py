"""Lake maintenance in Airflow: ``BinlogLakeMaintenanceOperator`` (summary, log, metrics through a real
StatsD listener, inlets) and the load operator's end-of-run maintenance (``maintenance=``), both
against the real MariaDB, ZooKeeper and Spark; the lake compared with the source value by value."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import Shop, lake_verify, make_context
from test_cli_status import StatsdListener, statsd  # noqa: F401  (the listener fixture)
from test_metrics import _parse, _received

from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.lake.maintenance import MaintenancePolicy
from airflow_provider_binlog.operators import metrics
from airflow_provider_binlog.operators.assets import table_asset
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator
from airflow_provider_binlog.operators.maintenance import BinlogLakeMaintenanceOperator

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lake"))
from maintenance_source import Source, lake_rows, merger

SHOP = ("customers", "products", "orders")


def test_parameters_checked_when_the_dag_is_parsed() -> None:
    op = BinlogLakeMaintenanceOperator(
        task_id="m", tables={"shop.*": "lake.shop.x"}, policy="keep_snapshots=9"
    )
    assert op.policy == MaintenancePolicy(keep_snapshots=9)
    assert op.inlets == [table_asset("lake.shop.x")] and op.outlets == []
    with pytest.raises(ValueError, match="cannot read 'keep=1'"):
        BinlogLakeMaintenanceOperator(task_id="m", tables=["lake.a.b"], policy="keep=1")
    with pytest.raises(ValueError, match="needs a policy"):
        BinlogLakeMaintenanceOperator(task_id="m", tables=["lake.a.b"], policy=False)
    load = BinlogToSparkOperator(task_id="l", destination="d", tables={"s.t": "lake.s.t"})
    assert load.maintenance == MaintenancePolicy.light()
    off = BinlogToSparkOperator(task_id="l", destination="d", tables={"s.t": "lake.s.t"}, maintenance=False)
    assert off.maintenance is None
    with pytest.raises(ValueError, match="keep_snapshots >= 2"):
        BinlogToSparkOperator(
            task_id="l", destination="d", tables={"s.t": "lake.s.t"}, maintenance={"keep_snapshots": 1}
        )


@pytest.mark.spark
def test_the_operator_compacts_and_reports(
    spark: Any,
    spark_warehouse: str,
    statsd: StatsdListener,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    target, src = f"lake.maint_op.t_{uuid.uuid4().hex[:8]}", Source(5)
    with merger(spark, "d1", target) as m:
        for _ in range(20):
            src.run(m, 20)
    healthy = f"lake.maint_op.h_{uuid.uuid4().hex[:8]}"
    with merger(spark, "d1", healthy) as m:
        Source(6).run(m, 20)
    op = BinlogLakeMaintenanceOperator(
        task_id="maintain", tables=[target, healthy], warehouse=spark_warehouse, spark_master="local[2]",
        stop_spark=False,
    )  # fmt: skip
    summary = op.execute(make_context(task_id="maintain"))
    done = summary["tables"][target]
    assert done["ran"][0] == "rewrite_data_files" and done["rewrite_data_files"]["rewritten_data_files"] == 20
    assert done["after"]["data_files"] == 1 and done["after"]["delete_files"] == 0
    assert summary["tables"][healthy]["ran"] == []
    assert summary["policy"]["keep_snapshots"] == 50
    assert lake_rows(spark, target) == src.rows
    logged = [line for line in capsys.readouterr().out.splitlines() if "maintenance summary" in line]
    assert len(logged) == 1 and target in logged[0] and "rewritten_data_files" in logged[0]  # the task log
    got = _parse(_received(statsd))
    segment = metrics.name_part(target)
    assert got[(f"binlog_cdc.maintenance_rewritten_files.{segment}", "c")] == [
        done["rewrite_data_files"]["rewritten_data_files"]
        + done["rewrite_data_files"]["removed_delete_files"]
        + done.get("rewrite_manifests", {}).get("rewritten_manifests", 0)
    ]
    assert len(got[(f"binlog_cdc.maintenance_duration.{segment}", "ms")]) == 1
    assert not any(metrics.name_part(healthy) in name for name, _ in got)  # a healthy table: nothing


@pytest.mark.integration
@pytest.mark.spark
def test_a_load_maintains_its_tables_at_the_end_of_its_run(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer
) -> None:
    """Four load runs with a policy that compacts a table beyond 3 data files: the fourth run's
    summary says it compacted; the lake equals the source after every run."""
    ns = f"m{uuid.uuid4().hex[:8]}"
    tables = {f"shop.{t}": f"lake.{ns}.{t}" for t in SHOP}
    policy = MaintenancePolicy.light().replace(max_small_files=1, max_delete_files=2)
    compacted: set[str] = set()
    for run in range(4):
        shop.changes(60)
        summary = BinlogToSparkOperator(
            task_id="load", destination=f"maint-{ns}", tables={"shop.*": f"lake.{ns}.{{table}}"},
            start_from=shop.start_from, warehouse=spark_warehouse, spark_master="local[2]", stop_spark=False,
            maintenance=policy,
        ).execute(make_context(run_id=f"r{run}"))  # fmt: skip
        done = summary["maintenance"]["tables"]
        assert set(done) == set(summary["snapshots"]), summary
        compacted |= {t for t, d in done.items() if "rewrite_data_files" in d["ran"]}
        diffs = lake_verify(mariadb, spark, tables)
        assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
    assert compacted, "no table compacted in four runs"
