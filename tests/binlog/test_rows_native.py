"""The C row decoder (``_rowdecode``) against the Python one: same values (compared by ``repr``, so
types, Decimal exponents, tzinfo and key order count) or the same DecodeError text.

Inputs: every row event of the fixture binlogs and of the golden all-types capture; those events
with their row data damaged by hypothesis (bit flips, truncation, random bytes); and synthetic
schemas of every type the C decoder reads, with structurally valid rows of random content
(invalid dates, out-of-range DECIMAL groups, bad text, ENUM/SET values beyond the labels...).
An event holding a date no Python type holds (an :class:`InvalidDate`) is declined by C, by design:
the Python decoder makes the value and records it for its event's position.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_values_golden import decode_events

from airflow_provider_binlog.binlog import values
from airflow_provider_binlog.binlog.columns import ColumnDef, InvalidDate, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType
from airflow_provider_binlog.binlog.errors import DecodeError
from airflow_provider_binlog.binlog.files import read_binlog_file
from airflow_provider_binlog.binlog.rows import RowsEvent

T = ColumnType
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "binlog"
NATIVE = values._native
pytestmark = pytest.mark.skipif(NATIVE is None, reason="C row decoder not built (or BINLOG_CDC_PURE_PYTHON)")
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn: Any) -> tuple[str, str]:
    try:
        return "ok", repr(fn())
    except DecodeError as e:
        return "error", str(e)


def both(fn: Any) -> tuple[tuple[str, str], tuple[str, str]]:
    """``fn()`` with the C decoder, then with the Python decoder."""
    c = outcome(fn)
    values._native = None
    try:
        py = outcome(fn)
    finally:
        values._native = NATIVE
    return c, py


def fresh(ev: RowsEvent, body: bytes | None = None) -> RowsEvent:
    return dataclasses.replace(ev, _body=ev._body if body is None else body, _rows=None)


def all_row_events() -> list[RowsEvent]:
    out = []
    for path in sorted(FIXTURES.iterdir()):
        if path.name == "README.md":
            continue
        out += [e.body for e in read_binlog_file(path) if isinstance(e.body, RowsEvent)]
    for variant in ("full", "minimal"):
        out += [e for e in decode_events(variant) if isinstance(e, RowsEvent)]
    return [e for e in out if e.table_map is not None and e._rows_at < len(e._body)]


EVENTS = all_row_events()


def holds_invalid(ev: RowsEvent) -> bool:
    """Whether the event's rows (decoded in Python) hold an :class:`InvalidDate`."""
    values._native = None
    try:
        rows = fresh(ev).rows
    finally:
        values._native = NATIVE
    images = [img for r in rows for img in (r if isinstance(r, tuple) else (r,))]
    return any(type(v) is InvalidDate for img in images for v in img.values())


def test_fixture_and_golden_events_decode_alike() -> None:
    native = 0
    for ev in EVENTS:
        c, py = both(lambda ev=ev: fresh(ev).rows)
        assert c == py, (ev.schema, ev.table, ev.type_code)
        dec = ev.table_map.row_decoder()
        plan = dec.native_plan(ev.columns_present)
        if plan is not None and ev.kind != "update":
            out = NATIVE.decode_rows(plan, ev._body, ev._rows_at, len(ev._body))
            assert (out is None) == holds_invalid(ev), (ev.schema, ev.table)
            native += out is not None
    assert native >= 10  # the C decoder really took most of them (all-types rows included)


def test_golden_all_types_rows_go_through_c() -> None:
    evs = [e for e in EVENTS if e.table == "all_types"]
    assert evs and any(holds_invalid(e) for e in evs)
    for ev in evs:
        if holds_invalid(ev):  # its zero dates: declined, Python decodes it (checked above)
            continue
        dec = ev.table_map.row_decoder()
        present_after = ev.columns_present_after or ev.columns_present
        assert dec.native_plan(ev.columns_present) is not None
        if ev.kind == "update":
            assert dec.native_pairs(ev._body, ev._rows_at, len(ev._body), ev.columns_present, present_after)
        else:
            assert NATIVE.decode_rows(
                dec.native_plan(ev.columns_present), ev._body, ev._rows_at, len(ev._body)
            )


