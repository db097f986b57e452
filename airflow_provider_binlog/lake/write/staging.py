"""Staging: rows of one target become typed Arrow chunks in a Parquet file that Spark reads.

Parquet through ``spark.read.parquet`` is about 3x faster than ``createDataFrame`` on Python tuples
(STACK.md) and keeps the driver's memory to one chunk of Arrow arrays at a time.

The files are written by the driver (the Airflow worker) and read by the executors, so they must be
where both see them. Where they go (:func:`staging_root`, first match wins):

1. the merger's ``staging_root`` argument (the drain's ``RunSettings.staging_uri``);
2. the session's ``spark.binlog_cdc.staging_uri`` (:data:`STAGING_CONF`: ``spark_conf`` of the
   operator, or set by the drain for the run);
3. ``<warehouse of the targets' catalog>/_binlog_cdc_staging``: the filesystem or object store the
   catalog already writes to, which every executor reaches;
4. for a local master without a warehouse setting (a catalog that brings its own, such as REST): a
   local temporary directory; any other master without one of the above fails, naming the setting.

The value ``local`` means the driver's temporary directory (only right when the executors run on
the driver's host, e.g. ``local[*]``). Any path or URI that ``pyarrow.fs.FileSystem.from_uri``
understands works (a local path, ``file://``, ``hdfs://``, ``s3://``, ``gs://``, ``abfs://``);
Spark must read the same URI (for object stores: the Hadoop connector of that scheme on the cluster).

Layout and cleaning::

    <root>/<destination>/<creation ms, 13 digits>-<32 hex>/   one merger's area (StagingArea)
        <32 hex>/part-0.parquet                               one staged piece, deleted once its
                                                              statement ran (StagedViews.drop)

An area is removed when its merger closes (after the run, also after a failure). An area a killed
process left behind is removed by the destination's next run (:func:`clean_orphans`, called by the
drain once it holds the destination's ``running`` node: every area created before that moment
belongs to a run that no longer holds it). Only names of exactly that form under the destination's
own folder are touched.

:class:`StagedViews` puts a staged file in front of Spark as a temporary view (what a statement
reads) and removes both once the statement ran, or after a failure whatever is left.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.native import arrow_native
from airflow_provider_binlog.lake.sql import parse_name
from airflow_provider_binlog.lake.sql import quote as quote_ident
from airflow_provider_binlog.lake.types import LakeColumn, LakeType, arrow_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_CHUNK_ROWS = 65_536
STAGING_CONF = "spark.binlog_cdc.staging_uri"
"""Session setting naming the staging root (a path or URI; ``local``: the driver's temp directory)."""
STAGING_FOLDER = "_binlog_cdc_staging"
"""The staging root's folder name under a catalog's warehouse."""
LOCAL = "local"
_AREA = re.compile(r"(\d{13})-[0-9a-f]{32}")
WRITER_OPTIONS: dict[str, Any] = {"compression": "snappy", "use_dictionary": False, "write_statistics": False}
"""How staged files are written: a staged file is read once, whole, by one statement, so neither
dictionary pages nor column statistics serve the read, and writing them was half the Parquet
writer's CPU (``bench/fold_stage.py``: 155k mixed rows, 0.075 against 0.030 CPU-seconds); snappy
stays (the file may travel to an object store)."""


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
            invalid = col.type.invalid_dates  # a date no date type holds: NULL, or the error naming it
            fixed = None if invalid is None else invalid.resolve(col.name, column_values)
            if fixed is not None:
                arrays.append(_array(col.type, fixed))
                continue
            raise LakeError(f"column {col.name!r}: value does not fit {col.type.sql}: {exc}") from exc
    return pa.Table.from_arrays(arrays, schema=arrow_schema(columns))


_ARROW_ERRORS = (pa.ArrowException, TypeError, ValueError, OverflowError)


def _array(lake_type: LakeType, values: list[Any]) -> pa.Array:
    conv = lake_type.convert
    if conv is None or lake_type.arrow_native:  # the values as they are: in C when it takes them
        built = arrow_native.array(lake_type.arrow, values)
        if built is not None:
            return built
    if conv is not None and lake_type.arrow_native:
        with contextlib.suppress(*_ARROW_ERRORS):
            return pa.array(values, type=lake_type.arrow)
    if conv is not None:
        values = [None if v is None else conv(v) for v in values]
    return pa.array(values, type=lake_type.arrow)


def local_root() -> str:
    """The driver's staging root when staging is ``local``: a folder in its temporary directory."""
    return os.path.join(tempfile.gettempdir(), "binlog-cdc-staging")


def staging_root(spark: SparkSession, catalog: str = "lake") -> str:
    """The staging root of ``spark``'s merges into ``catalog`` (see the module docstring, 2-4).

    :raises LakeError: a master other than ``local`` with no staging setting and no warehouse.
    """
    conf = spark.conf
    value = (conf.get(STAGING_CONF, None) or "").strip()
    if value:
        return local_root() if value == LOCAL else value
    warehouse = (conf.get(f"spark.sql.catalog.{catalog}.warehouse", None) or "").strip()
    if warehouse:
        return f"{warehouse.rstrip('/')}/{STAGING_FOLDER}"
    master = spark.sparkContext.master or ""
    if master == "local" or master.startswith("local["):
        return local_root()
    raise LakeError(
        f"Spark master {master!r}: nowhere to stage files the executors can read: catalog {catalog!r} "
        f"has no warehouse setting; set staging_uri (operator, RunSettings) or {STAGING_CONF} to a "
        "shared filesystem or object store URI"
    )


def filesystem_of(root: str) -> tuple[pafs.FileSystem, str, str]:
    """``(filesystem, path in it, URI prefix Spark reads the path through)`` of a path or URI
    (also ``file:/path``, as Hadoop names local files: Iceberg's locations).

    :raises pa.ArrowInvalid: a scheme pyarrow does not know (``s3a://``...).
    """
    if root.startswith("file:") and not root.startswith("file://"):
        return pafs.LocalFileSystem(), "/" + root[len("file:") :].lstrip("/").rstrip("/"), "file://"
    if "://" in root:
        fs, base = pafs.FileSystem.from_uri(root)
        prefix = root[: len(root) - len(base)] if root.endswith(base) else ""
        if isinstance(fs, pafs.LocalFileSystem):
            prefix = "file://"
        return fs, base.rstrip("/"), prefix
    return pafs.LocalFileSystem(), os.path.abspath(root).rstrip("/"), "file://"


def destination_folder(root: str, destination: str) -> str:
    """The folder of one destination's areas under ``root`` (the name %-quoted: one path segment)."""
    return f"{root.rstrip('/')}/{quote(destination, safe='')}"


def clean_orphans(root: str, destination: str, before: float) -> list[str]:
    """Remove the areas of ``destination`` under ``root`` created before ``before`` (epoch seconds):
    what killed runs left. Call it only while holding the destination (no other live run of it).
    Returns the removed paths; a failed removal is skipped (the next run tries again)."""
    fs, base, _ = filesystem_of(destination_folder(root, destination))
    try:
        infos = fs.get_file_info(pafs.FileSelector(base, allow_not_found=True))
    except (OSError, pa.ArrowException):
        return []
    removed = []
    for info in infos:
        found = _AREA.fullmatch(info.base_name)
        if found is None or int(found.group(1)) >= before * 1000:
            continue
        try:
            fs.delete_dir(info.path) if info.type == pafs.FileType.Directory else fs.delete_file(info.path)
        except (OSError, pa.ArrowException):
            continue
        removed.append(info.path)
    return removed


class StagingArea:
    """A private directory (local path or URI) holding the staged files of one merger:
    ``<root>/<destination>/<creation ms>-<uuid>`` (``<root>/<...>`` without a destination).

    :param root: where to create it; :func:`local_root` when ``None`` or ``local``.
    :param destination: the destination whose folder it is in (see :func:`clean_orphans`).
    """

    def __init__(self, root: str | None = None, destination: str = "") -> None:
        root = local_root() if root in (None, "", LOCAL) else root
        self.root = root
        folder = destination_folder(root, destination) if destination else root
        self.fs, base, self._uri_prefix = filesystem_of(folder)
        self.base = f"{base}/{int(time.time() * 1000):013d}-{uuid.uuid4().hex}"
        self.fs.create_dir(self.base, recursive=True)

    @classmethod
    def for_session(
        cls, spark: SparkSession, destination: str, root: str | None = None, targets: Iterable[str] = ()
    ) -> StagingArea:
        """The area of a merger on ``spark``: in ``root``, else in :func:`staging_root` of the first
        target's catalog (``lake`` for targets without one)."""
        if root is None:
            catalog = "lake"
            for target in targets:
                with contextlib.suppress(ConfigurationError):
                    parts = parse_name(target)
                    catalog = parts[0] if len(parts) >= 3 else catalog
                break
            root = staging_root(spark, catalog)
        return cls(root, destination)

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
            pq.ParquetWriter(sink, schema, **WRITER_OPTIONS) as writer,
        ):
            for table in tables:
                writer.write_table(table)
                count += table.num_rows
            if count == 0:
                writer.write_table(schema.empty_table())
        return self.uri(directory), count

    def read(
        self, name: str, batch_rows: int = DEFAULT_CHUNK_ROWS, columns: Sequence[str] | None = None
    ) -> Iterator[pa.Table]:
        """The rows staged as ``name``, ``batch_rows`` at a time (of ``columns`` only, if given)."""
        with self.fs.open_input_file(f"{self.base}/{name}/part-0.parquet") as source:
            for batch in pq.ParquetFile(source).iter_batches(batch_size=batch_rows, columns=columns):
                yield pa.Table.from_batches([batch])

    def remove(self, name: str) -> None:
        """Delete one staged directory (best effort)."""
        with contextlib.suppress(OSError, pa.ArrowException):
            self.fs.delete_dir(f"{self.base}/{name}")

    def close(self) -> None:
        """Delete everything this area staged."""
        with contextlib.suppress(OSError, pa.ArrowException):
            self.fs.delete_dir(self.base)


