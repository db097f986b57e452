"""Row events: v1/v2 layouts, extra data, partial JSON updates, compressed bodies, MINIMAL/NOBLOB
images, and robustness (every truncation or corruption raises only DecodeError)."""

from __future__ import annotations

import random
import struct
import zlib
from typing import Any

import pytest
from binlog_capture import binlog_events, master_position, statement_groups
from test_json_binary import diff_bytes, doc
from test_table_map import M as MetaField
from test_table_map import field, lenenc, strs, table_map_body
from test_values_golden import DATA, decode_events

from airflow_provider_binlog.binlog.columns import JSON_NULL
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.errors import DecodeError
from airflow_provider_binlog.binlog.event import DecodeContext, EventHeader
from airflow_provider_binlog.binlog.json_binary import JsonDiffs
from airflow_provider_binlog.binlog.rows import RowsEvent, decode_rows_body
from airflow_provider_binlog.binlog.table_map import TableMapEvent

TID = 500


def ctx_with_table(
    types: list[int], meta: bytes, names: tuple[str, ...], table_id: int = TID
) -> DecodeContext:
    ctx = DecodeContext()
    names_field = field(MetaField.COLUMN_NAME, strs(*names))
    body = table_map_body(types, meta, (1 << len(types)) - 1, names_field, table_id)
    TableMapEvent.decode(memoryview(body), ctx)
    return ctx


def rows_body(
    code: int,
    ncols: int,
    rows: bytes,
    extra: bytes | None = None,
    table_id: int = TID,
    present: int | None = None,
    present_after: int | None = None,
) -> bytes:
    nb = (ncols + 7) // 8
    p = (1 << ncols) - 1 if present is None else present
    out = table_id.to_bytes(6, "little") + b"\x01\x00"
    if code in (30, 31, 32, 39):
        ex = extra or b""
        out += struct.pack("<H", len(ex) + 2) + ex
    out += lenenc(ncols) + p.to_bytes(nb, "little")
    if code in (24, 31, 39):
        out += ((1 << ncols) - 1 if present_after is None else present_after).to_bytes(nb, "little")
    return out + rows


def decode(code: int, body: bytes, ctx: DecodeContext) -> RowsEvent:
    ctx.header = EventHeader(0, code, 1, 19 + len(body), 0, 0)
    return RowsEvent.decode(memoryview(body), ctx)


def int_row(*vals: int | None) -> bytes:
    nulls = sum(1 << i for i, v in enumerate(vals) if v is None)
    return bytes([nulls]) + b"".join(struct.pack("<i", v) for v in vals if v is not None)


def test_v1_and_v2_write_update_delete() -> None:
    ctx = ctx_with_table([T.LONG, T.LONG], b"", ("a", "b"))
    for code in (23, 30):
        ev = decode(code, rows_body(code, 2, int_row(1, 2) + int_row(3, None)), ctx)
        assert ev.kind == "insert" and ev.rows == [{"a": 1, "b": 2}, {"a": 3, "b": None}]
        assert ev.schema == "shop" and ev.table == "orders" and ev.is_statement_end
    for code in (24, 31):
        ev = decode(code, rows_body(code, 2, int_row(1, 2) + int_row(1, 5)), ctx)
        assert ev.kind == "update" and ev.rows == [({"a": 1, "b": 2}, {"a": 1, "b": 5})]
        assert ev.images() == ev.rows
    for code in (25, 32):
        ev = decode(code, rows_body(code, 2, int_row(7, 8)), ctx)
        assert ev.kind == "delete" and ev.images() == [({"a": 7, "b": 8}, None)]


def test_v2_extra_data_partition_and_ndb() -> None:
    ctx = ctx_with_table([T.LONG], b"", ("a",))
    ev = decode(31, rows_body(31, 1, int_row(1) + int_row(2), extra=b"\x01" + struct.pack("<HH", 3, 4)), ctx)
    assert ev.extra is not None and (ev.extra.partition_id, ev.extra.source_partition_id) == (3, 4)
    ev = decode(30, rows_body(30, 1, int_row(1), extra=b"\x00\x04\x00ab"), ctx)
    assert ev.extra is not None and ev.extra.ndb_info == b"\x00ab" and ev.rows == [{"a": 1}]


