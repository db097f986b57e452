"""One target's part of a commit, prepared: its rows staged, its statements ready to run.

:meth:`Statements.prepare` turns a target's :class:`~.pending.Pending` chunk into a list of
:data:`~.runner.Step`: first the table DDL (:class:`~.ddl.TargetTables`: create, add columns,
widen), then per piece its ``MERGE INTO`` (a TRUNCATE piece: its ``DELETE`` or soft-delete
``UPDATE``), or for an append-only target one ``INSERT``. Each statement commits with the
snapshot properties of its last entry (:mod:`.commits`; the batch's end position on the last
one) and leaves that entry's mark. A piece is staged here, before anything runs, and its folded
state released; its view is dropped by its statement. The SQL text is in :mod:`.merge_sql`.

Every statement commits through :func:`.commits.commit`, which retries a conflict with another
writer (another destination, or compaction, committing to the same table meanwhile) with the
statement's mark checked again; a conflict that persists names the table and the chunk's
``file:pos`` range.
"""

from __future__ import annotations

import datetime
import functools
import itertools
import logging
import operator
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Entry, Op, RowChange
from airflow_provider_binlog.lake import commits, settings
from airflow_provider_binlog.lake.collapse import (
    Held,
    Piece,
    delete_count,
    held_metas,
    staged_actions,
    staged_rows,
)
from airflow_provider_binlog.lake.commits import CommittedMark
from airflow_provider_binlog.lake.ddl.actions import DdlActions, describe_action
from airflow_provider_binlog.lake.ddl.ddl import TargetTables, lake_columns
from airflow_provider_binlog.lake.errors import LakeError, MissingKeyError, TypeMappingError
from airflow_provider_binlog.lake.native import file_append, fold_native, new_keys
from airflow_provider_binlog.lake.options import (
    ACTION_COLUMN,
    META_COLUMNS,
    TableCounts,
    TargetOptions,
)
from airflow_provider_binlog.lake.pending import DdlStep, Pending
from airflow_provider_binlog.lake.routes import TargetRoutes
from airflow_provider_binlog.lake.shards.shard_actions import ScopedActions
from airflow_provider_binlog.lake.shards.shards import Shard, scope_sql, shard_of
from airflow_provider_binlog.lake.types import BIGINT, INT, STRING, UBIGINT, LakeColumn
from airflow_provider_binlog.lake.write import merge_sql, paths
from airflow_provider_binlog.lake.write.runner import Step
from airflow_provider_binlog.lake.write.staging import DEFAULT_CHUNK_ROWS, StagedViews

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def utc_from_epoch(ts: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)


_HELD = operator.itemgetter(1)  # of a piece's (key, held) item


def piece_columns(
    items: Iterable[tuple[Any, Held]],
    names: list[str],
    keys: tuple[str, ...],
    with_meta: bool,
    shard: int | None = None,
    schema: TableSchema | None = None,
) -> Iterable[list[list[Any]]]:
    """The staged columns of a folded piece, in chunks of rows: ``names``, the action (``U``/``D``),
    then with ``with_meta`` the metadata columns of each key's last change.

    :param shard: the index in ``names`` of the shard column, the last part of every key (see
        :mod:`.shards`).
    :param schema: the piece's :attr:`~.collapse.Piece.schema`.
    """
    rest = iter(items)
    native = _native_columns(names, keys, with_meta, shard, schema)
    while part := list(itertools.islice(rest, DEFAULT_CHUNK_ROWS)):
        if native is not None and (out := native(part)) is not None:
            yield out
            continue
        out = [list(column) for column in zip(*staged_rows(part, names, keys, schema), strict=True)]
        if shard is not None:  # an upsert's image has no shard column: its key has the value
            out[shard] = [key[-1] for key, _held in part]
        out.append(staged_actions(map(_HELD, part)))
        if with_meta:
            last = held_metas(map(_HELD, part))
            out.append([m[0].value if m else None for m in last])
            out.append([utc_from_epoch(m[1]) if m else None for m in last])
            out.append([str(m[2]) if m else None for m in last])
        yield out


def _native_columns(
    names: list[str], keys: tuple[str, ...], with_meta: bool, shard: int | None, schema: TableSchema | None
) -> Callable[[list[tuple[Any, Held]]], list[list[Any]] | None] | None:
    """:func:`piece_columns`' chunk in C (:mod:`.fold_native`: ``None`` for a chunk it does not
    take), when the piece's bare tuples are rows of ``names`` as they are; else ``None``."""
    native = fold_native.NATIVE
    if native is None or with_meta or shard is not None or schema is None:
        return None
    if schema.column_names != tuple(names):
        return None
    columns, width = native[0].columns, len(names)
    positions = tuple(names.index(k) for k in keys)
    return lambda part: columns(part, width, positions, fold_native.UPSERT, fold_native.DELETE)


