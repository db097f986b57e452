"""The operator's run from a canal server (``canal_conn_id``): :class:`~..drain.canal_source.CanalDrain`
with the spec's routes, limits, target options and Spark, the connection from
:class:`~..hooks.canal.CanalHook`. The lake side and the ack-after-commit rule are the binlog run's;
so is the end-of-run maintenance (the spec's ``maintenance``). The MySQL-only steps (initial
snapshot, re-snapshots, interval stops, retention checks) are not run.
The run holds the destination client (:meth:`~..hooks.canal.CanalHook.hold`, waiting up to the
spec's ``running_timeout`` for another reader) so that no sensor's peek rolls back its batches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_binlog.drain.loop import Report
    from airflow_provider_binlog.drain.run import RunSettings
    from airflow_provider_binlog.operators.spec import Routing, RunSpec


class CanalSource:
    """A run of ``spec`` against its canal server (made by :func:`.sources.open_source`).

    :param spec: the run's specification.
    :param settings: the run's settings (its limits and label are used).
    :param routing: the spec's routing.
    :param spark: starts (or joins) the SparkSession.
    :param report: ``report(level, line)``.
    """

    lineage = False  #: the summary holds no lineage (no source schema is read)
    instance = None  #: no instance of ours: the canal server reads the binlog

    def __init__(
        self,
        spec: RunSpec,
        settings: RunSettings,
        routing: Routing,
        *,
        spark: Callable[[], Any],
        report: Report,
    ) -> None:
        from airflow_provider_binlog.hooks.canal import CanalHook

        self.spec, self.settings, self.routing = spec, settings, routing
        self.spark, self.report = spark, report
        self.hook = CanalHook(str(spec.canal_conn_id))

    def run(self, stop_at: Any = "head") -> dict[str, Any]:
        """Drain until caught up (a canal server has no head to stop at: ``stop_at`` is not used).

        :return: the drain summary (destination, source, end, batches, commits, changes, tables, and
            ``committed_earlier``/``snapshots`` as the binlog run's: a retry after a crash between
            commit and ack announces what the failed attempt committed, :mod:`.assets`).
        """
        from airflow_provider_binlog.drain.canal_source import CanalDrain

        spec, routing = self.spec, self.routing
        client = self.hook.client(spec.destination, spec.client_id, routing.filter.include)
        drain = CanalDrain(
            client, routing.routes, spark=self.spark, limits=self.settings.limits,
            target_options=routing.target_options, on_schema_change=spec.on_schema_change,
            report=self.report, maintenance=spec.maintenance,
        )  # fmt: skip
        with self.hook.hold(spec.destination, spec.client_id, self.settings.label).hold(spec.running_timeout):
            return drain.run()  # the one reader of the destination client (the sensor peeks around it)

    def kill(self) -> None:
        """Nothing to release here: the hold ends with the task's process."""

    def close(self) -> None:
        self.hook.close()
