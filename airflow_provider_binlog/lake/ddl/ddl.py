"""Table DDL of the targets: the lake schema of a target (the union of its source schemas, mapped by
:mod:`.types`, plus the columns of its options), creation with partitioning and write mode, and
schema evolution (new columns added, allowed widenings applied, anything else refused with
:class:`SchemaEvolutionError`). :class:`TargetTables` remembers per merger what it created and
evolved, so a chunk whose schemas did not change runs no DDL. The SQL text is in :mod:`.merge_sql`.

Table properties a new table gets (``table_properties`` wins over each of them):

===============================  ====================================================================
``format-version``               ``3``: a merge-on-read commit marks deleted and updated rows in
                                 deletion vectors, one per data file, each replacing the file's
                                 previous one. With v2 position delete files, each MERGE also read
                                 and rewrote the earlier deletes of the files it touched: of 5
                                 consecutive MERGEs of 70k keys into a 130k-row table, each took
                                 more JVM CPU than the one before (2.5 s rising to 3.8 s), with v3
                                 a flat 1.9-2.5 s (``bench/merge_variants.py``).
                                 Readers need Iceberg 1.8 or later; set ``"2"`` for older ones.
``write.merge.mode``,            the target's ``write_mode`` (``merge-on-read`` by default), for
``write.update.mode``,           MERGE, UPDATE and DELETE; not set for append-only targets.
``write.delete.mode``
``write.metadata.delete-after-``  ``true`` and ``20``: old metadata versions are deleted after each
``commit.enabled``,              commit, 20 kept (bounded history, :mod:`.maintenance`; without them
``write.metadata.previous-``     400 runs left 403 metadata files of 148 MB). Existing tables get them
``versions-max``                 at their next run (:mod:`.maintenance.bounded`).
===============================  ====================================================================

Tables created by earlier versions (``format-version`` 2) keep working as they are; upgrading one
(``ALTER TABLE ... SET TBLPROPERTIES ('format-version' = '3')``) is its owner's choice, as it shuts
out readers older than Iceberg 1.8.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.lake.commits import load_iceberg_table
from airflow_provider_binlog.lake.errors import LakeError, SchemaEvolutionError, TypeMappingError
from airflow_provider_binlog.lake.maintenance.policy import DEFAULT_POLICY
from airflow_provider_binlog.lake.options import TargetOptions, option_columns
from airflow_provider_binlog.lake.spark.table_schema import spark_fields
from airflow_provider_binlog.lake.sql import quote_parts
from airflow_provider_binlog.lake.types import LakeColumn, map_column, widening
from airflow_provider_binlog.lake.write import merge_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_FORMAT_VERSION = "3"


def new_table_properties(
    write_mode: str | None, table_properties: Mapping[str, str] | None
) -> dict[str, str]:
    """The properties of a new table: the defaults in the module docstring, then ``table_properties``.

    :param write_mode: as for :func:`create_table`.
    """
    props = {"format-version": DEFAULT_FORMAT_VERSION, **DEFAULT_POLICY.bounded_properties()}
    if write_mode is not None:
        for kind in ("merge", "update", "delete"):
            props[f"write.{kind}.mode"] = write_mode
    props.update(table_properties or {})
    return props


def create_table(
    spark: SparkSession,
    parts: Sequence[str],
    columns: Sequence[LakeColumn],
    write_mode: str | None,
    partition_by: Sequence[str] = (),
    table_properties: Mapping[str, str] | None = None,
) -> None:
    """``CREATE TABLE IF NOT EXISTS`` (and its namespace) with :func:`new_table_properties`.

    :param write_mode: ``copy-on-write`` or ``merge-on-read`` for merge, update and delete;
        ``None`` leaves Iceberg's default.
    """
    namespace = merge_sql.create_namespace_sql(parts)
    if namespace is not None:
        _created_by_someone(spark, namespace, f"DESCRIBE NAMESPACE {quote_parts(parts[:-1])}")
    props = new_table_properties(write_mode, table_properties)
    table = quote_parts(parts)
    create = merge_sql.create_table_sql(table, columns, partition_by, props)
    _created_by_someone(spark, create, f"DESCRIBE TABLE {table}")


def _duplicate(exc: BaseException) -> bool:
    text = str(exc)
    return any(w in text for w in ("duplicate key", "already exists", "AlreadyExists", "unique constraint"))


def _created_by_someone(spark: SparkSession, create: str, describe: str) -> None:
    """Run ``create`` (a ``CREATE ... IF NOT EXISTS``); when it fails because another writer (another
    process, or a target beside this one) created the same thing at the same moment, which a JDBC
    catalog reports as a duplicate key rather than "already exists", carry on if ``describe`` finds it."""
    try:
        spark.sql(create)
    except Exception as exc:
        try:
            spark.sql(describe)
        except Exception:
            raise exc from None
        if not _duplicate(exc):
            raise


def spark_types(spark: SparkSession, target: str) -> dict[str, str]:
    """Column name (lower case) -> Spark type (``simpleString``) of the existing table ``target``
    (quoted): the schema ``spark.table(target)`` has, which for an Iceberg table is
    ``SparkSchemaUtil.convert`` of the table's schema, read from the loaded table without analysing
    a query (a fresh session's first analysis took 0.2 s: a fifth of a small run's merge)."""
    table = load_iceberg_table(spark, target)
    # Spark's own error names what is missing
    fields = spark.table(target).schema.fields if table is None else spark_fields(spark, table)
    return {f.name.lower(): f.dataType.simpleString() for f in fields}


def evolve_table(spark: SparkSession, target: str, display: str, columns: Sequence[LakeColumn]) -> None:
    """Add missing columns and apply allowed widenings; raise :class:`SchemaEvolutionError` otherwise.

    :param target: quoted table name.
    :param display: the name for error messages.
    """
    existing = spark_types(spark, target)
    for col in columns:
        old = existing.get(col.name.lower())
        if old is None:
            spark.sql(merge_sql.add_column_sql(target, col))
            continue
        verdict = widening(old, col.type.sql)
        if verdict == "widen":
            spark.sql(merge_sql.alter_column_type_sql(target, col))
        elif verdict == "incompatible":
            raise SchemaEvolutionError(
                f"column {col.name!r} of {display}: the Iceberg type {old} cannot change to {col.type.sql} "
                "(only int->bigint, float->double and wider decimal precision are allowed). Reload the "
                "table: drop it and run with snapshot='when_needed', or load it under a new destination "
                "with snapshot='initial'"
            )


def lake_columns(schemas: Iterable[TableSchema], opts: TargetOptions, display: str) -> list[LakeColumn]:
    """The source columns of a target: the union of the columns of ``schemas`` (in the order they
    were met, a later definition of a name winning), mapped to lake types.

    :param display: the target's name, for errors.
    :raises LakeError: no schema at all.
    :raises TypeMappingError: a column has no lake type under ``opts.types``.
    """
    defs: dict[str, ColumnDef] = {}
    table = ""
    for schema in schemas:
        table = schema.qualified_name
        for col in schema.columns:
            defs[col.name] = col
    if not table:
        raise LakeError(f"no table schema on the changes for {display}; cannot map types")
    return [LakeColumn(name, map_column(col, opts.types, table)) for name, col in defs.items()]


class TargetTables:
    """What one merger knows of its target tables' DDL: which exist, and the source columns each
    was last created or evolved for.

    :param spark: the session.
    """

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.existing: set[str] = set()
        """Targets (quoted names) known to exist: created here, or found when their mark was read."""
        self._ensured: dict[str, tuple[tuple[str, str], ...]] = {}

    def ensure(
        self,
        target: str,
        parts: Sequence[str],
        display: str,
        columns: list[LakeColumn],
        opts: TargetOptions,
        where: object = None,
    ) -> None:
        """Create the target with ``columns`` and the option columns if it does not exist, else add
        its missing columns and apply allowed widenings (nothing when ``columns`` did not change).

        :param target: quoted name; ``parts`` its parts, ``display`` its name for errors.
        :param where: where the changes begin (a position), named by a schema error.
        :raises SchemaEvolutionError: a column type that cannot change to the new one.
        """
        signature = tuple((c.name, c.type.sql) for c in columns)
        if self._ensured.get(target) == signature:
            return
        all_columns = columns + option_columns(opts)
        try:
            if target not in self.existing:
                create_table(
                    self.spark,
                    parts,
                    all_columns,
                    write_mode=None if opts.append_only else opts.write_mode,
                    partition_by=opts.partition_by,
                    table_properties=opts.table_properties,
                )
                self.existing.add(target)
                from airflow_provider_binlog.lake.shards.shard_writers import check_created

                check_created(self.spark, target, display, opts)  # another writer created it meanwhile?
            evolve_table(self.spark, target, display, all_columns)
        except (TypeMappingError, SchemaEvolutionError) as exc:
            if where is None:
                raise
            raise type(exc)(f"{exc} (first change at {where})") from None
        self._ensured[target] = signature

    def forget(self, target: str) -> None:
        """The target's schema changed outside :meth:`ensure` (a DDL step): check it again next time."""
        self._ensured.pop(target, None)
