"""How a staged piece reaches Iceberg: one interface (:class:`WritePath`), four paths, the order of
trial in one place (:data:`ORDER`).

A piece (:class:`StagedPiece`: one target's folded changes, staged as Parquet under a temp view)
and the table as the attempt plans on it (:class:`PlannedTable`, :func:`plan`) go to each path of
:data:`ORDER` in turn. A path either commits the piece (``True``: its statement or its own commit
ran, with the piece's snapshot properties) or answers "not mine" (``False``: nothing written), and
the next is tried; the last path takes every piece the others left. Each attempt of
:func:`.commits.commit` (a retry after a conflict too) plans and tries anew. The model is
pyiceberg's ``table/update/snapshot.py``: one producer class per kind of commit.

=========================  ==========================================================================
path                       takes the piece when
=========================  ==========================================================================
:class:`DriverInsertFile`  no staged key can be in the table (:func:`.new_keys.untouched_snapshot`)
                           and the driver writes the table's data file itself
                           (:func:`.new_keys.insert_file`: no Spark job)
:class:`SparkInsert`       no staged key can be in the table: Spark's ``INSERT`` validated from
                           that snapshot (:func:`.new_keys.insert`)
:class:`DriverPositionDelta`  one key column compared with ``=`` and hard deletes, on a table the
                           driver merges itself (:func:`.position_delta.merge_file`: a data file
                           and deletion vectors in one row delta, no Spark job)
:class:`SparkMerge`        any other piece: Spark's ``MERGE INTO`` (:func:`.merge_sql.merge_sql`)
=========================  ==========================================================================

The switches that turn the driver's paths off are fields of :class:`~..settings.LakeSettings`
(``new_keys``, ``file_append``, ``position_delta``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.native import new_keys, position_delta
from airflow_provider_binlog.lake.types import LakeColumn
from airflow_provider_binlog.lake.write import merge_sql

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession


@dataclasses.dataclass(frozen=True)
class StagedPiece:
    """One target's folded piece as staged, and what each path needs to write it.

    :param target: the lake table's name, as statements name it.
    :param use_view: makes the staged piece's temp view current and returns its name (Spark's paths).
    :param read: reads the staged piece back as Arrow tables (the driver's paths).
    :param written: the columns a data file of the piece holds (the staged ones, less the action).
    :param keys: the key columns.
    :param ranges: integer key column -> lowest and highest staged value (empty: no range known).
    :param properties: the commit's snapshot properties (the piece's mark).
    :param upserts: how many staged rows are upserts.
    :param merge: the piece's ``MERGE INTO`` text.
    :param insert: the ``SELECT`` of the piece's rows as an insert (:func:`.merge_sql.new_keys_sql`).
    :param insert_columns: the columns that insert fills.
    :param new_keys: whether the piece may be an insert (:func:`plan` then looks for the untouched
        snapshot): ranges known, upserts only of keys the fold saw no earlier image of.
    :param single_key: one key column compared with ``=`` and hard deletes (the driver's merge).
    :param soft_delete: deletes mark rows instead of removing them.
    """

    spark: SparkSession
    target: str
    use_view: Callable[[], str]
    read: Callable[..., Iterable[pa.Table]]
    written: Sequence[LakeColumn]
    keys: tuple[str, ...]
    ranges: Mapping[str, tuple[int, int]]
    properties: Mapping[str, str]
    upserts: int
    merge: str
    insert: str
    insert_columns: Sequence[str]
    new_keys: bool
    single_key: bool
    soft_delete: bool


@dataclasses.dataclass(frozen=True)
class PlannedTable:
    """The table as one attempt plans on it.

    :param table: the JVM Iceberg ``Table`` (loaded only where a driver's path may use it), or ``None``.
    :param untouched: the snapshot in which no row can hold a staged key
        (:func:`.new_keys.untouched_snapshot`; :data:`.new_keys.EMPTY` for a table without a
        snapshot), ``None`` when the piece must merge.
    """

    table: Any | None
    untouched: int | None


def plan(piece: StagedPiece) -> PlannedTable:
    """Load what the paths decide on: the table (when a driver's path may write it) and its
    untouched snapshot (when the piece may be an insert)."""
    load = piece.new_keys or piece.single_key
    table = commits.load_iceberg_table(piece.spark, piece.target) if load else None
    untouched = (
        new_keys.untouched_snapshot(piece.spark, table, piece.ranges, piece.insert_columns)
        if piece.new_keys
        else None
    )
    return PlannedTable(table, untouched)


class WritePath(Protocol):
    """One way a piece reaches Iceberg."""

    name: str

    def write(self, piece: StagedPiece, table: PlannedTable) -> bool:
        """Commit ``piece`` to ``table`` with its properties and return ``True``, or write nothing and
        return ``False`` (not mine: the next path is tried)."""
        ...


class DriverInsertFile:
    """The piece as one data file the driver writes and commits itself (:func:`.new_keys.insert_file`)."""

    name = "driver insert file"

    def write(self, piece: StagedPiece, table: PlannedTable) -> bool:
        if table.untouched is None:
            return False
        return new_keys.insert_file(
            piece.spark,
            table.table,
            piece.target,
            piece.read,
            piece.written,
            piece.ranges,
            table.untouched,
            piece.properties,
            soft_delete=piece.soft_delete,
            expected=piece.upserts,
        )


class SparkInsert:
    """The piece as Spark's insert, validated from the untouched snapshot (:func:`.new_keys.insert`)."""

    name = "Spark insert"

    def write(self, piece: StagedPiece, table: PlannedTable) -> bool:
        if table.untouched is None:
            return False
        piece.use_view()
        with commits.commit_properties(piece.spark, piece.properties):
            predicate = merge_sql.key_range_predicate(piece.ranges)
            new_keys.insert(piece.spark, piece.target, piece.insert, predicate, table.untouched)
        return True


class DriverPositionDelta:
    """The piece merged by the driver: a data file and deletion vectors in one row delta
    (:func:`.position_delta.merge_file`)."""

    name = "driver position delta"

    def write(self, piece: StagedPiece, table: PlannedTable) -> bool:
        if table.untouched is not None or not piece.single_key:
            return False
        return position_delta.merge_file(
            piece.spark,
            table.table,
            piece.target,
            piece.read,
            piece.written,
            piece.keys[0],
            piece.ranges,
            piece.properties,
            upserts=piece.upserts,
        )


class SparkMerge:
    """The piece as Spark's ``MERGE INTO``: takes every piece that is not an insert."""

    name = "Spark MERGE"

    def write(self, piece: StagedPiece, table: PlannedTable) -> bool:
        if table.untouched is not None:
            return False
        piece.use_view()
        with commits.commit_properties(piece.spark, piece.properties):
            piece.spark.sql(piece.merge)
        return True


ORDER: tuple[WritePath, ...] = (DriverInsertFile(), SparkInsert(), DriverPositionDelta(), SparkMerge())
"""The order of trial: an insert before a merge, the driver's own commit before Spark's."""


def write(piece: StagedPiece, table: PlannedTable, order: Sequence[WritePath] = ORDER) -> WritePath:
    """Commit ``piece`` by the first path of ``order`` that takes it; return that path."""
    for path in order:
        if path.write(piece, table):
            return path
    tried = ", ".join(p.name for p in order)
    raise LakeError(f"no write path took the piece of {piece.target} (tried {tried})")
