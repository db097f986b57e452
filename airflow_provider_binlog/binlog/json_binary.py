"""MySQL's binary JSON (``json_binary.cc``) to Python, and PARTIAL_UPDATE_ROWS JSON diffs.

Value layout: a type byte, then the value. Objects and arrays come in a small (16-bit offsets) and
a large (32-bit offsets) form::

    object  count, size, count * (key offset, key length u16), count * value entry, keys, values
    array   count, size, count * value entry, values
    entry   type u8 + offset (2 or 4 bytes) from the start of the object/array, or the value
            itself when it fits (literals, int16, uint16; int32/uint32 in the large form)

Scalars: literal (0 null, 1 true, 2 false), int16/uint16/int32/uint32/int64/uint64, double,
string (length in 7-bit groups, UTF-8), opaque (MySQL type byte, length, bytes).

Python values: objects ``dict``, arrays ``list``, strings ``str``, integers ``int``, doubles
``float``, ``true``/``false``/``null`` ``True``/``False``/``None`` (a whole document that is JSON
``null`` is :data:`~.columns.JSON_NULL`). Opaque values: DECIMAL -> ``Decimal``; DATE, TIME,
DATETIME and TIMESTAMP -> ``str`` in MySQL's JSON text form (``2015-01-15``, ``23:24:25.000000``,
``2015-01-15 23:24:25.000000``); any other opaque type -> ``str`` ``base64:type<N>:<base64>``,
exactly as MySQL prints it.

JSON diffs (PARTIAL_UPDATE_ROWS after images): a 4-byte length already consumed by the row
decoder, then per diff: operation u8 (0 REPLACE, 1 INSERT, 2 REMOVE), path (length-encoded,
MySQL path text like ``$.a[2]."b c"``), and unless REMOVE the new value (length-encoded, type byte
+ value). :func:`apply_diffs` applies them to the before image's document.
"""

from __future__ import annotations

import base64
import copy
import json
import struct
from dataclasses import dataclass
from typing import Any

from airflow_provider_binlog.binlog.columns import JSON_NULL
from airflow_provider_binlog.binlog.decimal_binary import decimal_reader
from airflow_provider_binlog.binlog.errors import DecodeError

SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY = 0, 1, 2, 3
LITERAL, INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING = 4, 5, 6, 7, 8, 9, 10, 11, 12
OPAQUE = 15

_I16 = struct.Struct("<h").unpack_from
_U16 = struct.Struct("<H").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I64 = struct.Struct("<q").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_F64 = struct.Struct("<d").unpack_from
_LITERALS = {0: None, 1: True, 2: False}


