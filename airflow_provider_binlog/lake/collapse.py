"""Folding ordered row changes as they arrive: the last change per key, with key changes split in two.

Pure Python (no Spark). A :class:`Piece` holds the row changes of one target between TRUNCATEs,
already reduced to one action per key, so a chunk's memory follows the keys it touches, not the
changes it read: ``key -> ("U", after image, meta)`` for an upsert or ``("D", before image, meta)``
for a delete; an update that changes the key yields a delete of the old key and an upsert of the
new one. Folding a run of changes in one call or in several gives the same piece.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Op, RowChange
from airflow_provider_binlog.lake.errors import LakeError, MissingKeyError

Meta = tuple[Op, int, BinlogPosition]
"""What the metadata columns need of the last change of a key: its op, commit time and position."""


@dataclass(eq=False, slots=True)
class Piece:
    """Row changes of one target under one key, folded to the last change per key.

    :param keys: the key columns (a key is the column's value, or a tuple for a composite key).
    :param with_meta: keep :data:`Meta` of each key's last change (else ``None``).
    """

    keys: tuple[str, ...]
    with_meta: bool = False
    state: dict[Any, tuple[str, dict[str, Any], Meta | None]] = field(default_factory=dict)
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    last: RowChange | None = None
    """The newest change folded in (its position becomes the commit's mark)."""


def fold(piece: Piece, changes: Sequence[RowChange], table: str) -> int:
    """Fold ``changes`` (in commit order, after the ones already folded) into ``piece``; return how
    many keys it holds more than before.

    :param table: the target's name, for errors.
    :raises LakeError: a partial row image of an insert or update (``binlog_row_image`` not FULL).
    :raises MissingKeyError: a row image without a key column.
    """
    state = piece.state
    held = len(state)
    key_of = itemgetter(*piece.keys)  # the hot loop: one C call per image, no per-change tuple building
    insert, update = Op.INSERT, Op.UPDATE
    with_meta = piece.with_meta
    meta: Meta | None = None
    inserts = updates = deletes = 0
    try:
        for c in changes:
            op = c.op
            if with_meta:
                meta = (op, c.timestamp, c.position)
            if op is insert or op is update:
                after = c.after or {}
                schema = c.table_schema
                if schema is not None and len(after) < len(schema.columns):
                    raise LakeError(
                        f"partial row image for {table} at {c.position}: inserts and updates need "
                        "binlog_row_image=FULL"
                    )
                new = key_of(after)
                if op is update:
                    updates += 1
                    before = c.before or {}
                    old = key_of(before)
                    if old != new:
                        state[old] = ("D", before, meta)
                else:
                    inserts += 1
                state[new] = ("U", after, meta)
            else:
                deletes += 1
                before = c.before or {}
                state[key_of(before)] = ("D", before, meta)
    except KeyError as exc:
        raise MissingKeyError(f"key column {exc.args[0]!r} is missing from a row image of {table}") from None
    piece.inserts += inserts
    piece.updates += updates
    piece.deletes += deletes
    if changes:
        piece.last = changes[-1]
    return len(state) - held
