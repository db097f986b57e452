"""Apply batches of row changes to Iceberg tables with one ``MERGE INTO`` per target and piece.

Per target table, for the entries of a batch not yet in the table (see :mod:`.commits`):

1. entries are routed to their target (:mod:`.routes`) and folded as they arrive (:mod:`.pending`,
   :mod:`.collapse`): pieces cut at every TRUNCATE (in hard-delete mode everything before the
   last TRUNCATE is dropped: the TRUNCATE would erase it), each piece holding the last change per
   key (a key change is a delete of the old key plus an upsert of the new), so a chunk's memory
   follows the keys it touches, not the changes read;
2. the table is created on first use with the mapped schema (:mod:`.types`), new source columns are
   added and allowed widenings applied; anything else stops with :class:`SchemaEvolutionError`
   (:mod:`.ddl`);
3. each piece is staged as Parquet (:mod:`.staging`) and applied by one ``MERGE INTO``
   (delete / update / insert); a TRUNCATE piece empties the table (:mod:`.statements`, the SQL
   text in :mod:`.merge_sql`); the targets of a commit run side by side (:mod:`.runner`);
4. every commit carries the destination and the position of its last entry as snapshot properties.

The columns that options add are described in :mod:`.options`.

DDL statements act at their place (:mod:`airflow_provider_binlog.canal.sql.operations` classifies them,
:mod:`.actions` runs them between pieces), or stop the run as ``on_schema_change`` says.

Limits: row images must be FULL for inserts and updates (``binlog_row_image=FULL``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Entry, OrderKey
from airflow_provider_binlog.canal.sql.operations import Policy
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.commits import CommittedMark
from airflow_provider_binlog.lake.ddl.ddl import TargetTables
from airflow_provider_binlog.lake.options import (
    DELETED_COLUMN,
    OP_COLUMN,
    POSITION_COLUMN,
    TS_COLUMN,
    TableCounts,
    TargetOptions,
    WriteMode,
    options_for,
)
from airflow_provider_binlog.lake.pending import Pending
from airflow_provider_binlog.lake.routes import Resolver, TargetRoutes
from airflow_provider_binlog.lake.shards import shards
from airflow_provider_binlog.lake.spark.session import activate
from airflow_provider_binlog.lake.sql import parse_name, quote_parts
from airflow_provider_binlog.lake.verify.describe import chunk_sources
from airflow_provider_binlog.lake.write.runner import Step, TargetRunner, table_lock
from airflow_provider_binlog.lake.write.staging import StagedViews, StagingArea
from airflow_provider_binlog.lake.write.statements import Statements

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_binlog.binlog.columns import TableSchema

_LOOSE_MAX = 4096  # entries ``add`` collects before folding them


DEFAULT_PARALLEL = 8
"""Targets a commit merges at once. A table the driver merges (:mod:`.position_delta`) waits on the
JVM for most of its time (its Iceberg commit: about 65 ms of a small table's 95 ms), so more
tables than cores keep both the JVM and Python busy: 200 tables of 500k changes on 2 cores took 9.1
s with 8 at once, 10.2 s with 4, 9.0 s with 12 (issue #20's fourteenth round in
docs/performance-history-2026-12-01.md)."""


class ChangeMerger:
    """Merges change entries of one destination into Iceberg tables.

    Feed entries in commit order with :meth:`add` or :meth:`add_many` (or a whole batch with
    :meth:`merge`). They are folded as they arrive (the last change per key, see :mod:`.collapse`),
    and once ``max_rows`` row images are held they are committed as a chunk, so memory stays
    bounded by the keys a chunk touches however large the drain. :meth:`finish` commits the rest
    with the batch's end position and returns the counts.

    A caller that keeps adding while a chunk commits (the operator: the next chunk is read while
    Spark merges) uses :meth:`take` and :meth:`commit` instead, the commit in one other thread at
    a time; ``max_rows`` must then be out of reach, since an automatic flush would race the commit.
    The entries themselves are not kept (only the images a chunk needs), so a caller may drop them
    as soon as :meth:`add_many` returned. A commit first stages every target's rows (Arrow,
    Parquet), then calls ``staged``, then runs the Spark statements.

    The merger coordinates: :class:`~.routes.TargetRoutes` (source -> target), one
    :class:`~.pending.Pending` per target (folding), :class:`~.commits.Marks` (what each table
    holds), :class:`~.ddl.TargetTables` (table DDL), :class:`~.statements.Statements` with
    :class:`~.staging.StagedViews` (staging, SQL) and :class:`~.runner.TargetRunner` (targets side
    by side, marks moved on as statements commit).

    :param spark: a session from :func:`..session.create_session`.
    :param destination: the destination whose changes these are (written into every commit).
    :param tables: source ``schema.table`` -> target name (``catalog.namespace.table``; parts with
        dots or backticks in backticks). Entries of other tables are ignored.
    :param options: one :class:`TargetOptions` for all targets, or a mapping by target name.
    :param staging_root: where Parquet is staged (must be readable by executors); ``None``: the
        session's (:func:`~.staging.staging_root`: by default under the catalog's warehouse).
    :param max_rows: row images held (see :attr:`held`) before a chunk commit.
    :param parallel: targets a commit merges at once (their Spark jobs run side by side;
        :data:`DEFAULT_PARALLEL`).
    :param on_schema_change: the policy for targets whose options leave it ``None`` (see
        :class:`TargetOptions`).
    """

    def __init__(
        self,
        spark: SparkSession,
        destination: str,
        tables: Mapping[str, str],
        options: TargetOptions | Mapping[str, TargetOptions] | None = None,
        staging_root: str | None = None,
        max_rows: int = 500_000,
        parallel: int = DEFAULT_PARALLEL,
        on_schema_change: str | Mapping[str, str] | None = None,
    ) -> None:
        Policy.of(on_schema_change)  # a bad value fails here, not at the first DDL
        self.on_schema_change = on_schema_change
        self.spark = spark
        self.destination = destination
        self._routes = TargetRoutes(tables)
        self.routes = self._routes.by_source
        """Source ``schema.table`` -> quoted target name (read only: use :meth:`add_route`)."""
        self._options = options
        self.staging = StagingArea.for_session(spark, destination, staging_root, tables.values())
        self.max_rows = max_rows
        self.parallel = parallel
        self.timings: dict[str, float] = {"collapse": 0.0, "stage": 0.0, "spark": 0.0}
        """Seconds so far: ``collapse`` (folding entries as they are added: skipping what the lake
        has, the last change per key), and in commits ``stage`` (row tuples -> Arrow -> Parquet) and
        ``spark`` (the rest: reading the staged file, counting, MERGE/INSERT, table DDL and marks)."""
        self.target_tables = TargetTables(spark)
        self.marks = commits.Marks(
            spark,
            destination,
            found=self.target_tables.existing.add,
            append_only=lambda target: self.options_for(target).append_only,
            display=self._routes.display,
        )
        self.views = StagedViews(spark, self.staging, self.timings)
        self.statements = Statements(spark, destination, self._routes, self.target_tables, self.views)
        self.runner = TargetRunner(spark, parallel, committed=self.marks.put)
        self._pending: dict[str, Pending] = {}
        self._loose: list[Entry] = []  # what ``add`` took and did not fold yet
        self._held = 0
        self._counts: dict[str, TableCounts] = {}
        self._resolve: Resolver | None = None  # the last resolver add_many was given
        self.read: dict[str, int] = {}
        """Quoted target -> the changes (row changes and statements) of its sources this merger
        took (those the table already held included)."""
        self.sources: dict[str, dict[str, TableSchema]] = {}
        """Target (dotted) -> the source tables of the changes committed to it, each with the newest
        schema met (:func:`~.describe.chunk_sources`), for lineage."""

    # ---- public API -------------------------------------------------------------------------------

    def add_route(self, source: str, target: str) -> None:
        """Route ``source`` (``schema.table``) to ``target`` from now on (for tables matched by a
        pattern, possibly created after the run started). Re-adding the same route is a no-op."""
        self._routes.add(source, target)

    def display(self, target: str) -> str:
        """The dotted name of a target known by its quoted name (as in :attr:`routes`)."""
        return self._routes.display(target)

    def options_for(self, target: str) -> TargetOptions:
        found = shards.bind(self._options_for(target), self.destination)  # the shard value, if any
        if found.on_schema_change is None and self.on_schema_change is not None:
            return dataclasses.replace(found, on_schema_change=self.on_schema_change)
        return found

    def _options_for(self, target: str) -> TargetOptions:
        return options_for(self._options, target, self._routes.parts.get(target))

    @property
    def held(self) -> int:
        """Row images held for the next commit: one per key and piece (every change for an
        append-only target), TRUNCATEs, and entries :meth:`add` took but did not fold yet."""
        return self._held + len(self._loose)

    @property
    def targets(self) -> int:
        """How many targets the next commit holds row images for (each costs at least one
        statement; entries :meth:`add` took but did not fold yet are not counted)."""
        return sum(1 for pending in self._pending.values() if pending.held)

    def add(self, entry: Entry) -> None:
        """Buffer one entry; commit a chunk when ``max_rows`` row images are held."""
        loose = self._loose
        loose.append(entry)
        if len(loose) >= _LOOSE_MAX or self._held + len(loose) >= self.max_rows:
            self._fold_loose()
            if self._held >= self.max_rows:
                self._flush(end_position=None)

    def add_many(self, entries: Iterable[Entry], resolve: Resolver | None = None) -> int:
        """Buffer entries like :meth:`add` (a chunk is committed after them, not among them); return
        how many row changes were routed to a target.

        :param resolve: ``(schema, table) -> target or None`` for sources without a route yet (a
            pattern route meeting a table for the first time); asked once per source and merger.
        """
        if self._loose:
            self._fold_loose()
        rows = self._take_in(entries, resolve)
        if self._held >= self.max_rows:
            self._flush(end_position=None)
        return rows

    def finish(self, end_position: BinlogPosition | None = None) -> dict[str, TableCounts]:
        """Commit everything buffered; return counts per target since the last ``finish``.

        :param end_position: the batch's end position (recorded on each table's last commit).
        """
        self._flush(end_position=end_position)
        counts, self._counts = self._counts, {}
        return {self._routes.display(t): c for t, c in counts.items()}

    def take(self) -> dict[str, Pending]:
        """Hand over everything buffered (per target), for :meth:`commit`; the buffer starts empty."""
        if self._loose:
            self._fold_loose()
        pending, self._pending, self._held = self._pending, {}, 0
        return pending

    def commit(
        self,
        buffers: dict[str, Pending],
        end_position: BinlogPosition | None,
        staged: Callable[[], None] | None = None,
    ) -> dict[str, TableCounts]:
        """Commit what :meth:`take` returned (and empty ``buffers``); return this commit's counts.

        :param end_position: as for :meth:`finish`.
        :param staged: called once every target's rows are staged, before the first Spark statement.
        """
        counts: dict[str, TableCounts] = {}
        self._commit(buffers, end_position, counts, staged)
        return {self._routes.display(t): c for t, c in counts.items()}

    def merge(
        self, entries: Iterable[Entry], end_position: BinlogPosition | None = None
    ) -> dict[str, TableCounts]:
        """Apply one batch (in commit order): :meth:`add` every entry, then :meth:`finish`."""
        for entry in entries:
            self.add(entry)
        return self.finish(end_position)

    def committed(self, target: str | None = None) -> dict[str, CommittedMark | None]:
        """Read each target's committed mark for this destination from Iceberg (fresh, not cached).

        :param target: one target name, or ``None`` for all routed targets.
        """
        names = [quote_parts(parse_name(target))] if target else self._routes.targets()
        return {self._routes.display(name): self.marks.read(name) for name in names}

    def load_marks(self) -> dict[str, dict[str, str] | None]:
        """Load every routed target's committed mark now, as the first fold of each would (a caller
        that folds on another thread than Spark's start then never waits for a table to load).
        Several tables are read at once (:meth:`~.runner.TargetRunner.map`).

        :return: each target's table properties, read with its mark (``None``: no table yet), for
            :func:`.shard_writers.check_merger`.
        """
        targets = list(self._routes.targets())
        return dict(zip(targets, self.runner.map(self.marks.load, targets), strict=True))

    def forget(self, target: str) -> int:
        """Drop what is held for ``target`` (a re-snapshot replaces its contents); return the row
        images dropped. Entries of it folded later are skipped as its mark then says."""
        quoted = quote_parts(parse_name(target))
        pending = self._pending.pop(quoted, None)
        if pending is None:
            return 0
        self._held -= pending.held
        return pending.held

    def put_mark(self, target: str, mark: CommittedMark) -> None:
        """Take ``mark`` as ``target``'s committed mark (a re-snapshot swapped in at it): what it
        covers is skipped from now on, what follows it is applied."""
        quoted = quote_parts(parse_name(target))
        if quoted in self._pending:
            raise ValueError(f"{self._routes.display(quoted)} holds changes: forget() them first")
        self.marks.put(quoted, mark)
        self.target_tables.existing.add(quoted)

    def close(self) -> None:
        self.runner.close()
        self.staging.close()

    def __enter__(self) -> ChangeMerger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- folding ---------------------------------------------------------------------------------

    def _flush(self, end_position: BinlogPosition | None) -> None:
        self._commit(self.take(), end_position, self._counts, None)

    def _fold_loose(self) -> None:
        loose, self._loose = self._loose, []
        self._take_in(loose, None)

    def _take_in(self, entries: Iterable[Entry], resolve: Resolver | None) -> int:
        """Route entries to their targets and fold them; return how many row changes were routed."""
        if resolve is not None:
            self._resolve = resolve
        by_target, rows = self._routes.split(entries, resolve)
        t0 = time.perf_counter()
        for target, taken in by_target.items():
            self._fold(target, taken)
        self.timings["collapse"] += time.perf_counter() - t0
        read = self.read  # counted once every target took the batch (a batch folded again after
        for target, taken in by_target.items():  # a re-snapshot raised in it counts once)
            read[target] = read.get(target, 0) + len(taken)
        return rows

    def _route(self, schema: str, table: str) -> str | None:
        """The quoted target of ``schema.table`` (``None``: not routed), for a RENAME's other names."""
        found = self._routes.by_source.get(f"{schema}.{table}")
        if found is None and self._resolve is not None:
            target = self._resolve(schema, table)
            found = None if target is None else quote_parts(parse_name(target))
        return found

    def _fold(self, target: str, entries: list[Entry]) -> None:
        """Fold one target's new entries into its pending chunk."""
        if not entries:
            return
        pending = self._pending.get(target)
        if pending is None:
            pending = Pending.new(self.options_for(target), self.marks.get(target))
            pending.target = self._routes.display(target)
            pending.route = self._route
            self._pending[target] = pending
        held = pending.held
        try:
            pending.add(entries, self._routes.display(target))
        finally:
            self._held += pending.held - held

    # ---- committing ------------------------------------------------------------------------------

    def _commit(
        self,
        buffers: dict[str, Pending],
        end_position: BinlogPosition | None,
        counts: dict[str, TableCounts],
        staged: Callable[[], None] | None,
    ) -> None:
        t = self.timings
        t0, python = time.perf_counter(), t["stage"]
        activate(self.spark)  # the commit thread's JVM thread has no active session of its own
        try:
            with contextlib.ExitStack() as locks:
                for target in sorted(buffers):
                    locks.enter_context(table_lock(target))
                prepare = self.statements.prepare
                sources = {target: chunk_sources(p) for target, p in buffers.items()}

                def prepared() -> Iterator[tuple[str, list[Step]]]:
                    """Each target staged in turn: it merges while the next one is staged."""
                    for name, pending in list(buffers.items()):
                        counted = counts.setdefault(name, TableCounts())
                        yield name, prepare(name, pending, end_position, counted)
                    buffers.clear()
                    if staged is not None:
                        staged()

                self.runner.run_as_prepared(prepared())
                for target, found in sources.items():
                    if found:  # else every change was in the table already
                        self.sources.setdefault(self._routes.display(target), {}).update(found)
        finally:
            self.views.drop_all()  # what a failure left staged
            t["spark"] += time.perf_counter() - t0 - (t["stage"] - python)


