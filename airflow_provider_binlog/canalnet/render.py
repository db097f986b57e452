"""Column values as canal renders them: the JDBC type code (``java.sql.Types``) and the text.

Facts from canal's ``RowsLogBuffer.fetchValue`` / ``mysqlToJavaType`` and ``LogEventConvert.parseOneRow``:

==========================  ===================  ============================================
MySQL type                  sqlType              value text
==========================  ===================  ============================================
TINY/SHORT/INT24/LONG       TINYINT/SMALLINT/    decimal digits; an unsigned value past the
/LONGLONG                   INTEGER/INTEGER/     signed range moves up one type (TINY ->
                            BIGINT               SMALLINT, SHORT/INT24 -> INTEGER, LONG ->
                                                 BIGINT, LONGLONG -> DECIMAL)
FLOAT, DOUBLE               REAL, DOUBLE         Java's ``Float/Double.toString``
DECIMAL                     DECIMAL              ``BigDecimal.toPlainString`` (scale kept)
BIT                         BIT                  the number
DATETIME, TIMESTAMP         TIMESTAMP            ``yyyy-MM-dd HH:mm:ss[.f{fsp}]``; TIMESTAMP in
                                                 the server's local time zone (canal: the JVM's)
DATE                        DATE                 ``yyyy-MM-dd``
TIME                        TIME                 ``[-]HH:mm:ss[.f{fsp}]``
YEAR                        VARCHAR              ``yyyy`` (``0000`` for the zero year)
ENUM                        INTEGER              the 1-based index (0: the error value '')
SET                         BIT                  the bitmask
CHAR/VARCHAR                CHAR/VARCHAR         the text
TEXT                        CLOB                 the text
BINARY/VARBINARY/BLOB,      BLOB                 the bytes as ISO-8859-1 text
GEOMETRY
JSON                        VARCHAR              the document as MySQL prints it
==========================  ===================  ============================================

A zero, partial or invalid DATE/DATETIME/TIMESTAMP (the decoder's
:class:`~..binlog.columns.InvalidDate`) renders as the server's text, as canal's does
(``0000-00-00``, ``2020-00-10 01:02:03``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from airflow_provider_binlog.binlog.columns import JSON_NULL, ColumnDef, InvalidDate
from airflow_provider_binlog.binlog.constants import ColumnType as T


class Types:
    """``java.sql.Types`` codes canal uses."""

    BIT = -7
    TINYINT = -6
    SMALLINT = 5
    INTEGER = 4
    BIGINT = -5
    REAL = 7
    DOUBLE = 8
    DECIMAL = 3
    CHAR = 1
    VARCHAR = 12
    DATE = 91
    TIME = 92
    TIMESTAMP = 93
    BINARY = -2
    VARBINARY = -3
    LONGVARBINARY = -4
    BLOB = 2004
    CLOB = 2005
    OTHER = 1111


_INTS = {  # column type -> (sqlType, bits, sqlType once an unsigned value passes the signed range)
    T.TINY: (Types.TINYINT, 8, Types.SMALLINT),
    T.SHORT: (Types.SMALLINT, 16, Types.INTEGER),
    T.INT24: (Types.INTEGER, 24, Types.INTEGER),
    T.LONG: (Types.INTEGER, 32, Types.BIGINT),
    T.LONGLONG: (Types.BIGINT, 64, Types.DECIMAL),
}
_BLOBS = (T.TINY_BLOB, T.BLOB, T.MEDIUM_BLOB, T.LONG_BLOB)
_ZERO = {T.DATE: "0000-00-00", T.NEWDATE: "0000-00-00"}
_ZERO_DT = "0000-00-00 00:00:00"
_F32 = struct.Struct("<f")


def java_double(x: float) -> str:
    """Java's ``Double.toString`` (and ``Float.toString`` of the float's shortest digits)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    a = abs(x)
    if 1e-3 <= a < 1e7:
        text = repr(x)
        if "e" in text or "E" in text:
            text = format(Decimal(text), "f")
        return text if "." in text else text + ".0"
    _, dig, e = Decimal(repr(a)).as_tuple()
    ds = "".join(map(str, dig)).rstrip("0") or "0"
    exponent = int(e) + len(dig) - 1
    text = ds[0] + "." + (ds[1:] or "0")
    return ("-" if x < 0 else "") + f"{text}E{exponent}"


