"""The data and delete files the driver's merge plans and writes, passed to and from the JVM as
Iceberg's own JSON (``ScanTaskParser``, ``ContentFileParser``) instead of one py4j call per field.

Every call through py4j is a round trip to the JVM, and every JVM object it hands back costs one
more when Python drops it. Read field by field, a planned data file with a deletion vector cost
about 25 round trips (its task, file, count, format, delete list and each delete's content,
format, referenced file, location, offset and length, most returning objects), and a new deletion
vector's ``DeleteFile`` about 25 more (a builder call and a dropped object per field). A table
merged many times holds many files, so its commits grew by about 50 round trips per file
(``bench/merge_wide.py``: 224 per commit in the first round, 594 in the eighth). Here a
planned file costs two (its task, then the task's JSON) and a deletion vector's file two (the
JSON read into a tree, then the file built from it). The Puffin file the vectors are blobs of is
written in Python (:mod:`.puffin`), so its blobs' offsets are known without asking the JVM.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.java_classes import java_static

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_LISTS = "org.apache.iceberg.relocated.com.google.common.collect.Lists"


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


def scan(spark: SparkSession, table: Any, snapshot_id: int, row_filter: Any) -> Iterator[tuple[Any, Planned]]:
    """The data files of ``table``'s snapshot ``snapshot_id`` within ``row_filter``: each one's JVM
    ``FileScanTask`` (for its JVM ``DeleteFile``\\ s, ``task.deletes()``) and :class:`Planned`.

    The tasks are listed in the JVM at once (the scan is closed then); a caller that stops early
    asks for no more of them.
    """
    tasks = table.newScan().useSnapshot(snapshot_id).filter(row_filter).planFiles()
    try:
        listed = java_static(spark, _LISTS, "newArrayList")(tasks)
    finally:
        tasks.close()
    to_json = java_static(spark, "org.apache.iceberg.ScanTaskParser", "toJson")
    for i in range(int(listed.size())):
        task = listed.get(i)
        yield task, planned_of(json.loads(to_json(task)))


def deletion_vector_files(
    spark: SparkSession, spec: Any, puffin_size: int, vectors: Sequence[tuple[str, Vector, int]]
) -> list[Any]:
    """The JVM ``DeleteFile`` of each deletion vector in ``vectors``, in order: ``(the data file it
    marks rows of, the vector, how many rows it marks)``, every vector a blob of one Puffin file
    of ``puffin_size`` bytes, in the unpartitioned ``spec`` (a JVM ``PartitionSpec``)."""
    if not vectors:
        return []
    spec_id = int(spec.specId())
    mapper = java_static(spark, "org.apache.iceberg.util.JsonUtil", "mapper")()
    from_json = java_static(spark, "org.apache.iceberg.ContentFileParser", "fromJson")
    files = []
    for data_file, vector, cardinality in vectors:
        text = json.dumps(
            {
                "spec-id": spec_id,
                "content": "POSITION_DELETES",
                "file-path": vector.location,
                "file-format": "PUFFIN",
                "partition": {},
                "file-size-in-bytes": puffin_size,
                "record-count": cardinality,
                "referenced-data-file": data_file,
                "content-offset": vector.offset,
                "content-size-in-bytes": vector.size,
            }
        )
        files.append(from_json(mapper.readTree(text), spec))
    return files
