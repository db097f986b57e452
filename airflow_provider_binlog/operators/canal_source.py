"""The operator's run from a canal server (``canal_conn_id``): :class:`~..drain.canal_source.CanalDrain`
with the spec's routes, limits, target options and Spark, the connection from
:class:`~..hooks.canal.CanalHook`. The lake side and the ack-after-commit rule are the binlog run's;
so is the end-of-run maintenance (the spec's ``maintenance``). The MySQL-only steps (initial
snapshot, re-snapshots, interval stops, retention checks) are not run.
The run holds the destination client (:meth:`~..hooks.canal.CanalHook.hold`, waiting up to the
spec's ``running_timeout`` for another reader) so that no sensor's peek rolls back its batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.operators.run_source import RunSource

if TYPE_CHECKING:
    from airflow_provider_binlog.operators.spec import RunSpec


class CanalSource(RunSource):
    """A run of ``spec`` against its canal server (made by :func:`.sources.open_source`).

    Its parameters are :class:`~.run_source.RunSource`'s.
    """

    lineage = False  #: the summary holds no lineage (no source schema is read)
    instance = None  #: no instance of ours: the canal server reads the binlog

    def make_hook(self, spec: RunSpec) -> Any:
        from airflow_provider_binlog.hooks.canal import CanalHook

        return CanalHook(str(spec.canal_conn_id))

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