def java_float(x: float) -> str:
    """Java's ``Float.toString`` for a FLOAT column's value: the shortest digits that read back as
    the same float32."""
    if math.isnan(x) or math.isinf(x) or x == 0:
        return java_double(x)
    target = _F32.pack(x)
    for digits in range(1, 10):
        candidate = float(f"{x:.{digits - 1}e}")
        if _F32.pack(candidate) == target:
            return java_double(candidate)
    return java_double(x)


def _frac(us: int, fsp: int | None) -> str:
    return f".{us:06d}"[: 1 + fsp] if fsp else ""


def _datetime(v: Any, col: ColumnDef) -> str:
    return f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}" + _frac(
        v.microsecond, col.fsp
    )


def _timestamp(v: dt.datetime, col: ColumnDef) -> str:
    return _datetime(v.astimezone() if v.tzinfo is not None else v, col)


def _time(v: dt.timedelta, col: ColumnDef) -> str:
    us = v.days * 86_400_000_000 + v.seconds * 1_000_000 + v.microseconds
    sign = "-" if us < 0 else ""
    secs, frac = divmod(abs(us), 1_000_000)
    hours, rem = divmod(secs, 3600)
    return f"{sign}{hours:02d}:{rem // 60:02d}:{rem % 60:02d}" + _frac(frac, col.fsp)


def _json_default(o: Any) -> Any:
    if isinstance(o, Decimal):
        return float(o) if o != o.to_integral_value() else int(o)
    if o is JSON_NULL:
        return None
    if isinstance(o, bytes):
        return o.decode("latin-1")
    return str(o)


def _json(v: Any) -> str:
    return "null" if v is JSON_NULL else json.dumps(v, default=_json_default, ensure_ascii=False)


def _bytes(v: Any) -> str:
    return v.decode("latin-1") if isinstance(v, bytes | bytearray) else str(v)


def _enum_index(v: Any, col: ColumnDef) -> str:
    if isinstance(v, int):
        return str(v)
    labels = col.enum_values or ()
    return str(labels.index(v) + 1) if v in labels else "0"


def _set_mask(v: Any, col: ColumnDef) -> str:
    if isinstance(v, int):
        return str(v)
    labels = col.set_values or ()
    mask = 0
    for part in str(v).split(",") if v else ():
        if part in labels:
            mask |= 1 << labels.index(part)
    return str(mask)


Renderer = Callable[[Any], "tuple[int, str | None]"]


