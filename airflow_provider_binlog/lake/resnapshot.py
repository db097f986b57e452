"""The lake side of a table re-snapshot (:mod:`airflow_provider_binlog.canal.snapshot.resnapshot`): a staging
Iceberg table per attempt, then one commit that swaps its rows into the target.

Staging table: beside the target, ``{table}__resnapshot_{attempt}``
(:func:`~..canal.snapshot.resnapshot.staging_parts`; attempt: 12 lowercase hex digits; only names of exactly
that form count as staging tables, and only beside a target this destination re-snapshots), always
quoted in SQL, with the target's options (option columns, partitioning, properties) and the source's
CURRENT columns.
Chunks are appended as for the initial snapshot (:class:`~.snapshot.LakeChunkLoader`), each commit
marked ``(0, chunk, -1, row)`` for the destination, so a chunk committed before its progress write
is known and not loaded twice.

The swap is ONE Iceberg commit carrying the destination's mark at ``S``
(:func:`~..canal.snapshot.resnapshot.mark_key`) and ``binlog-cdc.resnapshot = attempt``:

* the target exists with the staging table's columns (names and types): an overwrite of every row
  (``writeTo(target).overwrite(true)``: delete all + the staging rows, one snapshot);
* else (no target, or its columns differ: a column dropped, renamed, a type the lake cannot widen):
  ``CREATE OR REPLACE TABLE target ... AS SELECT * FROM staging`` with the target's options, an
  atomic replace (schema, partitioning and rows in one commit; the old snapshots stay in the
  table's metadata for time travel).

Readers see the old contents or the new, never a mix.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import OrderKey, RowChange
from airflow_provider_binlog.canal.snapshot.resnapshot import ATTEMPT, STAGING_INFIX, mark_key, staging_parts
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.commits import CommittedMark
from airflow_provider_binlog.lake.ddl.ddl import TargetTables, lake_columns, new_table_properties
from airflow_provider_binlog.lake.options import TargetOptions
from airflow_provider_binlog.lake.shards import shards
from airflow_provider_binlog.lake.shards.shard_swap import shard_swap
from airflow_provider_binlog.lake.snapshot import LakeChunkLoader
from airflow_provider_binlog.lake.spark.session import activate
from airflow_provider_binlog.lake.sql import name_text, parse_name, quote_parts
from airflow_provider_binlog.lake.write import merge_sql
from airflow_provider_binlog.lake.write.runner import table_lock

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RESNAPSHOT = commits.PREFIX + "resnapshot"
"""Snapshot summary property of a swap commit: the re-snapshot attempt it completes."""


def resnapshot_mark(start: BinlogPosition) -> CommittedMark:
    """The committed mark a swap at ``start`` leaves (for a merger's in-memory marks)."""
    return CommittedMark(mark_key(start), start, None, None, -1)


class LakeResnapshot:
    """:class:`~..canal.snapshot.resnapshot.TableSwapper` for one target.

    :param spark: the session.
    :param destination: whose mark the swap writes.
    :param source: ``schema.table``.
    :param target: the lake table (``catalog.namespace.table``, parts in backticks as needed).
    :param options: the target's options.
    :param keep: attempts whose staging tables are never dropped as another attempt's leftovers (the
        lake copies of online schema-change tools in progress, :mod:`..canal.online_copy`).
    """

    def __init__(
        self,
        spark: SparkSession,
        destination: str,
        source: str,
        target: str,
        options: TargetOptions | None = None,
        keep: Collection[str] = (),
    ) -> None:
        self.spark = spark
        self.keep = frozenset(keep)
        self.destination = destination
        self.source = source
        self.parts = parse_name(target)
        if len(self.parts) < 2:
            raise ValueError(f"target {target!r} needs a namespace")
        self.target = quote_parts(self.parts)
        self.options = shards.bind(options or TargetOptions(), destination)
        self._loader: LakeChunkLoader | None = None
        self._loader_attempt = ""

    # -- names -------------------------------------------------------------------------------------

    def staging_parts(self, attempt: str) -> tuple[str, ...]:
        return staging_parts(self.parts, attempt)

    def staging(self, attempt: str) -> str:
        """The quoted name of the attempt's staging table."""
        return quote_parts(self.staging_parts(attempt))

    def leftovers(self, tables: list[str] | None = None) -> list[str]:
        """Attempts whose staging tables exist beside the target.

        :param tables: the names in the target's namespace (:func:`namespace_tables`), when the
            caller listed them already (one listing for several targets).
        """
        if tables is None:
            tables = namespace_tables(self.spark, self.parts[:-1])
        prefix = self.parts[-1] + STAGING_INFIX
        return sorted(
            name[len(prefix) :]
            for name in tables
            if name.startswith(prefix) and ATTEMPT.fullmatch(name[len(prefix) :])
        )

    # -- staging -----------------------------------------------------------------------------------

    def prepare(self, attempt: str, ts: TableSchema) -> None:
        activate(self.spark)
        for other in self.leftovers():
            if other != attempt and other not in self.keep:
                self.drop_staging(other)
        parts = self.staging_parts(attempt)
        display = name_text(parts)
        columns = lake_columns([ts], self.options, display)
        TargetTables(self.spark).ensure(quote_parts(parts), parts, display, columns, self.options)

    def _chunks(self, attempt: str) -> LakeChunkLoader:
        if self._loader is None or self._loader_attempt != attempt:
            if self._loader is not None:
                self._loader.close()
            staging = name_text(self.staging_parts(attempt))
            self._loader = LakeChunkLoader(self.spark, self.destination, {self.source: staging}, self.options)
            self._loader_attempt = attempt
        return self._loader

    def committed_chunk(self, attempt: str) -> int | None:
        return self._chunks(attempt).committed_chunk(self.source)

    def load(self, attempt: str, changes: list[RowChange]) -> None:
        self._chunks(attempt).load(self.source, changes)

    def drop_staging(self, attempt: str) -> None:
        activate(self.spark)
        if self._loader is not None and self._loader_attempt == attempt:
            self._loader.close()
            self._loader = None
        self.spark.sql(f"DROP TABLE IF EXISTS {self.staging(attempt)} PURGE")

    # -- the target ------------------------------------------------------------------------------

    def mark_position(self) -> OrderKey | None:
        mark = commits.read_mark(self.spark, self.target, self.destination)
        return None if mark is None else mark.order_key

    def swapped(self, attempt: str, max_depth: int = 10_000) -> bool:
        table = commits.load_iceberg_table(self.spark, self.target)
        if table is None:
            return False
        table.refresh()
        snap = table.currentSnapshot()
        depth = 0
        while snap is not None and depth < max_depth:
            if snap.summary().get(RESNAPSHOT) == attempt:
                return True
            parent = snap.parentId()
            snap = table.snapshot(parent) if parent is not None else None
            depth += 1
        return False

    def swap(self, attempt: str, start: BinlogPosition) -> None:
        spark = self.spark
        activate(spark)
        staging = self.staging(attempt)
        props = commits.mark_properties(self.destination, mark_key(start), start, None, None)
        props[RESNAPSHOT] = attempt

        def run() -> None:
            rows = spark.table(staging)
            same = commits.load_iceberg_table(spark, self.target) is not None and _columns(
                spark.table(self.target).schema
            ) == _columns(rows.schema)
            if self.options.shard_column and commits.load_iceberg_table(spark, self.target) is not None:
                shard_swap(spark, self.target, staging, self.source, self.options)  # this shard only
            elif same:
                from pyspark.sql import functions as F

                rows.writeTo(self.target).overwrite(F.lit(True))
            else:
                spark.sql(self._replace_sql(staging))

        with table_lock(self.target):
            commits.commit(spark, self.target, props, run, f"a re-snapshot at {start}")

    def _replace_sql(self, staging: str) -> str:
        opts = self.options
        namespace = merge_sql.create_namespace_sql(self.parts)
        if namespace is not None:
            self.spark.sql(namespace)
        partition = ""
        if opts.partition_by:
            partition = (
                " PARTITIONED BY (" + ", ".join(merge_sql.partition_field(p) for p in opts.partition_by) + ")"
            )
        write_mode = None if opts.append_only else opts.write_mode
        props = new_table_properties(write_mode, opts.table_properties)
        text = ", ".join(f"{merge_sql.sql_string(k)} = {merge_sql.sql_string(v)}" for k, v in props.items())
        return (
            f"CREATE OR REPLACE TABLE {self.target} USING iceberg{partition} TBLPROPERTIES ({text}) "
            f"AS SELECT * FROM {staging}"
        )

    def close(self) -> None:
        if self._loader is not None:
            self._loader.close()
            self._loader = None


def namespace_tables(spark: SparkSession, namespace: tuple[str, ...]) -> list[str]:
    """The table names in ``namespace`` (``catalog, db...``; none when it does not exist): one
    catalog listing."""
    activate(spark)
    try:
        rows = spark.sql(f"SHOW TABLES IN {quote_parts(namespace)}").collect()
    except Exception as exc:  # no namespace yet (Spark's words, or Iceberg's own): nothing left over
        if any(
            w in str(exc) for w in ("NAMESPACE_NOT_FOUND", "SCHEMA_NOT_FOUND", "NoSuchNamespaceException")
        ):
            return []
        raise
    return [str(r.tableName) for r in rows]


def _columns(schema: Any) -> list[tuple[str, str]]:
    return [(f.name.lower(), f.dataType.simpleString()) for f in schema.fields]


__all__ = ["RESNAPSHOT", "STAGING_INFIX", "LakeResnapshot", "namespace_tables", "resnapshot_mark"]
