"""Folding row changes to the last change per key (pure Python, no Spark)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
from airflow_provider_binlog.lake.collapse import Piece, fold, staged_rows
from airflow_provider_binlog.lake.errors import LakeError, MissingKeyError

SCHEMA = TableSchema(
    "db", "t", (ColumnDef("a", T.LONG), ColumnDef("b", T.LONG), ColumnDef("v", T.LONG)), ("a", "b")
)


def _change(n: int, op: Op, before: dict[str, Any] | None, after: dict[str, Any] | None) -> RowChange:
    pos = BinlogPosition("mysql-bin.000001", 4 + 10 * n)
    return RowChange(
        "dest", "db", "t", op, before, after, SCHEMA.primary_key, pos, BinlogPosition(pos.file, pos.pos + 10),
        None, 1_700_000_000 + n, OrderKey(1, pos.pos, -1, 0), SCHEMA,
    )  # fmt: skip


def _workload(rng: random.Random, n: int) -> tuple[dict[Any, dict[str, Any]], list[RowChange]]:
    """A table of a few composite keys and ``n`` valid changes to it (updates also move keys)."""
    table = {(a, b): {"a": a, "b": b, "v": 0} for a in range(3) for b in range(2)}
    initial = {k: dict(v) for k, v in table.items()}
    changes = []
    for i in range(n):
        free = [(a, b) for a in range(4) for b in range(3) if (a, b) not in table]
        roll = rng.random()
        if table and roll < 0.45:
            key = rng.choice(sorted(table))
            new = rng.choice([key, *free]) if roll < 0.15 and free else key
            after = {"a": new[0], "b": new[1], "v": i}
            changes.append(_change(i, Op.UPDATE, table.pop(key), after))
            table[new] = after
        elif table and roll < 0.7:
            key = rng.choice(sorted(table))
            changes.append(_change(i, Op.DELETE, table.pop(key), None))
        elif free:
            key = rng.choice(free)
            table[key] = {"a": key[0], "b": key[1], "v": i}
            changes.append(_change(i, Op.INSERT, None, table[key]))
    return initial, changes


def _apply(initial: dict[Any, dict[str, Any]], piece: Piece) -> dict[Any, dict[str, Any]]:
    """What the MERGE of the piece's staged rows does to ``initial``."""
    out = {k: dict(v) for k, v in initial.items()}
    names = SCHEMA.column_names
    items = list(piece.state.items())
    for (key, held), row in zip(items, staged_rows(items, names, ("a", "b"), piece.schema), strict=True):
        image = dict(zip(names, row, strict=True))
        assert (image["a"], image["b"]) == key
        if held is not None:  # without metadata a delete holds None, a full image its tuple
            assert type(held) is tuple and held == row
            out[key] = image
        else:
            assert image["v"] is None  # a delete stages its key only
            out.pop(key, None)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_folding_in_any_split_merges_to_the_source_table(seed: int) -> None:
    rng = random.Random(seed)
    initial, changes = _workload(rng, rng.randint(1, 80))
    expected = dict(initial)
    for c in changes:  # the source table after every change
        if c.before is not None:
            del expected[(c.before["a"], c.before["b"])]
        if c.after is not None:
            expected[(c.after["a"], c.after["b"])] = c.after

    whole = Piece(SCHEMA.primary_key)
    assert fold(whole, changes, "lake.t") == len(whole.state)
    split = Piece(SCHEMA.primary_key)
    cuts = sorted(rng.sample(range(len(changes) + 1), min(3, len(changes) + 1)))
    held = sum(
        fold(split, changes[lo:hi], "lake.t")
        for lo, hi in zip([0, *cuts], [*cuts, len(changes)], strict=True)
    )

    assert _apply(initial, whole) == expected
    assert split.state == whole.state and held == len(split.state)
    assert (whole.inserts, whole.updates, whole.deletes) == (
        sum(c.op is Op.INSERT for c in changes),
        sum(c.op is Op.UPDATE for c in changes),
        sum(c.op is Op.DELETE for c in changes),
    )
    assert whole.last is changes[-1] and split.last is changes[-1]
    made: set[Any] = set()  # keys an earlier change wrote: an update or delete of another was there before
    existing = False
    for c in changes:
        existing = existing or (c.before is not None and (c.before["a"], c.before["b"]) not in made)
        if c.after is not None:
            made.add((c.after["a"], c.after["b"]))
    assert whole.existing is existing and split.existing is existing
    touched = {(i["a"], i["b"]) for c in changes for i in (c.before, c.after) if i}
    assert set(whole.state) == touched  # one image per key touched, however many changes


