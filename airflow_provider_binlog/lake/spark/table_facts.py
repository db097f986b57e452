"""What the driver's merge and inserts check of an Iceberg table, read in one py4j call (issue #20).

Whether the driver may write a table's data file (:func:`.file_append.layout`) and merge its
pieces (:func:`.position_delta.applicable`) depends on the table's partition spec, sort order,
properties, schema, format version and current snapshot. Asked one by one through py4j (the
properties key by key, each spec and order object handed back and dropped), that was about 25
round trips per table and commit; the JVM helper (:func:`.jvm_helpers.driver_delta`) returns them
as one JSON text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.spark import jvm_helpers
from airflow_provider_binlog.lake.spark.table_schema import Columns, parse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True, slots=True)
class TableFacts:
    """A loaded table's state, as the table object holds it (not refreshed).

    :param root: its location without a trailing slash (:func:`.file_append.table_root`).
    :param unpartitioned: its partition spec has no field.
    :param unsorted: its sort order has no field.
    :param properties: its table properties.
    :param columns: its schema's top-level columns.
    :param format_version: its format version.
    :param snapshot_id: its current snapshot's id (``None``: no snapshot yet).
    """

    root: str
    unpartitioned: bool
    unsorted: bool
    properties: dict[str, str]
    columns: Columns
    format_version: int
    snapshot_id: int | None


def table_facts(spark: SparkSession, table: Any) -> TableFacts:
    """The :class:`TableFacts` of the JVM Iceberg ``table``."""
    loaded = json.loads(jvm_helpers.driver_delta(spark, table).facts(table))
    snapshot = loaded["snapshot-id"]
    return TableFacts(
        root=str(loaded["location"]).rstrip("/"),
        unpartitioned=bool(loaded["unpartitioned"]),
        unsorted=bool(loaded["unsorted"]),
        properties=dict(loaded["properties"] or {}),
        columns=parse(loaded["schema"]),
        format_version=int(loaded["format-version"]),
        snapshot_id=None if snapshot is None else int(snapshot),
    )
