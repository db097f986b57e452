"""An Iceberg table's top-level columns read into Python in one py4j call.

Walking a JVM ``Schema`` through py4j costs calls per column (the list's iterator, then each
field's name, id, type and optionality), and py4j deletes every object it handed out with one
more call: about forty per table for a ten-column table, paid at every piece's checks (the driver's
file layout, the new-keys check, the key column's field id). ``SchemaParser.toJson`` gives the
same facts as one string.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.spark.java_classes import java_static

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructField


@dataclass(frozen=True, slots=True)
class Field:
    """A top-level column.

    :param id: its Iceberg field id.
    :param name: its name as the table spells it.
    :param type: a primitive type as Iceberg prints it (``long``, ``decimal(10, 2)``,
        ``timestamptz``...), else the nested type's kind (``struct``, ``list``, ``map``).
    :param optional: it may hold NULL.
    """

    id: int
    name: str
    type: str
    optional: bool


@dataclass(frozen=True, slots=True)
class Columns:
    """A schema's top-level columns, in order."""

    fields: tuple[Field, ...]

    def find(self, name: str) -> Field | None:
        """The column named ``name``, case-insensitively (Spark's resolution); ``None`` if none (a
        nested field is not found here, unlike ``Schema.caseInsensitiveFindField``)."""
        wanted = name.lower()
        return next((f for f in self.fields if f.name.lower() == wanted), None)

    def names(self) -> list[str]:
        return [f.name for f in self.fields]


def parse(text: str) -> Columns:
    """The top-level columns of an Iceberg schema's JSON (the spec's ``struct`` with ``fields``)."""
    loaded = json.loads(text)
    fields = []
    for f in loaded["fields"]:
        kind = f["type"]
        fields.append(
            Field(
                id=int(f["id"]),
                name=str(f["name"]),
                type=kind if isinstance(kind, str) else str(kind["type"]),
                optional=not f["required"],
            )
        )
    return Columns(tuple(fields))


def columns_of(spark: SparkSession, schema: Any) -> Columns:
    """The top-level columns of a JVM ``org.apache.iceberg.Schema`` (a table's ``schema()``)."""
    return parse(str(java_static(spark, "org.apache.iceberg.SchemaParser", "toJson")(schema)))


def spark_fields(spark: SparkSession, table: Any) -> list[StructField]:
    """The columns Spark reads from the JVM Iceberg ``table``: ``spark.table(name).schema.fields``,
    which for an Iceberg table is ``SparkSchemaUtil.convert`` of its schema, read without analysing
    a query (``spark.table`` was 9% of the driver JVM's CPU over a 200-table run: one analysis per
    table for the run's lineage) and as one JSON string, not py4j calls per field."""
    from pyspark.sql.types import StructType

    struct = java_static(spark, "org.apache.iceberg.spark.SparkSchemaUtil", "convert")(table.schema())
    return list(StructType.fromJson(json.loads(struct.json())).fields)
