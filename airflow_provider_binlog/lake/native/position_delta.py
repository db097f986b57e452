"""A piece merged by the driver: its upserts as one data file, the rows they replace or delete
marked in deletion vectors, committed as one Iceberg row delta. No Spark job.

A merge-on-read ``MERGE INTO`` of a format-version 3 table writes exactly that: the matched rows'
positions into each data file's deletion vector (the file's previous vector included) and the
upserted rows into new data files, committed by ``RowDelta``. Spark pays a job for it (about a
JVM CPU-second per table and chunk, and seconds for a cold JVM's first one); the driver reads only
the key column of the data files the piece's key range can touch and writes the same files.

**What it matches.** A staged key matches the live rows (not in the file's deletion vector) whose
key column equals it (``=``: a NULL key never matches): the MERGE's ``ON`` condition. A staged
``D`` deletes the matched rows; a staged ``U`` deletes them and its image is appended: the
MERGE's update of every column and its insert. The file holds the staged columns the table has,
so only tables whose columns are exactly those take this path (:func:`.file_append.layout`).

**Row lineage** (format-version 3): a row an update moves into the new file keeps its ``_row_id``
(the id the old file stored, else its first row id plus the row's position) and gets a NULL
``_last_updated_sequence_number`` (the commit's), an inserted row NULL in both (a new id), as
Spark's MERGE writes them.

**Exactly as the MERGE commits.** The row delta carries the checks Spark's position delta makes
for a MERGE under serializable isolation, from the snapshot planned (``S``): the data files it
marks must still exist, no data or delete file within the piece's key range may have been
committed after ``S`` (``conflictDetectionFilter``), and the deletion vectors it replaces must
still be the files' current ones. Iceberg refuses the commit otherwise and
:func:`.commits.commit` runs the piece again, which plans anew. The mark rides in the snapshot's
summary as for the MERGE. A file whose commit Iceberg refused is deleted; after any other failure
both files are kept (the commit may have landed: :func:`.file_append.refused`).

**When.** The table is format-version 3 or later and merges merge-on-read (``write.merge.mode``),
its files are Parquet with the key column's field id, every delete in the plan is a deletion
vector, the key is one column, neither NULL-safe nor floating-point (Spark's ``=`` holds
``NaN = NaN`` and ``-0.0 = 0.0``), deletes are not soft, and the data file can be
written as Spark would write it (:func:`.file_append.layout`). Anything else, and a table in which
a staged key matches more than one live row (the MERGE updates each of them; this path would keep
one), or whose planned data files hold more than ``$BINLOG_CDC_POSITION_DELTA_MAX_ROWS`` rows
(:data:`DEFAULT_MAX_ROWS`), is merged by Spark, as is every piece of a table whose location the
driver could not create a file in (a warning says so once). ``$BINLOG_CDC_POSITION_DELTA=off``
always merges through Spark (``$BINLOG_CDC_FILE_APPEND=off`` too: no file by the driver at all).
"""

from __future__ import annotations

import array
import dataclasses
import json
import struct
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64

from airflow_provider_binlog.faults import failpoint
from airflow_provider_binlog.lake import settings
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.native import content_files, file_append, puffin
from airflow_provider_binlog.lake.native.new_keys import range_filter
from airflow_provider_binlog.lake.options import ACTION_COLUMN
from airflow_provider_binlog.lake.spark import jvm_helpers
from airflow_provider_binlog.lake.spark.java_classes import java_static
from airflow_provider_binlog.lake.spark.table_facts import TableFacts, table_facts
from airflow_provider_binlog.lake.types import LakeColumn

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

POSITION_DELTA_ENV = settings.env_name("position_delta")
"""``off``: every MERGE through Spark (:func:`enabled`)."""
DV_MAGIC = bytes.fromhex("d1d33964")
DV_BLOB = "deletion-vector-v1"
CREATED_BY = "airflow-provider-binlog"
ROW_POSITION_FIELD_ID = 2**31 - 1 - 2
"""The field id of Iceberg's ``_pos`` metadata column (``MetadataColumns.ROW_POSITION``), which a
deletion vector's blob names as its field."""


