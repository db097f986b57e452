"""The data files the driver's merge plans, read from Iceberg's own JSON of their scan tasks
(``ScanTaskParser``) instead of one py4j call per field.

Every call through py4j is a round trip to the JVM, and every JVM object it hands back costs one
more when Python drops it. Read field by field, a planned data file with a deletion vector cost
about 25 round trips (its task, file, count, format, delete list and each delete's content,
format, referenced file, location, offset and length, most returning objects). A table merged
many times holds many files, so its commits grew by about 50 round trips per file
(``bench/merge_wide.py``: 224 per commit in the first round, 594 in the eighth). Here the whole
plan costs three (:func:`scan`: the tasks, listed by the JVM helper of :mod:`.jvm_helpers`, then
their JSON in one string), whatever the number of files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.spark import jvm_helpers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True, slots=True)
class Vector:
    """A deletion vector: the Puffin file holding it, its blob's offset and length there."""

    location: str
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class Planned:
    """A data file of a scan, as its task's JSON describes it.

    :param location: the data file.
    :param records: its rows (deleted ones included).
    :param parquet: it is a Parquet file.
    :param first_row_id: the lineage id of its first row, if assigned.
    :param vectors: its deletion vectors; ``None`` when one of its delete files is not one.
    """

    location: str
    records: int
    parquet: bool
    first_row_id: int | None
    vectors: tuple[Vector, ...] | None


def planned_of(task: Mapping[str, Any]) -> Planned:
    """The :class:`Planned` of a ``FileScanTask``'s JSON (``ScanTaskParser.toJson``)."""
    data = task["data-file"]
    first = data.get("first-row-id")
    return Planned(
        location=data["file-path"],
        records=int(data["record-count"]),
        parquet=data.get("file-format") == "PARQUET",
        first_row_id=None if first is None else int(first),
        vectors=_vectors(task.get("delete-files") or ()),
    )


def _vectors(deletes: Sequence[Mapping[str, Any]]) -> tuple[Vector, ...] | None:
    """The deletion vectors of a task's delete files; ``None`` when one is not a deletion vector."""
    vectors = []
    for delete in deletes:
        offset, size = delete.get("content-offset"), delete.get("content-size-in-bytes")
        if (
            delete.get("content") != "POSITION_DELETES"
            or delete.get("file-format") != "PUFFIN"
            or delete.get("referenced-data-file") is None
            or offset is None
            or size is None
        ):
            return None
        vectors.append(Vector(delete["file-path"], int(offset), int(size)))
    return tuple(vectors)


def scan(
    spark: SparkSession, table: Any, snapshot_id: int, row_filter: Any, max_rows: int
) -> tuple[Any, list[Planned]]:
    r"""The data files of ``table``'s snapshot ``snapshot_id`` within ``row_filter``: the JVM list of
    their ``FileScanTask``\ s (the delete files a commit replaces are read from it in the JVM:
    :mod:`.jvm_helpers`) and each one's :class:`Planned`, in the list's order, up to the first
    whose files with the ones before it hold more than ``max_rows`` rows. Three py4j calls."""
    helper = jvm_helpers.driver_delta(spark, table)
    tasks = helper.tasks(table, str(snapshot_id), row_filter)
    return tasks, [planned_of(task) for task in json.loads(helper.tasksJson(tasks, str(max_rows)))]
