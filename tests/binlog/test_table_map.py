"""TABLE_MAP: optional metadata fields, the schema-resolver hook, type checks, malformed bodies."""

from __future__ import annotations

import struct
from dataclasses import replace
from typing import Any

import pytest
from test_values_golden import COLUMNS, _pair, decode_events, images, snapshots

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.errors import DecodeError
from airflow_provider_binlog.binlog.event import DecodeContext
from airflow_provider_binlog.binlog.table_map import (
    OptionalMetadataType as M,
)
from airflow_provider_binlog.binlog.table_map import (
    TableMapEvent,
    collation_charset,
    collation_codec,
    real_type,
)


def lenenc(n: int) -> bytes:
    return bytes([n]) if n < 251 else b"\xfc" + struct.pack("<H", n)


def field(kind: int, payload: bytes) -> bytes:
    return bytes([kind]) + lenenc(len(payload)) + payload


def strs(*values: str) -> bytes:
    return b"".join(lenenc(len(v.encode())) + v.encode() for v in values)


def table_map_body(
    types: list[int], meta: bytes, nullable: int, optional: bytes = b"", table_id: int = 77
) -> bytes:
    return (
        table_id.to_bytes(6, "little") + b"\x01\x00"
        + b"\x04shop\x00" + b"\x06orders\x00"
        + lenenc(len(types)) + bytes(types) + lenenc(len(meta)) + meta
        + nullable.to_bytes((len(types) + 7) // 8, "little") + optional
    )  # fmt: skip


# id INT UNSIGNED, name VARCHAR(40) latin1, v VECTOR(3), e ENUM('x','y') utf8mb4, s SET('p') latin1,
# secret INT invisible, g POINT, price DECIMAL(10,2), t TEXT binary (BLOB)
TYPES = [T.LONG, T.VARCHAR, T.VECTOR, T.STRING, T.STRING, T.LONG, T.GEOMETRY, T.NEWDECIMAL, T.BLOB]
META = (
    struct.pack("<H", 40) + b"\x04" + bytes([T.ENUM, 1]) + bytes([T.SET, 1])
    + b"\x04" + bytes([10, 2]) + b"\x02"
)  # fmt: skip
OPTIONAL = (
    field(M.SIGNEDNESS, bytes([0b10000000]))  # id unsigned, secret and price signed
    + field(M.DEFAULT_CHARSET, lenenc(255) + lenenc(0) + lenenc(8) + lenenc(1) + lenenc(63))
    + field(M.COLUMN_NAME, strs("id", "name", "v", "e", "s", "secret", "g", "price", "t"))
    + field(M.SET_STR_VALUE, lenenc(1) + strs("p"))
    + field(M.ENUM_STR_VALUE, lenenc(2) + strs("x", "y"))
    + field(M.GEOMETRY_TYPE, lenenc(1))
    + field(M.PRIMARY_KEY_WITH_PREFIX, lenenc(0) + lenenc(0) + lenenc(1) + lenenc(10))
    + field(M.ENUM_AND_SET_COLUMN_CHARSET, lenenc(255) + lenenc(8))
    + field(M.COLUMN_VISIBILITY, bytes([0b11111011, 0b10000000]))
    + field(M.VECTOR_DIMENSIONALITY, lenenc(3))
    + field(99, b"future")
)


def decode(body: bytes, **ctx: Any) -> TableMapEvent:
    return TableMapEvent.decode(memoryview(body), DecodeContext(**ctx))


def test_every_optional_field() -> None:
    ctx = DecodeContext()
    tm = TableMapEvent.decode(memoryview(table_map_body(TYPES, META, 0b111111110, OPTIONAL)), ctx)
    assert ctx.tables[77] is tm
    assert (tm.table_id, tm.flags, tm.schema, tm.table) == (77, 1, "shop", "orders")
    c = {col.name: col for col in tm.table_schema.columns}
    assert c["id"].unsigned and not c["id"].nullable and not c["secret"].unsigned
    assert c["name"].collation == 8 and c["name"].charset == "cp1252" and c["name"].max_length == 40
    assert c["t"].collation == 63 and c["t"].charset is None
    assert c["e"].type == T.ENUM and c["e"].enum_values == ("x", "y") and c["e"].collation == 255
    assert c["s"].type == T.SET and c["s"].set_values == ("p",) and c["s"].collation == 8
    assert c["v"].vector_dimensions == 3 and c["g"].geometry_type == 1
    assert (c["price"].precision, c["price"].scale) == (10, 2)
    assert not c["secret"].visible and c["id"].visible
    assert tm.table_schema.primary_key == ("id", "name")
    assert tm.optional.primary_key_with_prefix == ((0, 0), (1, 10))
    assert tm.optional.unknown == ((99, b"future"),)
    assert not tm.needs_resolver()


def test_identical_bodies_share_one_event_and_decoder() -> None:
    body = table_map_body(TYPES, META, 0, OPTIONAL, table_id=78)
    a, b = decode(body), decode(bytes(body))
    assert a is b and a.row_decoder() is b.row_decoder()


def test_no_metadata_names_are_positional() -> None:
    tm = decode(table_map_body([T.LONG, T.VARCHAR], struct.pack("<H", 10), 0b10))
    assert tm.table_schema.column_names == ("@1", "@2") and tm.needs_resolver()
    assert tm.table_schema.columns[1].collation is None


def test_long_char_real_type() -> None:
    # CHAR(255) utf8mb4 = 1020 bytes: the high length bits live in the type byte (MySQL bug 37426)
    meta = (T.STRING ^ ((1020 & 0x300) >> 4)) << 8 | (1020 & 0xFF)
    assert meta == 0xCEFC and real_type(T.STRING, meta) == (T.STRING, 1020)
    assert real_type(T.STRING, T.ENUM << 8 | 2) == (T.ENUM, 2)
    assert real_type(T.STRING, 30) == (T.STRING, 30)


def test_collations() -> None:
    assert collation_charset(255) == "utf8mb4" and collation_codec(255) == "utf-8"
    assert collation_codec(8) == "cp1252" and collation_codec(63) is None
    assert collation_codec(33) == "utf-8" and collation_codec(35) == "utf-16-be"
    assert collation_codec(28) == "gbk" and collation_codec(1) == "big5"
    assert collation_codec(13) == "shift_jis" and collation_codec(19) == "cp949"
    assert collation_codec(26) == "cp1250" and collation_codec(11) == "ascii"
    assert collation_codec(3) is None  # dec8: no Python codec
    assert collation_codec(9999) is None


@pytest.mark.parametrize(
    "body",
    [
        b"",
        table_map_body(TYPES, META, 0)[:30],
        table_map_body([T.LONG], b"", 0, field(M.COLUMN_NAME, strs("a", "b"))),  # 2 names for 1 column
        table_map_body([T.LONG], b"", 0, field(M.SIMPLE_PRIMARY_KEY, lenenc(5))),  # key column out of range
        table_map_body([T.LONG], b"", 0, b"\x04\x09ab"),  # optional field overruns
        table_map_body([200], b"", 0),  # unknown column type
        table_map_body([T.VARCHAR], b"\x01", 0),  # metadata too short
    ],
)
def test_malformed_bodies_raise_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(body)


# ---- the resolver hook, on MariaDB's binlog_row_metadata=MINIMAL golden bytes ---------------------


def full_schema() -> TableSchema:
    tm = decode_events("full")[0]
    assert isinstance(tm, TableMapEvent)
    return tm.table_schema


def test_minimal_metadata_without_resolver_keeps_positions_indexes_and_bitmasks() -> None:
    tm = decode_events("minimal")[0]
    assert isinstance(tm, TableMapEvent) and tm.needs_resolver() and not tm.resolved
    assert tm.table_schema.columns[0].name == "@1" and tm.table_schema.primary_key == ()
    full = images()
    minimal = _pair_positional(decode_events("minimal"))
    defs = full_schema().columns
    for (_, want, *_), (_, got) in zip(full, minimal, strict=True):
        if want is None:
            continue
        for k, name in enumerate(COLUMNS):
            value, col = want[name], defs[k]
            if col.type == T.ENUM and value is not None:  # index, 1-based ('' is 0)
                value = (col.enum_values or ()).index(value) + 1 if value else 0
            elif col.type == T.SET and value is not None:  # bitmask
                labels = col.set_values or ()
                value = sum(1 << labels.index(x) for x in value.split(",")) if value else 0
            assert got[f"@{k + 1}"] == value, name


def _pair_positional(events: list[Any]) -> list[tuple[Any, Any]]:
    return [pair for ev in events if hasattr(ev, "images") for pair in ev.images()]


def test_resolver_fills_names_labels_and_key() -> None:
    schema = full_schema()
    calls: list[TableMapEvent] = []

    def resolver(tm: TableMapEvent) -> TableSchema:
        calls.append(tm)
        # what information_schema would say: names, labels, key; binlog-level details need not match
        blank = {"meta": 0, "fsp": None, "collation": None, "charset": None, "nullable": True}
        cols = tuple(replace(c, **blank) for c in schema.columns)
        return replace(schema, columns=cols)

    events = decode_events("minimal", resolver)
    assert calls and all(not c.resolved for c in calls)
    tm = events[0]
    assert tm.resolved and tm.table_schema.primary_key == ("id",)
    assert tm.table_schema.column_names == tuple(COLUMNS)
    # charsets and nullability still come from the binlog
    cols = {c.name: c for c in tm.table_schema.columns}
    assert cols["c_latin1"].collation == 8 and not cols["id"].nullable
    got = _pair(events, snapshots("minimal"))
    for before, after, want_before, want_after in got:
        assert before == want_before and after == want_after


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda cols: cols[:-1], "columns but the TABLE_MAP has"),
        (lambda cols: (cols[0], replace(cols[1], type=T.VARCHAR), *cols[2:]), "refusing to decode"),
        (lambda cols: (*cols[:-1], replace(cols[-1], type=T.LONG)), "refusing to decode"),
    ],
)
def test_resolver_mismatch_raises(change: Any, message: str) -> None:
    schema = full_schema()

    def resolver(tm: TableMapEvent) -> TableSchema:
        return replace(schema, columns=tuple(change(schema.columns)))

    with pytest.raises(DecodeError, match=message):
        decode_events("minimal", resolver)


