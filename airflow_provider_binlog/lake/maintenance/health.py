"""A table's state as maintenance decides from it, read from its metadata in one py4j call
(``TableHealth.java``): snapshot counts and ages, the current snapshot's summary totals (data and
delete files, records, deleted rows, bytes) and manifests, the metadata log, the refs and each
destination's newest mark among the current snapshot's ancestors. No data or delete file is read."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.commits import DESTINATION, ORDER_KEY
from airflow_provider_binlog.lake.spark import jvm_helpers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024  # Iceberg's write.target-file-size-bytes


@dataclass(frozen=True, slots=True)
class MarkAt:
    """A destination's newest marked snapshot: its id, how many snapshots back from the current one
    (0: the current one) and its commit time (epoch ms)."""

    snapshot_id: int
    depth: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class RefAt:
    snapshot_id: int
    tag: bool
    max_ref_age_ms: int | None


@dataclass(frozen=True, slots=True)
class Health:
    """See the module docstring; counts are the current snapshot's (0 without one)."""

    format_version: int
    properties: dict[str, str]
    sorted: bool
    snapshots: int
    oldest_ms: int | None
    ancestors: int
    current_id: int | None
    data_files: int
    delete_files: int
    records: int
    deleted_rows: int
    data_bytes: int
    manifests: int
    delete_manifests: int
    metadata_versions: int
    marks: dict[str, MarkAt]
    refs: dict[str, RefAt]

    @property
    def target_file_size(self) -> int:
        try:
            return max(1, int(self.properties.get("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE)))
        except ValueError:
            return DEFAULT_TARGET_FILE_SIZE

    @property
    def needed_files(self) -> int:
        """Data files the table's bytes need at its target file size (at least 1)."""
        return max(1, math.ceil(self.data_bytes / self.target_file_size))

    def as_dict(self) -> dict[str, Any]:
        return {
            "snapshots": self.snapshots,
            "data_files": self.data_files,
            "delete_files": self.delete_files,
            "records": self.records,
            "deleted_rows": self.deleted_rows,
            "bytes": self.data_bytes,
            "manifests": self.manifests,
            "metadata_versions": self.metadata_versions,
        }


def _int(summary: dict[str, str], key: str) -> int:
    try:
        return int(summary.get(key) or 0)
    except ValueError:
        return 0


def read_health(spark: SparkSession, table: Any) -> Health:
    """The :class:`Health` of the JVM Iceberg ``table`` (refreshed first)."""
    found = json.loads(jvm_helpers.helper(spark, table, "TableHealth").health(table, DESTINATION, ORDER_KEY))
    summary = dict(found["summary"] or {})
    current = found["current-id"]
    return Health(
        format_version=int(found["format-version"]),
        properties=dict(found["properties"] or {}),
        sorted=bool(found["sorted"]),
        snapshots=int(found["snapshots"]),
        oldest_ms=None if found["oldest-ms"] is None else int(found["oldest-ms"]),
        ancestors=int(found["ancestors"]),
        current_id=None if current is None else int(current),
        data_files=_int(summary, "total-data-files"),
        delete_files=_int(summary, "total-delete-files"),
        records=_int(summary, "total-records"),
        deleted_rows=_int(summary, "total-position-deletes") + _int(summary, "total-equality-deletes"),
        data_bytes=_int(summary, "total-files-size"),
        manifests=int(found["manifests"]),
        delete_manifests=int(found["delete-manifests"]),
        metadata_versions=int(found["metadata-versions"]),
        marks={
            str(dest): MarkAt(int(m["snapshot-id"]), int(m["depth"]), int(m["timestamp-ms"]))
            for dest, m in (found["marks"] or {}).items()
        },
        refs={
            str(name): RefAt(
                int(r["snapshot-id"]),
                bool(r["tag"]),
                None if r["max-ref-age-ms"] is None else int(r["max-ref-age-ms"]),
            )
            for name, r in (found["refs"] or {}).items()
        },
    )
