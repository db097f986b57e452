"""BinlogToSparkOperator: drain a destination's binlog changes into Iceberg tables with Spark.

A thin shell: its parameters are a :class:`~.spec.RunSpec` (documented and validated there), the
run is the source :func:`~.sources.open_source` picks (the binlog through
:class:`~..drain.run.Drain`, or a canal server), the Spark session and catalog connection are
:class:`~..hooks.lake.LakeHook`'s. Here: the task context (the run's id, label and stop point), the
target tables declared as assets (an event for each table a run committed to: :mod:`.assets`), the
drain's summary as XCom and the destination released in :meth:`~BinlogToSparkOperator.on_kill`.

Exactly once: the cursor moves only after Spark committed; the lake remembers, per table and
destination, the last change it holds, so a retry after a crash between commit and ack skips
what is already there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_binlog.operators.assets import emit_events, lake_outlets
from airflow_provider_binlog.operators.spec import FIELDS, RunSpec
from airflow_provider_binlog.settings import env_name

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_binlog.canal.instance import CanalInstance
    from airflow_provider_binlog.hooks.lake import LakeHook
    from airflow_provider_binlog.lake.write.merge import TargetOptions
    from airflow_provider_binlog.operators.sources import BinlogSource, CanalSource

SPARK_MASTER_ENV = env_name("spark_master")
STAGING_URI_ENV = env_name("staging_uri")


class BinlogToSparkOperator(BaseOperator):
    """Merge the binlog changes of ``tables`` since the destination's cursor into Iceberg tables.

    The parameters are those of :class:`~.spec.RunSpec` (each documented there), listed here for
    ``default_args`` and templating: ``destination``, ``tables``, ``start_from``, ``stop_at``,
    ``spark_master``, ``spark_conf``, ``warehouse`` and ``archive_uri`` are templated.
    """

    #: seconds between progress lines in the task log (read, in the lake, merging, lag)
    progress_interval: float = 10.0
    # the spec's fields are the operator's attributes (set from it; the templated ones rendered in place)
    destination: str
    tables: Mapping[str, str]
    mysql_conn_id: str
    start_from: Any
    stop_at: Any
    spark_master: str | None
    spark_conf: dict[str, str] | None
    catalog: str
    catalog_conn_id: str | None
    warehouse: str | None
    archive_uri: str | None

    template_fields: Sequence[str] = (
        "destination", "tables", "start_from", "stop_at", "spark_master", "spark_conf", "warehouse",
        "archive_uri",
    )  # fmt: skip
    template_fields_renderers = {"tables": "json", "spark_conf": "json"}
    ui_color = "#dbeafe"

    def __init__(
        self,
        *,
        destination: str,
        tables: Mapping[str, str],
        mysql_conn_id: str = "mysql_default",
        zookeeper_conn_id: str | None = "zookeeper_default",
        meta_dir: str | None = None,
        client_id: int = 1001,
        canal_conn_id: str | None = None,
        server_id: int | None = None,
        start_from: Any = None,
        stop_at: Any = "head",
        columns: str | None = None,
        exclude: str | Sequence[str] | None = None,
        shadow_tables: bool = False,
        batch_size: int = 20_000,
        max_rows_per_commit: int = 1_000_000,
        max_bytes_per_commit: int = 1024 * 1024 * 1024,
        running_timeout: float = 60.0,
        spark_master: str | None = None,
        spark_conf: dict[str, str] | None = None,
        catalog: str = "lake",
        catalog_conn_id: str | None = None,
        warehouse: str | None = None,
        target_options: TargetOptions | Mapping[str, TargetOptions] | None = None,
        on_schema_change: str | Mapping[str, str] | None = None,
        stop_spark: bool = True,
        snapshot: str = "never",
        snapshot_chunk_size: int = 50_000,
        reconnect_timeout: float | None = 300.0,
        reconnect_attempts: int | None = None,
        retention_headroom: float = 0.25,
        on_cascade: str = "warn",
        staging_uri: str | None = None,
        stop_wait: float = 300.0,
        on_unreached: str = "fail",
        archive_uri: str | None = None,
        archive_schema: str | None = None,
        maintenance: Any = True,
        **kwargs: Any,
    ) -> None:
        params = {name: value for name, value in locals().items() if name in FIELDS}
        declare = "outlets" not in kwargs
        super().__init__(**kwargs)
        if declare:  # the lake tables and the alias (see .assets); bad target names fail here
            self.outlets = lake_outlets(tables, self.dag_id, self.task_id)
        spec = RunSpec(**params)  # a bad value fails when the DAG is parsed
        for name in FIELDS:
            setattr(self, name, getattr(spec, name))
        self._source: BinlogSource | CanalSource | None = None

    def spec(self) -> RunSpec:
        """The run's specification from the operator's (rendered) fields, checked."""
        return RunSpec(**{name: getattr(self, name) for name in FIELDS})

    def _lake(self) -> LakeHook:
        from airflow_provider_binlog.hooks.lake import LakeHook

        return LakeHook(
            f"binlog-cdc-{self.destination}", self.spark_master, self.spark_conf, self.catalog,
            self.catalog_conn_id, self.warehouse,
        )  # fmt: skip

    def _spark(self) -> Any:
        """Start (or join) the SparkSession (called by the drain in its committer thread)."""
        return self._lake().get_conn()

    def _catalog_conf(self, warehouse: str | None) -> dict[str, str]:
        """:meth:`~..hooks.lake.LakeHook.catalog_conf` (holding its password: never log it)."""
        return self._lake().catalog_conf(warehouse)

    def _report(self, level: int, line: str) -> None:
        self.log.log(level, "%s", line)

    @property
    def _instance(self) -> CanalInstance | None:
        """The running binlog source's instance (``None`` otherwise)."""
        return getattr(self._source, "instance", None)

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_binlog.operators.metrics import emit_maintenance
        from airflow_provider_binlog.operators.sources import open_source

        spec = self.spec()
        routing = spec.routing()
        ti = context["ti"]
        run_id = str(context.get("run_id") or "manual")
        label = f"{ti.dag_id}/{ti.task_id}/{run_id}/try-{ti.try_number}"
        stop_at = spec.stop_at
        if stop_at == "data_interval_end":
            stop_at = context.get("data_interval_end") or "head"
        settings = spec.settings(run_id, label, ti.try_number, self.progress_interval)
        source = open_source(spec, settings, routing, spark=self._spark, report=self._report)
        self._source = source
        try:
            summary = source.run(stop_at)
        finally:
            self._source = None
            source.close()
        if source.lineage:
            self._lineage_summary = summary
        if "maintenance" in summary:
            emit_maintenance(summary["maintenance"])
        self._asset_events(context, summary)
        return summary

    def _asset_events(self, context: Context, summary: dict[str, Any]) -> None:
        """An asset event per lake table the run committed to, none for the others (:mod:`.assets`)."""
        events = context.get("outlet_events")
        if events is None:  # execute() called outside Airflow's task runner
            return
        self.outlets, missed = emit_events(list(self.outlets), events, summary)
        if missed:
            self.log.warning(
                "no asset event for %s: the task's outlets hold neither their assets nor an alias", missed
            )

    def on_kill(self) -> None:
        """Release the running node without acking anything."""
        source = self._source
        if source is not None:
            source.kill()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The OpenLineage provider's call after a successful run: the source tables and lake tables
        it committed (:func:`.lineage.operator_lineage` of the summary ``execute`` returned, kept on
        the operator: no XCom read), the source named by its connection's host and port."""
        from airflow.sdk import BaseHook

        from airflow_provider_binlog.operators.lineage import operator_lineage, source_namespace

        summary = getattr(self, "_lineage_summary", None)
        conn = BaseHook.get_connection(self.mysql_conn_id)
        return operator_lineage(summary, source_namespace(conn.host, conn.port))
