"""Apply batches of row changes to Iceberg tables with one ``MERGE INTO`` per target and piece.

Per target table, for the entries of a batch not yet in the table (see :mod:`.commits`):

1. entries arrive in the order of their :class:`~airflow_provider_binlog.canal.change.OrderKey` and are
   folded as they arrive (:mod:`.collapse`): pieces cut at every TRUNCATE (in hard-delete mode
   everything before the last TRUNCATE is dropped: the TRUNCATE would erase it), each piece holding
   the last change per key (a key change is a delete of the old key plus an upsert of the new), so
   a chunk's memory follows the keys it touches, not the changes read;
2. the table is created on first use with the mapped schema (:mod:`.types`), new source columns are
   added and allowed widenings applied; anything else stops with :class:`SchemaEvolutionError`;
3. each piece is staged as Parquet (:mod:`.staging`) and applied by one ``MERGE INTO``
   (delete / update / insert); a TRUNCATE piece empties the table;
4. every commit carries the destination and the position of its last entry as snapshot properties.

Target columns added by options: ``_cdc_op`` (insert/update/delete/truncate), ``_cdc_ts`` (commit
time, UTC), ``_cdc_position`` (``file:pos`` of the event) with ``metadata_columns=True``, and
``_cdc_deleted`` (boolean) with ``soft_delete=True``. Append-only tables get every change as a row
with the metadata columns.

Limits: row images must be FULL for inserts and updates (``binlog_row_image=FULL``); a column added
with a DEFAULT shows NULL in rows written before it; dropped or renamed source columns stay in the
Iceberg table (NULL in new rows).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import functools
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Entry, Op, OrderKey, RowChange
from airflow_provider_binlog.faults import failpoint
from airflow_provider_binlog.lake import commits, ddl
from airflow_provider_binlog.lake.collapse import Folded, Piece, fold, staged_rows
from airflow_provider_binlog.lake.commits import CommittedMark
from airflow_provider_binlog.lake.ddl import sql_string
from airflow_provider_binlog.lake.errors import (
    LakeError,
    MissingKeyError,
    SchemaEvolutionError,
    TypeMappingError,
)
from airflow_provider_binlog.lake.session import activate
from airflow_provider_binlog.lake.sql import parse_name, quote, quote_parts
from airflow_provider_binlog.lake.staging import DEFAULT_CHUNK_ROWS, StagingArea
from airflow_provider_binlog.lake.types import (
    BOOLEAN,
    STRING,
    TIMESTAMP,
    LakeColumn,
    TypeOptions,
    map_column,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

OP_COLUMN = "_cdc_op"
TS_COLUMN = "_cdc_ts"
POSITION_COLUMN = "_cdc_position"
DELETED_COLUMN = "_cdc_deleted"
_ACTION = "_cdc_action"  # staging only: U (upsert) or D (delete)

WriteMode = Literal["copy-on-write", "merge-on-read"]


@dataclass(frozen=True)
class TargetOptions:
    """How one target table is written.

    :param key_columns: key for tables without a primary key (or to override it).
    :param append_only: append every change as a row (with metadata columns) instead of merging.
    :param soft_delete: mark deleted rows ``_cdc_deleted = true`` instead of deleting them.
    :param metadata_columns: add ``_cdc_op``, ``_cdc_ts`` and ``_cdc_position``.
    :param partition_by: Iceberg partition fields at creation: ``col``, ``days(col)``, ``bucket(16, col)``...
    :param write_mode: ``merge-on-read`` (default: a MERGE writes the changed rows and delete files,
        its cost follows the change, not the table) or ``copy-on-write`` (rewrites the data files it
        touches, all of an unpartitioned table, for faster reads); set at creation. Merge-on-read
        tables need Iceberg's ``rewrite_data_files`` from time to time, as every MERGE adds data
        files and deletion vectors (``format-version`` 2 tables: position delete files, which
        ``rewrite_position_delete_files`` compacts). See :mod:`.ddl` for the table properties.
    :param table_properties: more Iceberg table properties at creation.
    :param types: type-mapping choices.
    :param count_changes: make ``inserted``/``updated``/``deleted`` the lake's own counts (rows the
        MERGE inserted, updated, deleted), found by one extra key-only join of the staged keys with
        the table per merge, which costs about as much as the MERGE itself; off, they are the row
        changes as the source reported them (see :class:`TableCounts`).
    """

    key_columns: tuple[str, ...] = ()
    append_only: bool = False
    soft_delete: bool = False
    metadata_columns: bool = False
    partition_by: tuple[str, ...] = ()
    write_mode: WriteMode = "merge-on-read"
    table_properties: Mapping[str, str] = field(default_factory=dict)
    types: TypeOptions = field(default_factory=TypeOptions)
    count_changes: bool = False


@dataclass
class TableCounts:
    """What merges did to one target table.

    By default (``count_changes`` off) ``inserted``/``updated``/``deleted`` count the row changes the
    source reported and that were applied (INSERT, UPDATE and DELETE row images, before collapsing to
    the last change per key: a row inserted then updated in one chunk counts once in each). With
    ``count_changes`` on they are the lake's effect instead: rows that were new to the table, rows
    that existed and were overwritten, rows that existed and were removed. Either way ``deleted``
    also counts the rows a TRUNCATE removed, ``upserted`` the rows written after collapsing, and
    ``skipped`` the entries the table already held from an earlier attempt.
    """

    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    upserted: int = 0
    appended: int = 0
    truncated: int = 0
    skipped: int = 0
    commits: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def table_lock(name: str) -> threading.Lock:
    """The process-wide lock serializing merges into one target (``name`` as quoted)."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(name.lower(), threading.Lock())


