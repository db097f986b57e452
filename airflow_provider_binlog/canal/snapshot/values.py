"""Snapshot values: SELECT results in the binlog decoder's value contract, and keys kept as JSON.

One converter per column, built from its :class:`~airflow_provider_binlog.binlog.columns.ColumnDef`
(the session ``time_zone`` must be ``+00:00``): TIMESTAMP becomes aware UTC, zero, partial or
invalid dates an :class:`~airflow_provider_binlog.binlog.columns.InvalidDate` of the server's text
(pymysql returns them as text; the decoder makes the same text from the binlog), FLOAT the
float32 value the binlog holds, BIT an ``int``, JSON (MySQL's binary JSON type) parsed with a
``null`` document as ``JSON_NULL``, SET the comma-joined labels, binary strings ``bytes``,
MariaDB's UUID/INET6/INET4 their text (as the decoder makes it from their binary form,
:mod:`~airflow_provider_binlog.binlog.mariadb_types`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
import struct
from collections.abc import Callable, Sequence
from typing import Any

from airflow_provider_binlog.binlog.columns import JSON_NULL, ColumnDef, InvalidDate, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.canal.errors import CanalError
from airflow_provider_binlog.canal.schema import SchemaHistory

_UTC = dt.timezone.utc
_F32 = struct.Struct("<f")


class SnapshotError(CanalError):
    """The snapshot cannot proceed (no key, unknown table, ...)."""


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table_key(source: str) -> str:
    """The progress record key of ``schema.table``."""
    esc = re.sub(r"[^A-Za-z0-9_.-]", lambda m: "".join(f"={b:02x}" for b in m.group().encode()), source)
    return f"snapshot/{esc}"


# ---------------------------------------------------------------------------- value converters


def _date(v: Any) -> Any:
    return InvalidDate(v) if isinstance(v, str) else v  # pymysql returns zero/invalid dates as text


def _timestamp(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=_UTC)
    return InvalidDate(v) if isinstance(v, str) else v  # the zero TIMESTAMP


def _float32(v: Any) -> Any:
    return _F32.unpack(_F32.pack(v))[0]


def _bit(v: Any) -> Any:
    return int.from_bytes(v, "big") if isinstance(v, bytes | bytearray) else int(v)


def _json(v: Any) -> Any:
    if isinstance(v, bytes | bytearray):
        v = v.decode()
    out = json.loads(v)
    return JSON_NULL if out is None else out


def _set(col: ColumnDef) -> Callable[[Any], Any]:
    labels = col.set_values or ()

    def conv(v: Any) -> Any:
        if isinstance(v, set | frozenset):
            return ",".join(x for x in labels if x in v)
        return v

    return conv


def _text(charset: str | None) -> Callable[[Any], Any]:
    def conv(v: Any) -> Any:
        return v.decode(charset or "utf-8") if isinstance(v, bytes | bytearray) else v

    return conv


def _binary(v: Any) -> Any:
    return bytes(v) if isinstance(v, bytearray | memoryview) else (v.encode() if isinstance(v, str) else v)


def _identity(v: Any) -> Any:
    return v


def converter(col: ColumnDef) -> Callable[[Any], Any]:
    """The function turning a pymysql SELECT value of ``col`` into the binlog decoder's value."""
    t = col.type
    if col.plugin_type is not None:
        return _text("ascii")
    if t == T.FLOAT:
        return _float32
    if t in (T.TIMESTAMP, T.TIMESTAMP2):
        return _timestamp
    if t in TEMPORAL:
        return _date
    if t == T.BIT:
        return _bit
    if t == T.JSON:
        return _json
    if t == T.SET:
        return _set(col)
    if t in (T.VARCHAR, T.VAR_STRING, T.STRING, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB, T.ENUM):
        return _binary if col.is_binary else _text(col.charset)
    if t == T.GEOMETRY:
        return _binary
    return _identity


TEMPORAL = frozenset({T.DATE, T.NEWDATE, T.DATETIME, T.DATETIME2, T.TIMESTAMP, T.TIMESTAMP2})
"""The types whose SELECT value may be an invalid date."""


def stamp_invalid(rows: Sequence[Sequence[Any]], columns: Sequence[int], position: str) -> None:
    """Set ``position`` on the :class:`InvalidDate` values in ``columns`` of converted ``rows``."""
    for r in rows:
        for i in columns:
            v = r[i]
            if type(v) is InvalidDate:
                v.position = position


def converters(ts: TableSchema) -> tuple[Callable[[Any], Any], ...]:
    return tuple(converter(c) for c in ts.columns)


def table_schema(connect: Callable[[], Any], schema: str, table: str) -> TableSchema:
    """The table's columns from ``information_schema``, with DECIMAL precision/scale and temporal
    precision filled in (the binlog's FULL metadata has them; the lake types need them)."""
    ts = SchemaHistory(None, None, connect).from_information_schema(schema, table)
    if ts is None:
        raise SnapshotError(f"table {schema}.{table} does not exist (or cannot be read)")
    return ts


# ---------------------------------------------------------------------------- keys in JSON


def encode_key(values: Sequence[Any] | None) -> list[Any] | None:
    """A raw (pymysql) key as JSON, tagged so it reads back as the same types."""
    if values is None:
        return None
    out: list[Any] = []
    for v in values:
        if v is None or isinstance(v, bool | int | float | str):
            out.append(v)
        elif isinstance(v, decimal.Decimal):
            out.append({"decimal": str(v)})
        elif isinstance(v, dt.datetime):
            out.append({"datetime": v.isoformat()})
        elif isinstance(v, dt.date):
            out.append({"date": v.isoformat()})
        elif isinstance(v, dt.timedelta):
            out.append({"timedelta": v.total_seconds()})
        elif isinstance(v, bytes | bytearray):
            out.append({"bytes": bytes(v).hex()})
        else:
            raise SnapshotError(f"cannot keep a key value of type {type(v).__name__} in the progress")
    return out


_KEY_TAGS: dict[str, Callable[[Any], Any]] = {
    "decimal": decimal.Decimal,
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "timedelta": lambda s: dt.timedelta(seconds=s),
    "bytes": bytes.fromhex,
}


def decode_key(values: Sequence[Any] | None) -> tuple[Any, ...] | None:
    if values is None:
        return None
    out: list[Any] = []
    for v in values:
        if isinstance(v, dict):
            ((tag, x),) = v.items()
            out.append(_KEY_TAGS[tag](x))
        else:
            out.append(v)
    return tuple(out)
