"""What one target holds for its next commit (:class:`Pending`): the entries its table lacks, folded
as they arrive. Pure Python (no Spark).

Entries of one target come in batches, each sorted here by its
:class:`~airflow_provider_binlog.canal.change.OrderKey` and after the batches before it. Entries the
table's committed mark covers are skipped (an earlier attempt applied them). The rest become:

* for an append-only target, the list of every entry (each change is a row);
* otherwise a list of pieces, in order: :class:`~.collapse.Piece` (the row changes under one key,
  folded to the last change per key), TRUNCATE :class:`~airflow_provider_binlog.canal.change.DdlEntry`
  and :class:`DdlStep` (a DDL whose lake actions run at its place, see
  :mod:`airflow_provider_binlog.canal.sql.operations`). A piece ends at every TRUNCATE and DDL step and
  wherever the key columns change. In hard-delete mode a TRUNCATE drops every piece before it (it
  would erase them; DDL steps stay); with soft deletes they stay.

Each DDL step starts a new *segment*: the schemas of the row changes after it are kept apart from
those before (:attr:`Pending.segments`), so the table takes the columns of each segment only after
the DDL step before it ran (a renamed column is renamed, not added). A DDL whose verdict under the
target's ``on_schema_change`` is ``resnapshot`` or ``fail`` raises
:class:`~airflow_provider_binlog.canal.sql.operations.SourceOperationError` (or its subclass
:class:`~airflow_provider_binlog.canal.sql.operations.ResnapshotNeeded`) from the fold, before anything
after it is folded. Append-only targets keep every change as a row and only add and widen columns.
A statement-format DML (``DdlKind.STATEMENT_DML``) that the mark does not cover raises the same way
under the class ``statement_dml`` (append-only targets too: their log would lack its rows).

:attr:`Pending.held` counts the row images held: keys per piece, TRUNCATEs, every entry of an
append-only target. An error while folding (a partial row image, a table without a key) is kept
in :attr:`Pending.error` and raised by the commit; nothing folded after it matters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING

from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Entry, RowChange
from airflow_provider_binlog.canal.sql import operations
from airflow_provider_binlog.lake.collapse import Piece, fold
from airflow_provider_binlog.lake.errors import LakeError, MissingKeyError
from airflow_provider_binlog.lake.native import fold_native
from airflow_provider_binlog.lake.options import TargetOptions
from airflow_provider_binlog.lake.shards.shards import Shard, shard_keys, shard_of, shard_rename

if TYPE_CHECKING:
    from airflow_provider_binlog.lake.commits import CommittedMark

_ORDER = attrgetter("order_key")


def _in_order(entries: list[Entry]) -> bool:
    """Whether the entries' order keys strictly increase (in C when the C fold is built; else
    ``False``: the caller sorts)."""
    native = fold_native.NATIVE
    return native is not None and bool(native[0].in_order(native[1], entries))


@dataclass(eq=False, slots=True)
class DdlStep:
    """A DDL statement whose lake actions run at its place among the pieces.

    :param entry: the statement (its mark is the step's mark).
    :param actions: what the lake does (:mod:`airflow_provider_binlog.canal.sql.operations`).
    :param segment: the segment it starts.
    """

    entry: DdlEntry
    actions: tuple[operations.LakeAction, ...]
    segment: int


@dataclass(eq=False, slots=True)
class Pending:
    """What one target holds for its next commit: the entries the lake lacks, folded on arrival.

    :param opts: the target's options.
    :param mark: the target's committed mark when the chunk began (entries it covers are skipped).
    :param rows: every entry, for an append-only target (``None`` otherwise).
    :param error: why this target's part of the chunk cannot be merged (raised by the commit).
    """

    opts: TargetOptions
    mark: CommittedMark | None
    rows: list[Entry] | None = None
    schemas: dict[int, TableSchema] = field(default_factory=dict)
    """Append-only: the table schemas of the entries taken (by identity), in the order they were met."""
    pieces: list[Piece | DdlEntry | DdlStep] = field(default_factory=list)
    segments: list[dict[int, TableSchema]] = field(default_factory=lambda: [{}])
    """Per segment (stretches between DDL steps), the schemas of its row changes by identity."""
    last_schema: dict[str, TableSchema] = field(default_factory=dict)
    """Per source table, the newest schema folded (the schema before a DDL when it carries none)."""
    target: str = ""
    """The target's display name (for errors)."""
    first: Entry | None = None
    last: Entry | None = None
    skipped: int = 0
    error: LakeError | None = None
    held: int = 0
    """Row images held (see the module docstring)."""
    route: operations.Route | None = None
    """The routes (``(schema, table) -> target``), for a RENAME's other names."""
    shard: Shard | None = None
    """The shard values of the target's sources (see :mod:`.shards`; ``None``: no shard column)."""

    @classmethod
    def new(cls, opts: TargetOptions, mark: CommittedMark | None) -> Pending:
        """An empty chunk of a target with these options and mark."""
        return cls(opts, mark, rows=[] if opts.append_only else None, shard=shard_of(opts))

    def add(self, entries: list[Entry], table: str) -> None:
        """Take one batch of this target's entries (sorted here, in place).

        :param table: the target's name, for errors.
        :raises LakeError: the batch begins before the entries taken so far end (not in commit order).
        """
        if not entries or self.error is not None:
            return  # after an error, the commit raises it; nothing folded after it matters
        if not _in_order(entries):  # almost always they are: then no sort (a pass over cold entries)
            entries.sort(key=_ORDER)
        mark = self.mark
        if mark is not None and mark.covers(entries[0].order_key):  # else none is (they are sorted)
            fresh = [e for e in entries if not mark.covers(e.order_key)]
            self.skipped += len(entries) - len(fresh)
            entries = fresh
        if not entries:
            return
        if self.last is not None and entries[0].order_key < self.last.order_key:
            raise LakeError(
                f"changes for {table} must be added in commit order: {entries[0].position} "
                f"came after {self.last.position}"
            )
        if self.first is None:
            self.first = entries[0]
        self.last = entries[-1]
        if self.rows is not None:  # append-only: every change is a row
            schemas = self.schemas
            seen: TableSchema | None = None
            for e in entries:
                if type(e) is DdlEntry and e.kind is DdlKind.STATEMENT_DML:
                    raise self._statement_dml(e, table)
                schema = e.table_schema  # type: ignore[union-attr]
                if schema is not seen and schema is not None:
                    seen = schema
                    schemas.setdefault(id(schema), schema)
            self.rows.extend(entries)
            self.held += len(entries)
            return
        try:
            self._fold_pieces(entries, table)
        except LakeError as exc:
            self.error = exc

    def _fold_pieces(self, entries: list[Entry], table: str) -> None:
        """Cut ``entries`` at TRUNCATEs, DDL steps and key changes and fold the runs of row changes."""
        opts, pieces = self.opts, self.pieces
        current = pieces[-1] if pieces and isinstance(pieces[-1], Piece) else None
        run: list[RowChange] = []
        seen: TableSchema | None = None
        segment = len(self.segments) - 1
        schemas = self.segments[segment]
        for e in entries:
            if type(e) is RowChange:
                schema = e.table_schema
                if schema is not seen and schema is not None:
                    seen = schema
                    schemas.setdefault(id(schema), schema)
                    self.last_schema[e.qualified_name] = schema
                keys = opts.key_columns or e.primary_key
                if not keys and e.table_schema is not None:
                    keys = e.table_schema.primary_key
                if current is None or (keys is not current.keys and shard_keys(keys, opts) != current.keys):
                    if run:
                        assert current is not None
                        self.held += fold(current, run, table)
                        run = []
                    if not keys:
                        raise MissingKeyError(
                            f"table {e.qualified_name} (target {table}) has no primary key: give it one "
                            "and then re-snapshot the table (binlog-cdc resnapshot --destination "
                            f"{e.destination} --table {e.qualified_name} --target {table}: the changes "
                            "logged before the key have none), or set target_options "
                            "TargetOptions(key_columns=(...)) for it, or "
                            f"TargetOptions(append_only=True) (first change at {e.position})"
                        )
                    current = Piece(shard_keys(keys, opts), opts.metadata_columns, segment=segment)
                    current.shard = self.shard
                    pieces.append(current)
                run.append(e)
            elif type(e) is DdlEntry and e.kind is DdlKind.TRUNCATE:
                if e.table_schema is not None:
                    schemas.setdefault(id(e.table_schema), e.table_schema)
                if run:
                    assert current is not None
                    self.held += fold(current, run, table)
                    run = []
                if not opts.soft_delete and self.shard is None:  # it erases what came before it (not
                    # the DDL); with a shard column only its shard's rows, so everything stays
                    self.held -= sum(len(p.state) if isinstance(p, Piece) else 1 for p in pieces)
                    pieces[:] = [p for p in pieces if isinstance(p, DdlStep)]
                    self.held += len(pieces)
                pieces.append(e)
                self.held += 1
                current = None
            elif type(e) is DdlEntry and e.kind is DdlKind.STATEMENT_DML:
                raise self._statement_dml(e, table)
            elif type(e) is DdlEntry:
                actions = self._operation(e, table)
                if e.table_schema is not None:
                    self.last_schema[f"{e.schema}.{e.table}"] = e.table_schema
                if not actions:
                    if e.table_schema is not None:
                        schemas.setdefault(id(e.table_schema), e.table_schema)
                    continue
                if run:
                    assert current is not None
                    self.held += fold(current, run, table)
                    run = []
                self.segments.append({})
                segment = len(self.segments) - 1
                schemas = self.segments[segment]
                seen = None
                if e.table_schema is not None:
                    schemas[id(e.table_schema)] = e.table_schema
                pieces.append(DdlStep(e, actions, segment))
                self.held += 1
                current = None
        if run:
            assert current is not None
            self.held += fold(current, run, table)

    def _statement_dml(self, e: DdlEntry, table: str) -> operations.SourceOperationError:
        """The error of a statement-format DML the mark does not cover: ``statement_dml`` under the
        target's ``on_schema_change`` (:func:`operations.statement_dml_error`)."""
        policy = operations.Policy.of(self.opts.on_schema_change)
        source = f"{e.schema}.{e.table}"
        return operations.statement_dml_error(
            policy, source, e.sql, e.position, e.destination, self.target or table
        )

    def _operation(self, e: DdlEntry, table: str) -> tuple[operations.LakeAction, ...]:
        """The lake actions of a DDL entry under the target's policy; raise when it stops the run.

        :raises operations.SourceOperationError: the verdict is ``fail``.
        :raises operations.ResnapshotNeeded: the verdict is ``resnapshot``.
        """
        source = f"{e.schema}.{e.table}"
        before = e.previous_schema or self.last_schema.get(source)
        policy = operations.Policy.of(self.opts.on_schema_change)
        stmt = e.statement
        ops = operations.classify(stmt, (e.schema, e.table or ""), before,
                                  e.table_schema, policy, self.route)  # fmt: skip
        verdict, deciding = operations.decide(ops, policy)
        if deciding is None:  # a table renamed within this target: its rows' shard value follows
            relabel = shard_rename(stmt, (e.schema, e.table or ""), self.shard, self.route, source)
            return () if relabel is None else (relabel,)  # type: ignore[return-value]
        if verdict != "evolve":
            raise operations.stop_error(
                verdict, deciding, source, e.sql, e.position, e.destination, self.target or table
            )
        return tuple(a for op in ops for a in op.actions)