KEY_RANGE_ENV = settings.env_name("key_range")
"""``off``: no key range in a MERGE's condition (:func:`key_ranges`; for measuring it)."""
_INTEGER_TYPES = (INT, BIGINT, UBIGINT)  # staged as the decoder's ints, unchanged


def key_ranges(
    held_keys: Collection[Any], keys: tuple[str, ...], columns: list[LakeColumn]
) -> dict[str, tuple[int, int]]:
    """Integer key column -> the lowest and highest value a piece stages in it (a column with a NULL
    or a non-integer value among them is left out), for :func:`.merge_sql.key_condition`.

    :param held_keys: the piece's keys (its state), each the key column's value or a tuple of them.
    """
    if not held_keys or not settings.current().key_range:
        return {}
    types = {c.name: c.type for c in columns}
    found: dict[str, tuple[int, int]] = {}
    for i, name in enumerate(keys):
        if types.get(name) not in _INTEGER_TYPES:
            continue
        values = list(held_keys) if len(keys) == 1 else [key[i] for key in held_keys]
        try:
            lo, hi = min(values), max(values)
        except TypeError:  # a NULL (a configured key column), or mixed types
            continue
        if type(lo) is int and type(hi) is int and all(type(v) is int for v in values):
            found[name] = (lo, hi)
    return found


def append_rows(
    entries: Iterable[Entry], names: list[str], shard: Shard | None = None
) -> Iterable[tuple[Any, ...]]:
    """The staged rows of an append-only target: per row change its image (the before image of a
    delete), per TRUNCATE a row of NULLs, each followed by the metadata columns (after the shard
    value when ``shard`` is given: then the last of ``names`` is the shard column)."""
    if shard is not None:
        names = names[:-1]
    nulls: list[Any] = [None] * len(names)
    for e in entries:
        if isinstance(e, RowChange):
            image = e.before if e.op is Op.DELETE else e.after
            values = [image.get(n) for n in names] if image else list(nulls)
            op = e.op.value
        elif isinstance(e, DdlEntry) and e.kind is DdlKind.TRUNCATE:
            values, op = list(nulls), "truncate"
        else:
            continue
        if shard is not None:
            values.append(shard(e.schema, e.table or ""))
        yield (*values, op, utc_from_epoch(e.timestamp), str(e.position))