def committed_marks(
    spark: SparkSession, targets: Iterable[str], destination: str
) -> dict[str, CommittedMark | None]:
    """Read the committed mark of each target table for ``destination`` (for reconciliation).

    :param targets: target names as given to :class:`ChangeMerger`.
    """
    return {t: commits.read_mark(spark, quote_parts(parse_name(t)), destination) for t in targets}


def merge_batch(
    spark: SparkSession,
    destination: str,
    tables: Mapping[str, str],
    entries: Iterable[Entry],
    end_position: BinlogPosition | None = None,
    options: TargetOptions | Mapping[str, TargetOptions] | None = None,
    staging_root: str | None = None,
    max_rows: int = 500_000,
) -> dict[str, TableCounts]:
    """Merge one batch of entries and return counts per target (a one-shot :class:`ChangeMerger`)."""
    with ChangeMerger(spark, destination, tables, options, staging_root, max_rows) as merger:
        return merger.merge(entries, end_position)


__all__ = [
    "DELETED_COLUMN",
    "OP_COLUMN",
    "POSITION_COLUMN",
    "TS_COLUMN",
    "ChangeMerger",
    "OrderKey",
    "TableCounts",
    "TargetOptions",
    "WriteMode",
    "committed_marks",
    "merge_batch",
    "table_lock",
]