def parse(data: bytes | memoryview) -> Any:
    """A binary JSON document (type byte + value) to Python; a ``null`` document is JSON_NULL.

    :raises DecodeError: on any malformed input.
    """
    b = bytes(data)
    if not b:
        return JSON_NULL
    try:
        v = _value(b, b[0], 1, len(b))
    except DecodeError:
        raise
    except (IndexError, struct.error, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise DecodeError(f"malformed binary JSON: {type(e).__name__}: {e}") from None
    return JSON_NULL if v is None else v


def _varlen(b: bytes, p: int, end: int) -> tuple[int, int]:
    n = 0
    for k in range(5):
        if p >= end:
            raise DecodeError("malformed binary JSON: truncated length")
        byte = b[p]
        p += 1
        n |= (byte & 0x7F) << (7 * k)
        if not byte & 0x80:
            return n, p
    raise DecodeError("malformed binary JSON: length longer than 5 bytes")


def _value(b: bytes, t: int, p: int, end: int) -> Any:
    """Value of type ``t`` stored at ``b[p:end]``."""
    if t == STRING:
        n, p = _varlen(b, p, end)
        if p + n > end:
            raise DecodeError("malformed binary JSON: string overruns its container")
        return b[p : p + n].decode("utf-8")
    if t == INT64:
        return _I64(b, p)[0]
    if t == UINT64:
        return _U64(b, p)[0]
    if t == DOUBLE:
        return _F64(b, p)[0]
    if t == INT32:
        return _I32(b, p)[0]
    if t == UINT32:
        return _U32(b, p)[0]
    if t == INT16:
        return _I16(b, p)[0]
    if t == UINT16:
        return _U16(b, p)[0]
    if t == LITERAL:
        try:
            return _LITERALS[b[p]]
        except KeyError:
            raise DecodeError(f"malformed binary JSON: literal {b[p]}") from None
    if t in (SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY):
        return _container(b, t, p, end)
    if t == OPAQUE:
        mysql_type = b[p]
        n, q = _varlen(b, p + 1, end)
        if q + n > end:
            raise DecodeError("malformed binary JSON: opaque value overruns its container")
        return opaque(mysql_type, b[q : q + n])
    raise DecodeError(f"malformed binary JSON: unknown value type {t}")


def _container(b: bytes, t: int, start: int, end: int) -> Any:
    large = t in (LARGE_OBJECT, LARGE_ARRAY)
    is_obj = t in (SMALL_OBJECT, LARGE_OBJECT)
    w = 4 if large else 2
    rd = _U32 if large else _U16
    count = rd(b, start)[0]
    size = rd(b, start + w)[0]
    limit = start + size
    if limit > end or size < 2 * w:
        raise DecodeError("malformed binary JSON: container size overruns the value")
    p = start + 2 * w
    keys: list[str] = []
    if is_obj:
        for _ in range(count):
            koff = rd(b, p)[0]
            klen = _U16(b, p + w)[0]
            p += w + 2
            if start + koff + klen > limit:
                raise DecodeError("malformed binary JSON: key overruns its object")
            keys.append(b[start + koff : start + koff + klen].decode("utf-8"))
    vals = []
    entry = 1 + w
    if p + count * entry > limit:
        raise DecodeError("malformed binary JSON: value entries overrun the container")
    for _ in range(count):
        vt = b[p]
        if vt in (LITERAL, INT16, UINT16) or (large and vt in (INT32, UINT32)):
            vals.append(_value(b, vt, p + 1, p + entry))
        else:
            off = rd(b, p + 1)[0]
            if off >= size:
                raise DecodeError("malformed binary JSON: value offset outside its container")
            vals.append(_value(b, vt, start + off, limit))
        p += entry
    if is_obj:
        return dict(zip(keys, vals, strict=True))
    return vals


def _packed_temporal(mysql_type: int, raw: bytes) -> str:
    if len(raw) < 8:
        raise DecodeError(f"malformed binary JSON: temporal opaque value of {len(raw)} bytes")
    v = int.from_bytes(raw[:8], "little", signed=True)
    neg = v < 0
    a = -v if neg else v
    frac = a & 0xFFFFFF
    intpart = a >> 24
    if mysql_type == 11:  # TIME
        hms = intpart
        h, m, s = (hms >> 12) & 0x3FF, (hms >> 6) & 63, hms & 63
        return f"{'-' if neg else ''}{h:02d}:{m:02d}:{s:02d}.{frac:06d}"
    ymd = intpart >> 17
    ym = ymd >> 5
    year, month, day = ym // 13, ym % 13, ymd & 31
    if mysql_type == 10:  # DATE
        return f"{year:04d}-{month:02d}-{day:02d}"
    hms = intpart & 0x1FFFF
    h, m, s = hms >> 12, (hms >> 6) & 63, hms & 63
    return f"{year:04d}-{month:02d}-{day:02d} {h:02d}:{m:02d}:{s:02d}.{frac:06d}"


def opaque(mysql_type: int, raw: bytes) -> Any:
    """An opaque JSON value: DECIMAL -> Decimal, temporal -> MySQL's text, else ``base64:typeN:...``."""
    if mysql_type == 246 and len(raw) >= 2:
        read, size = decimal_reader(raw[0], raw[1])
        if len(raw) < 2 + size:
            raise DecodeError("malformed binary JSON: DECIMAL opaque value truncated")
        return read(raw, 2)[0]
    if mysql_type in (7, 10, 11, 12):
        return _packed_temporal(mysql_type, raw)
    return f"base64:type{mysql_type}:{base64.b64encode(raw).decode('ascii')}"


# --------------------------------------------------------------------------------------------------
# JSON diffs

REPLACE, INSERT, REMOVE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class JsonDiff:
    """One logical change of a partially updated JSON column.

    :param operation: ``REPLACE`` (0), ``INSERT`` (1) or ``REMOVE`` (2).
    :param path: the MySQL JSON path text.
    :param value: the new value (not for REMOVE).
    """

    operation: int
    path: str
    value: Any = None


@dataclass(frozen=True, slots=True)
class JsonDiffs:
    """The diffs of one JSON column in one after image; :func:`apply_diffs` applies them."""

    diffs: tuple[JsonDiff, ...]


def _packed(b: bytes, p: int) -> tuple[int, int]:
    first = b[p]
    if first < 0xFB:
        return first, p + 1
    if first == 0xFC:
        return int.from_bytes(b[p + 1 : p + 3], "little"), p + 3
    if first == 0xFD:
        return int.from_bytes(b[p + 1 : p + 4], "little"), p + 4
    if first == 0xFE:
        return int.from_bytes(b[p + 1 : p + 9], "little"), p + 9
    raise DecodeError(f"malformed JSON diff: bad length prefix {first:#x}")


def parse_diffs(data: bytes | memoryview) -> JsonDiffs:
    """Parse the diff list of one column (without its 4-byte length prefix).

    :raises DecodeError: on malformed input.
    """
    b = bytes(data)
    out = []
    p = 0
    try:
        while p < len(b):
            op = b[p]
            if op > REMOVE:
                raise DecodeError(f"malformed JSON diff: unknown operation {op}")
            n, p = _packed(b, p + 1)
            if p + n > len(b):
                raise DecodeError("malformed JSON diff: path overruns the diff")
            path = b[p : p + n].decode("utf-8")
            p += n
            if op == REMOVE:
                out.append(JsonDiff(op, path))
                continue
            n, p = _packed(b, p)
            if p + n > len(b) or n < 1:
                raise DecodeError("malformed JSON diff: value overruns the diff")
            value = _value(b[p : p + n], b[p], 1, n)
            p += n
            out.append(JsonDiff(op, path, value))
    except DecodeError:
        raise
    except (IndexError, struct.error, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise DecodeError(f"malformed JSON diff: {type(e).__name__}: {e}") from None
    return JsonDiffs(tuple(out))


def parse_path(path: str) -> list[str | int | tuple[str, int]]:
    """Split a MySQL JSON path into legs: ``str`` member names, ``int`` array indexes, and
    ``("last", k)`` for ``[last-k]``.

    :raises DecodeError: on wildcards, ranges or malformed paths (never in a diff).
    """
    s = path.strip()
    if not s.startswith("$"):
        raise DecodeError(f"JSON path {path!r} does not start with $")
    legs: list[str | int | tuple[str, int]] = []
    i, n = 1, len(s)
    while i < n:
        c = s[i]
        if c.isspace():
            i += 1
        elif c == ".":
            i += 1
            while i < n and s[i].isspace():
                i += 1
            if i < n and s[i] == '"':
                j = i + 1
                while j < n and s[j] != '"':
                    j += 2 if s[j] == "\\" else 1
                if j >= n:
                    raise DecodeError(f"JSON path {path!r}: unterminated quoted key")
                legs.append(json.loads(s[i : j + 1]))
                i = j + 1
            else:
                j = i
                while j < n and s[j] not in ".[ ":
                    j += 1
                if j == i or s[i:j] == "*":
                    raise DecodeError(f"JSON path {path!r}: unsupported member leg")
                legs.append(s[i:j])
                i = j
        elif c == "[":
            j = s.find("]", i)
            if j < 0:
                raise DecodeError(f"JSON path {path!r}: unterminated array leg")
            inner = s[i + 1 : j].replace(" ", "")
            if inner.isdigit():
                legs.append(int(inner))
            elif inner == "last":
                legs.append(("last", 0))
            elif inner.startswith("last-") and inner[5:].isdigit():
                legs.append(("last", int(inner[5:])))
            else:
                raise DecodeError(f"JSON path {path!r}: unsupported array leg [{inner}]")
            i = j + 1
        else:
            raise DecodeError(f"JSON path {path!r}: unexpected {c!r}")
    return legs


def _index(leg: Any, arr: list[Any]) -> int:
    if isinstance(leg, tuple):
        return len(arr) - 1 - leg[1]
    return int(leg)


def apply_diffs(document: Any, diffs: JsonDiffs) -> Any:
    """Apply ``diffs`` to a copy of ``document`` (the before image) and return the new document.

    :raises DecodeError: if a path does not fit the document.
    """
    doc = None if document is JSON_NULL else copy.deepcopy(document)
    for d in diffs.diffs:
        legs = parse_path(d.path)
        if not legs:
            if d.operation == REMOVE:
                raise DecodeError("JSON diff removes the whole document")
            doc = d.value
            continue
        parent: Any = doc
        try:
            for leg in legs[:-1]:
                parent = parent[leg] if isinstance(leg, str) else parent[_index(leg, parent)]
            last = legs[-1]
            if isinstance(last, str):
                if not isinstance(parent, dict):
                    raise DecodeError(f"JSON diff path {d.path!r}: not an object")
                if d.operation == REMOVE:
                    parent.pop(last, None)
                else:
                    parent[last] = d.value
            else:
                if not isinstance(parent, list):
                    raise DecodeError(f"JSON diff path {d.path!r}: not an array")
                k = _index(last, parent)
                if d.operation == REPLACE:
                    parent[k] = d.value
                elif d.operation == INSERT:
                    parent.insert(min(k, len(parent)), d.value)
                else:
                    del parent[k]
        except (KeyError, IndexError, TypeError) as e:
            raise DecodeError(f"JSON diff path {d.path!r} does not fit the before image: {e}") from None
    return JSON_NULL if doc is None else doc
