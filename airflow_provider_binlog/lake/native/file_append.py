"""Rows the driver writes itself as one Iceberg data file and commits through Iceberg's API: no
Spark job.

Used for inserts: a piece of new keys (:mod:`.new_keys`), a chunk of an append-only target
(:class:`.statements.Statements`) or of an initial snapshot (:mod:`.snapshot`). Through Spark an
insert costs a job: the staged Parquet file is read, every row converted to Spark's rows and back,
and written again as the table's Parquet (in the insert benchmark, half of the JVM's CPU). The rows
are already typed Arrow in the staged file, so here pyarrow copies them into a Parquet file in the
table's data location, with each column's Iceberg field id and column statistics; Iceberg reads
the file's metrics from its footer (``ParquetUtil.footerMetrics``, the table's metrics settings:
:func:`data_file`) and
the file is committed by the operation Spark's write commits (:func:`commit_overwrite`, or an
append).

**When.** Only where the file holds what Spark's write would, column for column (:func:`layout`):
the table is unpartitioned and unsorted, its write format Parquet with a codec pyarrow writes
(``zstd``, ``snappy``, ``gzip``, ``uncompressed``), no encryption, and every column optional,
primitive and of exactly the Iceberg type of its staged Arrow type (:func:`iceberg_type`); the
session writes no WAP branch; pyarrow knows the scheme of the table's location. Anything else
goes through Spark, as does every piece when ``$BINLOG_CDC_FILE_APPEND=off``, and every piece of a
table whose location pyarrow failed to create a file in (:func:`write_committed`: a warning says
so).

**Exactly once.** The commit carries the same snapshot properties (the piece's mark) and the same
validation as Spark's overwrite, so :func:`.commits.commit` retries and checks it as it does
Spark's. A file whose commit Iceberg refused is deleted; after any other failure of the commit
(``CommitStateUnknownException``, a lost JVM) it is kept: the commit may have landed, and the file
is then the table's. A file a killed process wrote but
never committed is an orphan in the data folder, as a killed Spark write leaves them; no
snapshot refers to it (Iceberg's ``remove_orphan_files`` removes such files).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from airflow_provider_binlog.faults import failpoint
from airflow_provider_binlog.lake import settings
from airflow_provider_binlog.lake.commits import commit_tagged, java_causes, load_iceberg_table
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.spark import jvm_helpers
from airflow_provider_binlog.lake.spark.table_facts import TableFacts, table_facts
from airflow_provider_binlog.lake.types import LakeColumn
from airflow_provider_binlog.lake.write.staging import filesystem_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

FILE_APPEND_ENV = settings.env_name("file_append")
"""``off``: write every insert through Spark (:func:`enabled`)."""
CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "uncompressed": "none", "none": "none"}
"""Iceberg's ``write.parquet.compression-codec`` values -> pyarrow's codec names."""
DEFAULT_CODEC = "zstd"  # Iceberg's default for Parquet since 1.4
UNKNOWN_STATE = "org.apache.iceberg.exceptions.CommitStateUnknownException"
FIELD_ID = b"PARQUET:field_id"


def enabled() -> bool:
    return settings.current().file_append


def iceberg_type(arrow: pa.DataType) -> str | None:
    """The Iceberg type a staged Arrow column is written as (as ``Type.toString()`` prints it), or
    ``None`` for a type this module does not write (nested types)."""
    if pa.types.is_decimal128(arrow):
        return f"decimal({arrow.precision}, {arrow.scale})"
    if pa.types.is_timestamp(arrow):
        if arrow.unit != "us":
            return None
        return "timestamptz" if arrow.tz is not None else "timestamp"
    simple = {
        pa.bool_(): "boolean",
        pa.int32(): "int",
        pa.int64(): "long",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.date32(): "date",
        pa.string(): "string",
        pa.binary(): "binary",
    }
    return simple.get(arrow)


@dataclass(frozen=True, slots=True)
class Layout:
    """How one table's data file is written.

    :param schema: the file's Arrow schema: the table's column names, each with its field id.
    :param sources: the staged column each file column is copied from, in the file's order.
    :param codec: pyarrow's compression codec.
    :param level: the codec's level (``write.parquet.compression-level``), if set.
    :param dictionary: the file columns written with dictionary pages: its strings and binaries.
        Dictionaries of numbers, dates and times (of many distinct values mostly: keys, amounts,
        timestamps) cost the writer 30-45% of its CPU and made files 20-30% larger: the
        benchmark's three tables (``bench/parquet_dictionary.py``, 131-134k rows each) took 102-110
        against 53-79 CPU-ms, 4.0-5.1 against 3.1-4.2 MB (no dictionary at all: 39-50 CPU-ms,
        3.2-3.9 MB; the strings keep theirs for readers that filter on them).
    """

    schema: pa.Schema
    sources: tuple[str, ...]
    codec: str
    level: int | None
    root: str
    """The table's location (:func:`table_root`), which its files are written under."""
    dictionary: tuple[str, ...] = ()


