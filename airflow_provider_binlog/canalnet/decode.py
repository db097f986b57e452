"""canal ``Entry`` messages back into our entries (:mod:`..canal.change`), typed as our decoder types
values (:mod:`..binlog.columns`), for a destination read from a canal server.

* ``ROWDATA`` rows -> :class:`~..canal.change.RowChange` (one per row), the table schema rebuilt
  from the columns' ``mysqlType`` (canal's table meta text) and ``isKey``; values parsed back from
  canal's text (:mod:`.render` says how canal writes them): TIMESTAMP text is read in this
  process's local time zone, as the server wrote it in its own (run both in one zone, e.g. UTC);
* ``TRANSACTIONEND`` -> :class:`~..canal.change.TransactionEnd` (an ack point);
  ``TRANSACTIONBEGIN`` carries nothing we need;
* a DDL -> :class:`~..canal.change.DdlEntry` (TRUNCATE as such); a QUERY that is no DDL -> a
  statement-format DML entry (never an ack point).

Order keys: ``(file number, logfileOffset, payload index, row index)`` from the header, the row
index counted from the entry's first row (our server says where that is, :data:`.entries.ROW_INDEX_PROP`;
canal's own server sends whole events, so 0).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import struct
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from airflow_provider_binlog.binlog.columns import BINARY_COLLATION, ColumnDef, InvalidDate, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition, file_number
from airflow_provider_binlog.canal.change import (
    DdlEntry,
    DdlKind,
    Entry,
    Op,
    OrderKey,
    RowChange,
    TransactionEnd,
)
from airflow_provider_binlog.canalnet.entries import PAYLOAD_INDEX_PROP, ROW_INDEX_PROP
from airflow_provider_binlog.canalnet.errors import CanalProtocolError
from airflow_provider_binlog.canalnet.protocol import entry_pb
from airflow_provider_binlog.canalnet.render import Types

_OPS = {entry_pb.INSERT: Op.INSERT, entry_pb.UPDATE: Op.UPDATE, entry_pb.DELETE: Op.DELETE}
_TYPE = re.compile(r"^\s*(\w+)\s*(?:\((.*)\))?\s*(.*)$", re.S)
_SIMPLE = {
    "tinyint": T.TINY, "bool": T.TINY, "boolean": T.TINY, "smallint": T.SHORT, "mediumint": T.INT24,
    "int": T.LONG, "integer": T.LONG, "bigint": T.LONGLONG, "float": T.FLOAT, "double": T.DOUBLE,
    "real": T.DOUBLE, "date": T.DATE, "year": T.YEAR, "json": T.JSON,
}  # fmt: skip
_F32 = struct.Struct("<f")
_BLOB_META = {"tiny": 1, "": 2, "medium": 3, "long": 4}
_BY_SQL_TYPE = {
    Types.TINYINT: T.TINY, Types.SMALLINT: T.SHORT, Types.INTEGER: T.LONG, Types.BIGINT: T.LONGLONG,
    Types.REAL: T.FLOAT, Types.DOUBLE: T.DOUBLE, Types.DECIMAL: T.NEWDECIMAL, Types.BIT: T.BIT,
    Types.DATE: T.DATE, Types.TIME: T.TIME2, Types.TIMESTAMP: T.DATETIME2, Types.CHAR: T.STRING,
    Types.VARCHAR: T.VARCHAR, Types.CLOB: T.BLOB,
}  # fmt: skip


def _labels(inner: str) -> tuple[str, ...]:
    return tuple(m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", inner))


def column_def(name: str, mysql_type: str, sql_type: int) -> ColumnDef:
    """Our column definition from canal's ``mysqlType`` text (``sqlType`` when there is none)."""
    m = _TYPE.match(mysql_type.lower()) if mysql_type else None
    if m is None:
        t = _BY_SQL_TYPE.get(sql_type, T.BLOB)
        binary = sql_type == Types.BLOB
        return ColumnDef(
            name, t, meta=4 if t == T.BLOB else 0, collation=BINARY_COLLATION if binary else None,
            charset=None if binary else "utf-8", fsp=6 if t in (T.TIME2, T.DATETIME2) else None,
        )  # fmt: skip
    base, args, rest = m.group(1), m.group(2) or "", m.group(3)
    unsigned = "unsigned" in rest
    if base in _SIMPLE:
        return ColumnDef(name, _SIMPLE[base], unsigned=unsigned)
    if base in ("decimal", "numeric", "dec", "fixed"):
        p, _, s = args.partition(",")
        return ColumnDef(name, T.NEWDECIMAL, unsigned=unsigned, precision=int(p or 10), scale=int(s or 0))
    if base == "bit":
        n = int(args or 1)
        return ColumnDef(name, T.BIT, meta=((n // 8) << 8) | (n % 8))
    if base in ("datetime", "timestamp", "time"):
        t = {"datetime": T.DATETIME2, "timestamp": T.TIMESTAMP2, "time": T.TIME2}[base]
        return ColumnDef(name, t, fsp=int(args or 0))
    if base in ("char", "varchar"):
        return ColumnDef(name, T.STRING if base == "char" else T.VARCHAR, charset="utf-8")
    if base in ("binary", "varbinary"):
        t = T.STRING if base == "binary" else T.VARCHAR
        return ColumnDef(name, t, collation=BINARY_COLLATION)
    if base.endswith("text"):
        return ColumnDef(name, T.BLOB, meta=_BLOB_META.get(base[:-4], 2), charset="utf-8")
    if base.endswith("blob"):
        return ColumnDef(name, T.BLOB, meta=_BLOB_META.get(base[:-4], 2), collation=BINARY_COLLATION)
    if base == "enum":
        return ColumnDef(name, T.ENUM, enum_values=_labels(args))
    if base == "set":
        return ColumnDef(name, T.SET, set_values=_labels(args))
    if base in ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
                "multipolygon", "geometrycollection", "geomcollection"):  # fmt: skip
        return ColumnDef(name, T.GEOMETRY)
    raise CanalProtocolError(f"column {name!r}: canal type {mysql_type!r} is not known here")


def _parse_dt(text: str) -> dt.datetime | InvalidDate:
    """A DATETIME's text; a zero, partial or invalid one is an :class:`InvalidDate` (as the decoder
    makes it)."""
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        if text[:4].isdigit() and text[4:5] == "-":
            return InvalidDate(text)
        raise


def _parse_ts(text: str) -> dt.datetime | InvalidDate:
    local = _parse_dt(text)
    return local if isinstance(local, InvalidDate) else local.astimezone().astimezone(dt.timezone.utc)


def _parse_time(text: str) -> dt.timedelta:
    sign = -1 if text.startswith("-") else 1
    hms, _, frac = text.lstrip("-").partition(".")
    h, m, s = (int(x) for x in hms.split(":"))
    us = int((frac + "000000")[:6]) if frac else 0
    return sign * dt.timedelta(hours=h, minutes=m, seconds=s, microseconds=us)


def _parse_date(text: str) -> dt.date | InvalidDate:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        if text[:4].isdigit() and text[4:5] == "-":
            return InvalidDate(text)
        raise


def parser(col: ColumnDef, sql_type: int) -> Callable[[str], Any]:
    """Text -> our value for one column (built once per column)."""
    t = col.type
    if t in (T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.BIT, T.YEAR):
        return int
    if t == T.NEWDECIMAL:
        return Decimal
    if t == T.FLOAT:  # canal's shortest text of the float32: back to the very float32
        return lambda text: _F32.unpack(_F32.pack(float(text)))[0]
    if t == T.DOUBLE:
        return float
    if t == T.DATE:
        return _parse_date
    if t == T.DATETIME2:
        return _parse_dt
    if t == T.TIMESTAMP2:
        return _parse_ts
    if t == T.TIME2:
        return _parse_time
    if t == T.ENUM:
        labels = ("", *(col.enum_values or ()))
        return lambda text: labels[int(text)] if int(text) < len(labels) else int(text)
    if t == T.SET:
        members = col.set_values or ()
        return lambda text: ",".join(v for i, v in enumerate(members) if int(text) >> i & 1)
    if t == T.JSON:
        return json.loads
    if col.is_binary or t == T.GEOMETRY or sql_type == Types.BLOB:
        return lambda text: text.encode("latin-1")
    return str


class EntryDecoder:
    """canal entries -> ours, for one destination (schemas and parsers cached per column layout)."""

    def __init__(self, destination: str) -> None:
        self.destination = destination
        self._tables: dict[
            tuple[Any, ...], tuple[TableSchema, list[Callable[[str], Any]], dict[int, int]]
        ] = {}

    def decode(self, entries: Iterable[Any]) -> list[Entry]:
        out: list[Entry] = []
        for entry in entries:
            h = entry.header
            pos = BinlogPosition(h.logfileName, h.logfileOffset)
            end = BinlogPosition(h.logfileName, h.logfileOffset + h.eventLength)
            props = {p.key: p.value for p in h.props}
            payload = int(props.get(PAYLOAD_INDEX_PROP, -1))
            fnum = file_number(h.logfileName)
            ts = h.executeTime // 1000
            gtid = h.gtid or None
            if entry.entryType == entry_pb.TRANSACTIONEND:
                key = OrderKey(fnum, pos.pos, payload, 0)
                out.append(TransactionEnd(self.destination, pos, end, gtid, ts, key, server_id=h.serverId))
            elif entry.entryType == entry_pb.ROWDATA:
                change = entry_pb.RowChange.FromString(entry.storeValue)
                key = OrderKey(fnum, pos.pos, payload, 0)
                if change.isDdl or change.eventType not in _OPS:
                    kind = DdlKind.TRUNCATE if change.eventType == entry_pb.TRUNCATE else DdlKind.DDL
                    dml = not change.isDdl
                    out.append(DdlEntry(
                        self.destination, h.schemaName or change.ddlSchemaName, h.tableName or None,
                        DdlKind.STATEMENT_DML if dml else kind, change.sql, pos, end, gtid, ts, key,
                        server_id=h.serverId, ends_statement=not dml,
                    ))  # fmt: skip
                    continue
                op = _OPS[change.eventType]
                first = int(props.get(ROW_INDEX_PROP, 0))
                for i, row in enumerate(change.rowDatas):
                    cols = row.afterColumns if len(row.afterColumns) else row.beforeColumns
                    schema, parsers, slots = self._table(h.schemaName, h.tableName, cols)
                    before = self._image(row.beforeColumns, parsers, slots) if op is not Op.INSERT else None
                    after = self._image(row.afterColumns, parsers, slots) if op is not Op.DELETE else None
                    out.append(RowChange(
                        self.destination, h.schemaName, h.tableName, op, before, after, schema.primary_key,
                        pos, end, gtid, ts, OrderKey(fnum, pos.pos, payload, first + i), schema,
                    ))  # fmt: skip
        return out

    def _table(
        self, schema: str, table: str, cols: Any
    ) -> tuple[TableSchema, list[Callable[[str], Any]], dict[int, int]]:
        key = (schema, table, *((c.index, c.name, c.mysqlType, c.sqlType, c.isKey) for c in cols))
        hit = self._tables.get(key)
        if hit is None:
            defs = [column_def(c.name, c.mysqlType, c.sqlType) for c in cols]
            ts = TableSchema(schema, table, tuple(defs), tuple(c.name for c in cols if c.isKey))
            parsers = [parser(d, c.sqlType) for d, c in zip(defs, cols, strict=True)]
            hit = (ts, parsers, {c.index: i for i, c in enumerate(cols)})
            if len(self._tables) > 4096:
                self._tables.clear()
            self._tables[key] = hit
        return hit

    @staticmethod
    def _image(cols: Any, parsers: list[Callable[[str], Any]], slots: dict[int, int]) -> dict[str, Any]:
        image: dict[str, Any] = {}
        for c in cols:
            slot = slots.get(c.index)
            image[c.name] = None if c.isNull else (parsers[slot](c.value) if slot is not None else c.value)
        return image