MAX_ROWS_ENV = settings.env_name("position_delta_max_rows")
"""The most rows the planned data files may hold for the driver to merge a piece (default
:data:`DEFAULT_MAX_ROWS`); above it Spark merges."""
DEFAULT_MAX_ROWS = 500_000
"""The driver reads every planned row's key (deleted rows too: a merge-on-read table's files keep
them) in the operator's process, Spark on the JVM's threads. A 1M-change run whose tables' files
grew to about 330k rows ran 1.4x faster with the driver merging. Over a 10M-change drain (files past
2M rows per table) the three choices ran within 7% of each other (issue #20's seventh round in
docs/performance-history-2026-12-01.md): with this limit 41.8k changes/s, operator 197 and JVM 146
CPU-seconds; without it 44.6k, 241 and 26; Spark only 43.5k, 182 and 161. The limit keeps the
operator's CPU and memory (peak RSS
1,095 against 1,189 MB) for large tables, where a cluster's Spark has the cores. Compacting a table
(``rewrite_data_files``) brings its pieces back under it."""


def enabled() -> bool:
    return settings.current().position_delta


def max_rows() -> int:
    limit = settings.current().position_delta_max_rows
    return DEFAULT_MAX_ROWS if limit is None else limit


# ---- deletion vectors ---------------------------------------------------------------------------


def parse_dv(blob: bytes, where: str) -> BitMap64:
    """The positions of a ``deletion-vector-v1`` blob: a big-endian length, the magic, a portable
    64-bit Roaring bitmap and a big-endian CRC-32 of magic and bitmap (Iceberg's Puffin spec).

    :param where: the blob's file and offset, for the message.
    :raises LakeError: the blob is not one (length, magic or checksum).
    """
    if len(blob) < 12:
        raise LakeError(f"deletion vector at {where}: {len(blob)} bytes, too short")
    (length,) = struct.unpack(">I", blob[:4])
    body = blob[4 : 4 + length]
    if length + 8 != len(blob) or body[:4] != DV_MAGIC:
        raise LakeError(f"deletion vector at {where}: not a {DV_BLOB} blob (length or magic)")
    (crc,) = struct.unpack(">I", blob[4 + length :])
    if crc != zlib.crc32(body):
        raise LakeError(f"deletion vector at {where}: checksum mismatch")
    return BitMap64.deserialize(body[4:])


def dv_blob(positions: BitMap64) -> bytes:
    """``positions`` as a ``deletion-vector-v1`` blob (see :func:`parse_dv`)."""
    positions.run_optimize()
    body = DV_MAGIC + positions.serialize()
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def read_dv(root: str, vector: content_files.Vector) -> BitMap64:
    """The positions of a deletion vector of a table whose location is ``root``
    (:func:`.file_append.table_root`)."""
    fs, path = file_append.file_under(root, vector.location)
    with fs.open_input_file(path) as source:
        source.seek(vector.offset)
        blob = source.read(vector.size)
    return parse_dv(blob, f"{vector.location}@{vector.offset}")


# ---- the plan -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Marked:
    """One data file the piece deletes rows of.

    :param location: the data file.
    :param task: the index of its scan task in :attr:`Matched.tasks` (the commit replaces the task's
        deletion vectors: at most one in a v3 table).
    :param positions: its deleted positions after the commit (the previous ones included).
    """

    location: str
    task: int
    positions: BitMap64


def key_column_of(schema: pa.Schema, field_id: int) -> str | None:
    """The name of the top-level column of a data file's ``schema`` with Iceberg field id
    ``field_id`` (a renamed column keeps its id, not its name)."""
    wanted = str(field_id).encode()
    for field in schema:
        if (field.metadata or {}).get(file_append.FIELD_ID) == wanted:
            return field.name
    return None


ROW_ID = 2147483540
"""Field id of ``_row_id`` (``MetadataColumns.ROW_ID``): a row's lineage id, written for a row an
update moves into a new file (NULL: assigned from the file's first row id and the row's position)."""
LAST_UPDATED = 2147483539
"""Field id of ``_last_updated_sequence_number``: written NULL (the new file's sequence number)."""
_ROW_ID_SOURCE, _LAST_UPDATED_SOURCE = "\0row_id", "\0last_updated"  # no MySQL identifier holds NUL


@dataclass(slots=True)
class Matched:
    """What a piece's keys match in a table: the data files whose rows it deletes, and the staged
    keys the table holds, each with its row's lineage id (in the same order); and the JVM list of
    the plan's scan tasks (:func:`.content_files.scan`)."""

    marked: list[Marked]
    keys: pa.Array
    row_ids: pa.Array
    tasks: Any