_filesystems: dict[str, tuple[pafs.FileSystem, str] | None] = {}
"""Table location -> the filesystem pyarrow writes it through and the location's path in it
(``None``: a scheme it does not know). Kept for the process: resolving an object store's URI may
ask the store (its bucket's region)."""


def _filesystem_for(location: str) -> tuple[pafs.FileSystem, str] | None:
    if location not in _filesystems:
        try:
            fs, path, _ = filesystem_of(location)
            _filesystems[location] = (fs, path)
        except (pa.ArrowException, OSError, ValueError):
            _filesystems[location] = None
    return _filesystems[location]


def table_root(table: Any) -> str:
    """``table``'s location without a trailing slash: the key of :data:`_filesystems` and
    :data:`_unwritable`, and what :func:`file_under` takes."""
    return str(table.location()).rstrip("/")


def file_in(table: Any, location: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path pyarrow opens file ``location`` of ``table`` (a JVM
    ``org.apache.iceberg.Table``) through: :func:`file_under` its location."""
    return file_under(table_root(table), location)


def file_under(root: str, location: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path pyarrow opens file ``location`` of the table at ``root``
    (:func:`table_root`) through: the table location's, resolved once per process, for a file
    under it (its data and delete files, unless the table keeps them elsewhere), else the file's
    own (:func:`.staging.filesystem_of`).

    :raises pa.ArrowInvalid: a scheme pyarrow does not know.
    """
    resolved = _filesystem_for(root) if location.startswith(root + "/") else None
    if resolved is None:
        fs, path, _ = filesystem_of(location)
        return fs, path
    return resolved[0], resolved[1] + location[len(root) :]


def layout(
    spark: SparkSession,
    table: Any,
    columns: Sequence[tuple[str, pa.DataType]],
    facts: TableFacts | None = None,
) -> Layout | None:
    """How the rows of ``columns`` (staged name, Arrow type) are written into ``table`` (a JVM
    ``org.apache.iceberg.Table``), or ``None`` when Spark must write them (see the module
    docstring). Names match the table's columns case-insensitively, as Spark resolves them.

    :param facts: the table's :class:`.table_facts.TableFacts`, if the caller read them already.
    """
    if not enabled():
        return None
    facts = facts or table_facts(spark, table)
    root = facts.root
    if not facts.unpartitioned or not facts.unsorted or root in _unwritable:
        return None
    conf = spark.conf
    if conf.get("spark.wap.id", None) or conf.get("spark.wap.branch", None):
        return None
    props = facts.properties
    if props.get("write.format.default", "parquet").lower() != "parquet":
        return None
    if "encryption.key-id" in props:
        return None
    codec = CODECS.get(props.get("write.parquet.compression-codec", DEFAULT_CODEC).lower())
    if codec is None:
        return None
    level_text = props.get("write.parquet.compression-level")
    schema = facts.columns
    fields = []
    dictionary = []
    for name, arrow in columns:
        field = schema.find(name)
        wanted = iceberg_type(arrow)
        if field is None or wanted is None or not field.optional or field.type != wanted:
            return None
        metadata = {FIELD_ID: str(field.id).encode()}
        fields.append(pa.field(field.name, arrow, nullable=True, metadata=metadata))
        if wanted in ("string", "binary"):
            dictionary.append(field.name)
    if len(fields) != len(schema.fields):
        return None
    if _filesystem_for(root) is None:
        return None  # a scheme pyarrow does not know
    return Layout(
        schema=pa.schema(fields),
        sources=tuple(name for name, _ in columns),
        codec=codec,
        level=int(level_text) if level_text is not None and level_text.isdigit() else None,
        dictionary=tuple(dictionary),
        root=root,
    )


class Unwritable(Exception):
    """pyarrow could not create a file in a table's data location (no access, no credentials)."""


_unwritable: set[str] = set()
"""Table locations pyarrow could not create a file in, in this process: Spark writes those."""


def create(root: str, location: str) -> tuple[pafs.FileSystem, str, Any]:
    """Create file ``location`` of the table at ``root`` (:func:`table_root`; the file's folder
    too: a new table has no data folder yet); return its filesystem, its path there and the open
    output stream.

    :raises Unwritable: it could not be created (nothing written).
    """
    fs, path = file_under(root, location)
    try:
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        return fs, path, fs.open_output_stream(path)
    except (OSError, pa.ArrowException) as exc:
        raise Unwritable(f"{type(exc).__name__}: {exc}") from exc


def write_bytes(root: str, location: str, content: bytes) -> None:
    """Write ``content`` as the new file ``location`` of the table at ``root`` (:func:`table_root`);
    a failed write removes it.

    :raises Unwritable: it could not be created (nothing written).
    """
    fs, path, sink = create(root, location)
    try:
        with sink:
            sink.write(content)
    except BaseException:
        with contextlib.suppress(OSError, pa.ArrowException):
            fs.delete_file(path)
        raise


def write_file(table: Any, shape: Layout, tables: Iterable[pa.Table]) -> tuple[str, int]:
    """Write the rows of ``tables`` (columns named as :attr:`Layout.sources`) as one Parquet file
    in ``table``'s data location; return ``(its location as Iceberg names it, row count)``. A
    failed write removes what it wrote.

    :raises Unwritable: the file could not be created (nothing written).
    """
    location = str(table.locationProvider().newDataLocation(f"binlog-cdc-{uuid.uuid4().hex}.parquet"))
    fs, path, sink = create(shape.root, location)
    count = 0
    try:
        with (
            sink,
            pq.ParquetWriter(
                sink,
                shape.schema,
                compression=shape.codec,
                compression_level=shape.level,
                use_dictionary=list(shape.dictionary),
            ) as writer,
        ):
            for part in tables:
                columns = [part.column(source) for source in shape.sources]
                writer.write_table(pa.Table.from_arrays(columns, schema=shape.schema))
                count += part.num_rows
    except BaseException:
        with contextlib.suppress(OSError, pa.ArrowException):
            fs.delete_file(path)
        raise
    finally:
        # Arrow's allocator keeps what the read-back and the writer freed (about 60 MB of memory
        # per 100k rows here, with three tables written side by side) until asked to return it
        pa.default_memory_pool().release_unused()
    return location, count


def leave_to_spark(table: Any, exc: Unwritable, what: str) -> None:
    """Spark writes ``table`` from now on in this process (:func:`layout`), with a warning."""
    where = table_root(table)
    _unwritable.add(where)
    log.warning(
        "%s: the driver cannot create files in %s (%s); Spark writes this table's inserts and "
        "merges from now on (give the driver's pyarrow access to it, or set %s=off to stop trying)",
        what,
        where,
        exc,
        FILE_APPEND_ENV,
    )


def write_committed(
    spark: SparkSession,
    table: Any,
    shape: Layout,
    tables: Iterable[pa.Table],
    expected: int,
    commit: Callable[[Any], None],
    what: str,
) -> bool:
    """Write ``tables`` as one data file of ``table`` (:func:`write_file`) and ``commit`` its JVM
    ``DataFile``; the file is deleted when the commit was not reached or was refused
    (:func:`refused`), and kept when the commit's outcome is not known. ``False`` (nothing
    written) when the file could not be created: the table's location is then left to Spark for
    the rest of the process, with a warning.

    :param expected: the rows the file must hold.
    :param what: the table's name, for the messages.
    :raises LakeError: the file holds another count of rows (nothing committed).
    """
    try:
        location, count = write_file(table, shape, tables)
    except Unwritable as exc:
        leave_to_spark(table, exc, what)
        return False
    committing = False
    try:
        failpoint("file_written")  # the crash tests stop here: a data file no snapshot holds
        if count != expected:
            raise LakeError(
                f"insert into {what}: {count} staged rows written, {expected} expected; nothing was committed"
            )
        file = data_file(spark, table, location)
        committing = True
        commit(file)
    except BaseException as exc:
        if not committing or refused(exc):  # else the commit may have landed: the file is the table's
            discard(table, location)
        raise
    return True


def append(
    spark: SparkSession,
    target: str,
    staged: Callable[[], Iterable[pa.Table]],
    columns: Sequence[LakeColumn],
    properties: Mapping[str, str],
    expected: int,
) -> bool:
    """Append every staged row to ``target`` as one data file the driver writes, committed as
    Spark's ``INSERT INTO`` commits (an append: nothing to validate) with ``properties`` in the
    snapshot's summary; ``False`` (nothing written) when Spark must write them (:func:`layout`).

    :param staged: opens the staged rows (tables of ``columns``).
    :param expected: the staged rows.
    """
    loaded = load_iceberg_table(spark, target)
    if loaded is None:
        return False
    table = loaded
    shape = layout(spark, table, [(c.name, c.type.arrow) for c in columns])
    if shape is None:
        return False

    def commit(file: Any) -> None:
        def build(transaction: Any) -> None:
            op = transaction.newAppend().appendFile(file)
            for key, value in properties.items():
                op = op.set(key, value)
            op.commit()

        commit_tagged(spark, table, build, properties)  # the mark's tag in the same commit

    return write_committed(spark, table, shape, staged(), expected, commit, target)


def data_file(spark: SparkSession, table: Any, location: str) -> Any:
    """The JVM ``DataFile`` of a Parquet file in ``table``'s location, its metrics read from its
    footer under the table's metrics settings, as ``ParquetUtil.fileMetrics`` reads them (one
    py4j call: :mod:`.jvm_helpers`).

    ``fileMetrics`` opens the file with a new Hadoop ``Configuration``, which parses Hadoop's XML
    defaults again: 30% of the driver JVM's CPU over a 200-table run (a JFR profile). A table whose
    files go through Hadoop (``HadoopFileIO``, the Hadoop and JDBC catalogs' default) is read with
    its file IO's configuration instead, then measured by the same ``footerMetrics``; any other
    file IO takes ``fileMetrics``."""
    return jvm_helpers.driver_delta(spark, table).dataFile(table, location)


def commit_overwrite(
    table: Any,
    file: Any,
    row_filter: Any,
    snapshot_id: int | None,
    properties: Mapping[str, str],
    spark: SparkSession,
) -> None:
    """Commit ``file`` as an overwrite by ``row_filter`` (a JVM ``Expression``) with serializable
    validation from ``snapshot_id`` (``None``: from the table's first snapshot), as Spark's
    ``overwrite`` with ``validate-from-snapshot-id`` and ``isolation-level=serializable`` does
    (see :mod:`.new_keys`), with ``properties`` in the snapshot's summary and their destination's tag
    moved to it in the same transaction (:func:`.commits.commit_tagged`)."""

    def build(transaction: Any) -> None:
        op = transaction.newOverwrite().overwriteByRowFilter(row_filter).addFile(file)
        if snapshot_id is not None:
            op = op.validateFromSnapshot(snapshot_id)
        op = op.conflictDetectionFilter(row_filter).validateNoConflictingData().validateNoConflictingDeletes()
        for key, value in properties.items():
            op = op.set(key, value)
        op.commit()

    commit_tagged(spark, table, build, properties)  # the mark's tag in the same commit


REFUSED = (
    "org.apache.iceberg.exceptions.ValidationException",
    "org.apache.iceberg.exceptions.CommitFailedException",
)
"""Java exceptions (anywhere in the cause chain) that say a commit did not land."""


def refused(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a commit, says for sure that it did not land: Iceberg refused it
    (:data:`REFUSED`) and its outcome is not unknown (``CommitStateUnknownException``). Anything
    else (a lost JVM connection, an error of another kind) may have come after the commit landed."""
    names = java_causes(exc)
    return UNKNOWN_STATE not in names and UNKNOWN_STATE not in str(exc) and any(n in REFUSED for n in names)


def discard(table: Any, location: str) -> None:
    """Delete a data file no snapshot holds (best effort: an orphan is harmless)."""
    with contextlib.suppress(Exception):
        table.io().deleteFile(location)