def test_resolver_cannot_rename_columns_the_binlog_names() -> None:
    body = table_map_body([T.LONG], b"", 0, field(M.COLUMN_NAME, strs("a")), table_id=79)
    tm = decode(body)
    with pytest.raises(DecodeError, match="named"):
        tm.with_resolved(TableSchema("shop", "orders", (ColumnDef("b", T.LONG),)))


def test_resolver_returning_none_keeps_the_binlog_view() -> None:
    tm = decode(table_map_body([T.LONG], b"", 0, table_id=80), schema_resolver=lambda tm: None)
    assert tm.table_schema.column_names == ("@1",) and not tm.resolved


def test_resolver_json_on_mariadb_text_keeps_the_text() -> None:
    """MariaDB's JSON is a LONGTEXT: a resolver that says JSON (the DDL did) leaves it text, so the
    document reaches the lake exactly as written, as with FULL metadata (issue 42)."""
    resolved = TableSchema("shop", "orders", (ColumnDef("id", T.LONG), ColumnDef("doc", T.JSON)))
    for charset_field in ((field(M.COLUMN_CHARSET, lenenc(46)),), ()):  # FULL-like, MINIMAL
        body = table_map_body([T.LONG, T.BLOB], b"\x04", 0b10, *charset_field, table_id=81)
        ctx = DecodeContext(flavor="mariadb", schema_resolver=lambda tm: resolved)
        tm = TableMapEvent.decode(memoryview(body), ctx)
        col = tm.table_schema.columns[1]
        assert (col.type, col.collation, col.charset) == (T.BLOB, 46, "utf-8")
        doc = b'["a", "b",1]'
        row_bytes = b"\x00" + struct.pack("<i", 1) + struct.pack("<I", len(doc)) + doc
        dec = tm.row_decoder()
        assert dec.decode_rows(row_bytes, 0, len(row_bytes), b"\x03") == [{"id": 1, "doc": '["a", "b",1]'}]
