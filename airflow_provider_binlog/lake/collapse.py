"""Folding ordered row changes as they arrive: the last change per key, with key changes split in two.

No Spark; the common case folds in C (:mod:`.fold_native`), to the same piece as in Python. A
:class:`Piece` holds the row changes of one target between TRUNCATEs, already reduced to one
action per key, so a chunk's memory follows the keys it touches, not the changes it read: per key
the after image of an upsert, or a delete (the key is all a delete needs); an update that changes
the key yields a delete of the old key and an upsert of the new one. Folding a run of changes in
one call or in several gives the same piece.

An after image is kept as the tuple of its values in the order of ``schema.columns`` when it holds
exactly those columns in that order (a full image, as the decoder makes it): a tuple takes a fifth
of a dict's memory. Any other image is kept as its dict. What a piece holds per key
(:data:`Held`) is that tuple alone when it is a full image of the piece's schema (the first
schema it met) and no metadata is kept: a long drain's chunk holds hundreds of thousands of them,
and a ``(values, schema, meta)`` tuple around each cost 64 bytes more (about a tenth of a held
image).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import countOf, itemgetter
from typing import Any

from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Op, RowChange
from airflow_provider_binlog.lake.errors import LakeError, MissingKeyError
from airflow_provider_binlog.lake.native import fold_native

Meta = tuple[Op, int, BinlogPosition]
"""What the metadata columns need of the last change of a key: its op, commit time and position."""

Values = tuple[Any, ...] | dict[str, Any]
"""An after image: values in ``schema.columns`` order, or the image's dict."""

Held = tuple[Any, ...] | list[Any] | None
"""What a piece holds per key: a full image of :attr:`Piece.schema` in its column order (a tuple),
a delete without metadata (``None``), or anything else as the list ``[values, schema, meta]``
(the after image, or ``None`` for a delete; its schema; :data:`Meta` or ``None``)."""


@dataclass(eq=False, slots=True)
class Piece:
    """Row changes of one target under one key, folded to the last change per key.

    :param keys: the key columns (a key is the column's value, or a tuple for a composite key).
    :param with_meta: keep :data:`Meta` of each key's last change (else ``None``).
    """

    keys: tuple[str, ...]
    with_meta: bool = False
    state: dict[Any, Held] = field(default_factory=dict)
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    last: RowChange | None = None
    """The newest change folded in (its position becomes the commit's mark)."""
    ordered: dict[int, tuple[TableSchema, bool]] = field(default_factory=dict)
    """Per schema (by identity): whether its full images list its columns in order."""
    segment: int = 0
    """Which stretch between schema-changing DDL it belongs to (see :mod:`.pending`)."""
    existing: bool = False
    """An update or delete of a key the piece had not folded before: the key was in the source
    before the piece, so the lake table holds it, and the piece cannot be written as new keys alone
    (:mod:`.new_keys` need not look)."""
    shard: Callable[[str, str], str] | None = None
    """``(schema, table) -> shard value`` when ``keys`` end with the shard column (see
    :mod:`.shards`): a key is then the source key's values and the change's shard value, flat."""
    schema: TableSchema | None = None
    """The schema whose full images, in its column order, :attr:`state` holds as bare tuples (the
    first one met with such an image; ``None`` until then and when metadata is kept)."""


def fold(piece: Piece, changes: Sequence[RowChange], table: str) -> int:
    """Fold ``changes`` (in commit order, after the ones already folded) into ``piece``; return how
    many keys it holds more than before.

    The C fold (:mod:`.fold_native`) takes the runs of changes it can; :func:`_fold_python` the rest.

    :param table: the target's name, for errors.
    :raises LakeError: a partial row image of an insert or update (``binlog_row_image`` not FULL).
    :raises MissingKeyError: a row image without a key column.
    """
    held = len(piece.state)
    native = fold_native.NATIVE
    if native is None or piece.shard is not None or piece.with_meta or type(changes) is not list:
        _fold_python(piece, changes, table)
        return len(piece.state) - held
    mod, plan = native
    i, n = 0, len(changes)
    while i < n:
        step = _PYTHON_RUN
        schema = piece.schema
        if schema is not None:
            stop, inserts, updates, deletes, piece.existing = mod.fold_run(
                plan,
                piece.state,
                changes,
                i,
                piece.keys,
                schema,
                len(schema.columns),
                fold_native.OPS,
                piece.existing,
            )
            piece.inserts += inserts
            piece.updates += updates
            piece.deletes += deletes
            if stop > i:
                step = 1  # the change it stopped at, then the C fold again
            i = stop
            if i >= n:
                break
        j = min(n, i + step)
        _fold_python(piece, changes[i:j], table)
        i = j
    if changes:
        piece.last = changes[-1]
    return len(piece.state) - held


_PYTHON_RUN = 64
"""Changes the Python fold takes at once where the C fold took none (a piece's first changes)."""