def renderer(col: ColumnDef) -> Renderer:
    """The function turning one of this column's values into ``(sqlType, text or None)``.

    Built once per column of a table schema (see :class:`.entries.EntryEncoder`); no type dispatch
    per value.
    """
    t = col.type
    binary = col.is_binary or (col.charset is None and t in (T.STRING, T.VARCHAR, T.VAR_STRING))
    if t in _INTS:
        base, bits, bumped = _INTS[t]
        limit = 1 << (bits - 1)
        return lambda v: (base, None) if v is None else ((bumped if v >= limit else base), str(v))
    if t == T.FLOAT:
        return lambda v: (Types.REAL, None if v is None else java_float(v))
    if t == T.DOUBLE:
        return lambda v: (Types.DOUBLE, None if v is None else java_double(v))
    if t in (T.NEWDECIMAL, T.DECIMAL):
        return lambda v: (Types.DECIMAL, None if v is None else format(v, "f"))
    if t == T.BIT:
        return lambda v: (Types.BIT, None if v is None else str(int(v)))
    if t in (T.DATETIME, T.DATETIME2, T.TIMESTAMP, T.TIMESTAMP2):
        fmt = _timestamp if t in (T.TIMESTAMP, T.TIMESTAMP2) else _datetime
        zero = None if col.nullable else _ZERO_DT + _frac(0, col.fsp)
        return lambda v: (
            Types.TIMESTAMP,
            zero if v is None else v.text if type(v) is InvalidDate else fmt(v, col),
        )
    if t in (T.DATE, T.NEWDATE):
        zero_d = None if col.nullable else _ZERO[t]
        return lambda v: (
            Types.DATE,
            zero_d
            if v is None
            else v.text
            if type(v) is InvalidDate
            else f"{v.year:04d}-{v.month:02d}-{v.day:02d}",
        )
    if t in (T.TIME, T.TIME2):
        return lambda v: (Types.TIME, None if v is None else _time(v, col))
    if t == T.YEAR:
        return lambda v: (Types.VARCHAR, None if v is None else (f"{v:04d}" if v else "0000"))
    if t == T.ENUM:
        return lambda v: (Types.INTEGER, None if v is None else _enum_index(v, col))
    if t == T.SET:
        return lambda v: (Types.BIT, None if v is None else _set_mask(v, col))
    if t == T.JSON:
        return lambda v: (Types.VARCHAR, None if v is None else _json(v))
    if t in _BLOBS:
        kind = Types.BLOB if binary else Types.CLOB
        return lambda v: (kind, None if v is None else _bytes(v))
    if t in (T.VARCHAR, T.VAR_STRING, T.STRING):
        if binary:
            return lambda v: (Types.BLOB, None if v is None else _bytes(v))
        kind = Types.CHAR if t == T.STRING else Types.VARCHAR
        return lambda v: (kind, None if v is None else str(v))
    if t == T.GEOMETRY:
        return lambda v: (Types.BLOB, None if v is None else _bytes(v))
    return lambda v: (Types.OTHER, None if v is None else str(v))


_TYPE_NAMES = {
    T.TINY: "tinyint", T.SHORT: "smallint", T.INT24: "mediumint", T.LONG: "int", T.LONGLONG: "bigint",
    T.FLOAT: "float", T.DOUBLE: "double", T.DATE: "date", T.NEWDATE: "date", T.YEAR: "year",
    T.JSON: "json", T.GEOMETRY: "geometry", T.VECTOR: "vector",
}  # fmt: skip
_BLOB_NAMES = {1: "tiny", 2: "", 3: "medium", 4: "long"}


def mysql_type(col: ColumnDef) -> str:
    """A column type text like ``information_schema.COLUMNS.COLUMN_TYPE`` from what the binlog
    tells (canal sends the table meta's text; :class:`.entries.EntryEncoder` prefers the real one
    when the source can be asked)."""
    t = col.type
    unsigned = " unsigned" if col.unsigned else ""
    if t in _TYPE_NAMES:
        return _TYPE_NAMES[t] + (unsigned if t in _INTS or t in (T.FLOAT, T.DOUBLE) else "")
    if t in (T.NEWDECIMAL, T.DECIMAL):
        return f"decimal({col.precision},{col.scale}){unsigned}"
    if t in (T.DATETIME, T.DATETIME2, T.TIMESTAMP, T.TIMESTAMP2, T.TIME, T.TIME2):
        name = (
            "datetime"
            if t in (T.DATETIME, T.DATETIME2)
            else "timestamp"
            if t in (T.TIMESTAMP, T.TIMESTAMP2)
            else "time"
        )
        return f"{name}({col.fsp})" if col.fsp else name
    if t == T.BIT:
        return f"bit({(col.meta >> 8) * 8 + (col.meta & 0xFF)})"
    if t in (T.ENUM, T.SET):
        labels = (col.enum_values if t == T.ENUM else col.set_values) or ()
        inner = ",".join("'" + s.replace("'", "''") + "'" for s in labels)
        return f"{'enum' if t == T.ENUM else 'set'}({inner})"
    binary = col.is_binary
    if t in _BLOBS:
        return _BLOB_NAMES.get(col.meta, "") + ("blob" if binary else "text")
    if t in (T.VARCHAR, T.VAR_STRING):
        return "varbinary" if binary else "varchar"
    if t == T.STRING:
        return "binary" if binary else "char"
    return t.name.lower()