@FUZZ
@given(data=st.data())
def test_damaged_row_data_decodes_alike(data: st.DataObject) -> None:
    ev = data.draw(st.sampled_from(EVENTS))
    body = bytearray(ev._body)
    start = ev._rows_at
    how = data.draw(st.sampled_from(["flip", "truncate", "random", "extend"]))
    if how == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(start, len(body) - 1))
            body[i] ^= 1 << data.draw(st.integers(0, 7))
    elif how == "truncate":
        del body[data.draw(st.integers(start, len(body) - 1)) :]
    elif how == "random":
        i = data.draw(st.integers(start, len(body) - 1))
        chunk = data.draw(st.binary(min_size=1, max_size=16))
        body[i : i + len(chunk)] = chunk
    else:
        body += data.draw(st.binary(min_size=1, max_size=16))
    c, py = both(lambda: fresh(ev, bytes(body)).rows)
    assert c == py


# -------------------------------------------------------------------------------- synthetic schemas

LABELS = st.lists(st.text("abcxyz\u00e7\u20ac", min_size=1, max_size=3), min_size=1, max_size=70, unique=True)
TEXT = st.sampled_from(
    [(None, None), (63, None), (255, "utf-8"), (8, "cp1252"), (28, "gbk"), (35, "utf-16-be")]
)


@st.composite
def columns(draw: Any) -> ColumnDef:
    kind = draw(st.sampled_from(["int", "float", "year", "bit", "varchar", "binary", "blob", "date",
                                 "datetime2", "timestamp2", "time2", "decimal", "enum", "set", "old",
                                 "json"]))  # fmt: skip
    name = f"c{draw(st.integers(0, 10**6))}"
    if kind == "int":
        t = draw(st.sampled_from([T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG]))
        return ColumnDef(name, t, unsigned=draw(st.booleans()))
    if kind == "float":
        return ColumnDef(name, draw(st.sampled_from([T.FLOAT, T.DOUBLE])), meta=4)
    if kind == "year":
        return ColumnDef(name, T.YEAR)
    if kind == "bit":
        return ColumnDef(name, T.BIT, meta=draw(st.integers(0, 7)) << 8 | draw(st.integers(0, 7)))
    if kind in ("varchar", "binary"):
        coll, cs = (63, None) if kind == "binary" else draw(TEXT)
        t = T.STRING if kind == "binary" else draw(st.sampled_from([T.VARCHAR, T.STRING, T.VAR_STRING]))
        return ColumnDef(
            name, t, meta=draw(st.sampled_from([3, 10, 255, 256, 1000])), collation=coll, charset=cs
        )
    if kind == "blob":
        coll, cs = draw(TEXT)
        t = draw(st.sampled_from([T.BLOB, T.GEOMETRY]))
        return ColumnDef(name, t, meta=draw(st.integers(1, 4)), collation=coll, charset=cs)
    if kind in ("date", "datetime2", "timestamp2", "time2"):
        t = {"date": T.DATE, "datetime2": T.DATETIME2, "timestamp2": T.TIMESTAMP2, "time2": T.TIME2}[kind]
        return ColumnDef(name, t, fsp=draw(st.integers(0, 6)))
    if kind == "decimal":
        p = draw(st.integers(1, 65))
        return ColumnDef(name, T.NEWDECIMAL, precision=p, scale=draw(st.integers(0, min(p, 30))))
    if kind in ("enum", "set"):
        t = T.ENUM if kind == "enum" else T.SET
        labels = draw(st.none() | LABELS.map(tuple))
        width = draw(st.integers(1, 2)) if t == T.ENUM else draw(st.sampled_from([1, 2, 3, 4, 8]))
        if t == T.ENUM:
            return ColumnDef(name, t, meta=width, enum_values=labels)
        return ColumnDef(name, t, meta=width, set_values=labels)
    if kind == "old":
        return ColumnDef(name, draw(st.sampled_from([T.TIME, T.DATETIME, T.TIMESTAMP])))
    return ColumnDef(name, T.JSON, meta=draw(st.integers(1, 4)))