def test_minimal_image_columns_are_absent_not_null() -> None:
    ctx = ctx_with_table([T.LONG, T.LONG, T.LONG], b"", ("a", "b", "c"))
    ev = decode(31, rows_body(31, 3, int_row(1) + int_row(9, None), present=0b001, present_after=0b110), ctx)
    assert ev.rows == [({"a": 1}, {"b": 9, "c": None})]


def test_partial_json_update_with_full_before_image() -> None:
    # id INT, j JSON, k JSON: j is updated by a diff, k in full
    ctx = ctx_with_table([T.LONG, T.JSON, T.JSON], b"\x04\x04", ("id", "j", "k"))
    before_j, before_k = doc({"age": 25, "tags": ["a"]}), doc([1])
    before = b"\x00" + struct.pack("<i", 1) + struct.pack("<I", len(before_j)) + before_j
    before += struct.pack("<I", len(before_k)) + before_k
    diffs = diff_bytes(0, "$.age", 26) + diff_bytes(1, "$.tags[1]", "b")
    after_k = doc(None)
    after = (
        lenenc(1) + bytes([0b01])  # value_options PARTIAL_JSON, partial bits: j yes, k no
        + b"\x00" + struct.pack("<i", 1) + struct.pack("<I", len(diffs)) + diffs
        + struct.pack("<I", len(after_k)) + after_k
    )  # fmt: skip
    unchanged = lenenc(0) + before  # a row without diffs: value_options 0, full after image
    ev = decode(39, rows_body(39, 3, before + after + before + unchanged), ctx)
    assert ev.kind == "update"
    (b1, a1), (b2, a2) = ev.rows
    assert b1 == {"id": 1, "j": {"age": 25, "tags": ["a"]}, "k": [1]}
    assert a1 == {"id": 1, "j": {"age": 26, "tags": ["a", "b"]}, "k": JSON_NULL}
    assert b2 == a2 == b1


def test_partial_json_update_with_minimal_before_image_keeps_the_diff() -> None:
    ctx = ctx_with_table([T.LONG, T.JSON], b"\x04", ("id", "j"))
    diffs = diff_bytes(2, "$.gone")
    row = int_row(1) + lenenc(1) + b"\x01" + b"\x00" + struct.pack("<I", len(diffs)) + diffs
    ev = decode(39, rows_body(39, 2, row, present=0b01, present_after=0b10), ctx)
    ((before, after),) = ev.rows
    assert before == {"id": 1} and isinstance(after["j"], JsonDiffs)


@pytest.mark.parametrize(("code", "base"), [(166, 23), (167, 24), (168, 25), (169, 30), (170, 31), (171, 32)])
def test_mariadb_compressed_rows(code: int, base: int) -> None:
    ctx = ctx_with_table([T.LONG], b"", ("a",))
    plain = int_row(1) + int_row(2)
    data = zlib.compress(plain)
    packed = bytes([0x80 | 1]) + bytes([len(plain)]) + data
    body = rows_body(base, 1, packed)
    ev = decode_rows_body(code, body, ctx)
    assert ev.rows == ([({"a": 1}, {"a": 2})] if base in (24, 31) else [{"a": 1}, {"a": 2}])
    with pytest.raises(DecodeError):
        decode_rows_body(code, rows_body(base, 1, b"\x81\x09" + data), ctx)  # wrong length


def test_missing_table_map_and_column_count_mismatch() -> None:
    ctx = ctx_with_table([T.LONG], b"", ("a",))
    with pytest.raises(DecodeError, match="without a preceding TABLE_MAP"):
        decode(30, rows_body(30, 1, int_row(1), table_id=999), ctx)
    ev = decode(30, rows_body(30, 2, int_row(1, 2)), ctx)
    with pytest.raises(DecodeError, match="2 columns"):
        ev.rows  # noqa: B018
    # an empty "dummy" event for an unknown table id decodes with no rows
    assert decode(30, rows_body(30, 0, b"", table_id=0xFFFFFF), ctx).rows == []


