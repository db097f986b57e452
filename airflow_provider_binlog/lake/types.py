"""MySQL column types -> Iceberg (Spark SQL) types and Arrow staging types.

Input values follow the decoder's contract (:mod:`airflow_provider_binlog.binlog.columns`).

==============================  =====================  ===================  ==============================
MySQL type                      Iceberg (Spark SQL)    Arrow staging        value written
==============================  =====================  ===================  ==============================
TINYINT, SMALLINT, MEDIUMINT    int                    int32                as is (unsigned fits in int)
INT                             int                    int32                as is
INT UNSIGNED                    bigint                 int64                as is
BIGINT                          bigint                 int64                as is
BIGINT UNSIGNED                 decimal(20,0)          decimal128(20,0)     as is
DECIMAL(p,s), p <= 38           decimal(p,s)           decimal128(p,s)      exact
DECIMAL(p,s), p > 38            error; or string with  string               plain text with scale s
                                decimal_overflow=
                                "string"
FLOAT                           float                  float32              as is
DOUBLE                          double                 float64              as is
BIT(n), n <= 63                 bigint                 int64                the bits as a number
BIT(64)                         decimal(20,0)          decimal128(20,0)     the bits as a number
YEAR                            int                    int32                0 for the zero year
DATE                            date                   date32               as is; an invalid date stops
                                                                            (or NULL with zero_dates=
                                                                            "null"), see below
TIME                            bigint                 int64                signed microseconds
                                                                            (-838:59:59 .. 838:59:59)
DATETIME                        timestamp_ntz          timestamp[us]        wall clock, no zone
TIMESTAMP                       timestamp (with zone)  timestamp[us, UTC]   the instant, UTC
CHAR, VARCHAR, TEXT types       string                 string               as is
BINARY, VARBINARY, BLOB types   binary                 binary               as is
MariaDB UUID, INET6, INET4      string                 string               MariaDB's text form
ENUM                            string                 string               the label (the index as text
                                                                            if labels are unknown)
SET                             string                 string               comma-joined labels
JSON                            string                 string               MySQL's text form; the JSON
                                                                            null document -> "null"
GEOMETRY                        binary                 binary               WKB (MySQL's 4-byte SRID
                                                                            prefix dropped; kept with
                                                                            geometry="mysql")
VECTOR                          array<float>           list<float32>        as is
==============================  =====================  ===================  ==============================

Invalid dates: MariaDB and MySQL (``sql_mode`` without ``NO_ZERO_DATE``/``NO_ZERO_IN_DATE``, or
with ``ALLOW_INVALID_DATES``) store DATE, DATETIME and TIMESTAMP values no date type holds: the zero
date ``0000-00-00`` (``0000-00-00 00:00:00``), partial dates (``2024-00-15``, ``2024-03-00``), year 0
and days a month lacks (``2024-02-31``). Both paths, the binlog decoder and the snapshot's SELECT,
make the same :class:`~airflow_provider_binlog.binlog.columns.InvalidDate` of them; staging then
does what ``TypeOptions.zero_dates`` says: ``"error"`` (default) stops with
:class:`InvalidDateError` naming the lake table, the column, the value and its ``file:pos`` (a
change the table's mark covers is skipped before, so a replay over a re-snapshot does not stop);
``"null"`` writes NULL, chosen knowingly. (No ``"string"`` choice: a text column would hold every
date of the column as text, and the date type could not come back without a re-created table.)

Every Iceberg column is nullable. SQL NULL is NULL everywhere. TIME becomes microseconds rather than
Iceberg ``time`` because MySQL times are durations (negative, over 24 hours) that ``time`` cannot hold.

Widening Iceberg allows (applied in place when the source type changes): int -> bigint,
float -> double, decimal(p,s) -> decimal(p2,s) with p2 > p (see :func:`widening`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import decimal
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

from airflow_provider_binlog.binlog.columns import JSON_NULL, ColumnDef, InvalidDate
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.lake.errors import LakeError, TypeMappingError

MAX_ICEBERG_DECIMAL_PRECISION = 38

Converter = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class TypeOptions:
    """Choices where the mapping has more than one sensible answer.

    :param decimal_overflow: DECIMAL with precision over 38: ``"error"`` (default) or ``"string"``.
    :param geometry: ``"wkb"`` (default, standard WKB) or ``"mysql"`` (SRID prefix + WKB, as stored).
    :param zero_dates: a DATE/DATETIME/TIMESTAMP value no date type holds (zero, partial, invalid;
        see the module docstring): ``"error"`` (default, stop naming table, column, value and
        ``file:pos``) or ``"null"`` (write NULL).
    """

    decimal_overflow: Literal["error", "string"] = "error"
    geometry: Literal["wkb", "mysql"] = "wkb"
    zero_dates: Literal["error", "null"] = "error"

    def __post_init__(self) -> None:
        if self.zero_dates not in ("error", "null"):
            raise TypeMappingError(f"TypeOptions(zero_dates={self.zero_dates!r}): use 'error' or 'null'")


class InvalidDateError(LakeError):
    """A DATE/DATETIME/TIMESTAMP value no lake date type holds, under ``zero_dates="error"``."""


@dataclass(frozen=True, slots=True)
class InvalidDates:
    """What staging does with a temporal column's :class:`InvalidDate` values.

    :param mode: ``TypeOptions.zero_dates``.
    :param table: the lake table, for the error.
    """

    mode: Literal["error", "null"]
    table: str

    def resolve(self, column: str, values: list[Any]) -> list[Any] | None:
        """``values`` with the invalid dates as NULL (mode ``"null"``); ``None`` when there are none
        (the staging error stands).

        :raises InvalidDateError: mode ``"error"`` and there is one.
        """
        bad = next((v for v in values if type(v) is InvalidDate), None)
        if bad is None:
            return None
        if self.mode == "null":
            return [None if type(v) is InvalidDate else v for v in values]
        where = f"the row at {bad.position}" if bad.position else "a row"
        raise InvalidDateError(
            f"lake table {self.table or '?'} column {column!r}: {where} holds {bad.text!r}, a date no lake "
            "date type can hold (a zero, partial or invalid date); to write NULL for such values, set "
            "target_options=TargetOptions(types=TypeOptions(zero_dates='null')) for this table and "
            "run again (the run goes on from the last commit)"
        )


@dataclass(frozen=True, slots=True)
class LakeType:
    """The lake side of one column.

    :param sql: Spark SQL type as ``DataType.simpleString()`` prints it (``decimal(20,0)``...).
    :param arrow: Arrow type used for staging.
    :param convert: turns a non-NULL decoder value into the Arrow value; ``None`` means as is.
    :param arrow_native: pyarrow builds the same array from the decoder's usual values as from their
        converted values (ints, floats, str, bytes, Decimal, datetimes: a tz-aware one as its
        instant, a naive one as UTC), so staging first tries the values unconverted, in C, and
        calls ``convert`` per value only when that fails.
    """

    sql: str
    arrow: pa.DataType
    convert: Converter | None = None
    arrow_native: bool = False
    invalid_dates: InvalidDates | None = None
    """For DATE, DATETIME and TIMESTAMP columns: what becomes of an invalid date."""


@dataclass(frozen=True, slots=True)
class LakeColumn:
    """A named column with its lake type."""

    name: str
    type: LakeType


# ---- converters (built once; called per non-NULL value) -------------------------------------------


def _to_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def _to_bytes(v: Any) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


def _to_int(v: Any) -> int:
    return int(v)


def _to_decimal(v: Any) -> decimal.Decimal:
    return v if isinstance(v, decimal.Decimal) else decimal.Decimal(v)


def _decimal_text(v: Any) -> str:
    return format(_to_decimal(v), "f")


_MICRO = datetime.timedelta(microseconds=1)


def _time_micros(v: Any) -> int:
    if isinstance(v, datetime.timedelta):
        return v // _MICRO
    if isinstance(v, datetime.time):
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    return int(v)


def _utc(v: Any) -> datetime.datetime:
    if isinstance(v, datetime.datetime) and v.tzinfo is None:
        return v.replace(tzinfo=datetime.timezone.utc)
    return v


def _geometry_wkb(v: Any) -> bytes:
    b = _to_bytes(v)
    return b[4:] if len(b) >= 4 else b


def _json_text(v: Any) -> str:
    """Serialize a decoded JSON document the way MySQL prints it (``", "`` and ``": "``).

    A document of strings, numbers, booleans, nulls, objects with string keys (the decoder's are)
    and arrays goes through the json module's C encoder (a third of the time); it refuses any other
    value (a DECIMAL, a date, bytes, a NaN), and :func:`_json_into` writes that document.
    """
    if v is JSON_NULL:
        return "null"
    with contextlib.suppress(TypeError, ValueError):
        return _JSON_ENCODER.encode(v)
    parts: list[str] = []
    _json_into(v, parts)
    return "".join(parts)


_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)  # separators: ", " and ": "


def _json_into(v: Any, out: list[str]) -> None:
    if v is None or v is JSON_NULL:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        out.append(json.dumps(v, ensure_ascii=False))
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, float):
        out.append(repr(v))
    elif isinstance(v, decimal.Decimal):
        out.append(format(v, "f"))
    elif isinstance(v, dict):
        out.append("{")
        for i, (k, item) in enumerate(v.items()):
            if i:
                out.append(", ")
            out.append(json.dumps(str(k), ensure_ascii=False))
            out.append(": ")
            _json_into(item, out)
        out.append("}")
    elif isinstance(v, list | tuple):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(", ")
            _json_into(item, out)
        out.append("]")
    elif isinstance(v, bytes):
        out.append(json.dumps(v.decode("utf-8", "replace"), ensure_ascii=False))
    else:  # dates, times and other opaque scalars: their text form, quoted
        out.append(json.dumps(str(v), ensure_ascii=False))


# ---- the mapping ------------------------------------------------------------------------------------

INT = LakeType("int", pa.int32(), _to_int, arrow_native=True)
BIGINT = LakeType("bigint", pa.int64(), _to_int, arrow_native=True)
UBIGINT = LakeType("decimal(20,0)", pa.decimal128(20, 0), _to_decimal, arrow_native=True)
FLOAT = LakeType("float", pa.float32(), float, arrow_native=True)
DOUBLE = LakeType("double", pa.float64(), float, arrow_native=True)
DATE = LakeType("date", pa.date32())
TIME = LakeType("bigint", pa.int64(), _time_micros)
DATETIME = LakeType("timestamp_ntz", pa.timestamp("us"))
TIMESTAMP = LakeType("timestamp", pa.timestamp("us", tz="UTC"), _utc, arrow_native=True)
STRING = LakeType("string", pa.string(), _to_text, arrow_native=True)
BINARY = LakeType("binary", pa.binary(), _to_bytes, arrow_native=True)
JSON = LakeType("string", pa.string(), _json_text)
VECTOR = LakeType("array<float>", pa.list_(pa.float32()), list)
BOOLEAN = LakeType("boolean", pa.bool_())

_SMALL_INTS = frozenset({T.TINY, T.SHORT, T.INT24, T.YEAR})
_TEXT_OR_BINARY = frozenset({T.VARCHAR, T.VAR_STRING, T.STRING})
_BLOBS = frozenset({T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB})


def decimal_type(precision: int, scale: int) -> LakeType:
    return LakeType(
        f"decimal({precision},{scale})", pa.decimal128(precision, scale), _to_decimal, arrow_native=True
    )


def _temporal(base: LakeType, opts: TypeOptions, table: str) -> LakeType:
    return dataclasses.replace(base, invalid_dates=InvalidDates(opts.zero_dates, table))


def map_column(col: ColumnDef, options: TypeOptions | None = None, table: str = "") -> LakeType:
    """Return the lake type of one MySQL column; raise :class:`TypeMappingError` naming it if none.

    :param col: the column as the decoder describes it.
    :param options: mapping choices.
    :param table: ``schema.table`` for error messages.
    """
    opts = options or TypeOptions()
    t = col.type
    if t in _SMALL_INTS:
        return INT
    if t == T.LONG:
        return BIGINT if col.unsigned else INT
    if t == T.LONGLONG:
        return UBIGINT if col.unsigned else BIGINT
    if t in (T.DECIMAL, T.NEWDECIMAL):
        precision = col.precision if col.precision is not None else col.meta >> 8
        scale = col.scale if col.scale is not None else col.meta & 0xFF
        if precision <= MAX_ICEBERG_DECIMAL_PRECISION:
            return decimal_type(max(precision, 1), scale)
        if opts.decimal_overflow == "string":
            return LakeType("string", pa.string(), _decimal_text)
        raise TypeMappingError(
            f"column {col.name!r} of {table or 'a table'}: DECIMAL({precision},{scale}) exceeds Iceberg's "
            "maximum precision 38; set TargetOptions(types=TypeOptions(decimal_overflow='string')) "
            "to store it as text"
        )
    if t == T.FLOAT:
        return FLOAT
    if t == T.DOUBLE:
        return DOUBLE
    if t == T.BIT:
        nbits = (col.meta >> 8) * 8 + (col.meta & 0xFF)
        return BIGINT if 0 < nbits <= 63 else UBIGINT
    if t in (T.DATE, T.NEWDATE):
        return _temporal(DATE, opts, table)
    if t in (T.TIME, T.TIME2):
        return TIME
    if t in (T.DATETIME, T.DATETIME2):
        return _temporal(DATETIME, opts, table)
    if t in (T.TIMESTAMP, T.TIMESTAMP2):
        return _temporal(TIMESTAMP, opts, table)
    if t in _TEXT_OR_BINARY:
        if col.plugin_type is not None:  # MariaDB's UUID/INET6/INET4, decoded to their text
            return STRING
        return BINARY if col.is_binary else STRING
    if t in _BLOBS:
        if col.is_binary or (col.collation is None and col.charset is None):
            return BINARY
        return STRING
    if t in (T.ENUM, T.SET):
        return STRING
    if t == T.JSON:
        return JSON
    if t == T.GEOMETRY:
        return LakeType("binary", pa.binary(), _geometry_wkb if opts.geometry == "wkb" else _to_bytes)
    if t == T.VECTOR:
        return VECTOR
    if t == T.BOOL:
        return BOOLEAN
    raise TypeMappingError(
        f"column {col.name!r} of {table or 'a table'}: MySQL type {t.name} has no lake mapping"
    )


def map_columns(
    columns: Iterable[ColumnDef], options: TypeOptions | None = None, table: str = ""
) -> list[LakeColumn]:
    """Map every column, in order."""
    return [LakeColumn(c.name, map_column(c, options, table)) for c in columns]


def arrow_schema(columns: Sequence[LakeColumn]) -> pa.Schema:
    """Return the Arrow schema used to stage rows of these columns."""
    return pa.schema([pa.field(c.name, c.type.arrow, nullable=True) for c in columns])


_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")


def widening(old: str, new: str) -> Literal["same", "widen", "narrower", "incompatible"]:
    """Compare an Iceberg column type (``old``) with the newly mapped source type (``new``).

    ``"widen"``: Iceberg allows promoting ``old`` to ``new`` in place. ``"narrower"``: ``new`` values
    fit in ``old`` as it is (the write casts them). ``"incompatible"``: neither.
    """
    if old == new:
        return "same"
    pairs = {("int", "bigint"), ("float", "double")}
    if (old, new) in pairs:
        return "widen"
    if (new, old) in pairs:
        return "narrower"
    mo, mn = _DECIMAL.match(old), _DECIMAL.match(new)
    if mo and mn and mo.group(2) == mn.group(2):
        return "widen" if int(mn.group(1)) > int(mo.group(1)) else "narrower"
    return "incompatible"