def spark_schema(columns: Sequence[LakeColumn]) -> str:
    """The staged file's schema as Spark DDL (what Spark infers from the file's footer): given to the
    reader, it spares a Spark job per staged file (reading the footer and inferring the schema, about
    0.2-0.4 s in a fresh driver)."""
    return ", ".join(f"{quote_ident(c.name)} {c.type.sql}" for c in columns)


class StagedViews:
    """Staged files of one merger, each read by Spark as a temporary view until it is dropped.

    A view is made when a statement first needs it (:meth:`use`), on the thread that runs the
    statement: making one costs Spark about 40 ms (0.4 s the first time in a driver), which the
    statements of a chunk's tables then pay side by side instead of one after another while the
    chunk is prepared, and an insert the driver writes itself (:mod:`.file_append`) never pays.

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
        self._unmade: dict[str, tuple[str, str]] = {}  # view -> (file URI, Spark schema): not made yet
        self._lock = threading.Lock()  # views are made and dropped by the threads that run the statements

    def stage(
        self,
        columns: Sequence[LakeColumn],
        rows: Iterable[Sequence[Any]] = (),
        column_chunks: Iterable[Sequence[list[Any]]] | None = None,
    ) -> tuple[str, str, int]:
        """Stage ``rows`` (tuples), or ``column_chunks`` (lists of values per column), for a temp
        view; return ``(view, staged name, row count)``. The view is made by :meth:`use`."""
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
            self._unmade[view] = (uri, spark_schema(columns))
        return view, name, count

    def use(self, view: str) -> str:
        """Make ``view`` (a view :meth:`stage` returned) if it is not made yet; return its name.
        Call it before the first statement that reads the view."""
        with self._lock:
            unmade = self._unmade.pop(view, None)
        if unmade is not None:
            uri, schema = unmade
            # pyarrow writes proleptic Gregorian dates; tell Spark not to rebase (or refuse) ancient ones
            reader = self.spark.read.option("datetimeRebaseMode", "CORRECTED").option(
                "int96RebaseMode", "CORRECTED"
            )
            reader.schema(schema).parquet(uri).createOrReplaceTempView(view)
        return view

    def drop(self, view: str, name: str) -> None:
        """Drop one view (if it was made) and its file."""
        with self._lock:
            self._live.remove((view, name))
            made = self._unmade.pop(view, None) is None
        if made:
            self.spark.catalog.dropTempView(view)
        self.area.remove(name)

    def drop_all(self) -> None:
        """Drop what is left staged (best effort: after a failure, which is what the caller must see)."""
        with self._lock:
            live = list(self._live)
        for view, name in live:
            with contextlib.suppress(Exception):
                self.drop(view, name)