def _column(parquet: pq.ParquetFile, field_id: int) -> pa.ChunkedArray | None:
    name = key_column_of(parquet.schema_arrow, field_id)
    return None if name is None else parquet.read(columns=[name]).column(0)


def _key_column(
    root: str, location: str, field_id: int, keys: pa.DataType
) -> tuple[pa.ChunkedArray, pa.ChunkedArray | None] | None:
    """The key column (cast to ``keys``) and stored row ids (if the file has them) of data file
    ``location`` of the table at ``root``; ``None`` when the file has no column of that field id
    or its type does not cast."""
    fs, path = file_append.file_under(root, location)
    with fs.open_input_file(path) as source:
        parquet = pq.ParquetFile(source)
        column = _column(parquet, field_id)
        stored = _column(parquet, ROW_ID)
    if column is None:
        return None
    try:
        return column.cast(keys), stored
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _row_ids(
    positions: pa.Array, stored: pa.ChunkedArray | None, first_row_id: int | None
) -> pa.Array | None:
    """The lineage ids of the rows at ``positions``: the stored id, else the file's first row id
    plus the position; ``None`` when one is not known (no first row id)."""
    inherited = None if first_row_id is None else pc.add(positions, first_row_id)
    row_ids = inherited
    if stored is not None:
        row_ids = pc.take(stored, positions).combine_chunks()
        if inherited is not None:
            row_ids = pc.coalesce(row_ids, inherited)
    return None if row_ids is None or row_ids.null_count else row_ids


def bitmap_of(positions: pa.Array) -> BitMap64:
    """``positions`` (non-negative int64, no nulls) as a bitmap, through a buffer (no Python ints)."""
    unsigned = positions.cast(pa.uint64())
    start = unsigned.offset * 8
    values = array.array("Q")
    values.frombytes(memoryview(unsigned.buffers()[1])[start : start + len(unsigned) * 8])
    return BitMap64(values)


def arrow_of(positions: BitMap64) -> pa.Array:
    """The int64 array of a bitmap's positions, ascending, through a buffer (no Python ints)."""
    values = positions.to_array()
    return pa.Array.from_buffers(pa.uint64(), len(values), [None, pa.py_buffer(values)]).cast(pa.int64())


def staged_keys(parts: Iterable[pa.Table]) -> pa.Array:
    """The first column of the staged ``parts`` as one array. Built from the columns' chunks:
    ``pa.chunked_array`` given ``ChunkedArray`` objects converts them value by value in Python
    (180 ms for 200k keys against 0.3 ms)."""
    tables = list(parts)
    if not tables:
        raise ValueError("no staged part to take keys from")
    chunks = [chunk for part in tables for chunk in part.column(0).chunks]
    return pa.chunked_array(chunks, type=tables[0].schema.field(0).type).combine_chunks()


def plan(
    spark: SparkSession,
    table: Any,
    snapshot_id: int,
    row_filter: Any,
    field_id: int,
    keys: pa.Array,
    root: str,
) -> Matched | None:
    """The data files of ``snapshot_id`` within ``row_filter`` with live rows whose key is among
    ``keys``, each with its deleted positions after the merge, and those rows' keys and row ids;
    ``None`` when Spark must merge (see the module docstring). ``root``: the table's location
    (:func:`.file_append.table_root`)."""
    found: list[tuple[int, content_files.Planned]] = []
    budget = max_rows()
    tasks, planned_files = content_files.scan(spark, table, snapshot_id, row_filter, budget)
    for task, planned in enumerate(planned_files):
        budget -= planned.records
        if budget < 0 or not planned.parquet or planned.vectors is None:
            return None  # too many rows to read here (:data:`DEFAULT_MAX_ROWS`), not Parquet, or
            # a delete file that is not a deletion vector
        found.append((task, planned))
    columns = []
    for _task, planned in found:
        read = _key_column(root, planned.location, field_id, keys.type)
        if read is None:
            return None
        columns.append(read)
    # one lookup over every file's keys: the staged keys' hash set is built once
    chunks = [chunk for column, _stored in columns for chunk in column.chunks]
    staged = pc.is_in(pa.chunked_array(chunks, type=keys.type), value_set=keys, skip_nulls=True)
    marked: list[Marked] = []
    matched_keys: list[pa.Array] = []
    matched_ids: list[pa.Array] = []
    start = 0
    for (task, planned), (column, stored) in zip(found, columns, strict=True):
        positions = pc.indices_nonzero(staged.slice(start, len(column))).cast(pa.int64())
        start += len(column)
        if len(positions) == 0:
            continue
        row_ids = _row_ids(positions, stored, planned.first_row_id)
        if row_ids is None:
            return None
        hit_keys = pc.take(column, positions).combine_chunks()
        previous = BitMap64()
        for vector in planned.vectors or ():
            previous |= read_dv(root, vector)
        hits = bitmap_of(positions)
        dead = hits & previous
        if dead:
            live = pc.invert(pc.is_in(positions, value_set=arrow_of(dead)))
            positions, hit_keys, row_ids = (pc.filter(a, live) for a in (positions, hit_keys, row_ids))
            hits -= dead
        if not hits:
            continue
        matched_keys.append(hit_keys)
        matched_ids.append(row_ids)
        # the commit replaces the task's delete files: the vectors read above
        marked.append(Marked(planned.location, task, previous | hits))
    hit = pa.chunked_array(matched_keys, type=keys.type).combine_chunks()
    if pc.count_distinct(hit).as_py() != len(hit):
        return None  # a key held twice: the MERGE updates each row, this would keep one
    return Matched(marked, hit, pa.chunked_array(matched_ids, type=pa.int64()).combine_chunks(), tasks)