def value_bytes(draw: Any, col: ColumnDef) -> bytes:
    """Bytes of one value of the column's shape, random content (often an invalid value)."""
    t = col.type
    fixed = {T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8, T.FLOAT: 4, T.DOUBLE: 8,
             T.YEAR: 1, T.DATE: 3, T.TIME: 3, T.DATETIME: 8, T.TIMESTAMP: 4}  # fmt: skip
    n = ((col.fsp or 0) + 1) // 2
    size = fixed.get(t) or {T.DATETIME2: 5 + n, T.TIMESTAMP2: 4 + n, T.TIME2: 3 + n}.get(t)
    if t == T.BIT:
        size = (col.meta >> 8) + (1 if col.meta & 0xFF else 0)
    elif t == T.NEWDECIMAL:
        size = values.decimal_reader(col.precision or 0, col.scale or 0)[1]
    elif t in (T.ENUM, T.SET):
        size = col.meta & 0xFF
        if draw(st.booleans()):  # mostly a valid value
            labels = col.enum_values if t == T.ENUM else col.set_values
            k = len(labels or ()) + 1
            v = draw(st.integers(0, k)) if t == T.ENUM else draw(st.integers(0, (1 << min(k, 64)) - 1))
            return (v & ((1 << 8 * size) - 1)).to_bytes(size, "little")
    if size is not None:
        if t in (T.NEWDECIMAL, T.DATETIME2, T.TIMESTAMP2, T.TIME2, T.DATE) and draw(st.booleans()):
            return draw(st.sampled_from([b"\x80", b"\x7f", b"\x00"])) + bytes(size - 1) if size else b""
        return draw(st.binary(min_size=size, max_size=size))
    if t == T.JSON:
        payload = draw(st.sampled_from([b"", b"\x04\x01", b"\x0c\x03abc", b"\x04\x02", b"\x00\x01\x00"]))
    else:
        payload = draw(st.binary(max_size=12) | st.text(max_size=6).map(lambda s: s.encode()))
    width = col.meta if t in (T.BLOB, T.GEOMETRY, T.JSON) else (2 if col.meta > 255 else 1)
    return len(payload).to_bytes(width, "little") + payload


