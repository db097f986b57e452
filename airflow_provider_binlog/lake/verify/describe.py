"""What a run wrote, described for lineage (:mod:`airflow_provider_binlog.operators.lineage`): the
source tables whose changes a commit held, with their columns as the changes carried them, and each
lake table's location and columns as Iceberg has them after the run.

The run's summary carries the result under ``lineage`` (see :func:`describe_run`)::

    {"lake.shop.orders": {"location": "file:/warehouse/shop/orders",
                          "columns": [["id", "int"], ["total", "decimal(12,2)"], ...],
                          "sources": {"shop.orders": [["id", "LONG"], ["total", "NEWDECIMAL(12,2)"]]}}}

(a source's columns are ``None`` for a table the run re-snapshotted without changes of it).

A source column's type is the binlog's own name for it (``MYSQL_TYPE_<name>`` of the TABLE_MAP,
with the DECIMAL precision and scale and ``UNSIGNED``), a lake column's type Spark's name for the
Iceberg type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType
from airflow_provider_binlog.lake.sql import parse_name, quote_parts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_binlog.lake.pending import Pending


def source_type(col: ColumnDef) -> str:
    """``LONG UNSIGNED``, ``NEWDECIMAL(12,2)``, ``VARCHAR``: the column's binlog type."""
    name = col.type.name
    if col.type in (ColumnType.NEWDECIMAL, ColumnType.DECIMAL) and col.precision is not None:
        name += f"({col.precision},{col.scale or 0})"
    return name + " UNSIGNED" if col.unsigned else name


def source_columns(schema: TableSchema) -> list[list[str]]:
    """``[[name, binlog type], ...]`` in table order."""
    return [[c.name, source_type(c)] for c in schema.columns]


def chunk_sources(pending: Pending) -> dict[str, TableSchema]:
    """The source tables (``schema.table``) of the changes one target's chunk holds, each with the
    newest schema met (row changes, TRUNCATEs and DDL statements that carried one)."""
    found: dict[str, TableSchema] = {}
    for schemas in (pending.schemas, *pending.segments):
        for schema in schemas.values():
            found[schema.qualified_name] = schema
    found.update(pending.last_schema)
    return found


def describe_table(spark: SparkSession, target: str) -> dict[str, Any]:
    """``{"location": ..., "columns": [[name, type], ...]}`` of a lake table: the Iceberg table's
    location and the columns of the relation Spark resolves, each type as ``simpleString`` (what
    ``DESCRIBE TABLE`` prints). A table that is not Iceberg's is described by
    :func:`describe_statement`.

    (``DESCRIBE TABLE EXTENDED`` answers the same, but its first call in a JVM costs seconds: code
    no statement of the run loaded before; this costs milliseconds.)

    :param target: the table's name (dotted, parts in backticks where needed).
    """
    from airflow_provider_binlog.lake.commits import load_iceberg_table
    from airflow_provider_binlog.lake.spark.table_schema import spark_fields

    name = quote_parts(parse_name(target))
    table = load_iceberg_table(spark, name)
    if table is None:
        return describe_statement(spark, target)
    columns = [[f.name, f.dataType.simpleString()] for f in spark_fields(spark, table)]
    return {"location": str(table.location()) or None, "columns": columns}


def describe_statement(spark: SparkSession, target: str) -> dict[str, Any]:
    """:func:`describe_table` by ``DESCRIBE TABLE EXTENDED`` (the columns come first, up to an empty
    or ``#`` row; ``Location`` further down)."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {quote_parts(parse_name(target))}").collect()
    columns: list[list[str]] = []
    location = None
    in_columns = True
    for row in rows:
        name, kind = (row[0] or "").strip(), (row[1] or "").strip()
        if in_columns and (not name or name.startswith("#")):
            in_columns = False
        if in_columns:
            columns.append([name, kind])
        elif name == "Location":
            location = kind or None
    return {"location": location, "columns": columns}


def describe_run(
    spark: SparkSession,
    sources: Mapping[str, Mapping[str, TableSchema]],
    loaded: Iterable[tuple[str, str]] = (),
    each: Callable[[Callable[[str], dict[str, Any]], list[str]], list[dict[str, Any]]] | None = None,
) -> dict[str, dict[str, Any]]:
    """The summary's ``lineage`` (see the module docstring).

    :param sources: target -> source -> newest schema, of the changes the run committed.
    :param loaded: ``(source, target)`` pairs the run loaded whole (re-snapshots): their source
        columns are not at hand (``None``).
    :param each: how the lake tables are described: given the describing function and the tables,
        the descriptions in their order (a merger's pool: ``runner.map``); ``None``: one by one.
    """
    found: dict[str, dict[str, list[list[str]] | None]] = {}
    for target, tables in sources.items():
        found.setdefault(target, {}).update({s: source_columns(schema) for s, schema in tables.items()})
    for source, target in loaded:
        found.setdefault(target, {}).setdefault(source, None)
    targets = sorted(found)

    def describe(target: str) -> dict[str, Any]:
        return describe_table(spark, target)

    described = each(describe, targets) if each is not None else [describe(t) for t in targets]
    out: dict[str, dict[str, Any]] = {}
    for target, description in zip(targets, described, strict=True):
        description["sources"] = dict(sorted(found[target].items()))
        out[target] = description
    return out