def with_lineage(shape: file_append.Layout) -> file_append.Layout:
    """``shape`` with the two row lineage columns Spark's MERGE writes after the table's."""
    lineage = [
        pa.field("_row_id", pa.int64(), metadata={file_append.FIELD_ID: str(ROW_ID).encode()}),
        pa.field(
            "_last_updated_sequence_number",
            pa.int64(),
            metadata={file_append.FIELD_ID: str(LAST_UPDATED).encode()},
        ),
    ]
    return dataclasses.replace(
        shape,
        schema=pa.schema([*shape.schema, *lineage]),
        sources=(*shape.sources, _ROW_ID_SOURCE, _LAST_UPDATED_SOURCE),
    )


def upserts_with_lineage(part: pa.Table, key: str, matched: Matched) -> pa.Table:
    """The ``U`` rows of a staged ``part``, each with its key's row id where the table holds the
    key (an update keeps its row's lineage id) and NULL elsewhere (an insert: a new id), and a
    NULL last-updated sequence number (the commit's)."""
    part = part.filter(pc.equal(part.column(ACTION_COLUMN), "U"))
    at = pc.index_in(part.column(key), value_set=matched.keys, skip_nulls=True)
    row_ids = pc.take(matched.row_ids, at)
    part = part.append_column(_ROW_ID_SOURCE, row_ids)
    return part.append_column(_LAST_UPDATED_SOURCE, pa.nulls(part.num_rows, pa.int64()))


# ---- the files and the commit -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Vectors:
    """The deletion vectors of a piece, written: their Puffin file, its size, and each one's blob
    ``(offset, length)`` there, in the order of the marked files."""

    location: str
    size: int
    spans: list[tuple[int, int]]


def write_vectors(table: Any, root: str, marked: Sequence[Marked]) -> Vectors:
    """Write the deletion vectors of ``marked`` into one Puffin file in ``table``'s data location
    (:mod:`.puffin`, written by pyarrow; ``root``: :func:`.file_append.table_root`).

    :raises file_append.Unwritable: the file could not be created (nothing written).
    """
    location = str(table.locationProvider().newDataLocation(f"binlog-cdc-{uuid.uuid4().hex}-deletes.puffin"))
    blobs = [
        puffin.Blob(
            dv_blob(m.positions), {"referenced-data-file": m.location, "cardinality": str(len(m.positions))}
        )
        for m in marked
    ]
    content, spans = puffin.encode(DV_BLOB, [ROW_POSITION_FIELD_ID], blobs, CREATED_BY)
    file_append.write_bytes(root, location, content)
    return Vectors(location, len(content), spans)


