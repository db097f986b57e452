"""Staging: rows of one target become typed Arrow chunks in a Parquet file that Spark reads.

Parquet through ``spark.read.parquet`` is about 3x faster than ``createDataFrame`` on Python tuples
(STACK.md) and keeps the driver's memory to one chunk of Arrow arrays at a time.

The staging root must be readable by the executors: a local directory is enough for ``local[*]`` and
for a cluster on the same machine; a real cluster needs a shared URI (``hdfs://``, ``s3://``...),
written through ``pyarrow.fs``.

:class:`StagedViews` puts a staged file in front of Spark as a temporary view (what a statement
reads) and removes both once the statement ran, or after a failure whatever is left.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.types import LakeColumn, LakeType, arrow_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_CHUNK_ROWS = 65_536


def _chunks(rows: Iterable[Sequence[Any]], size: int) -> Iterator[list[Sequence[Any]]]:
    it = iter(rows)
    while True:
        chunk = list(islice(it, size))
        if not chunk:
            return
        yield chunk


def to_arrow(columns: Sequence[LakeColumn], rows: Sequence[Sequence[Any]]) -> pa.Table:
    """Build one Arrow table from row tuples in column order (decoder values, ``None`` for NULL).

    :raises LakeError: naming the column when a value does not fit its type.
    """
    return from_columns(columns, [[r[i] for r in rows] for i in range(len(columns))])


def from_columns(columns: Sequence[LakeColumn], values: Sequence[list[Any]]) -> pa.Table:
    """Build one Arrow table from one list of values per column (all of one length).

    :raises LakeError: naming the column when a value does not fit its type.
    """
    arrays = []
    for col, column_values in zip(columns, values, strict=True):
        try:
            arrays.append(_array(col.type, column_values))
        except _ARROW_ERRORS as exc:
            raise LakeError(f"column {col.name!r}: value does not fit {col.type.sql}: {exc}") from exc
    return pa.Table.from_arrays(arrays, schema=arrow_schema(columns))


_ARROW_ERRORS = (pa.ArrowException, TypeError, ValueError, OverflowError)


def _array(lake_type: LakeType, values: list[Any]) -> pa.Array:
    conv = lake_type.convert
    if conv is not None and lake_type.arrow_native:
        with contextlib.suppress(*_ARROW_ERRORS):
            return pa.array(values, type=lake_type.arrow)
    if conv is not None:
        values = [None if v is None else conv(v) for v in values]
    return pa.array(values, type=lake_type.arrow)


class StagingArea:
    """A private directory (local path or URI) holding the staged files of one merger.

    :param root: where to create it; a local temporary directory when ``None``.
    """

    def __init__(self, root: str | None = None) -> None:
        self._owned_tmp: str | None = None
        if root is None:
            self._owned_tmp = tempfile.mkdtemp(prefix="binlog-cdc-stage-")
            root = self._owned_tmp
        if "://" in root:
            self.fs, base = pafs.FileSystem.from_uri(root)
            self._uri_prefix = root[: len(root) - len(base)] if root.endswith(base) else ""
        else:
            self.fs = pafs.LocalFileSystem()
            base = os.path.abspath(root)
            self._uri_prefix = "file://"
        self.base = f"{base.rstrip('/')}/{uuid.uuid4().hex}"
        self.fs.create_dir(self.base, recursive=True)

    def uri(self, path: str) -> str:
        """The URI Spark reads ``path`` (a path inside this area's filesystem) through."""
        return f"{self._uri_prefix}{path}"

    def write(
        self,
        name: str,
        columns: Sequence[LakeColumn],
        rows: Iterable[Sequence[Any]],
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
    ) -> tuple[str, int]:
        """Write rows to ``<area>/<name>/part-0.parquet`` in chunks; return (directory URI, row count)."""
        chunks = (to_arrow(columns, chunk) for chunk in _chunks(rows, chunk_rows))
        return self.write_tables(name, columns, chunks)

    def write_columns(
        self, name: str, columns: Sequence[LakeColumn], chunks: Iterable[Sequence[list[Any]]]
    ) -> tuple[str, int]:
        """Like :meth:`write`, from chunks given as one list of values per column."""
        return self.write_tables(name, columns, (from_columns(columns, chunk) for chunk in chunks))

    def write_tables(
        self, name: str, columns: Sequence[LakeColumn], tables: Iterable[pa.Table]
    ) -> tuple[str, int]:
        """Write Arrow tables of ``columns`` to ``<area>/<name>/part-0.parquet``; return (directory
        URI, row count)."""
        directory = f"{self.base}/{name}"
        self.fs.create_dir(directory, recursive=True)
        schema = arrow_schema(columns)
        count = 0
        with (
            self.fs.open_output_stream(f"{directory}/part-0.parquet") as sink,
            pq.ParquetWriter(sink, schema, compression="snappy") as writer,
        ):
            for table in tables:
                writer.write_table(table)
                count += table.num_rows
            if count == 0:
                writer.write_table(schema.empty_table())
        return self.uri(directory), count

    def remove(self, name: str) -> None:
        """Delete one staged directory (best effort)."""
        with contextlib.suppress(OSError, pa.ArrowException):
            self.fs.delete_dir(f"{self.base}/{name}")

    def close(self) -> None:
        """Delete everything this area staged."""
        with contextlib.suppress(OSError, pa.ArrowException):
            self.fs.delete_dir(self.base)
        if self._owned_tmp is not None:
            shutil.rmtree(self._owned_tmp, ignore_errors=True)


class StagedViews:
    """Staged files of one merger, each read by Spark as a temporary view until it is dropped.

    :param spark: the session the views live in.
    :param area: where the files are written.
    :param timings: ``timings["stage"]`` grows by the seconds spent writing files (rows -> Arrow ->
        Parquet); Spark's part is not counted.
    """

    def __init__(self, spark: SparkSession, area: StagingArea, timings: dict[str, float]) -> None:
        self.spark = spark
        self.area = area
        self.timings = timings
        self._live: list[tuple[str, str]] = []  # (view, staged name) not dropped yet
        self._lock = threading.Lock()  # views are dropped by the threads that run the statements

    def stage(
        self,
        columns: Sequence[LakeColumn],
        rows: Iterable[Sequence[Any]] = (),
        column_chunks: Iterable[Sequence[list[Any]]] | None = None,
    ) -> tuple[str, str, int]:
        """Stage ``rows`` (tuples), or ``column_chunks`` (lists of values per column), as a temp
        view; return ``(view, staged name, row count)``."""
        name = uuid.uuid4().hex
        t0 = time.perf_counter()
        if column_chunks is not None:
            uri, count = self.area.write_columns(name, columns, column_chunks)
        else:
            uri, count = self.area.write(name, columns, rows)
        self.timings["stage"] += time.perf_counter() - t0
        view = f"binlog_cdc_stage_{name}"
        with self._lock:
            self._live.append((view, name))
        # pyarrow writes proleptic Gregorian dates; tell Spark not to rebase (or refuse) ancient ones
        reader = self.spark.read.option("datetimeRebaseMode", "CORRECTED").option(
            "int96RebaseMode", "CORRECTED"
        )
        reader.parquet(uri).createOrReplaceTempView(view)
        return view, name, count

    def drop(self, view: str, name: str) -> None:
        """Drop one view and its file."""
        with self._lock:
            self._live.remove((view, name))
        self.spark.catalog.dropTempView(view)
        self.area.remove(name)

    def drop_all(self) -> None:
        """Drop what is left staged (best effort: after a failure, which is what the caller must see)."""
        with self._lock:
            live = list(self._live)
        for view, name in live:
            with contextlib.suppress(Exception):
                self.drop(view, name)
