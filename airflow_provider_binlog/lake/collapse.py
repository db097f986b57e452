"""Collapsing ordered row changes: the last change per key, with key changes split in two.

Pure Python (no Spark): ``split_at_truncates`` cuts an ordered batch at TRUNCATE entries and
``collapse`` maps each key to its final action, ``("U", after image, change)`` for an upsert or
``("D", before image, change)`` for a delete; an update that changes the key yields a delete of the
old key and an upsert of the new one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
) -> dict[tuple[Any, ...], tuple[str, dict[str, Any], RowChange]]:
    """The last change per key: ``key -> ("U", after image, change)`` or ``("D", before image, change)``."""
    state: dict[tuple[Any, ...], tuple[str, dict[str, Any], RowChange]] = {}
    try:
        for c in changes:
            if c.op is Op.INSERT:
                after = c.after or {}
                _check_full(c, after, table)
                state[tuple(after[k] for k in keys)] = ("U", after, c)
            elif c.op is Op.UPDATE:
                before, after = c.before or {}, c.after or {}
                _check_full(c, after, table)
                old = tuple(before[k] for k in keys)
                new = tuple(after[k] for k in keys)
                if old != new:
                    state[old] = ("D", before, c)
                state[new] = ("U", after, c)
            else:
                before = c.before or {}
                state[tuple(before[k] for k in keys)] = ("D", before, c)
    except KeyError as exc:
        raise MissingKeyError(f"key column {exc.args[0]!r} is missing from a row image of {table}") from None
    return state


def _check_full(change: RowChange, image: Mapping[str, Any], table: str) -> None:
    schema = change.table_schema
    if schema is not None and len(image) < len(schema.columns):
        raise LakeError(
            f"partial row image for {table} at {change.position}: inserts and updates need "
            "binlog_row_image=FULL"
        )
