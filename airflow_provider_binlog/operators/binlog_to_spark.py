"""BinlogToSparkOperator: drain a destination's binlog changes into Iceberg tables with Spark.

The run itself (running node, snapshot, stop point, reconciliation, the exactly-once loop, the
run record) is :class:`~airflow_provider_binlog.drain.run.Drain`; this operator turns its
parameters and connections into the drain's configuration, takes the stop point from the task
context, declares the target tables as assets (an event for each table a run committed to:
:mod:`.assets`), returns the drain's summary as XCom and releases
the destination in :meth:`~BinlogToSparkOperator.on_kill`.

Exactly once: the cursor moves only after Spark committed; the lake remembers, per table and
destination, the last change it holds, so a retry after a crash between commit and ack skips
what is already there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_binlog.drain.snapshot import SNAPSHOT_MODES
from airflow_provider_binlog.drain.source import CASCADE_MODES
from airflow_provider_binlog.operators.assets import emit_events, lake_outlets
from airflow_provider_binlog.settings import current as switches
from airflow_provider_binlog.settings import env_name

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_binlog.canal.instance import CanalInstance
    from airflow_provider_binlog.lake.write.merge import TargetOptions

SPARK_MASTER_ENV = env_name("spark_master")
STAGING_URI_ENV = env_name("staging_uri")


class BinlogToSparkOperator(BaseOperator):
    """Merge the binlog changes of ``tables`` since the destination's cursor into Iceberg tables.

    :param destination: the subscription (its cursor lives under this name in the meta store).
    :param tables: source ``schema.table`` (globs allowed) -> target ``catalog.namespace.table``
        (``{schema}``/``{table}`` allowed), e.g. ``{"shop.*": "lake.shop.{table}"}``.
    :param mysql_conn_id: the source connection.
    :param zookeeper_conn_id: the meta store / HA connection; ``None`` for a local file store.
    :param meta_dir: file meta store directory (without ZooKeeper).
    :param client_id: canal client id.
    :param canal_conn_id: a ``canal`` connection: read the destination from that canal server instead of
        the MySQL binlog (:mod:`.canal_source`; the commit-then-ack handling is the same).
    :param server_id: replica server id to register with (default: the connection's, else random).
    :param start_from: where to start when the destination has no cursor yet: ``file:pos``,
        ``gtid:SET``, an ISO timestamp, or a recorded run's summary (see :mod:`..canal.positions.points`).
        With a cursor, the cursor wins (so a retried or resumed backfill continues where it was).
        Not allowed with ``snapshot`` other than ``never`` (the snapshot decides the start).
    :param stop_at: ``head`` (the server's head at task start), ``data_interval_end``, ``file:pos``,
        ``gtid:SET`` or a timestamp. A timestamp (``data_interval_end`` is one) ends an interval
        reproducibly: the run stops before the first transaction committed at or after it, and
        records both ends in the summary's ``interval`` and the commits' snapshot properties
        (:mod:`..drain.interval`).
    :param stop_wait: seconds a timestamp stop waits at most while the server has not reached it
        (no transaction committed at or after it yet and the server's clock before it).
    :param on_unreached: past ``stop_wait``: ``fail`` (default; a retry tries again) or ``head``
        (stop at the head, saying so; a rerun of the interval may then stop later).
    :param archive_uri: archived binlog files (a directory or a ``pyarrow.fs`` URI) to read where
        the server no longer has a file; the run continues on the server where the archive ends
        and fails naming any gap (:mod:`..drain.archive`).
    :param archive_schema: where column names of archived positions come from: ``binlog``
        (``binlog_row_metadata=FULL``) or ``information_schema`` (today's tables); required when
        a destination starts in the archive.
    :param columns: canal column filter (``schema.table:col1/col2,...``): a listed table's lake table
        holds those columns only; the list must hold the table's primary-key columns.
    :param exclude: tables never read (canal's black list): globs like the keys of ``tables``
        (``shop.tmp_*``, ``shop.`z.w```) or canal regexes (``shop\\.tmp_.*``), comma-separated or a
        list (see :mod:`..canal.filter`). Also the way past a table whose name cannot be a lake table.
    :param shadow_tables: glob routes take tables named like the shadow tables of gh-ost and
        pt-online-schema-change too (``_t_gho``, ``_t_new``, ``_t_old``...; by default they are left
        out, and each run start warns naming every existing table left out so): give the sensor the
        same (see :mod:`..canal.routing`).
    :param batch_size: entries per batch taken from the store.
    :param max_rows_per_commit: row images a Spark commit holds: one per key a chunk touches (its
        changes are folded to the last per key as they are read), so it bounds memory, not the
        changes a commit applies.
    :param max_bytes_per_commit: the estimated bytes of those row images (bounds memory). The
        store's read-ahead (changes read but not yet folded) is bounded by a quarter of both.
    :param running_timeout: seconds to wait for another consumer of the destination.
    :param spark_master: Spark master (default ``$BINLOG_CDC_SPARK_MASTER`` or ``local[*]``).
    :param spark_conf: more Spark configuration (cluster, catalog, jars.packages...).
    :param catalog: the Iceberg catalog name used in targets.
    :param catalog_conn_id: an Airflow connection that makes ``catalog`` an Iceberg JDBC catalog
        (:func:`..lake.spark.session.jdbc_catalog_conf`), read when the task runs (its password never
        reaches a rendered field, a log line or an XCom): type ``postgres`` (host, port, schema =
        database, login, password) or ``jdbc`` (host = ``jdbc:postgresql://...``); extras
        ``warehouse`` (default: ``warehouse``) and ``catalog_properties`` (more catalog properties).
        Its settings win over the same keys in ``spark_conf``.
    :param warehouse: warehouse of the default Hadoop catalog (default ``$BINLOG_CDC_WAREHOUSE``).
    :param target_options: :class:`~..lake.write.merge.TargetOptions` for all targets or per target.
    :param on_schema_change: what a DDL statement on a source table does to its lake table:
        ``evolve`` / ``resnapshot`` / ``fail`` for every class of operation, or a mapping from class
        (``add_column``, ``drop_column``, ``rename_column``, ``modify_column``, ``drop_table``,
        ``recreate_table``, ``partition``, ``rename_table``, ``unknown``) to one of them; ``None``:
        the defaults (see docs/operations.md, "Source operations and the lake"). A target's
        ``TargetOptions(on_schema_change=...)`` wins over it.
    :param stop_spark: stop the SparkSession at the end (off when the caller owns the session).
    :param snapshot: ``never`` (default: only the binlog), ``initial`` (first load the tables' existing
        rows, chunk by chunk, then continue from the binlog; see :mod:`..canal.snapshot.initial`; a killed
        snapshot resumes; until a snapshot is done, a table this destination never loaded is
        snapshotted even when a cursor exists, e.g. the start a sensor pinned) or ``when_needed``
        (also snapshot tables added later and, when the cursor's binlog was purged, every table
        again from a new start).
    :param snapshot_chunk_size: rows per snapshot chunk.
    :param reconnect_timeout: seconds the source may stay unreachable mid-run (the reader reconnects
        with backoff meanwhile) before the task fails with ``SourceUnavailableError`` naming the
        source, the last error and the position; the cursor stays where the lake is. ``None``:
        reconnect for ever.
    :param reconnect_attempts: also fail after this many reconnect attempts in a row (``None``: no count).
    :param retention_headroom: warn in the task log when the cursor's binlog file may be purged by
        the server's retention (``binlog_expire_logs_seconds``) within this fraction of the
        retention (default a quarter); the numbers are in the summary's ``retention``.
    :param on_cascade: what a routed table that is the child of an ``ON DELETE/UPDATE CASCADE`` or
        ``SET NULL`` foreign key does (the server does not write those changes to the ROW binlog, so
        its lake table misses them): ``warn`` (default; listed in the summary's ``cascades``),
        ``fail`` (the task stops before reading) or ``ignore``.
    :param staging_uri: where staged Parquet goes on its way to the executors: a path or URI on a
        filesystem or object store they read too (``local``: the Airflow worker's temporary
        directory, for ``local[*]`` only). Default ``$BINLOG_CDC_STAGING_URI``, else
        ``spark_conf["spark.binlog_cdc.staging_uri"]``, else ``<warehouse>/_binlog_cdc_staging``.
        Cleaned after each statement and at the end; a later run removes what a killed one left.
    :param maintenance: lake maintenance of the run's tables (:mod:`..lake.maintenance`): ``True``
        (default: :meth:`~..lake.maintenance.MaintenancePolicy.light`: bounded metadata, expiry and
        compaction when the table's metadata says they are due, a metadata read per table
        otherwise), a ``MaintenancePolicy``, or ``False`` (none). What ran is in the summary's
        ``maintenance``.
    """

    #: seconds between progress lines in the task log (read, in the lake, merging, lag)
    progress_interval: float = 10.0

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
        declare = "outlets" not in kwargs
        super().__init__(**kwargs)
        if declare:  # the lake tables and the alias (see .assets); bad target names fail here
            self.outlets = lake_outlets(tables, self.dag_id, self.task_id)
        self.destination = destination
        self.tables = tables
        self.mysql_conn_id = mysql_conn_id
        self.zookeeper_conn_id = zookeeper_conn_id
        self.meta_dir = meta_dir
        self.client_id = client_id
        self.canal_conn_id = canal_conn_id
        self.server_id = server_id
        self.start_from = start_from
        self.stop_at = stop_at
        self.columns = columns
        self.exclude = exclude
        self.shadow_tables = shadow_tables
        self.batch_size = batch_size
        self.max_rows_per_commit = max_rows_per_commit
        self.max_bytes_per_commit = max_bytes_per_commit
        self.running_timeout = running_timeout
        self.spark_master = spark_master
        self.spark_conf = spark_conf
        self.catalog = catalog
        self.catalog_conn_id = catalog_conn_id
        self.warehouse = warehouse
        self.target_options = target_options
        if "{{" not in str(tables):  # sources colliding in one target without a shard column fail here
            from airflow_provider_binlog.lake.shards.shards import check_routes

            check_routes(tables, target_options)
        from airflow_provider_binlog.canal.sql.operations import Policy

        Policy.of(on_schema_change)  # a bad value fails when the DAG is parsed
        self.on_schema_change = on_schema_change
        self.stop_spark = stop_spark
        if snapshot not in SNAPSHOT_MODES:
            raise ValueError(f"snapshot must be one of {', '.join(SNAPSHOT_MODES)}, not {snapshot!r}")
        self.snapshot = snapshot
        self.snapshot_chunk_size = snapshot_chunk_size
        self.reconnect_timeout = reconnect_timeout
        self.reconnect_attempts = reconnect_attempts
        self.retention_headroom = retention_headroom
        if on_cascade not in CASCADE_MODES:
            raise ValueError(f"on_cascade must be one of {', '.join(CASCADE_MODES)}, not {on_cascade!r}")
        self.on_cascade = on_cascade
        self.staging_uri = staging_uri
        from airflow_provider_binlog.canal.positions.interval import UNREACHED_MODES

        if on_unreached not in UNREACHED_MODES:
            modes = ", ".join(UNREACHED_MODES)
            raise ValueError(f"on_unreached must be one of {modes}, not {on_unreached!r}")
        self.stop_wait = stop_wait
        self.on_unreached = on_unreached
        from airflow_provider_binlog.drain.archive import ARCHIVE_SCHEMAS

        if archive_schema not in (None, *ARCHIVE_SCHEMAS):
            raise ValueError(f"archive_schema must be one of {ARCHIVE_SCHEMAS}, not {archive_schema!r}")
        self.archive_uri = archive_uri
        self.archive_schema = archive_schema
        from airflow_provider_binlog.lake.maintenance.policy import policy_of

        self.maintenance = policy_of(maintenance)  # a bad value fails when the DAG is parsed
        self._instance: CanalInstance | None = None
        if "{{" not in str(start_from):  # a template is checked once rendered, in execute
            self._check_start_from()

    # ------------------------------------------------------------------ pieces

    def _spark(self) -> Any:
        """Start (or join) the SparkSession (called by the drain in its committer thread)."""
        from airflow_provider_binlog.lake.spark.session import create_session

        warehouse = self.warehouse or switches().warehouse
        conf = dict(self.spark_conf or {})
        if self.catalog_conn_id:
            conf.update(self._catalog_conf(warehouse))
        return create_session(
            app_name=f"binlog-cdc-{self.destination}",
            master=self.spark_master or switches().spark_master,
            warehouse=warehouse,
            catalog=self.catalog,
            conf=conf,
        )

    def _catalog_conf(self, warehouse: str | None) -> dict[str, str]:
        """The JDBC catalog settings of ``catalog_conn_id`` (holding its password: never log them)."""
        from airflow.sdk import BaseHook

        from airflow_provider_binlog.lake.spark.session import default_warehouse, jdbc_catalog_conf, jdbc_uri

        conn_id = str(self.catalog_conn_id)
        conn = BaseHook.get_connection(conn_id)
        extra = conn.extra_dejson
        host = conn.host or ""
        try:
            if conn.conn_type == "jdbc" or host.startswith("jdbc:"):
                uri = host
            elif conn.conn_type in ("postgres", "postgresql"):
                uri = jdbc_uri(host, conn.port, conn.schema or "")
            else:
                raise ValueError(f"its type is {conn.conn_type!r}, not 'postgres' or 'jdbc'")
            return jdbc_catalog_conf(
                uri, conn.login or "", conn.password or "", extra.get("warehouse") or warehouse
                or default_warehouse(), self.catalog, dict(extra.get("catalog_properties") or {}),
            )  # fmt: skip
        except ValueError as exc:
            raise ValueError(f"catalog connection {conn_id!r}: {exc}") from None

    def _check_start_from(self) -> None:
        """``start_from`` with a snapshot is refused: both would decide where a destination without a
        cursor starts, and a snapshot must hand over to the binlog at its own consistent position
        (an earlier start only re-reads, a later one loses changes). With a cursor both are unused."""
        if self.snapshot != "never" and self.start_from not in (None, ""):
            raise ValueError(
                f"destination {self.destination!r}: start_from={self.start_from!r} and "
                f"snapshot={self.snapshot!r} both say where a destination without a cursor starts; the "
                "snapshot continues from the binlog at its own consistent position. Remove start_from to "
                "take the snapshot, or use snapshot='never' to read the binlog from start_from without "
                "loading the existing rows"
            )

    # ------------------------------------------------------------------ execute

    def _report(self, level: int, line: str) -> None:
        self.log.log(level, "%s", line)

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_binlog.canal.positions.points import parse_point
        from airflow_provider_binlog.canal.routing import Routes
        from airflow_provider_binlog.drain import Drain, Limits, RunSettings, run_fields
        from airflow_provider_binlog.drain.interval import IntervalSettings
        from airflow_provider_binlog.hooks.binlog import BinlogHook
        from airflow_provider_binlog.lake.shards.shards import bind_options, check_routes
        from airflow_provider_binlog.lake.sql import check_target
        from airflow_provider_binlog.operators.metrics import RunMetrics, emit_headroom

        self._check_start_from()
        routes = Routes(dict(self.tables), exclude=self.exclude, shadow_tables=self.shadow_tables)
        for pattern, name in routes.routes.items():
            check_target(name, pattern)
        check_routes(routes.routes, self.target_options)
        # the shard values know the destination and connection from here on (lake.shards.shards)
        target_options = bind_options(self.target_options, self.destination, self.mysql_conn_id)
        ti = context["ti"]
        run_id = str(context.get("run_id") or "manual")
        label = f"{ti.dag_id}/{ti.task_id}/{run_id}/try-{ti.try_number}"
        stop_at = self.stop_at
        if stop_at == "data_interval_end":
            stop_at = context.get("data_interval_end") or "head"
        limits = Limits(
            self.batch_size, self.max_rows_per_commit, self.max_bytes_per_commit, self.progress_interval
        )
        settings = RunSettings(
            run_id=run_id, label=label, try_number=ti.try_number, limits=limits,
            running_timeout=self.running_timeout, snapshot=self.snapshot,
            snapshot_chunk_size=self.snapshot_chunk_size, stop_spark=self.stop_spark,
            reconnect_timeout=self.reconnect_timeout, reconnect_attempts=self.reconnect_attempts,
            retention_headroom=self.retention_headroom, on_cascade=self.on_cascade,
            staging_uri=self.staging_uri or switches().staging_uri,
            interval=IntervalSettings(wait=self.stop_wait, on_unreached=self.on_unreached),
            maintenance=self.maintenance,
        )  # fmt: skip
        if self.canal_conn_id:  # a canal server instead of the binlog (operators/canal_source.py)
            from airflow_provider_binlog.operators.canal_source import run_from_canal

            return run_from_canal(self, context, routes, target_options, limits)
        hook = BinlogHook(self.mysql_conn_id, self.zookeeper_conn_id, self.meta_dir, self.server_id)
        try:
            start_spec = parse_point(self.start_from) if self.start_from not in (None, "") else None
            instance = hook.instance(
                self.destination, routes.filter(self.columns), self.client_id, start_spec, label,
                **run_fields(routes, settings, target_options),
            )  # fmt: skip
            self._instance = instance
            if self.archive_uri:
                from airflow_provider_binlog.drain.archive import attach_archive

                attach_archive(instance, self.archive_uri, self.archive_schema, self._report)
            drain = Drain(
                instance, routes, settings, spark=self._spark, connect=hook.source_connection,
                target_options=target_options, on_schema_change=self.on_schema_change,
                report=self._report, observer=RunMetrics(self.destination),
            )  # fmt: skip
            try:
                summary = self._lineage_summary = drain.run(stop_at)
                if "maintenance" in summary:
                    from airflow_provider_binlog.operators.metrics import emit_maintenance

                    emit_maintenance(summary["maintenance"])
                self._asset_events(context, summary)
                return summary
            finally:  # the run start's retention headroom as a gauge, the run failed or not
                emit_headroom(self.destination, drain.retention)
        finally:
            self._instance = None
            hook.close()

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
        instance = self._instance
        if instance is not None:
            instance.close()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The OpenLineage provider's call after a successful run: the source tables and lake tables
        it committed (:func:`.lineage.operator_lineage` of the summary ``execute`` returned, kept on
        the operator: no XCom read), the source named by its connection's host and port."""
        from airflow.sdk import BaseHook

        from airflow_provider_binlog.operators.lineage import operator_lineage, source_namespace

        summary = getattr(self, "_lineage_summary", None)
        conn = BaseHook.get_connection(self.mysql_conn_id)
        return operator_lineage(summary, source_namespace(conn.host, conn.port))