class Statements:
    """Prepares the commits of one merger's targets.

    :param spark: the session.
    :param destination: written into every commit's mark.
    :param routes: the targets' names.
    :param tables: the targets' DDL state.
    :param views: where rows are staged.
    """

    def __init__(
        self,
        spark: SparkSession,
        destination: str,
        routes: TargetRoutes,
        tables: TargetTables,
        views: StagedViews,
    ) -> None:
        self.spark = spark
        self.destination = destination
        self.routes = routes
        self.tables = tables
        self.views = views
        self.actions = DdlActions(spark, tables)

    def prepare(
        self, target: str, pending: Pending, end_position: BinlogPosition | None, counts: TableCounts
    ) -> list[Step]:
        """Stage one target's pending chunk; return its statements (not run yet) with their marks.

        :raises LakeError: what folding the chunk met (:attr:`Pending.error`), or a type mapping error.
        """
        counts.skipped += pending.skipped
        if pending.error is not None:
            raise pending.error
        first = pending.first
        if first is None:
            return []
        opts = pending.opts
        display = self.routes.display(target)
        parts = self.routes.parts[target]
        changes = f"{first.position} to {_last_position(pending)}"

        def ensure_step(schemas: Iterable[TableSchema], where: Entry) -> tuple[Step, list[LakeColumn]]:
            try:
                columns = lake_columns(schemas, opts, display)
            except TypeMappingError as exc:
                raise TypeMappingError(f"{exc} (first change at {where.position})") from None
            ensure = functools.partial(
                self.tables.ensure, target, parts, display, columns, opts, where.position
            )
            return (ensure, None), columns

        # table DDL runs with the statements (a target failing there leaves the earlier ones committed)
        if pending.rows is not None:
            step, all_columns = ensure_step(pending.schemas.values(), first)
            last = pending.rows[-1]
            done = CommittedMark(last.order_key, last.position, end_position, last.gtid, -1)
            append = self._append(target, all_columns, pending.rows, end_position, counts, changes, opts)
            steps: list[Step] = [step]
            return steps if append is None else [*steps, (append, done)]
        pieces = pending.pieces
        steps = []
        segment, ensured = 0, -1  # the segment of the pieces, the one the table was last given
        columns: list[LakeColumn] = []
        for i, piece in enumerate(pieces):
            entry = (
                piece.last
                if isinstance(piece, Piece)
                else piece.entry
                if isinstance(piece, DdlStep)
                else piece
            )
            assert entry is not None
            end = end_position if i == len(pieces) - 1 else None
            props = commits.mark_properties(
                self.destination, entry.order_key, entry.position, end, entry.gtid
            )
            if isinstance(piece, DdlStep):
                segment = piece.segment
            elif segment != ensured and pending.segments[segment]:
                # the table takes this segment's columns after the DDL step before it ran
                ensured = segment
                step, columns = ensure_step(pending.segments[segment].values(), entry)
                steps.append(step)
            statement: Callable[[], None] | None
            if isinstance(piece, DdlStep):
                statement = functools.partial(self._ddl, target, piece, opts, props, counts, changes)
            elif isinstance(piece, DdlEntry):
                statement = functools.partial(self._truncate, target, piece, opts, props, counts, changes)
            else:
                statement = self._merge_piece(target, columns, piece, opts, props, counts, changes)
            done = CommittedMark(entry.order_key, entry.position, end, entry.gtid, -1)
            steps.append((statement, done))
        return steps

    def _merge_piece(
        self,
        target: str,
        columns: list[LakeColumn],
        piece: Piece,
        opts: TargetOptions,
        props: dict[str, str],
        counts: TableCounts,
        changes: str,
    ) -> Callable[[], None] | None:
        """Stage one folded piece (its state is released); return its MERGE (``None``: nothing left)."""
        state, keys, existing = piece.state, piece.keys, piece.existing
        piece.state = {}
        reported = (piece.inserts, piece.updates, piece.deletes)
        if not state:
            return None
        names = [c.name for c in columns]
        shard_at = None
        if opts.shard_column:
            if opts.shard_column in names:
                raise MissingKeyError(
                    f"the shard column {opts.shard_column!r} of {self.routes.display(target)} is a source "
                    "column too: choose another shard_column"
                )
            columns = [*columns, LakeColumn(opts.shard_column, STRING)]
            shard_at, names = len(names), [*names, opts.shard_column]
        missing = [k for k in keys if k not in names]
        if missing:
            raise MissingKeyError(f"key column(s) {missing} are not columns of {self.routes.display(target)}")
        with_meta = opts.metadata_columns
        stage_cols = [*columns, LakeColumn(ACTION_COLUMN, STRING)]
        if with_meta:
            stage_cols += META_COLUMNS
        # the state is read where it is (a list of its items would cost 64 bytes more per row image)
        deletes = delete_count(state, with_meta)
        upserts = len(state) - deletes
        ranges = key_ranges(state, keys, columns)
        view, stage_name, _ = self.views.stage(
            stage_cols,
            column_chunks=piece_columns(state.items(), names, keys, with_meta, shard_at, piece.schema),
        )
        del state  # the state dies here, before the MERGE runs
        null_safe = bool(opts.key_columns)
        statement = merge_sql.merge_sql(
            target,
            view,
            names,
            keys,
            null_safe=null_safe,
            deletes=deletes > 0,
            upserts=upserts > 0,
            soft_delete=opts.soft_delete,
            with_meta=with_meta,
            key_ranges=ranges,
        )
        # the keys none of the table's rows can hold: an insert (see .new_keys)
        insert, columns_filled = merge_sql.new_keys_sql(
            view, names, soft_delete=opts.soft_delete, with_meta=with_meta
        )
        staged = paths.StagedPiece(
            spark=self.spark,
            target=target,
            use_view=functools.partial(self.views.use, view),
            read=functools.partial(self.views.area.read, stage_name),
            written=[c for c in stage_cols if c.name != ACTION_COLUMN],  # what a driver's data file holds
            keys=keys,
            ranges=ranges,
            properties=props,
            upserts=upserts,
            merge=statement,
            insert=insert,
            insert_columns=columns_filled,
            # an update or delete of a key from before the piece: the table holds a staged key
            new_keys=bool(ranges) and upserts > 0 and not existing and new_keys.enabled(),
            # the driver's own MERGE (.position_delta): one key column compared with =, hard deletes
            single_key=len(keys) == 1 and not null_safe and not opts.soft_delete,
            soft_delete=opts.soft_delete,
        )
        spark = self.spark

        def apply(checked: list[paths.PlannedTable]) -> None:
            paths.write(staged, checked.pop() if checked else paths.plan(staged))  # a retry plans anew

        def run() -> None:
            try:
                checked = [paths.plan(staged)]
                if opts.count_changes and checked[0].untouched is not None:
                    counts.inserted += upserts  # no staged key in the table: nothing matched
                elif opts.count_changes:
                    query = merge_sql.matched_actions_sql(target, self.views.use(view), keys, null_safe)
                    matched = {r[0]: int(r[1]) for r in spark.sql(query).collect()}
                    counts.updated += matched.get("U", 0)
                    counts.inserted += upserts - matched.get("U", 0)
                    counts.deleted += matched.get("D", 0)
                else:
                    counts.inserted += reported[0]
                    counts.updated += reported[1]
                    counts.deleted += reported[2]
                counts.upserted += upserts
                # the driver's commits carry ``props`` themselves; Spark's get them attached in apply
                commits.commit(spark, target, props, functools.partial(apply, checked), changes, attach=False)
                counts.commits += 1
            finally:
                self.views.drop(view, stage_name)

        return run

    def _ddl(
        self,
        target: str,
        step: DdlStep,
        opts: TargetOptions,
        props: dict[str, str],
        counts: TableCounts,
        changes: str,
    ) -> None:
        # the actions converge from any state (see .actions) and write the mark last themselves
        entry = step.entry
        if opts.shard_column or opts.unique_keys or self._sources(target) > 1:
            try:
                scope, problem = self._scope(target, opts, entry, f"the statement {entry.sql[:200]!r}"), None
            except LakeError as exc:  # raised by an action that touches rows
                scope, problem = None, str(exc)
            scoped = ScopedActions(self.spark, self.tables)
            run = functools.partial(scoped.run_scoped, target, step.actions, opts, props, scope, problem)
        else:
            run = functools.partial(self.actions.run, target, step.actions, opts, props)
        commits.commit(self.spark, target, props, run, changes, attach=False)
        counts.commits += 1
        if step.actions:  # the task log names the DDL each run applied
            log.info(
                "%s: %s (the statement at %s: %s)",
                self.routes.display(target), "; ".join(describe_action(a) for a in step.actions),
                entry.position, " ".join(entry.sql.split())[:300],
            )  # fmt: skip

    def _truncate(
        self,
        target: str,
        entry: DdlEntry,
        opts: TargetOptions,
        props: dict[str, str],
        counts: TableCounts,
        changes: str,
    ) -> None:
        meta = None
        if opts.soft_delete and opts.metadata_columns:
            meta = (utc_from_epoch(entry.timestamp), str(entry.position))
        where = self._scope(target, opts, entry, "a TRUNCATE TABLE")
        count_query, statement = merge_sql.truncate_sql(target, opts.soft_delete, meta, where)
        n = int(self.spark.sql(count_query).collect()[0][0])
        commits.commit(self.spark, target, props, functools.partial(self.spark.sql, statement), changes)
        counts.deleted += n
        counts.truncated += 1
        counts.commits += 1

    def _append(
        self,
        target: str,
        columns: list[LakeColumn],
        entries: list[Entry],
        end_position: BinlogPosition | None,
        counts: TableCounts,
        changes: str,
        opts: TargetOptions | None = None,
    ) -> Callable[[], None] | None:
        """Stage every change as a row; return the INSERT (``None`` when nothing is left)."""
        shard = None if opts is None else shard_of(opts)
        if shard is not None:
            columns = [*columns, LakeColumn(shard.column, STRING)]
        all_columns = [*columns, *META_COLUMNS]
        view, stage_name, n = self.views.stage(
            all_columns, append_rows(entries, [c.name for c in columns], shard)
        )
        if not n:
            self.views.drop(view, stage_name)
            return None
        last = entries[-1]
        props = commits.mark_properties(
            self.destination, last.order_key, last.position, end_position, last.gtid
        )
        statement = merge_sql.append_sql(target, view, [c.name for c in all_columns])
        spark = self.spark

        def apply() -> None:
            read = functools.partial(self.views.area.read, stage_name)
            if not file_append.append(spark, target, read, all_columns, props, n):
                # Spark's commit cannot move the tag with it: say first what it is about to mark
                commits.record_intent(spark, target, props)
                self.views.use(view)
                spark.sql(statement)

        def run() -> None:
            try:
                commits.commit(spark, target, props, apply, changes)
                counts.appended += n
                counts.commits += 1
            finally:
                self.views.drop(view, stage_name)

        return run

    def _sources(self, target: str) -> int:
        """How many source tables of this destination are routed to ``target`` (known so far)."""
        return sum(1 for t in self.routes.by_source.values() if t == target)

    def _scope(self, target: str, opts: TargetOptions, entry: DdlEntry, what: str) -> str | None:
        """The rows of ``entry``'s source in ``target`` (:func:`.shards.scope_sql`)."""
        return scope_sql(
            opts, entry.schema, entry.table, self._sources(target), what, self.routes.display(target)
        )


def _last_position(pending: Pending) -> BinlogPosition | None:
    """The position of a chunk's last entry."""
    if pending.rows is not None:
        return pending.rows[-1].position if pending.rows else None
    for piece in reversed(pending.pieces):
        entry = (
            piece.last if isinstance(piece, Piece) else piece.entry if isinstance(piece, DdlStep) else piece
        )
        if entry is not None:
            return entry.position
    return None
