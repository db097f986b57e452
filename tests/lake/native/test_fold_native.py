"""The C fold and staging (``_fold``) hold and stage exactly what the Python loops do (pure, no Spark).

Each randomized stream mixes the case the C fold takes (full images of the piece's schema, in
column order) with the ones it leaves to Python: images of another schema, images whose keys are
not in column order, partial images and images without a key column (an error at the same change).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Op, OrderKey, RowChange, TransactionEnd
from airflow_provider_binlog.lake import collapse, routes
from airflow_provider_binlog.lake.collapse import Piece, delete_count, fold
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.native import fold_native
from airflow_provider_binlog.lake.write import statements

pytestmark = pytest.mark.skipif(
    fold_native.NATIVE is None, reason="C fold not built (or BINLOG_CDC_PURE_PYTHON)"
)

COLUMNS = (ColumnDef("a", T.LONG), ColumnDef("b", T.VARCHAR), ColumnDef("v", T.LONG))
ONE_KEY = TableSchema("db", "t", COLUMNS, ("a",))
TWO_KEYS = TableSchema("db", "t", COLUMNS, ("a", "b"))


def _change(n: int, op: Op, before: Any, after: Any, schema: TableSchema) -> RowChange:
    pos = BinlogPosition("mysql-bin.000001", 4 + 10 * n)
    return RowChange(
        "dest", "db", "t", op, before, after, schema.primary_key, pos, BinlogPosition(pos.file, pos.pos + 10),
        None, 1_700_000_000 + n, OrderKey(1, pos.pos, -1, 0), schema,
    )  # fmt: skip


def _stream(rng: random.Random, schema: TableSchema, n: int, odd: float) -> list[RowChange]:
    """``n`` changes to a few keys; with probability ``odd`` a change the C fold leaves to Python."""
    wider = TableSchema("db", "t", (*COLUMNS, ColumnDef("w", T.LONG)), schema.primary_key)
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    out = []
    for i in range(n):
        a, b = rng.randrange(6), rng.choice(["x", "y"])
        image: dict[str, Any] = {"a": a, "b": b, "v": i}
        key = (a,) if len(schema.primary_key) == 1 else (a, b)
        roll, own = rng.random(), schema
        if rng.random() < odd:
            kind = rng.choice(["wider", "shuffled", "partial", "keyless", "none"])
            if kind == "wider":
                image, own = {**image, "w": i}, wider
            elif kind == "shuffled":
                image = {"v": i, "b": b, "a": a}
            elif kind == "partial":
                del image["v"]
            elif kind == "keyless":
                del image["a"]
            else:
                image = None  # type: ignore[assignment]
        old = rows.get(key) or {"a": a, "b": b, "v": -1}
        if roll < 0.3:
            out.append(_change(i, Op.INSERT, None, image, own))
        elif roll < 0.75:
            moved = rng.random() < 0.2 and image is not None and "a" in image
            if moved:
                image["a"] = rng.randrange(6)
            out.append(_change(i, Op.UPDATE, old, image, own))
        else:
            out.append(_change(i, Op.DELETE, image if rng.random() < 0.2 else old, None, own))
        if image is not None:
            rows[key] = image
    return out


def _fold_all(changes: list[RowChange], cuts: list[int], keys: tuple[str, ...]) -> tuple[Any, ...]:
    """Everything a piece shows after folding ``changes`` cut at ``cuts``, or the error it raised."""
    piece = Piece(keys)
    held = 0
    try:
        for lo, hi in zip([0, *cuts], [*cuts, len(changes)], strict=True):
            held += fold(piece, changes[lo:hi], "lake.t")
    except LakeError as exc:  # MissingKeyError is one
        return (type(exc), str(exc))
    return (
        list(piece.state.items()),
        held,
        piece.inserts,
        piece.updates,
        piece.deletes,
        piece.existing,
        piece.last,
        piece.schema,
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_c_fold_holds_what_the_python_fold_holds(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    schema = rng.choice([ONE_KEY, TWO_KEYS])
    changes = _stream(rng, schema, rng.randint(1, 300), rng.choice([0.0, 0.01, 0.1, 0.5]))
    cuts = sorted(rng.sample(range(len(changes) + 1), min(4, len(changes) + 1)))
    taken = []
    real = fold_native.NATIVE
    assert real is not None

    def counting(*args: Any) -> Any:  # how many changes the C fold took
        result = real[0].fold_run(*args)
        taken.append(result[0] - args[3])
        return result

    monkeypatch.setattr(fold_native, "NATIVE", (type("M", (), {"fold_run": staticmethod(counting)}), real[1]))
    native = _fold_all(changes, cuts, schema.primary_key)
    monkeypatch.setattr(fold_native, "NATIVE", None)
    python = _fold_all(changes, cuts, schema.primary_key)
    assert native == python
    if (
        isinstance(native[0], list) and len(changes) > 100
    ):  # no error: the C fold took a long stream's changes
        assert sum(taken) > 0


def test_a_stream_the_c_fold_takes_whole() -> None:
    """Inserts, updates (one moving its key) and a delete: the C fold takes them all, in one call."""
    row = {"a": 1, "b": "x", "v": 1}
    changes = [
        _change(0, Op.INSERT, None, row, TWO_KEYS),
        _change(1, Op.INSERT, None, {"a": 2, "b": "x", "v": 2}, TWO_KEYS),
        _change(2, Op.UPDATE, row, {"a": 1, "b": "y", "v": 3}, TWO_KEYS),
        _change(3, Op.DELETE, {"a": 2, "b": "x", "v": 2}, None, TWO_KEYS),
        _change(4, Op.UPDATE, {"a": 7, "b": "x", "v": 0}, {"a": 7, "b": "x", "v": 4}, TWO_KEYS),
    ]
    assert fold_native.NATIVE is not None
    mod, plan = fold_native.NATIVE
    state: dict[Any, Any] = {(1, "x"): (1, "x", 1)}  # what the Python fold made of the first change
    stop, inserts, updates, deletes, existing = mod.fold_run(
        plan, state, changes, 1, ("a", "b"), TWO_KEYS, 3, fold_native.OPS, False
    )
    assert (stop, inserts, updates, deletes, existing) == (5, 1, 2, 1, True)
    assert state == {(1, "x"): None, (2, "x"): None, (1, "y"): (1, "y", 3), (7, "x"): (7, "x", 4)}
    assert list(state) == [(1, "x"), (2, "x"), (1, "y"), (7, "x")]  # the Python fold's order
    # a change of another schema: it stops there and changes nothing for it
    other = dataclasses.replace(changes[0], table_schema=ONE_KEY)
    assert mod.fold_run(plan, {}, [other], 0, ("a", "b"), TWO_KEYS, 3, fold_native.OPS, False)[0] == 0


@pytest.mark.parametrize("seed", range(10))
def test_the_c_staging_columns_equal_the_python_rows(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    schema = rng.choice([ONE_KEY, TWO_KEYS])
    changes = [c for c in _stream(rng, schema, 400, 0.0)]
    piece = Piece(schema.primary_key)
    fold(piece, changes, "lake.t")
    if rng.random() < 0.3:  # a piece holding images of another schema too: Python takes its chunks
        fold(piece, _stream(random.Random(seed + 100), schema, 50, 1.0)[:1], "lake.t")
    names = list(schema.column_names)
    monkeypatch.setattr(statements, "DEFAULT_CHUNK_ROWS", 7)
    native = list(
        statements.piece_columns(piece.state.items(), names, schema.primary_key, False, None, piece.schema)
    )
    monkeypatch.setattr(fold_native, "NATIVE", None)
    python = list(
        statements.piece_columns(piece.state.items(), names, schema.primary_key, False, None, piece.schema)
    )
    assert native == python and sum(len(chunk[-1]) for chunk in native) == len(piece.state)
    assert delete_count(piece.state, False) == sum(chunk[-1].count("D") for chunk in native)
    assert delete_count(piece.state, False) == collapse.staged_actions(piece.state.values()).count("D")


# ------------------------------------------------------------------ a batch's passes: sources, order


def _batch(rng: random.Random, n: int) -> list[Any]:
    """A batch of row changes, DDL (with and without a table) and transaction ends over a few tables,
    the table names equal but not always the same objects (as the decoder makes them per TABLE_MAP)."""
    out: list[Any] = []
    for i in range(n):
        pos = BinlogPosition("mysql-bin.000001", 4 + 10 * i)
        key = OrderKey(1, pos.pos, -1, 0)
        schema, table = rng.choice(["db", "db2"]), rng.choice(["t", "u", "v"])
        if rng.random() < 0.5:  # the same value, another object
            schema, table = "".join(list(schema)), "".join(list(table))
        roll = rng.random()
        if roll < 0.8:
            c = _change(i, Op.INSERT, None, {"a": i, "b": "x", "v": i}, ONE_KEY)
            out.append(
                dataclasses.replace(c, schema=schema, table=table, order_key=OrderKey(1, pos.pos, -1, 0))
            )
        elif roll < 0.9:
            sql, named = "ALTER TABLE x ADD c INT", rng.choice([table, None])
            out.append(DdlEntry("dest", schema, named, DdlKind.DDL, sql, pos, pos, None, 0, key))
        else:
            out.append(TransactionEnd("dest", pos, pos, None, 0, key))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_the_c_sources_group_as_the_python_loop(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    entries = _batch(rng, rng.randrange(0, 300))
    in_c = routes._sources(entries)
    as_tuple = routes._sources(tuple(entries))  # a batch's entries, as the store hands them out
    assert [(s, t, g, n) for s, t, g, n in as_tuple] == [(s, t, g, n) for s, t, g, n in in_c]
    monkeypatch.setattr(fold_native, "NATIVE", None)
    in_python = routes._sources(entries)
    assert [(s, t, [id(e) for e in g], n) for s, t, g, n in in_c] == [
        (s, t, [id(e) for e in g], n) for s, t, g, n in in_python
    ]
    assert sum(n for *_, n in in_c) == sum(type(e) is RowChange for e in entries)


@pytest.mark.parametrize("seed", range(20))
def test_in_order_is_whether_the_order_keys_strictly_increase(seed: int) -> None:
    rng = random.Random(seed)
    entries = [e for e in _batch(rng, rng.randrange(0, 60)) if not isinstance(e, TransactionEnd)]
    mod, plan = fold_native.NATIVE  # type: ignore[misc]
    assert mod.in_order(plan, entries) is True  # as the converter emits them
    assert mod.in_order(plan, tuple(entries)) is True
    if len(entries) > 1:
        i = rng.randrange(1, len(entries))
        swapped = [*entries[: i - 1], entries[i], entries[i - 1], *entries[i + 1 :]]
        assert mod.in_order(plan, swapped) is False
        tied = [
            *entries[:i],
            dataclasses.replace(entries[i], order_key=entries[i - 1].order_key),
            *entries[i + 1 :],
        ]
        assert mod.in_order(plan, tied) is False  # equal keys: sorted, as before
