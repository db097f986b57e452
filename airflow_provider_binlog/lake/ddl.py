"""Table DDL: creation with the mapped schema, partitioning and write mode; schema evolution.

Every identifier goes through :func:`..sql.quote`; property keys and values are SQL string literals.

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
===============================  ====================================================================

Tables created by earlier versions (``format-version`` 2) keep working as they are; upgrading one
(``ALTER TABLE ... SET TBLPROPERTIES ('format-version' = '3')``) is its owner's choice, as it shuts
out readers older than Iceberg 1.8.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_provider_binlog.lake.errors import LakeError, SchemaEvolutionError
from airflow_provider_binlog.lake.sql import parse_name, quote, quote_parts
from airflow_provider_binlog.lake.types import LakeColumn, widening

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def sql_string(value: str) -> str:
    """A Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _partition_column(text: str, spec: str) -> str:
    parts = parse_name(text.strip())
    if len(parts) != 1:
        raise LakeError(f"invalid partition field {spec!r}: put a column name holding dots in backticks")
    return quote(parts[0])


def partition_field(spec: str) -> str:
    """Turn ``col``, ``days(col)`` or ``bucket(16, col)`` into SQL with the column quoted."""
    spec = spec.strip()
    if spec.endswith(")") and "(" in spec:
        fn, _, inner = spec[:-1].partition("(")
        args = [a.strip() for a in inner.rsplit(",", 1)]
        if not fn.strip().isidentifier():
            raise LakeError(f"invalid partition transform {spec!r}")
        column = _partition_column(args[-1], spec)
        if len(args) == 2:
            if not args[0].isdigit():
                raise LakeError(f"invalid partition transform {spec!r}")
            return f"{fn.strip()}({args[0]}, {column})"
        return f"{fn.strip()}({column})"
    return _partition_column(spec, spec)


DEFAULT_FORMAT_VERSION = "3"


def new_table_properties(
    write_mode: str | None, table_properties: Mapping[str, str] | None
) -> dict[str, str]:
    """The properties of a new table: the defaults in the module docstring, then ``table_properties``.

    :param write_mode: as for :func:`create_table`.
    """
    props = {"format-version": DEFAULT_FORMAT_VERSION}
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
    """``CREATE TABLE IF NOT EXISTS`` (and its namespace) with :func:`table_properties`.

    :param write_mode: ``copy-on-write`` or ``merge-on-read`` for merge, update and delete;
        ``None`` leaves Iceberg's default.
    """
    target = quote_parts(parts)
    if len(parts) >= 2:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quote_parts(parts[:-1])}")
    props = new_table_properties(write_mode, table_properties)
    cols_sql = ", ".join(f"{quote(c.name)} {c.type.sql}" for c in columns)
    partition = ""
    if partition_by:
        partition = " PARTITIONED BY (" + ", ".join(partition_field(p) for p in partition_by) + ")"
    tblprops = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in props.items())
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {target} ({cols_sql}) USING iceberg{partition} "
        f"TBLPROPERTIES ({tblprops})"
    )


def evolve_table(spark: SparkSession, target: str, display: str, columns: Sequence[LakeColumn]) -> None:
    """Add missing columns and apply allowed widenings; raise :class:`SchemaEvolutionError` otherwise.

    :param target: quoted table name.
    :param display: the name for error messages.
    """
    existing = {f.name.lower(): f.dataType.simpleString() for f in spark.table(target).schema.fields}
    for col in columns:
        old = existing.get(col.name.lower())
        if old is None:
            spark.sql(f"ALTER TABLE {target} ADD COLUMN {quote(col.name)} {col.type.sql}")
            continue
        verdict = widening(old, col.type.sql)
        if verdict == "widen":
            spark.sql(f"ALTER TABLE {target} ALTER COLUMN {quote(col.name)} TYPE {col.type.sql}")
        elif verdict == "incompatible":
            raise SchemaEvolutionError(
                f"column {col.name!r} of {display}: the Iceberg type {old} cannot change to {col.type.sql} "
                "(only int->bigint, float->double and wider decimal precision are allowed). Reload the "
                "table: drop it and run with snapshot='when_needed', or load it under a new destination "
                "with snapshot='initial'"
            )