def _golden_bodies() -> list[tuple[int, bytes]]:
    return [(e["type"], bytes.fromhex(e["body"])) for e in DATA["full"]["events"]]


def test_truncated_or_corrupted_golden_rows_raise_only_decode_error() -> None:
    events = _golden_bodies()
    rnd = random.Random(3)
    for i, (code, body) in enumerate(events):
        if code == 19:
            continue
        table_map = next(e for e in reversed(events[:i]) if e[0] == 19)
        cuts = sorted({rnd.randrange(len(body)) for _ in range(40)} | {len(body) - 1, 13, 8})
        for cut in cuts:
            _expect_decode_error_or_rows(table_map[1], code, body[:cut])
        for _ in range(60):
            flipped = bytearray(body)
            k = rnd.randrange(len(body))
            flipped[k] ^= 1 << rnd.randrange(8)
            _expect_decode_error_or_rows(table_map[1], code, bytes(flipped))


def _expect_decode_error_or_rows(table_map: bytes, code: int, body: bytes) -> None:
    ctx = DecodeContext(flavor="mariadb")
    TableMapEvent.decode(memoryview(table_map), ctx)
    try:
        ev = decode(code, body, ctx)
        ev.images()
    except DecodeError as e:
        assert e.event_type  # every decode error names the event type
    except Exception as e:  # pragma: no cover - the failure this test exists to catch
        raise AssertionError(f"{type(e).__name__} escaped: {e}") from e


def test_decode_error_names_event_type_and_position() -> None:
    ctx = ctx_with_table([T.LONG], b"", ("a",))
    ctx.file = "mysql-bin.000007"
    body = rows_body(30, 1, int_row(1)[:-1])
    ctx.header = EventHeader(0, 30, 1, 19 + len(body), 1000, 0)
    ev = RowsEvent.decode(memoryview(body), ctx)
    with pytest.raises(DecodeError) as err:
        ev.rows  # noqa: B018
    assert err.value.event_type == "WRITE_ROWS_EVENT_V2"
    assert err.value.position == f"mysql-bin.000007:{1000 - 19 - len(body)}"
    assert "shop.orders" in str(err.value)


def test_golden_events_decode_lazily_and_once() -> None:
    events = decode_events("full")
    ev = next(e for e in events if isinstance(e, RowsEvent))
    assert ev._rows is None
    rows = ev.rows
    assert ev.rows is rows


@pytest.mark.integration
@pytest.mark.parametrize("image", ["MINIMAL", "NOBLOB"])
def test_live_minimal_and_noblob_images(mariadb: Any, database: str, image: str) -> None:
    conn = mariadb.connect(database)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE m (id INT PRIMARY KEY, a INT, t TEXT, b BLOB)")
        cur.execute(f"SET SESSION binlog_row_image = {image}")
        start = master_position(cur)
        cur.execute("INSERT INTO m VALUES (1, 2, 'x', 'y')")
        cur.execute("UPDATE m SET a = 3 WHERE id = 1")
        cur.execute("DELETE FROM m WHERE id = 1")
        cur.execute("FLUSH BINARY LOGS")
    conn.close()
    groups = statement_groups(binlog_events(mariadb.datadir, start, database))
    (ins,), (upd,), (dele,) = groups
    if image == "MINIMAL":
        assert ins.rows == [{"id": 1, "a": 2, "t": "x", "b": b"y"}]
        assert upd.rows == [({"id": 1}, {"a": 3})]
        assert dele.rows == [{"id": 1}]
    else:  # NOBLOB: all non-BLOB/TEXT columns; blobs only where needed
        assert upd.rows == [({"id": 1, "a": 2}, {"id": 1, "a": 3})]
        assert dele.rows == [{"id": 1, "a": 3}]
