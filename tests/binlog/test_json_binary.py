"""MySQL binary JSON and JSON diffs.

MariaDB (the test server) stores JSON as text, so binary JSON comes from the MySQL fixture files
(test_rows_fixtures.py) and from the byte strings below, written by hand from MySQL's
``json_binary.cc`` layout (each with the JSON text MySQL would show for it).
"""

from __future__ import annotations

import contextlib
import struct
import subprocess
import sys
from decimal import Decimal
from typing import Any

import pytest

from airflow_provider_binlog.binlog.columns import JSON_NULL
from airflow_provider_binlog.binlog.errors import DecodeError
from airflow_provider_binlog.binlog.json_binary import (
    INSERT,
    REMOVE,
    REPLACE,
    JsonDiff,
    JsonDiffs,
    apply_diffs,
    parse,
    parse_diffs,
    parse_path,
)


def varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


# ---- a tiny encoder following json_binary.cc, used to build every container form ----------------


def enc(v: Any, large: bool = False) -> tuple[int, bytes]:
    """(type, value bytes) of ``v``."""
    if v is None or v is True or v is False:
        return 4, bytes([{None: 0, True: 1, False: 2}[v]])
    if isinstance(v, int):
        if -(1 << 15) <= v < 1 << 15:
            return 5, struct.pack("<h", v)
        if -(1 << 31) <= v < 1 << 31:
            return 7, struct.pack("<i", v)
        if v < 0 or v < 1 << 63:
            return 9, struct.pack("<q", v)
        return 10, struct.pack("<Q", v)
    if isinstance(v, float):
        return 11, struct.pack("<d", v)
    if isinstance(v, str):
        raw = v.encode()
        return 12, varlen(len(raw)) + raw
    if isinstance(v, dict):
        return (1 if large else 0), container(list(v.items()), True, large)
    if isinstance(v, list):
        return (3 if large else 2), container([(None, x) for x in v], False, large)
    raise TypeError(v)


def container(items: list[tuple[str | None, Any]], is_obj: bool, large: bool) -> bytes:
    w = 4 if large else 2
    fmt = "<I" if large else "<H"
    n = len(items)
    header = 2 * w + (n * (w + 2) if is_obj else 0) + n * (1 + w)
    keys = b""
    key_entries = b""
    pos = header
    if is_obj:
        for k, _ in items:
            raw = k.encode()  # type: ignore[union-attr]
            key_entries += struct.pack(fmt, pos + len(keys)) + struct.pack("<H", len(raw))
            keys += raw
    pos = header + len(keys)
    entries = b""
    values = b""
    for _, v in items:
        t, data = enc(v, large)
        inline = t in (4, 5, 6) or (large and t in (7, 8))
        if inline:
            entries += bytes([t]) + data.ljust(w, b"\0")
        else:
            entries += bytes([t]) + struct.pack(fmt, pos + len(values))
            values += data
    body = key_entries + entries + keys + values
    size = 2 * w + len(body)
    return struct.pack(fmt, n) + struct.pack(fmt, size) + body


def doc(v: Any, large: bool = False) -> bytes:
    t, data = enc(v, large)
    return bytes([t]) + data


SAMPLE = {
    "a": [1, -2, 70000, -70000, 2**40, -(2**62), 1.5, "x", None, True, False, [], {}],
    "ü😀": {"nested": {"deep": ["s" * 200]}},
    "n": None,
    "u64": 2**64 - 1,
}


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_containers_roundtrip(large: bool) -> None:
    assert parse(doc(SAMPLE, large)) == SAMPLE


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"\x04\x00", JSON_NULL),  # top-level null document
        (b"\x04\x01", True),
        (b"\x04\x02", False),
        (b"\x05" + struct.pack("<h", -5), -5),
        (b"\x06" + struct.pack("<H", 65535), 65535),
        (b"\x07" + struct.pack("<i", -(2**31)), -(2**31)),
        (b"\x08" + struct.pack("<I", 2**32 - 1), 2**32 - 1),
        (b"\x09" + struct.pack("<q", -(2**63)), -(2**63)),
        (b"\x0a" + struct.pack("<Q", 2**64 - 1), 2**64 - 1),
        (b"\x0b" + struct.pack("<d", 0.1), 0.1),
        (b"\x0c" + varlen(300) + b"y" * 300, "y" * 300),  # 2-byte string length
        (b"\x0c\x00", ""),
        (b"", JSON_NULL),  # an empty JSON column value is JSON null (as MySQL reads it)
        # opaque DECIMAL(5,2) -123.45: precision, scale, decimal2bin bytes
        (b"\x0f\xf6" + varlen(5) + bytes([5, 2]) + bytes([0x7F ^ 0x7F, 0x84, 0xD2]), None),
        # opaque DATE 2015-01-15 (packed datetime, time part 0)
        (b"\x0f\x0a\x08" + struct.pack("<q", ((2015 * 13 + 1) << 5 | 15) << 17 << 24), "2015-01-15"),
        # opaque DATETIME 2015-01-15 23:24:25.000123
        (
            b"\x0f\x0c\x08"
            + struct.pack(
                "<q", ((((2015 * 13 + 1) << 5 | 15) << 17 | (23 << 12 | 24 << 6 | 25)) << 24) + 123
            ),
            "2015-01-15 23:24:25.000123",
        ),
        # opaque TIME -838:59:59
        (b"\x0f\x0b\x08" + struct.pack("<q", -((838 << 12 | 59 << 6 | 59) << 24)), "-838:59:59.000000"),
        # opaque of another type (VARCHAR 15): MySQL's base64 text form
        (b"\x0f\x0f\x03abc", "base64:type15:YWJj"),
    ],
)
def test_scalars_and_opaque(raw: bytes, expected: Any) -> None:
    if expected is None:  # the DECIMAL case: compute the bytes the way MySQL's decimal2bin does
        raw = b"\x0f\xf6" + varlen(5) + bytes([5, 2]) + bytes([0x80 ^ 0xFF, 0x7B ^ 0xFF, 0x2D ^ 0xFF])
        assert parse(raw) == Decimal("-123.45")
        return
    v = parse(raw)
    assert v == expected and type(v) is type(expected)


