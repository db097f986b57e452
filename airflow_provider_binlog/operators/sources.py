"""The two sources behind the drain, chosen by one factory (:func:`open_source`): the MySQL binlog
(:class:`BinlogSource`, the default) or a canal server (:class:`~.canal_source.CanalSource`, with
``canal_conn_id``). Each is built from the run's specification, settings and routing alone, runs
once (``run(stop_at)`` returns the drain's summary), releases what it holds in ``kill()`` (the
task's ``on_kill``) and its connections in ``close()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.operators.canal_source import CanalSource
from airflow_provider_binlog.operators.run_source import RunSource

if TYPE_CHECKING:
    from airflow_provider_binlog.canal.instance import CanalInstance
    from airflow_provider_binlog.drain.loop import Report
    from airflow_provider_binlog.drain.run import RunSettings
    from airflow_provider_binlog.operators.spec import Routing, RunSpec


class BinlogSource(RunSource):
    """A run of ``spec`` from the MySQL binlog: the destination's instance from
    :class:`~..hooks.binlog.BinlogHook` (its run fields set as it is built, :mod:`..drain.context`),
    the archive when ``archive_uri`` is given, then :class:`~..drain.run.Drain`. The parameters are
    :class:`~.run_source.RunSource`'s."""

    lineage = True  #: the summary's ``lineage`` (the OpenLineage facets read it)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.instance: CanalInstance | None = None  # while it runs

    def make_hook(self, spec: RunSpec) -> Any:
        from airflow_provider_binlog.hooks.binlog import BinlogHook

        return BinlogHook(spec.mysql_conn_id, spec.zookeeper_conn_id, spec.meta_dir, spec.server_id)

    def run(self, stop_at: Any = "head") -> dict[str, Any]:
        """Drain to ``stop_at``; the summary of :meth:`~..drain.run.Drain.run`."""
        from airflow_provider_binlog.canal.positions.points import parse_point
        from airflow_provider_binlog.drain import Drain, run_fields
        from airflow_provider_binlog.operators.metrics import RunMetrics, emit_headroom

        spec, settings, (routes, table_filter, options) = self.spec, self.settings, self.routing
        start = parse_point(spec.start_from) if spec.start_from not in (None, "") else None
        self.instance = instance = self.hook.instance(
            spec.destination, table_filter, spec.client_id, start, settings.label,
            **run_fields(routes, settings, options),
        )  # fmt: skip
        if spec.archive_uri:
            from airflow_provider_binlog.drain.archive import attach_archive

            attach_archive(instance, spec.archive_uri, spec.archive_schema, self.report)
        drain = Drain(
            instance, routes, settings, spark=self.spark, connect=self.hook.source_connection,
            target_options=options, on_schema_change=spec.on_schema_change, report=self.report,
            observer=RunMetrics(spec.destination),
        )  # fmt: skip
        try:
            return drain.run(stop_at)
        finally:  # the run start's retention headroom as a gauge, the run failed or not
            emit_headroom(spec.destination, drain.retention)

    def kill(self) -> None:
        """Release the running node without acking anything."""
        instance = self.instance
        if instance is not None:
            instance.close()

    def close(self) -> None:
        self.instance = None
        self.hook.close()


def open_source(
    spec: RunSpec, settings: RunSettings, routing: Routing, *, spark: Callable[[], Any], report: Report
) -> BinlogSource | CanalSource:
    """The run's source: a canal server with ``canal_conn_id``, else the MySQL binlog."""
    kind = CanalSource if spec.canal_conn_id else BinlogSource
    return kind(spec, settings, routing, spark=spark, report=report)
