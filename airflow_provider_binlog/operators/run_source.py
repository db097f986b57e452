"""What both sources of :mod:`.sources` are built from: the run's specification, settings and
routing, how to start Spark, and where to report; each source adds its hook (:meth:`RunSource.make_hook`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_binlog.drain.loop import Report
    from airflow_provider_binlog.drain.run import RunSettings
    from airflow_provider_binlog.operators.spec import Routing, RunSpec


class RunSource:
    """A run of ``spec`` from one source.

    :param spec: the run's specification.
    :param settings: the run's settings (its limits and label are used).
    :param routing: the spec's routing.
    :param spark: starts (or joins) the SparkSession.
    :param report: ``report(level, line)``.
    """

    def __init__(
        self,
        spec: RunSpec,
        settings: RunSettings,
        routing: Routing,
        *,
        spark: Callable[[], Any],
        report: Report,
    ) -> None:
        self.spec, self.settings, self.routing = spec, settings, routing
        self.spark, self.report = spark, report
        self.hook = self.make_hook(spec)

    def make_hook(self, spec: RunSpec) -> Any:
        """The hook this source reads through."""
        raise NotImplementedError