@FUZZ
@given(data=st.data())
def test_synthetic_rows_decode_alike(data: st.DataObject) -> None:
    cols = data.draw(st.lists(columns(), min_size=1, max_size=8, unique_by=lambda c: c.name))
    schema = TableSchema("s", "t", tuple(cols))
    present = b"\xff" * ((len(cols) + 7) // 8)
    body = b""
    for _ in range(data.draw(st.integers(1, 3))):
        nulls = data.draw(st.integers(0, (1 << len(cols)) - 1)) if data.draw(st.booleans()) else 0
        body += nulls.to_bytes((len(cols) + 7) // 8, "little")
        body += b"".join(value_bytes(data.draw, c) for k, c in enumerate(cols) if not nulls >> k & 1)
    if data.draw(st.integers(0, 3)) == 0:
        body = body[: data.draw(st.integers(0, len(body)))]

    def decode() -> Any:
        try:
            return values.RowDecoder(schema).decode_rows(body, 0, len(body), present)
        except DecodeError:
            raise
        except Exception as e:  # what RowsEvent.rows turns into a DecodeError
            raise DecodeError(f"{type(e).__name__}: {e}") from None

    c, py = both(decode)
    assert c == py, (c, py)


# -------------------------------------------------------------------------------- kept columns


def projected(rows: Any, names: list[str], kind: str) -> Any:
    """``rows`` (as :attr:`RowsEvent.rows` gives them) with the before images cut to ``names``."""

    def cut(image: dict[str, Any]) -> dict[str, Any]:
        return {n: image[n] for n in names if n in image}

    if kind == "update":
        return [(cut(b), a) for b, a in rows]
    return rows if kind == "insert" else [cut(r) for r in rows]


def eval_rows(ev: RowsEvent) -> Any:
    """``ev.rows`` decoded in Python."""
    values._native = None
    try:
        return ev.rows
    finally:
        values._native = NATIVE


def test_fixture_and_golden_events_keep_the_asked_columns_of_before_images() -> None:
    """``rows_keeping`` is ``rows`` with the before images cut to the kept columns, with the C
    decoder and without it; through C for every event of the all-types table."""
    rng = random.Random(7)
    checked = 0
    for ev in EVENTS:
        cols = ev.table_map.table_schema.columns
        for keep in (frozenset({0}), frozenset(i for i in range(len(cols)) if rng.random() < 0.4)):
            names = [cols[i].name for i in sorted(keep)]
            full = both(lambda ev=ev: fresh(ev).rows)
            kept = both(lambda ev=ev, keep=keep: fresh(ev).rows_keeping(keep))
            if full[1][0] == "ok":
                want = repr(projected(eval_rows(fresh(ev)), names, ev.kind))
                assert kept == (("ok", want), ("ok", want)), (ev.schema, ev.table, ev.type_code)
                checked += ev.kind != "insert"
        if ev.table == "all_types" and ev.kind != "insert":  # taken in C, not left to Python
            dec, body, at = ev.table_map.row_decoder(), ev._body, ev._rows_at
            keep = frozenset({0})
            if ev.kind == "update":
                after = ev.columns_present_after or ev.columns_present
                assert dec.native_pairs(body, at, len(body), ev.columns_present, after, keep) is not None
            else:
                plan = dec.native_plan(ev.columns_present, keep)
                assert NATIVE.decode_rows(plan, body, at, len(body)) is not None
    assert checked > 10


@FUZZ
@given(data=st.data())
def test_synthetic_rows_with_kept_columns_decode_as_projected(data: st.DataObject) -> None:
    """The C decoder reads past the columns a plan does not keep: the kept values are those of a
    whole decode, for row images (deletes) and for the before images of update pairs."""
    cols = data.draw(st.lists(columns(), min_size=1, max_size=8, unique_by=lambda c: c.name))
    schema = TableSchema("s", "t", tuple(cols))
    keep = frozenset(data.draw(st.sets(st.integers(0, len(cols) - 1))))
    names = [cols[i].name for i in sorted(keep)]
    present = b"\xff" * ((len(cols) + 7) // 8)
    body = b""
    for _ in range(2 * data.draw(st.integers(1, 3))):  # an even count: also read as update pairs
        nulls = data.draw(st.integers(0, (1 << len(cols)) - 1)) if data.draw(st.booleans()) else 0
        body += nulls.to_bytes((len(cols) + 7) // 8, "little")
        body += b"".join(value_bytes(data.draw, c) for k, c in enumerate(cols) if not nulls >> k & 1)
    dec = values.RowDecoder(schema)
    plan, plan_kept = dec.native_plan(present), dec.native_plan(present, keep)
    assert (plan is None) == (plan_kept is None)
    if plan is None:  # a column without a C twin
        return
    whole = NATIVE.decode_rows(plan, body, 0, len(body))
    kept = NATIVE.decode_rows(plan_kept, body, 0, len(body))
    pairs = dec.native_pairs(body, 0, len(body), present, present, keep)
    if whole is None:  # the C decoder declined a value: reading past it may not
        return
    assert repr(kept) == repr(projected(whole, names, "delete"))
    assert repr(pairs) == repr(projected(list(zip(whole[::2], whole[1::2], strict=True)), names, "update"))
    values._native = None
    try:
        assert repr(dec.decode_rows(body, 0, len(body), present, keep)) == repr(kept)
    finally:
        values._native = NATIVE