def _fold_python(piece: Piece, changes: Sequence[RowChange], table: str) -> None:
    """:func:`fold` in Python, for any piece and changes."""
    state = piece.state
    # the hot loop: one C call per image, no per-change tuple building
    key_of: Callable[[Any], Any] = itemgetter(*piece.keys)
    shard = piece.shard
    source: tuple[str, str] | None = None
    if shard is not None:  # (source key..., shard value of the change's table)
        key_of, shard_key = _shard_key(piece.keys[:-1])
    insert, update = Op.INSERT, Op.UPDATE
    with_meta = piece.with_meta
    meta: Meta | None = None
    inserts = updates = deletes = 0
    existing = piece.existing
    seen: TableSchema | None = None  # the schema of the previous change, and what is known of it
    width, in_order, bare = -1, False, False  # bare: its full images are held as tuples alone
    try:
        for c in changes:
            op = c.op
            if shard is not None and (c.schema, c.table) != source:
                source = (c.schema, c.table)
                shard_key[0] = shard(c.schema, c.table)
            if with_meta:
                meta = (op, c.timestamp, c.position)
            if op is insert or op is update:
                after = c.after or {}
                schema = c.table_schema
                if schema is not seen:
                    seen = schema
                    width, in_order = _layout(piece, schema, after)
                    if in_order and not with_meta and piece.schema is None:
                        piece.schema = schema
                    bare = in_order and not with_meta and schema is piece.schema
                if len(after) != width:
                    if len(after) < width:
                        raise LakeError(
                            f"partial row image for {table} at {c.position}: inserts and updates need "
                            "binlog_row_image=FULL"
                        )
                    values: Values = after
                else:
                    values = tuple(after.values()) if in_order else after
                new = key_of(after)
                if op is update:
                    updates += 1
                    old = key_of(c.before or {})
                    if not existing and old not in state:
                        existing = True
                    if old != new:
                        state[old] = [None, None, meta] if with_meta else None
                else:
                    inserts += 1
                state[new] = values if bare and type(values) is tuple else [values, schema, meta]
            else:
                deletes += 1
                old = key_of(c.before or {})
                if not existing and old not in state:
                    existing = True
                state[old] = [None, None, meta] if with_meta else None
    except KeyError as exc:
        raise MissingKeyError(
            f"key column {exc.args[0]!r} is missing from a row image of {table} at {c.position} "
            f"(source {c.schema}.{c.table}, key {tuple(piece.keys)}): set TargetOptions(key_columns=(...)) "
            "to columns its row images hold"
        ) from None
    piece.inserts += inserts
    piece.updates += updates
    piece.deletes += deletes
    piece.existing = existing
    if changes:
        piece.last = changes[-1]


def staged_actions(helds: Iterable[Held]) -> list[str]:
    """The staged action of each of a piece's held values, in order: ``D`` for a delete, ``U`` for
    an upsert."""
    upsert, delete = fold_native.UPSERT, fold_native.DELETE
    return [delete if held is None or (type(held) is list and held[0] is None) else upsert for held in helds]


def delete_count(state: dict[Any, Held], with_meta: bool) -> int:
    """How many keys of a piece's state it holds as deletes (``with_meta``: the piece's own)."""
    if with_meta:
        return staged_actions(state.values()).count(fold_native.DELETE)
    return countOf(state.values(), None)  # without metadata a delete is held as None


def held_metas(helds: Iterable[Held]) -> list[Meta | None]:
    """:data:`Meta` of each of a piece's held values, in order (a piece that keeps metadata holds
    every key as ``[values, schema, meta]``)."""
    return [held[2] for held in helds]  # type: ignore[index]


def _shard_key(keys: tuple[str, ...]) -> tuple[Callable[[Any], Any], list[Any]]:
    """A key function of the source ``keys`` followed by the shard value held in the returned cell."""
    cell: list[Any] = [None]
    get = itemgetter(*keys)
    if len(keys) == 1:
        return (lambda image: (get(image), cell[0])), cell
    return (lambda image: (*get(image), cell[0])), cell


def _layout(piece: Piece, schema: TableSchema | None, image: dict[str, Any]) -> tuple[int, bool]:
    """``(columns of a full image, whether full images list them in order)`` for ``schema``; the
    order is checked on the first full image met (``-1, False`` without a schema: keep dicts)."""
    if schema is None:
        return -1, False
    known = piece.ordered.get(id(schema))
    width = len(schema.columns)
    if known is None:
        if len(image) != width:
            return width, False  # decided by a full image
        known = (schema, tuple(image) == schema.column_names)
        piece.ordered[id(schema)] = known
    return width, known[1]


def staged_rows(
    items: Sequence[tuple[Any, Held]],
    names: Sequence[str],
    keys: tuple[str, ...],
    schema: TableSchema | None = None,
) -> list[Sequence[Any]]:
    """One row of the lake columns ``names`` per ``(key, held)`` of a piece's state: an upsert's
    image (``None`` for a column its schema lacks), a delete's key (``None`` elsewhere).

    :param schema: the piece's :attr:`Piece.schema` (the schema of its bare tuples).
    :raises ValueError: a key column is not among ``names``.
    """
    key_pos = [list(names).index(k) for k in keys]
    nulls = [None] * len(names)
    layouts: dict[int, list[int] | None] = {}  # per schema: None = its columns are ``names``
    out: list[Sequence[Any]] = []
    append = out.append
    values: Values | None
    own: TableSchema | None
    for key, held in items:
        if type(held) is tuple:
            values, own = held, schema
        elif held is None:
            values = own = None
        else:
            values, own = held[0], held[1]
        if values is None:
            row: list[Any] = nulls.copy()
            if len(key_pos) == 1:
                row[key_pos[0]] = key
            else:
                for p, v in zip(key_pos, key, strict=True):
                    row[p] = v
            append(row)
        elif type(values) is tuple:
            assert own is not None
            layout = layouts.get(id(own), _UNKNOWN)
            if layout is _UNKNOWN:
                have = own.column_names
                layout = None if have == tuple(names) else [have.index(n) if n in have else -1 for n in names]
                layouts[id(own)] = layout
            append(values if layout is None else [values[i] if i >= 0 else None for i in layout])
        else:
            assert isinstance(values, dict)
            append([values.get(n) for n in names])
    return out


_UNKNOWN: list[int] = []  # a sentinel: "this schema's layout was not computed yet"
