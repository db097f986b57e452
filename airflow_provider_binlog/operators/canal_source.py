"""The operator's run from a canal server (``canal_conn_id``): :class:`~..drain.canal_source.CanalDrain`
with the operator's routes, limits, target options and Spark, the connection from
:class:`~..hooks.canal.CanalHook`. The lake side and the ack-after-commit rule are the binlog run's;
so is the end-of-run maintenance (the operator's ``maintenance``). The MySQL-only steps (initial
snapshot, re-snapshots, interval stops, retention checks) are not run.
The run holds the destination client (:meth:`~..hooks.canal.CanalHook.hold`, waiting up to the
operator's ``running_timeout`` for another reader) so that no sensor's peek rolls back its batches.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_binlog.drain.loop import Limits


def run_from_canal(op: Any, context: Any, routes: Any, target_options: Any, limits: Limits) -> dict[str, Any]:
    """Run ``op`` (a :class:`~.binlog_to_spark.BinlogToSparkOperator`) against its canal server.

    :return: the drain summary (destination, source, end, batches, commits, changes, tables, and
        ``committed_earlier``/``snapshots`` as the binlog run's: a retry after a crash between
        commit and ack announces what the failed attempt committed, :mod:`.assets`).
    """
    from airflow_provider_binlog.drain.canal_source import CanalDrain
    from airflow_provider_binlog.hooks.canal import CanalHook

    hook = CanalHook(op.canal_conn_id)
    try:
        client = hook.client(op.destination, op.client_id, routes.filter(op.columns).include)
        drain = CanalDrain(
            client, routes, spark=op._spark, limits=limits, target_options=target_options,
            on_schema_change=op.on_schema_change, report=op._report, maintenance=op.maintenance,
        )  # fmt: skip
        ti = context.get("ti")
        label = f"{ti.dag_id}/{ti.task_id}/{context.get('run_id')}/try-{ti.try_number}" if ti else ""
        with hook.hold(op.destination, op.client_id, label).hold(op.running_timeout):
            summary = drain.run()  # the one reader of the destination client (the sensor peeks around it)
        if "maintenance" in summary:
            from airflow_provider_binlog.operators.metrics import emit_maintenance

            emit_maintenance(summary["maintenance"])
        op._asset_events(context, summary)
        return summary
    finally:
        hook.close()
