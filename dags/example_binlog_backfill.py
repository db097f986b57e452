"""Backfill: re-apply stretches of the binlog to lake tables, each interval under its own destination.

Trigger it with params, e.g. ``airflow dags trigger example_binlog_backfill --conf '{"intervals":
[["2026-11-21T00:00:00+00:00", "2026-11-21T12:00:00+00:00"], ["2026-11-21T12:00:00+00:00",
"2026-11-22T00:00:00+00:00"]], "targets": {"shop.*": "lake.shop_bf_{interval}.{table}"}}'``.

* ``intervals``: ``[start, end]`` pairs. ``start`` is a ``start_from`` (``file:pos``, ``gtid:SET``,
  an ISO timestamp, a recorded run's summary or interval end), ``end`` a ``stop_at``; an ISO
  timestamp ends the interval reproducibly (before the first transaction committed at or after it).
  Consecutive timestamp intervals tile the binlog: each starts where the one before stops.
* ``range``: ``{"from": ISO, "to": ISO, "every_seconds": N}`` instead of listing the intervals.
* ``start_from`` / ``stop_at``: one interval (``stop_at`` may be ``head``), the form before lists;
  ``start_from`` also takes a recorded run's summary (its XCom ``return_value``), as an object or
  pasted as JSON text: the interval starts at its ``end``.
* Without any of them the run's data interval is backfilled (a copy of this DAG with a schedule,
  run by ``airflow backfill create --from-date ... --to-date ...``).
* ``targets``: source -> lake table (globs, ``{schema}``/``{table}``, and ``{interval}``: the
  interval's start, e.g. ``20261121t000000``).
* ``archive_uri`` / ``archive_schema``: archived binlog files for starts the server no longer has.

Each interval runs under the destination ``backfill-<run id>-<interval>`` (the live cursor never
moves; a retry resumes from its own cursor). With ``{interval}`` in the targets each interval writes
its own tables and the runs are mapped in parallel; intervals writing the same tables run as one
(they must be contiguous). :mod:`airflow_provider_binlog.operators.backfill` has the rules.
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import DAG, AssetAlias, Param, task

from airflow_provider_binlog.operators.assets import alias_name
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

with DAG(
    dag_id="example_binlog_backfill",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["binlog-cdc", "example"],
    doc_md=__doc__,
    params={
        "intervals": Param([], type="array", description="[start, end] pairs (start_from, stop_at)"),
        "range": Param({}, type="object", description='{"from": ISO, "to": ISO, "every_seconds": N}'),
        "start_from": Param(
            "",
            type=["string", "object"],
            description="one interval: file:pos, gtid:SET, ISO, or a recorded run's summary (object or JSON)",
        ),
        "stop_at": Param("head", type="string", description="one interval: head, file:pos, gtid:SET or ISO"),
        "targets": Param({"shop.*": "lake.shop_backfill.{table}"}, type="object"),
        "archive_uri": Param("", type="string", description="archived binlog files (directory or URI)"),
        "archive_schema": Param("", type="string", description="binlog or information_schema"),
    },
) as dag:

    @task
    def plan(
        params: dict[str, Any] | None = None,
        run_id: str | None = None,
        data_interval_start: Any = None,
        data_interval_end: Any = None,
    ) -> list[dict[str, Any]]:
        """One operator run per interval (or per group of contiguous intervals sharing targets)."""
        from airflow_provider_binlog.operators.backfill import expand_range, plan_backfill

        p = params or {}
        intervals = list(p.get("intervals") or [])
        span = p.get("range") or {}
        if span:
            intervals += expand_range(span["from"], span["to"], float(span.get("every_seconds", 86400)))
        runs = plan_backfill(
            str(run_id), dict(p["targets"]), intervals, start_from=p.get("start_from"),
            stop_at=p.get("stop_at"), data_interval=(data_interval_start, data_interval_end),
        )  # fmt: skip
        for run in runs:
            if p.get("archive_uri"):
                run.update(archive_uri=p["archive_uri"], archive_schema=p.get("archive_schema") or None)
        return runs

    # a mapped load's tables are known at run time only: its events go through the load's alias
    alias = AssetAlias(name=alias_name("example_binlog_backfill", "backfill"))
    BinlogToSparkOperator.partial(
        task_id="backfill", outlets=[alias], max_active_tis_per_dagrun=4
    ).expand_kwargs(plan())