def _utc_from_epoch(ts: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)


_NO_LIST: list[Entry] = []  # a sentinel: "this source was not looked up yet"
_ORDER = attrgetter("order_key")
_LOOSE_MAX = 4096  # entries ``add`` collects before folding them

_Step = tuple["Callable[[], None] | None", "CommittedMark | None"]
"""A prepared statement of one target (``None``: nothing to run) and the mark it leaves (if any)."""


@dataclass(eq=False, slots=True)
class _Pending:
    """What one target holds for its next commit: the entries the lake lacks, folded on arrival.

    :param mark: the target's committed mark when the chunk began (entries it covers are skipped).
    :param rows: every entry, for an append-only target (``None`` otherwise).
    :param error: why this target's part of the chunk cannot be merged (raised by the commit).
    """

    opts: TargetOptions
    mark: CommittedMark | None
    rows: list[Entry] | None = None
    schemas: dict[int, TableSchema] = field(default_factory=dict)
    pieces: list[Piece | DdlEntry] = field(default_factory=list)
    first: Entry | None = None
    last: Entry | None = None
    skipped: int = 0
    error: LakeError | None = None


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

    :param spark: a session from :func:`..session.create_session`.
    :param destination: the destination whose changes these are (written into every commit).
    :param tables: source ``schema.table`` -> target name (``catalog.namespace.table``; parts with
        dots or backticks in backticks). Entries of other tables are ignored.
    :param options: one :class:`TargetOptions` for all targets, or a mapping by target name.
    :param staging_root: where Parquet is staged (must be readable by executors); a temp dir if ``None``.
    :param max_rows: row images held (see :attr:`held`) before a chunk commit.
    :param parallel: targets a commit merges at once (their Spark jobs run side by side).
    """

    def __init__(
        self,
        spark: SparkSession,
        destination: str,
        tables: Mapping[str, str],
        options: TargetOptions | Mapping[str, TargetOptions] | None = None,
        staging_root: str | None = None,
        max_rows: int = 500_000,
        parallel: int = 4,
    ) -> None:
        self.spark = spark
        self.destination = destination
        self.routes: dict[str, str] = {}
        self._names: dict[str, tuple[str, ...]] = {}
        for source, target in tables.items():
            parts = parse_name(target)
            quoted = quote_parts(parts)
            self.routes[source] = quoted
            self._names[quoted] = parts
        self._options = options
        self.staging = StagingArea(staging_root)
        self.max_rows = max_rows
        self._pending: dict[str, _Pending] = {}
        self._loose: list[Entry] = []  # what ``add`` took and did not fold yet
        self._held = 0
        self._marks: dict[str, CommittedMark | None] = {}
        self._ensured: dict[str, tuple[tuple[str, str], ...]] = {}
        self._existing: set[str] = set()
        self._counts: dict[str, TableCounts] = {}
        self._staged: list[tuple[str, str]] = []  # (temp view, staged directory) not dropped yet
        self.parallel = parallel
        self._pool: ThreadPoolExecutor | None = None
        self._unrouted: set[tuple[str, str]] = set()  # sources ``add_many``'s resolver has no route for
        self.timings: dict[str, float] = {"collapse": 0.0, "stage": 0.0, "spark": 0.0}
        """Seconds so far: ``collapse`` (folding entries as they are added: skipping what the lake
        has, the last change per key), and in commits ``stage`` (row tuples -> Arrow -> Parquet) and
        ``spark`` (the rest: reading the staged file, counting, MERGE/INSERT, table DDL and marks)."""

    # ---- public API -------------------------------------------------------------------------------

    def add_route(self, source: str, target: str) -> None:
        """Route ``source`` (``schema.table``) to ``target`` from now on (for tables matched by a
        pattern, possibly created after the run started). Re-adding the same route is a no-op."""
        parts = parse_name(target)
        quoted = quote_parts(parts)
        current = self.routes.get(source)
        if current == quoted:
            return
        if current is not None:
            raise LakeError(f"{source} is routed to both {self._display(current)} and {target}")
        self.routes[source] = quoted
        self._names[quoted] = parts

    def options_for(self, target: str) -> TargetOptions:
        opts = self._options
        if opts is None:
            return TargetOptions()
        if isinstance(opts, TargetOptions):
            return opts
        parts = self._names.get(target)
        for key, value in opts.items():
            if parse_name(key) == parts or key == target:
                return value
        return TargetOptions()

    @property
    def held(self) -> int:
        """Row images held for the next commit: one per key and piece (every change for an
        append-only target), TRUNCATEs, and entries :meth:`add` took but did not fold yet."""
        return self._held + len(self._loose)

    def add(self, entry: Entry) -> None:
        """Buffer one entry; commit a chunk when ``max_rows`` row images are held."""
        loose = self._loose
        loose.append(entry)
        if len(loose) >= _LOOSE_MAX or self._held + len(loose) >= self.max_rows:
            self._fold_loose()
            if self._held >= self.max_rows:
                self._flush(end_position=None)

    def add_many(
        self, entries: Iterable[Entry], resolve: Callable[[str, str], str | None] | None = None
    ) -> int:
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
        return {self._display(t): c for t, c in counts.items()}

    def take(self) -> dict[str, _Pending]:
        """Hand over everything buffered (per target), for :meth:`commit`; the buffer starts empty."""
        if self._loose:
            self._fold_loose()
        pending, self._pending, self._held = self._pending, {}, 0
        return pending

    def commit(
        self,
        buffers: dict[str, _Pending],
        end_position: BinlogPosition | None,
        staged: Callable[[], None] | None = None,
    ) -> dict[str, TableCounts]:
        """Commit what :meth:`take` returned (and empty ``buffers``); return this commit's counts.

        :param end_position: as for :meth:`finish`.
        :param staged: called once every target's rows are staged, before the first Spark statement.
        """
        counts: dict[str, TableCounts] = {}
        self._commit(buffers, end_position, counts, staged)
        return {self._display(t): c for t, c in counts.items()}

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
        names = [quote_parts(parse_name(target))] if target else sorted(set(self.routes.values()))
        out: dict[str, CommittedMark | None] = {}
        for name in names:
            mark = commits.read_mark(self.spark, name, self.destination)
            self._marks[name] = mark
            out[self._display(name)] = mark
        return out

    def load_marks(self) -> None:
        """Load every routed target's committed mark now, as the first fold of each would (a caller
        that folds on another thread than Spark's start then never waits for a table to load)."""
        for target in sorted(set(self.routes.values())):
            self._mark(target)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.staging.close()

    def __enter__(self) -> ChangeMerger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- per target ------------------------------------------------------------------------------

    def _display(self, target: str) -> str:
        parts = self._names.get(target)
        return ".".join(parts) if parts else target

    def _flush(self, end_position: BinlogPosition | None) -> None:
        self._commit(self.take(), end_position, self._counts, None)

    def _fold_loose(self) -> None:
        loose, self._loose = self._loose, []
        self._take_in(loose, None)

    def _take_in(self, entries: Iterable[Entry], resolve: Callable[[str, str], str | None] | None) -> int:
        """Route entries to their targets and fold them; return how many row changes were routed."""
        routes = self.routes
        lists: dict[tuple[str, str], list[Entry] | None] = {}  # one route lookup per source and call
        by_target: dict[str, list[Entry]] = {}
        rows = 0
        for e in entries:
            if type(e) is RowChange:
                rows += 1
                source = (e.schema, e.table)
            elif type(e) is DdlEntry and e.table is not None:
                source = (e.schema, e.table)
            else:
                continue
            out = lists.get(source, _NO_LIST)
            if out is _NO_LIST:
                name = f"{source[0]}.{source[1]}"
                target = routes.get(name)
                if target is None and resolve is not None and source not in self._unrouted:
                    found = resolve(*source)
                    if found is None:
                        self._unrouted.add(source)
                    else:
                        self.add_route(name, found)
                        target = routes[name]
                out = None if target is None else by_target.setdefault(target, [])
                lists[source] = out
            if out is not None:
                out.append(e)
            elif type(e) is RowChange:
                rows -= 1
        t0 = time.perf_counter()
        for target, taken in by_target.items():
            self._fold(target, taken)
        self.timings["collapse"] += time.perf_counter() - t0
        return rows

    def _fold(self, target: str, entries: list[Entry]) -> None:
        """Fold one target's new entries into its pending chunk."""
        if not entries:
            return
        pending = self._pending.get(target)
        if pending is None:
            opts = self.options_for(target)
            pending = _Pending(opts, self._mark(target), rows=[] if opts.append_only else None)
            self._pending[target] = pending
        if pending.error is not None:
            return  # the commit raises it; nothing folded after it matters
        entries.sort(key=_ORDER)
        mark = pending.mark
        if mark is not None and mark.covers(entries[0].order_key):  # else none is (they are sorted)
            fresh = [e for e in entries if not mark.covers(e.order_key)]
            pending.skipped += len(entries) - len(fresh)
            entries = fresh
        if not entries:
            return
        if pending.last is not None and entries[0].order_key < pending.last.order_key:
            raise LakeError(
                f"changes for {self._display(target)} must be added in commit order: {entries[0].position} "
                f"came after {pending.last.position}"
            )
        if pending.first is None:
            pending.first = entries[0]
        pending.last = entries[-1]
        schemas = pending.schemas
        seen: TableSchema | None = None
        for e in entries:
            schema = e.table_schema  # type: ignore[union-attr]
            if schema is not seen and schema is not None:
                seen = schema
                schemas.setdefault(id(schema), schema)
        if pending.rows is not None:  # append-only: every change is a row
            pending.rows.extend(entries)
            self._held += len(entries)
            return
        try:
            self._fold_pieces(target, pending, entries)
        except LakeError as exc:
            pending.error = exc

    def _fold_pieces(self, target: str, pending: _Pending, entries: list[Entry]) -> None:
        """Cut ``entries`` at TRUNCATEs and at key changes and fold the runs of row changes."""
        opts, pieces, table = pending.opts, pending.pieces, self._display(target)
        current = pieces[-1] if pieces and isinstance(pieces[-1], Piece) else None
        run: list[RowChange] = []
        for e in entries:
            if type(e) is RowChange:
                keys = opts.key_columns or e.primary_key
                if not keys and e.table_schema is not None:
                    keys = e.table_schema.primary_key
                if current is None or (keys is not current.keys and tuple(keys) != current.keys):
                    if run:
                        assert current is not None
                        self._held += fold(current, run, table)
                        run = []
                    if not keys:
                        raise MissingKeyError(
                            f"table {e.qualified_name} (target {table}) has no primary key: give it one, "
                            "or set target_options TargetOptions(key_columns=(...)) for it, or "
                            f"TargetOptions(append_only=True) (first change at {e.position})"
                        )
                    current = Piece(tuple(keys), opts.metadata_columns)
                    pieces.append(current)
                run.append(e)
            elif type(e) is DdlEntry and e.kind is DdlKind.TRUNCATE:
                if run:
                    assert current is not None
                    self._held += fold(current, run, table)
                    run = []
                if not opts.soft_delete:  # the TRUNCATE erases what came before it
                    self._held -= sum(len(p.state) if isinstance(p, Piece) else 1 for p in pieces)
                    pieces.clear()
                pieces.append(e)
                self._held += 1
                current = None
        if run:
            assert current is not None
            self._held += fold(current, run, table)

    def _commit(
        self,
        buffers: dict[str, _Pending],
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
                prepared = [
                    (t, self._prepare(t, pending, end_position, counts.setdefault(t, TableCounts())))
                    for t, pending in buffers.items()
                ]
                buffers.clear()
                if staged is not None:
                    staged()
                self._run_all(prepared)
        finally:
            for view, name in list(self._staged):  # what a failure left staged (best effort: the
                with contextlib.suppress(Exception):  # failure itself is what the caller must see)
                    self._drop_stage(view, name)
            t["spark"] += time.perf_counter() - t0 - (t["stage"] - python)

    def _run_all(self, prepared: list[tuple[str, list[_Step]]]) -> None:
        """Run the targets' statements, several targets at once (Spark runs their jobs side by
        side: one MERGE of a small chunk leaves cores idle). Waits for every target, then raises
        the first failure; the targets that succeeded stay committed, with their marks."""
        work = [(target, steps) for target, steps in prepared if steps]
        if len(work) <= 1 or self.parallel <= 1:
            for target, steps in work:
                failpoint("merge_table")  # the crash tests stop here with some targets committed
                self._run(target, steps)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.parallel, thread_name_prefix="binlog-cdc-merge")
        futures = [self._pool.submit(self._run_here, target, steps) for target, steps in work]
        concurrent.futures.wait(futures)
        for future in futures:
            future.result()

    def _run_here(self, target: str, steps: list[_Step]) -> None:
        activate(self.spark)  # a pool thread's JVM thread has no active session of its own
        failpoint("merge_table")
        self._run(target, steps)

    def _mark(self, target: str) -> CommittedMark | None:
        if target not in self._marks:
            table = commits.load_iceberg_table(self.spark, target)
            if table is not None:
                self._existing.add(target)
            self._marks[target] = None if table is None else commits.mark_of(table, self.destination)
        return self._marks[target]

    def _run(self, target: str, steps: list[_Step]) -> None:
        """Run one target's prepared statements in order, each followed by its mark."""
        for statement, mark in steps:
            if statement is not None:
                statement()
            if mark is not None:
                self._marks[target] = mark

    def _prepare(
        self, target: str, pending: _Pending, end_position: BinlogPosition | None, counts: TableCounts
    ) -> list[_Step]:
        """Stage one target's pending chunk; return its statements (not run yet) with their marks."""
        counts.skipped += pending.skipped
        if pending.error is not None:
            raise pending.error
        first = pending.first
        if first is None:
            return []
        opts = pending.opts
        try:
            columns = self._columns(target, pending.schemas.values(), opts)
        except TypeMappingError as exc:
            raise TypeMappingError(f"{exc} (first change at {first.position})") from None
        # table DDL runs with the statements (a target failing there leaves the earlier ones committed)
        ensure: _Step = (functools.partial(self._ensure_table_for, target, columns, opts, first), None)
        if pending.rows is not None:
            last = pending.rows[-1]
            done = CommittedMark(last.order_key, last.position, end_position, last.gtid, -1)
            append = self._append(target, columns, pending.rows, opts, end_position, counts)
            return [ensure] if append is None else [ensure, (append, done)]
        steps: list[_Step] = [ensure]
        pieces = pending.pieces
        for i, piece in enumerate(pieces):
            entry = piece if isinstance(piece, DdlEntry) else piece.last
            assert entry is not None
            end = end_position if i == len(pieces) - 1 else None
            props = commits.mark_properties(
                self.destination, entry.order_key, entry.position, end, entry.gtid
            )
            statement: Callable[[], None] | None
            if isinstance(piece, DdlEntry):
                statement = functools.partial(self._truncate, target, piece, opts, props, counts)
            else:
                statement = self._merge_piece(target, columns, piece, opts, props, counts)
            done = CommittedMark(entry.order_key, entry.position, end, entry.gtid, -1)
            steps.append((statement, done))
        return steps

    def _columns(self, target: str, schemas: Iterable[TableSchema], opts: TargetOptions) -> list[LakeColumn]:
        """The union of the columns of ``schemas`` (in the order they were met), mapped."""
        defs: dict[str, ColumnDef] = {}
        table = ""
        for schema in schemas:
            table = schema.qualified_name
            for col in schema.columns:
                defs[col.name] = col
        if not table:
            raise LakeError(f"no table schema on the changes for {self._display(target)}; cannot map types")
        return [LakeColumn(name, map_column(col, opts.types, table)) for name, col in defs.items()]

    def _meta_columns(self, opts: TargetOptions) -> list[LakeColumn]:
        meta: list[LakeColumn] = []
        if opts.metadata_columns or opts.append_only:
            meta += [
                LakeColumn(OP_COLUMN, STRING),
                LakeColumn(TS_COLUMN, TIMESTAMP),
                LakeColumn(POSITION_COLUMN, STRING),
            ]
        if opts.soft_delete and not opts.append_only:
            meta.append(LakeColumn(DELETED_COLUMN, BOOLEAN))
        return meta

    def _ensure_table_for(
        self, target: str, columns: list[LakeColumn], opts: TargetOptions, first: Entry
    ) -> None:
        """:meth:`_ensure_table`; a schema it cannot evolve names where the changes begin."""
        try:
            self._ensure_table(target, columns, opts)
        except (TypeMappingError, SchemaEvolutionError) as exc:
            raise type(exc)(f"{exc} (first change at {first.position})") from None

    def _ensure_table(self, target: str, columns: list[LakeColumn], opts: TargetOptions) -> None:
        signature = tuple((c.name, c.type.sql) for c in columns)
        if self._ensured.get(target) == signature:
            return
        all_columns = columns + self._meta_columns(opts)
        if target not in self._existing:
            ddl.create_table(
                self.spark,
                self._names[target],
                all_columns,
                write_mode=None if opts.append_only else opts.write_mode,
                partition_by=opts.partition_by,
                table_properties=opts.table_properties,
            )
            self._existing.add(target)
        ddl.evolve_table(self.spark, target, self._display(target), all_columns)
        self._ensured[target] = signature

    # ---- the statements --------------------------------------------------------------------------

    def _stage_view(
        self,
        columns: list[LakeColumn],
        rows: Iterable[Sequence[Any]] = (),
        column_chunks: Iterable[Sequence[list[Any]]] | None = None,
    ) -> tuple[str, str, int]:
        """Stage ``rows`` (tuples), or ``column_chunks`` (lists of values per column), as a temp view."""
        name = uuid.uuid4().hex
        t0 = time.perf_counter()
        if column_chunks is not None:
            uri, count = self.staging.write_columns(name, columns, column_chunks)
        else:
            uri, count = self.staging.write(name, columns, rows)
        self.timings["stage"] += time.perf_counter() - t0
        view = f"binlog_cdc_stage_{name}"
        self._staged.append((view, name))
        # pyarrow writes proleptic Gregorian dates; tell Spark not to rebase (or refuse) ancient ones
        reader = self.spark.read.option("datetimeRebaseMode", "CORRECTED").option(
            "int96RebaseMode", "CORRECTED"
        )
        reader.parquet(uri).createOrReplaceTempView(view)
        return view, name, count

    def _drop_stage(self, view: str, name: str) -> None:
        self._staged.remove((view, name))
        self.spark.catalog.dropTempView(view)
        self.staging.remove(name)

    def _merge_piece(
        self,
        target: str,
        columns: list[LakeColumn],
        piece: Piece,
        opts: TargetOptions,
        props: dict[str, str],
        counts: TableCounts,
    ) -> Callable[[], None] | None:
        """Stage one folded piece (its state is released); return its MERGE (``None``: nothing left)."""
        state, keys = piece.state, piece.keys
        piece.state = {}
        reported = (piece.inserts, piece.updates, piece.deletes)
        if not state:
            return None
        names = [c.name for c in columns]
        missing = [k for k in keys if k not in names]
        if missing:
            raise MissingKeyError(f"key column(s) {missing} are not columns of {self._display(target)}")
        with_meta = opts.metadata_columns
        stage_cols = [*columns, LakeColumn(_ACTION, STRING)]
        if with_meta:
            stage_cols += [
                LakeColumn(OP_COLUMN, STRING),
                LakeColumn(TS_COLUMN, TIMESTAMP),
                LakeColumn(POSITION_COLUMN, STRING),
            ]
        items = list(state.items())
        del state
        actions = ["D" if values is None else "U" for _key, (values, _schema, _meta) in items]
        deletes = actions.count("D")
        upserts = len(actions) - deletes

        def column_chunks(items: list[tuple[Any, Folded]], actions: list[str]) -> Iterable[list[list[Any]]]:
            for lo in range(0, len(items), DEFAULT_CHUNK_ROWS):
                part = items[lo : lo + DEFAULT_CHUNK_ROWS]
                out = [list(column) for column in zip(*staged_rows(part, names, keys), strict=True)]
                out.append(actions[lo : lo + DEFAULT_CHUNK_ROWS])
                if with_meta:
                    metas = [meta for _key, (_values, _schema, meta) in part]
                    out.append([m[0].value if m else None for m in metas])
                    out.append([_utc_from_epoch(m[1]) if m else None for m in metas])
                    out.append([str(m[2]) if m else None for m in metas])
                yield out

        view, stage_name, _ = self._stage_view(stage_cols, column_chunks=column_chunks(items, actions))
        del items, actions  # the state dies here, before the MERGE runs

        def statement() -> None:
            try:
                s_view = quote(view)
                cond = " AND ".join(
                    f"t.{quote(k)} {'<=>' if opts.key_columns else '='} s.{quote(k)}" for k in keys
                )
                if opts.count_changes:
                    matched = {
                        r[0]: int(r[1])
                        for r in self.spark.sql(
                            f"SELECT s.{_ACTION}, count(*) FROM {s_view} s LEFT SEMI JOIN "
                            f"(SELECT {', '.join(quote(k) for k in keys)} FROM {target}) t ON {cond} "
                            f"GROUP BY s.{_ACTION}"
                        ).collect()
                    }
                    counts.updated += matched.get("U", 0)
                    counts.inserted += upserts - matched.get("U", 0)
                    counts.deleted += matched.get("D", 0)
                else:
                    counts.inserted += reported[0]
                    counts.updated += reported[1]
                    counts.deleted += reported[2]
                counts.upserted += upserts
                meta_set = []
                if with_meta:
                    meta_set = [f"t.{c} = s.{c}" for c in (OP_COLUMN, TS_COLUMN, POSITION_COLUMN)]
                clauses = []
                if deletes:
                    if opts.soft_delete:
                        clauses.append(
                            f"WHEN MATCHED AND s.{_ACTION} = 'D' THEN UPDATE SET "
                            + ", ".join([f"t.{DELETED_COLUMN} = true", *meta_set])
                        )
                    else:
                        clauses.append(f"WHEN MATCHED AND s.{_ACTION} = 'D' THEN DELETE")
                if upserts:
                    assign = [f"t.{quote(n)} = s.{quote(n)}" for n in names] + meta_set
                    insert_cols = [quote(n) for n in names]
                    insert_vals = [f"s.{quote(n)}" for n in names]
                    if with_meta:
                        insert_cols += [OP_COLUMN, TS_COLUMN, POSITION_COLUMN]
                        insert_vals += [f"s.{c}" for c in (OP_COLUMN, TS_COLUMN, POSITION_COLUMN)]
                    if opts.soft_delete:
                        assign.append(f"t.{DELETED_COLUMN} = false")
                        insert_cols.append(DELETED_COLUMN)
                        insert_vals.append("false")
                    clauses.append(f"WHEN MATCHED AND s.{_ACTION} = 'U' THEN UPDATE SET " + ", ".join(assign))
                    clauses.append(
                        f"WHEN NOT MATCHED AND s.{_ACTION} = 'U' THEN INSERT ({', '.join(insert_cols)}) "
                        f"VALUES ({', '.join(insert_vals)})"
                    )
                statement = f"MERGE INTO {target} t USING {s_view} s ON {cond} " + " ".join(clauses)
                with commits.commit_properties(self.spark, props):
                    self.spark.sql(statement)
                counts.commits += 1
            finally:
                self._drop_stage(view, stage_name)

        return statement

    def _truncate(
        self, target: str, entry: DdlEntry, opts: TargetOptions, props: dict[str, str], counts: TableCounts
    ) -> None:
        if opts.soft_delete:
            live = f"{DELETED_COLUMN} IS DISTINCT FROM true"
            n = int(self.spark.sql(f"SELECT count(*) FROM {target} WHERE {live}").collect()[0][0])
            sets = [f"{DELETED_COLUMN} = true"]
            if opts.metadata_columns:
                ts = _utc_from_epoch(entry.timestamp).strftime("%Y-%m-%d %H:%M:%S")
                sets += [
                    f"{OP_COLUMN} = 'truncate'",
                    f"{TS_COLUMN} = TIMESTAMP {sql_string(ts + '+00:00')}",
                    f"{POSITION_COLUMN} = {sql_string(str(entry.position))}",
                ]
            statement = f"UPDATE {target} SET {', '.join(sets)} WHERE {live}"
        else:
            n = int(self.spark.sql(f"SELECT count(*) FROM {target}").collect()[0][0])
            statement = f"DELETE FROM {target}"
        with commits.commit_properties(self.spark, props):
            self.spark.sql(statement)
        counts.deleted += n
        counts.truncated += 1
        counts.commits += 1

    def _append(
        self,
        target: str,
        columns: list[LakeColumn],
        entries: list[Entry],
        opts: TargetOptions,
        end_position: BinlogPosition | None,
        counts: TableCounts,
    ) -> Callable[[], None] | None:
        """Stage every change as a row; return the INSERT (``None`` when nothing is left)."""
        names = [c.name for c in columns]
        meta = [
            LakeColumn(OP_COLUMN, STRING),
            LakeColumn(TS_COLUMN, TIMESTAMP),
            LakeColumn(POSITION_COLUMN, STRING),
        ]
        nulls = [None] * len(names)

        def rows() -> Iterable[tuple[Any, ...]]:
            for e in entries:
                if isinstance(e, RowChange):
                    image = e.before if e.op is Op.DELETE else e.after
                    values = [image.get(n) for n in names] if image else list(nulls)
                    op = e.op.value
                elif isinstance(e, DdlEntry) and e.kind is DdlKind.TRUNCATE:
                    values, op = list(nulls), "truncate"
                else:
                    continue
                yield (*values, op, _utc_from_epoch(e.timestamp), str(e.position))

        view, stage_name, n = self._stage_view(columns + meta, rows())
        if not n:
            self._drop_stage(view, stage_name)
            return None
        last = entries[-1]
        props = commits.mark_properties(
            self.destination, last.order_key, last.position, end_position, last.gtid
        )
        cols = ", ".join(quote(c.name) for c in columns + meta)

        def statement() -> None:
            try:
                with commits.commit_properties(self.spark, props):
                    self.spark.sql(f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {quote(view)}")
                counts.appended += n
                counts.commits += 1
            finally:
                self._drop_stage(view, stage_name)

        return statement


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
    "committed_marks",
    "merge_batch",
]