@pytest.mark.parametrize(
    "raw",
    [b"\x00", b"\x00\x05\x00\xff\xff", b"\x02\x01\x00\x20\x00", b"\x0c\x85", b"\x0c\x05ab", b"\x04\x09",
     b"\x0e", b"\x0f\xf6\x02\x05", b"\x0c" + b"\x80" * 6, b"\x03" + b"\xff" * 8],
)  # fmt: skip
def test_malformed_raises_decode_error(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        parse(raw)


def test_every_truncation_of_a_document_raises_only_decode_error() -> None:
    full = doc(SAMPLE)
    for n in range(1, len(full)):
        with contextlib.suppress(DecodeError):
            parse(full[:n])


# ---- JSON diffs -----------------------------------------------------------------------------------


def diff_bytes(op: int, path: str, value: Any = None) -> bytes:
    p = path.encode()
    out = bytes([op, len(p)]) + p
    if op != REMOVE:
        v = doc(value)
        out += bytes([len(v)]) + v
    return out


def test_parse_and_apply_diffs() -> None:
    raw = (
        diff_bytes(REPLACE, "$.age", 26)
        + diff_bytes(INSERT, "$.tags[1]", "new")
        + diff_bytes(REMOVE, '$."a b"')
        + diff_bytes(INSERT, "$.obj.k", {"x": [1]})
        + diff_bytes(REPLACE, "$.tags[last]", "z")
        + diff_bytes(INSERT, "$.tags[99]", "end")
    )
    diffs = parse_diffs(raw)
    assert diffs.diffs[0] == JsonDiff(REPLACE, "$.age", 26)
    assert diffs.diffs[2] == JsonDiff(REMOVE, '$."a b"')
    before = {"age": 25, "tags": ["a", "b"], "a b": 1, "obj": {}}
    after = apply_diffs(before, diffs)
    assert after == {"age": 26, "tags": ["a", "new", "z", "end"], "obj": {"k": {"x": [1]}}}
    assert before == {"age": 25, "tags": ["a", "b"], "a b": 1, "obj": {}}


def test_apply_replace_whole_document_and_remove_from_array() -> None:
    assert apply_diffs([1, 2], JsonDiffs((JsonDiff(REPLACE, "$", {"a": 1}),))) == {"a": 1}
    assert apply_diffs([1, 2, 3], JsonDiffs((JsonDiff(REMOVE, "$[1]"),))) == [1, 3]
    assert apply_diffs(JSON_NULL, JsonDiffs((JsonDiff(REPLACE, "$", 5),))) == 5


def test_paths() -> None:
    assert parse_path('$.a[0]."b.c"[last-1].d') == ["a", 0, "b.c", ("last", 1), "d"]
    assert parse_path("$") == []
    for bad in ("a", "$.*", "$[1 to 2]", '$."x', "$[", "$!"):
        with pytest.raises(DecodeError):
            parse_path(bad)


def test_diff_that_does_not_fit_raises() -> None:
    with pytest.raises(DecodeError):
        apply_diffs({"a": 1}, JsonDiffs((JsonDiff(REPLACE, "$.a.b[2]", 1),)))
    with pytest.raises(DecodeError):
        apply_diffs({"a": [1]}, JsonDiffs((JsonDiff(REPLACE, "$.a[5]", 1),)))


@pytest.mark.parametrize("raw", [b"\x07", b"\x00\x05$.a", b"\x00\x03$.a\x09\x05", b"\x01\xff"])
def test_malformed_diffs_raise_decode_error(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        parse_diffs(raw)


def test_json_binary_does_not_import_the_row_value_readers() -> None:
    """No import circle: the DECIMAL reader both use lives below both (binlog/decimal_binary.py)."""
    code = (
        "import sys, airflow_provider_binlog.binlog.json_binary as j; "
        "print('airflow_provider_binlog.binlog.values' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
