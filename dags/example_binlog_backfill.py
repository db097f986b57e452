"""Backfill: re-apply a stretch of the binlog to lake tables, under its own destination.

Trigger it with params, e.g. ``airflow dags trigger example_binlog_backfill --conf
'{"start_from": "mysql-bin.000003:4", "stop_at": "2026-11-21T12:00:00+00:00"}'``.

* ``start_from``: ``file:pos``, ``gtid:SET``, an ISO timestamp with zone, or the summary (XCom) of
  an earlier incremental run (then it resumes where that run stopped).
* ``stop_at``: ``head``, ``file:pos``, ``gtid:SET`` or a timestamp.
* ``targets``: source -> lake table mapping (globs and ``{schema}``/``{table}`` allowed).

The destination is ``backfill-<run id>``: the live destination's cursor never moves, and a retry of
the same run resumes from its own cursor; the lake skips what that destination already committed.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

with DAG(
    dag_id="example_binlog_backfill",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["binlog-cdc", "example"],
    doc_md=__doc__,
    render_template_as_native_obj=True,
    params={
        "start_from": Param("", type="string", description="file:pos, gtid:SET or ISO timestamp"),
        "stop_at": Param("head", type="string", description="head, file:pos, gtid:SET or ISO timestamp"),
        "targets": Param({"shop.*": "lake.shop_backfill.{table}"}, type="object"),
    },
) as dag:
    BinlogToSparkOperator(
        task_id="backfill",
        destination="backfill-{{ run_id }}",
        tables="{{ params.targets }}",  # type: ignore[arg-type]
        start_from="{{ params.start_from }}",
        stop_at="{{ params.stop_at }}",
    )
