"""A staged piece whose keys no row of the table can hold is inserted, not merged.

A piece's ``MERGE INTO`` costs about half a JVM CPU-second even for a few hundred rows (four Spark
stages, the MERGE's planning), most of it for the join that finds which staged keys the table
holds. When the table's own file metadata proves it holds none of them, the join finds nothing and
the MERGE is exactly an insert of the piece's upserts (its deletes and its matched updates touch no
row), so the piece is written by one Spark job instead.

**The proof.** The piece's integer key columns have ranges (:func:`.statements.key_ranges`: the
lowest and highest staged value of each, none NULL). At snapshot ``S`` (the table as this session
last loaded or committed it, which the MERGE would plan on too) the table is planned with
the filter "every ranged key column within its range": Iceberg keeps a data file when its column
bounds (or a missing bound) allow a row there, deletion vectors or not. No file kept means no row
of ``S`` can equal a staged key (a match needs every key column equal, so within its range).

**Under concurrent writers.** The insert is written as an overwrite by that same filter with
``validate-from-snapshot-id = S`` and ``isolation-level = serializable``: Iceberg refuses the commit
(``ValidationException``) when a data or delete file that can hold a row within the filter was
committed after ``S`` (another destination under ``unique_keys``, a consumer that took the
destination over while this one was cut off, a user's insert), exactly where the MERGE, which
validates the same way from the snapshot it read, would conflict. :func:`.commits.commit` then
checks the mark and runs the statement again, which plans anew (the MERGE when the keys are no
longer new). The overwrite deletes nothing: a file within the filter at commit time is either of
``S`` (none) or newer (refused). Compaction rewrites rows already in ``S``: none within the filter.
Snapshot properties ride on the same commit as for the MERGE (:func:`.commits.commit_properties`).

**A table without a snapshot** (just created: a destination's first chunk, a backfill's first load)
holds no row, so every piece of it is new keys (:data:`EMPTY`). Its insert is validated from the
table's first snapshot on (no ``validate-from-snapshot-id``: Iceberg then checks every snapshot
committed before the insert's own), so a writer that committed a row within the filter meanwhile
makes it conflict as above.

**Who writes the file.** Where the table allows it, the driver writes the insert's rows as one data
file and commits it through Iceberg's API (:func:`insert_file`, :mod:`.file_append`) with exactly
this overwrite, filter and validation; otherwise Spark writes it (:func:`insert`).

Used only for int and long key columns (the predicate's literals need no cast in Spark's filter; an
unsigned BIGINT is a decimal(20, 0) column), and when the table's columns are exactly the
statement's (the MERGE leaves columns it does not name NULL, a by-name overwrite would refuse
them). ``$BINLOG_CDC_NEW_KEYS=off`` always merges (for measuring).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_binlog.lake import settings
from airflow_provider_binlog.lake.native import file_append
from airflow_provider_binlog.lake.options import ACTION_COLUMN, DELETED_COLUMN
from airflow_provider_binlog.lake.spark.java_classes import java_static
from airflow_provider_binlog.lake.spark.table_schema import Columns, columns_of
from airflow_provider_binlog.lake.types import LakeColumn

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NEW_KEYS_ENV = settings.env_name("new_keys")
"""``off``: never insert instead of merging (:func:`enabled`)."""
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


EMPTY = -1
""":func:`untouched_snapshot` of a table that has no snapshot yet (snapshot ids are positive)."""


def enabled() -> bool:
    return settings.current().new_keys


def untouched_snapshot(
    spark: SparkSession, table: Any | None, ranges: Mapping[str, tuple[int, int]], columns: Sequence[str]
) -> int | None:
    """The current snapshot of ``table`` when no row of it can lie within ``ranges`` (see the
    module docstring) and its columns are exactly ``columns`` (case-insensitive), :data:`EMPTY`
    when the table has no snapshot yet (and those columns), else ``None`` (also for a column not
    in it).

    :param table: the JVM ``org.apache.iceberg.Table`` (:func:`.commits.load_iceberg_table`),
        ``None`` when it does not exist.
    :param ranges: integer key column -> lowest and highest staged value.
    :param columns: the columns the insert writes.
    """
    if not ranges or table is None:
        return None
    snapshot = table.currentSnapshot()  # as this session plans on it (no refresh: like the MERGE)
    schema = columns_of(spark, table.schema())
    found = range_filter(spark, schema, ranges)
    if found is None:
        return None
    snapshot_id = EMPTY
    if snapshot is not None:
        snapshot_id = int(snapshot.snapshotId())
        files = table.newScan().useSnapshot(snapshot_id).filter(found).planFiles()
        try:
            if files.iterator().hasNext():
                return None
        finally:
            files.close()
    if sorted(n.lower() for n in schema.names()) != sorted(c.lower() for c in columns):
        return None
    return snapshot_id


def range_filter(spark: SparkSession, schema: Columns, ranges: Mapping[str, tuple[int, int]]) -> Any | None:
    """The JVM ``Expression`` "every ranged key column within its range" on a table of columns
    ``schema``, or ``None`` when a column is not an int or long column of it (or a range does not
    fit a long)."""
    found: dict[str, Any] | None = None
    for name, (lo, hi) in ranges.items():
        field = schema.find(name)
        if field is None or field.type not in ("int", "long") or not (_LONG_MIN <= lo <= hi <= _LONG_MAX):
            return None
        bound = {
            "type": "and",
            "left": {"type": "gt-eq", "term": field.name, "value": int(lo)},
            "right": {"type": "lt-eq", "term": field.name, "value": int(hi)},
        }
        found = bound if found is None else {"type": "and", "left": found, "right": bound}
    if found is None:
        return None
    # built from Iceberg's JSON of it: one call, where Expressions' builders cost one per node
    parse = java_static(spark, "org.apache.iceberg.expressions.ExpressionParser", "fromJson")
    return parse(json.dumps(found))


def insert(spark: SparkSession, target: str, select: str, predicate: str, snapshot_id: int) -> None:
    """Write the rows of ``select`` into ``target`` as an overwrite by ``predicate`` validated from
    ``snapshot_id`` (:data:`EMPTY`: from the table's first snapshot; see the module docstring); the
    caller attaches the commit's properties.

    :param select: the rows, one column per table column, named as they are.
    :param predicate: the key ranges, as SQL on the table's columns (unaliased).
    """
    from pyspark.sql import functions

    writer = spark.sql(select).writeTo(target).option("isolation-level", "serializable")
    if snapshot_id != EMPTY:
        writer = writer.option("validate-from-snapshot-id", str(snapshot_id))
    writer.overwrite(functions.expr(predicate))


def insert_file(
    spark: SparkSession,
    table: Any | None,
    target: str,
    staged: Callable[[], Iterable[pa.Table]],
    columns: Sequence[LakeColumn],
    ranges: Mapping[str, tuple[int, int]],
    snapshot_id: int,
    properties: Mapping[str, str],
    *,
    soft_delete: bool,
    expected: int,
) -> bool:
    """Write the piece's insert as one data file the driver writes and commit it through Iceberg's
    API (:mod:`.file_append`), with the validation and commit of :func:`insert`; ``False`` (nothing
    written) when the table needs Spark's write.

    :param table: the target's JVM ``org.apache.iceberg.Table`` (``None``: it does not exist).
    :param target: its quoted name, for messages.
    :param staged: opens the staged piece (its tables have the ``columns`` and the action column).
    :param columns: the staged columns the table's columns are filled from (the names of
        :func:`.merge_sql.new_keys_sql`, but ``_cdc_deleted``, which is ``false`` with
        ``soft_delete``).
    :param snapshot_id: as for :func:`insert`.
    :param properties: the commit's snapshot properties.
    :param expected: the piece's upserts: the file must hold exactly that many rows.
    :raises LakeError: the file's row count differs (nothing committed; :func:`.file_append.write_committed`).
    """
    if table is None:
        return False
    written = [(c.name, c.type.arrow) for c in columns]
    if soft_delete:
        written.append((DELETED_COLUMN, pa.bool_()))
    shape = file_append.layout(spark, table, written)
    row_filter = range_filter(spark, columns_of(spark, table.schema()), ranges) if shape is not None else None
    if shape is None or row_filter is None:
        return False

    def upserts() -> Iterable[pa.Table]:
        for part in staged():
            part = part.filter(pc.equal(part.column(ACTION_COLUMN), "U"))
            if soft_delete:
                part = part.append_column(DELETED_COLUMN, pa.array([False] * part.num_rows, pa.bool_()))
            yield part

    start = None if snapshot_id == EMPTY else snapshot_id

    def commit(data: Any) -> None:
        file_append.commit_overwrite(table, data, row_filter, start, properties, spark)

    return file_append.write_committed(spark, table, shape, upserts(), expected, commit, target)
