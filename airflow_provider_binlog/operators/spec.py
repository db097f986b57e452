"""The operator's run specification: every parameter of
:class:`~.binlog_to_spark.BinlogToSparkOperator` in one frozen value, documented and validated here once.

::

    spec = RunSpec(destination="shop", tables={"shop.*": "lake.shop.{table}"}, snapshot="initial")
    spec.settings(run_id, label, try_number)   # the drain's RunSettings
    spec.routing()                              # routes, the table filter and the bound target options

The operator builds one when the DAG is parsed (a bad value fails there; a templated value is
checked once rendered) and one from its rendered fields when the task runs; the sources
(:mod:`.sources`) read nothing else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from airflow_provider_binlog.canal.filter import TableFilter
    from airflow_provider_binlog.canal.routing import Routes
    from airflow_provider_binlog.drain.loop import Limits
    from airflow_provider_binlog.drain.run import RunSettings
    from airflow_provider_binlog.lake.write.merge import TargetOptions


def templated(value: Any) -> bool:
    """A value Airflow renders before the task runs (checked then)."""
    return "{{" in str(value)


class Routing(NamedTuple):
    """The spec's routes, checked: source tables -> targets, the table filter (with ``columns``)
    and the target options bound to the destination and connection (:mod:`..lake.shards.shards`)."""

    routes: Routes
    filter: TableFilter
    target_options: TargetOptions | Mapping[str, TargetOptions] | None


@dataclass(frozen=True)
class RunSpec:
    """What a run of a destination does (the operator's parameters).

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

    destination: str
    tables: Mapping[str, str]
    mysql_conn_id: str = "mysql_default"
    zookeeper_conn_id: str | None = "zookeeper_default"
    meta_dir: str | None = None
    client_id: int = 1001
    canal_conn_id: str | None = None
    server_id: int | None = None
    start_from: Any = None
    stop_at: Any = "head"
    columns: str | None = None
    exclude: str | Sequence[str] | None = None
    shadow_tables: bool = False
    batch_size: int = 20_000
    max_rows_per_commit: int = 1_000_000
    max_bytes_per_commit: int = 1024 * 1024 * 1024
    running_timeout: float = 60.0
    spark_master: str | None = None
    spark_conf: dict[str, str] | None = None
    catalog: str = "lake"
    catalog_conn_id: str | None = None
    warehouse: str | None = None
    target_options: TargetOptions | Mapping[str, TargetOptions] | None = None
    on_schema_change: str | Mapping[str, str] | None = None
    stop_spark: bool = True
    snapshot: str = "never"
    snapshot_chunk_size: int = 50_000
    reconnect_timeout: float | None = 300.0
    reconnect_attempts: int | None = None
    retention_headroom: float = 0.25
    on_cascade: str = "warn"
    staging_uri: str | None = None
    stop_wait: float = 300.0
    on_unreached: str = "fail"
    archive_uri: str | None = None
    archive_schema: str | None = None
    maintenance: Any = True

    def __post_init__(self) -> None:
        """Every check of the parameters, in one place (a templated value is checked once rendered)."""
        from airflow_provider_binlog.canal.positions.interval import UNREACHED_MODES
        from airflow_provider_binlog.canal.sql.operations import Policy
        from airflow_provider_binlog.drain.archive import ARCHIVE_SCHEMAS
        from airflow_provider_binlog.lake.maintenance.policy import policy_of

        if not templated(self.tables):  # sources colliding in one target without a shard column fail here
            from airflow_provider_binlog.lake.shards.shards import check_routes

            check_routes(self.tables, self.target_options)
        Policy.of(self.on_schema_change)
        self.settings("manual", "", 1)  # the drain's own checks (snapshot, on_cascade, retention_headroom)
        if self.on_unreached not in UNREACHED_MODES:
            modes = ", ".join(UNREACHED_MODES)
            raise ValueError(f"on_unreached must be one of {modes}, not {self.on_unreached!r}")
        if self.archive_schema not in (None, *ARCHIVE_SCHEMAS):
            raise ValueError(f"archive_schema must be one of {ARCHIVE_SCHEMAS}, not {self.archive_schema!r}")
        object.__setattr__(self, "maintenance", policy_of(self.maintenance))
        if not templated(self.start_from):
            self._check_start_from()

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

    def limits(self, progress_interval: float = 10.0) -> Limits:
        from airflow_provider_binlog.drain.loop import Limits

        return Limits(self.batch_size, self.max_rows_per_commit, self.max_bytes_per_commit, progress_interval)

    def settings(
        self, run_id: str, label: str, try_number: int, progress_interval: float = 10.0
    ) -> RunSettings:
        """The drain's :class:`~..drain.run.RunSettings` of a run (``staging_uri`` defaults to the
        settings' ``BINLOG_CDC_STAGING_URI``)."""
        from airflow_provider_binlog.drain.interval import IntervalSettings
        from airflow_provider_binlog.drain.run import RunSettings
        from airflow_provider_binlog.settings import current

        return RunSettings(
            run_id=run_id, label=label, try_number=try_number, limits=self.limits(progress_interval),
            running_timeout=self.running_timeout, snapshot=self.snapshot,
            snapshot_chunk_size=self.snapshot_chunk_size, stop_spark=self.stop_spark,
            reconnect_timeout=self.reconnect_timeout, reconnect_attempts=self.reconnect_attempts,
            retention_headroom=self.retention_headroom, on_cascade=self.on_cascade,
            staging_uri=self.staging_uri or current().staging_uri,
            interval=IntervalSettings(wait=self.stop_wait, on_unreached=self.on_unreached),
            maintenance=self.maintenance,
        )  # fmt: skip

    def routing(self) -> Routing:
        """The routes (every target name checked), the filter and the target options bound to the
        destination and connection (from here on the shard values know them)."""
        from airflow_provider_binlog.canal.routing import Routes
        from airflow_provider_binlog.lake.shards.shards import bind_options, check_routes
        from airflow_provider_binlog.lake.sql import check_target

        routes = Routes(dict(self.tables), exclude=self.exclude, shadow_tables=self.shadow_tables)
        for pattern, name in routes.routes.items():
            check_target(name, pattern)
        check_routes(routes.routes, self.target_options)
        options = bind_options(self.target_options, self.destination, self.mysql_conn_id)
        return Routing(routes, routes.filter(self.columns), options)


FIELDS = tuple(f.name for f in dataclasses.fields(RunSpec))
"""The parameters, in the operator's order."""