def row_delta(
    spark: SparkSession,
    table: Any,
    data: str | None,
    vectors: Vectors | None,
    matched: Matched,
    row_filter: Any,
    snapshot_id: int,
    properties: Mapping[str, str],
) -> Any:
    """The piece's JVM ``RowDelta``, not committed (:mod:`.jvm_helpers`, one py4j call): the data
    file ``data`` (``None``: no upserts) with its footer's metrics, a ``DeleteFile`` per deletion
    vector replacing its data file's planned ones, the checks of Spark's MERGE (module docstring)
    from ``snapshot_id`` within ``row_filter``, and ``properties`` in the snapshot's summary."""
    spec: dict[str, Any] = {"snapshot-id": str(snapshot_id), "properties": dict(properties), "vectors": []}
    if vectors is not None:
        spec["puffin"], spec["puffin-size"] = vectors.location, vectors.size
        spec["vectors"] = [
            {
                "task": m.task,
                "referenced": m.location,
                "offset": offset,
                "length": length,
                "cardinality": len(m.positions),
            }
            for m, (offset, length) in zip(matched.marked, vectors.spans, strict=True)
        ]
    helper = jvm_helpers.driver_delta(spark, table)
    return helper.delta(table, data, matched.tasks, row_filter, json.dumps(spec))


def commit_delta(spark: SparkSession, table: Any, delta: Any) -> None:
    """Commit the piece's row delta (:func:`row_delta`)."""
    delta.commit()


def applicable(facts: TableFacts) -> bool:
    """Format-version 3 or later, merged merge-on-read."""
    if facts.properties.get("write.merge.mode", "copy-on-write").lower() != "merge-on-read":
        return False
    return facts.format_version >= 3


def merge_file(
    spark: SparkSession,
    table: Any | None,
    target: str,
    staged: Callable[..., Iterable[pa.Table]],
    columns: Sequence[LakeColumn],
    key: str,
    ranges: Mapping[str, tuple[int, int]],
    properties: Mapping[str, str],
    *,
    upserts: int,
) -> bool:
    """Merge the staged piece into ``target`` by the driver (module docstring); ``False``
    (nothing written) when Spark must merge it.

    :param table: the target's JVM ``org.apache.iceberg.Table`` (``None``: it does not exist).
    :param target: its quoted name, for messages.
    :param staged: opens the staged piece (tables of ``columns`` and the action column; with
        ``columns=[...]`` of those columns only).
    :param columns: the staged columns the table's columns are filled from (not the action).
    :param key: the key column (a staged column).
    :param ranges: the piece's integer key ranges (:func:`.statements.key_ranges`), may be empty.
    :param upserts: the piece's staged upserts: the data file must hold that many rows.
    :raises LakeError: the data file holds another count of rows (nothing committed).
    """
    if not enabled() or table is None:
        return False
    facts = table_facts(spark, table)  # as the MERGE plans: the table as loaded, not refreshed
    if facts.snapshot_id is None or not applicable(facts):
        return False
    shape = file_append.layout(spark, table, [(c.name, c.type.arrow) for c in columns], facts)
    schema = facts.columns
    field = schema.find(key)
    if shape is None or field is None:
        return False
    row_filter = range_filter(spark, schema, ranges) if ranges else None
    if row_filter is None:
        row_filter = java_static(spark, "org.apache.iceberg.expressions.Expressions", "alwaysTrue")()
    keys = staged_keys(staged(columns=[key]))
    if pa.types.is_floating(keys.type):
        return False  # Spark's = holds NaN = NaN and -0.0 = 0.0; a hash lookup may not
    snapshot_id = facts.snapshot_id
    matched = plan(spark, table, snapshot_id, row_filter, field.id, keys, facts.root)
    if matched is None or (not matched.marked and upserts == 0):
        return False  # Spark merges it (or commits the piece's mark when it changes nothing)
    marked = matched.marked

    def rows() -> Iterable[pa.Table]:
        for part in staged():
            yield upserts_with_lineage(part, key, matched)

    written: list[str] = []
    committing = False
    try:
        data = None
        if upserts:
            data, count = file_append.write_file(table, with_lineage(shape), rows())
            written.append(data)
            if count != upserts:
                raise LakeError(
                    f"merge into {target}: {count} staged upserts written, {upserts} expected; "
                    "nothing was committed"
                )
        vectors = None
        if marked:
            vectors = write_vectors(table, facts.root, marked)
            written.append(vectors.location)
        delta = row_delta(spark, table, data, vectors, matched, row_filter, snapshot_id, properties)
        failpoint("file_written")  # the crash tests stop here: files no snapshot holds
        committing = True
        commit_delta(spark, table, delta)
    except file_append.Unwritable as exc:  # a file could not be created: nothing was committed
        for location in written:
            file_append.discard(table, location)
        file_append.leave_to_spark(table, exc, target)
        return False
    except BaseException as exc:
        if not committing or file_append.refused(exc):
            for location in written:
                file_append.discard(table, location)
        raise
    return True