def test_metadata_is_the_last_change_of_each_key() -> None:
    first = _change(1, Op.INSERT, None, {"a": 1, "b": 1, "v": 1})
    second = _change(2, Op.UPDATE, first.after, {"a": 1, "b": 2, "v": 2})  # moves the key
    piece = Piece(SCHEMA.primary_key, with_meta=True)
    fold(piece, [first, second], "lake.t")
    # with metadata every key holds [values, schema, meta]
    assert piece.state[(1, 1)] == [None, None, (Op.UPDATE, second.timestamp, second.position)]
    assert piece.state[(1, 2)] == [(1, 2, 2), SCHEMA, (Op.UPDATE, second.timestamp, second.position)]
    assert piece.schema is None
    assert Piece(SCHEMA.primary_key).with_meta is False


def test_partial_images_and_missing_keys_are_refused() -> None:
    partial = _change(1, Op.INSERT, None, {"a": 1, "b": 1})
    with pytest.raises(LakeError, match=r"partial row image for lake.t at mysql-bin.000001:14.*FULL"):
        fold(Piece(SCHEMA.primary_key), [partial], "lake.t")
    keyless = _change(2, Op.DELETE, {"a": 1, "v": 1}, None)
    with pytest.raises(
        MissingKeyError,
        match=r"key column 'b' is missing from a row image of lake\.t at mysql-bin.000001:\d+ .*key_columns",
    ):
        fold(Piece(SCHEMA.primary_key), [keyless], "lake.t")
    piece = Piece(("a",))  # the remedy: key columns the images hold
    fold(piece, [keyless], "lake.t")
    assert piece.state == {1: None} and piece.deletes == 1


def test_images_are_tuples_in_column_order_and_staged_under_a_wider_schema() -> None:
    """Full images become value tuples, held alone for the piece's first schema and with their
    schema for another; an image of an older schema (before ADD COLUMN) stages NULL for the new
    column; an image whose keys are not in column order stays a dict."""
    wider = TableSchema("db", "t", (*SCHEMA.columns, ColumnDef("w", T.LONG)), SCHEMA.primary_key)
    old = _change(1, Op.INSERT, None, {"a": 1, "b": 1, "v": 1})
    new = dataclasses.replace(
        _change(2, Op.INSERT, None, {"a": 2, "b": 1, "v": 2, "w": 9}), table_schema=wider
    )
    shuffled = _change(3, Op.INSERT, None, {"v": 3, "b": 1, "a": 3})
    piece = Piece(SCHEMA.primary_key)
    fold(piece, [old, new], "lake.t")
    assert piece.schema is SCHEMA
    assert piece.state == {(1, 1): (1, 1, 1), (2, 1): [(2, 1, 2, 9), wider, None]}
    other = Piece(SCHEMA.primary_key)
    fold(other, [shuffled], "lake.t")
    assert other.state[(3, 1)] == [{"v": 3, "b": 1, "a": 3}, SCHEMA, None] and other.schema is None
    items = [*piece.state.items(), *other.state.items()]
    assert staged_rows(items, wider.column_names, ("a", "b"), SCHEMA) == [
        [1, 1, 1, None],
        (2, 1, 2, 9),
        [3, 1, 3, None],
    ]
    # the wider schema first: its images are the bare ones, the older one's carry their schema
    later = Piece(SCHEMA.primary_key)
    fold(later, [new], "lake.t")
    fold(later, [old, _change(4, Op.DELETE, {"a": 2, "b": 1, "v": 2}, None)], "lake.t")
    assert later.schema is wider
    assert later.state == {(2, 1): None, (1, 1): [(1, 1, 1), SCHEMA, None]}
    assert staged_rows(list(later.state.items()), wider.column_names, ("a", "b"), wider) == [
        [2, 1, None, None],
        [1, 1, 1, None],
    ]


def test_existing_says_whether_an_update_or_delete_reached_a_key_from_before_the_piece() -> None:
    row = {"a": 1, "b": 1, "v": 0}
    moved = {"a": 2, "b": 1, "v": 0}
    cases = {
        "inserts only": ([_change(0, Op.INSERT, None, row)], False),
        "insert then update and delete": (
            [
                _change(0, Op.INSERT, None, row),
                _change(1, Op.UPDATE, row, moved),
                _change(2, Op.DELETE, moved, None),
            ],
            False,
        ),
        "an update of an older row": (
            [_change(0, Op.INSERT, None, moved), _change(1, Op.UPDATE, row, row)],
            True,
        ),
        "a delete of an older row": ([_change(0, Op.DELETE, row, None)], True),
    }
    for what, (changes, existing) in cases.items():
        piece = Piece(SCHEMA.primary_key)
        fold(piece, changes, "lake.t")
        assert piece.existing is existing, what
        fold(piece, [_change(9, Op.INSERT, None, {"a": 3, "b": 3, "v": 0})], "lake.t")
        assert piece.existing is existing, f"{what}, then an insert"
