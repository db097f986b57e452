"""Collapsing ordered row changes: the last change per key, with key changes split in two.

Pure Python (no Spark): ``split_at_truncates`` cuts an ordered batch at TRUNCATE entries and
``collapse`` maps each key to its final action, ``("U", after image, change)`` for an upsert or
``("D", before image, change)`` for a delete; an update that changes the key yields a delete of the
old key and an upsert of the new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Entry, Op, RowChange
from airflow_provider_binlog.lake.errors import LakeError, MissingKeyError


def split_at_truncates(entries: Sequence[Entry]) -> list[list[RowChange] | DdlEntry]:
    pieces: list[list[RowChange] | DdlEntry] = []
    current: list[RowChange] = []
    for e in entries:
        if isinstance(e, RowChange):
            current.append(e)
        elif isinstance(e, DdlEntry) and e.kind is DdlKind.TRUNCATE:
            if current:
                pieces.append(current)
                current = []
            pieces.append(e)
    if current:
        pieces.append(current)
    return pieces


def collapse(
    changes: Sequence[RowChange], keys: tuple[str, ...], table: str
) -> dict[Any, tuple[str, dict[str, Any], RowChange]]:
    """The last change per key: ``key -> ("U", after image, change)`` or ``("D", before image, change)``.

    A key is the key column's value, or a tuple of values for a composite key.
    """
    state: dict[Any, tuple[str, dict[str, Any], RowChange]] = {}
    key_of = itemgetter(*keys)  # the hot loop: one C call per image, no per-change tuple building
    insert, update = Op.INSERT, Op.UPDATE
    try:
        for c in changes:
            op = c.op
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
                    before = c.before or {}
                    old = key_of(before)
                    if old != new:
                        state[old] = ("D", before, c)
                state[new] = ("U", after, c)
            else:
                before = c.before or {}
                state[key_of(before)] = ("D", before, c)
    except KeyError as exc:
        raise MissingKeyError(f"key column {exc.args[0]!r} is missing from a row image of {table}") from None
    return state
