"""Compare source tables with their lake tables: row counts, per-row hashes, the differing keys.

Both sides are brought to one canonical form per column before hashing, following the type
mapping of :mod:`.types`: a source value read with a plain ``SELECT`` (session time zone UTC) and
the lake value read back from Iceberg must be equal whenever the pipeline is right.

===================  ===========================================================================
source type          canonical value (both sides)
===================  ===========================================================================
integers, YEAR       ``int`` (BIGINT UNSIGNED from its ``decimal(20,0)``)
DECIMAL              ``Decimal`` normalized (``1.50`` == ``1.5``)
FLOAT                the float32 value; DOUBLE the float64 value
BIT                  ``int``
DATE, DATETIME       ``date`` / naive ``datetime``; zero dates ``None``
TIMESTAMP            aware ``datetime`` in UTC; zero ``None``
TIME                 signed microseconds
text, ENUM, SET      ``str``; JSON parsed (``json.loads``) when the source type is ``json``
binary, BLOB         ``bytes``; GEOMETRY without MySQL's 4-byte SRID prefix
===================  ===========================================================================

Memory: keys and 16-byte digests only; rows stream from both sides.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.sql import parse_name, quote_parts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_F32 = struct.Struct("<f")
_UTC = dt.timezone.utc
_INTS = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year", "bit"}
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"}
_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_GEOMETRY = {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
             "multipolygon", "geometrycollection", "geomcollection"}  # fmt: skip


def _int(v: Any) -> Any:
    if isinstance(v, bytes | bytearray):
        return int.from_bytes(v, "big")
    return int(v)


def _decimal(v: Any) -> Any:
    return decimal.Decimal(v).normalize()


def _float32(v: Any) -> Any:
    return _F32.unpack(_F32.pack(float(v)))[0]


def _date(v: Any) -> Any:
    return v if isinstance(v, dt.date) else None  # pymysql gives zero dates back as text


def _datetime(v: Any) -> Any:
    if not isinstance(v, dt.datetime):
        return None
    return v.replace(tzinfo=None) if v.tzinfo else v


def _timestamp_source(v: Any) -> Any:
    return v.replace(tzinfo=_UTC) if isinstance(v, dt.datetime) else None


def _timestamp_lake(v: Any) -> Any:
    if not isinstance(v, dt.datetime):
        return None
    # PySpark hands zoned timestamps back as naive local time of this process
    return v.astimezone(_UTC) if v.tzinfo else dt.datetime.fromtimestamp(v.timestamp(), _UTC)


def _time(v: Any) -> Any:
    if isinstance(v, dt.timedelta):
        return v // dt.timedelta(microseconds=1)
    return int(v)


def _text(v: Any) -> Any:
    return bytes(v).decode("utf-8", "replace") if isinstance(v, bytes | bytearray) else str(v)


def _json(v: Any) -> Any:
    return json.loads(_text(v))


def _bytes(v: Any) -> Any:
    return bytes(v)


def _geometry_source(v: Any) -> Any:
    b = bytes(v)
    return b[4:] if len(b) >= 4 else b


@dataclass(frozen=True)
class SourceColumn:
    """A source column as ``information_schema`` describes it."""

    name: str
    data_type: str
    column_type: str

    def normalizers(self) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
        """(source side, lake side) canonicalizers for this column."""
        t = self.data_type.lower()
        if t in _INTS:
            return _int, _int
        if t in ("decimal", "numeric"):
            return _decimal, _decimal
        if t == "float":
            return _float32, _float32
        if t in ("double", "real"):
            return float, float
        if t == "date":
            return _date, _date
        if t == "datetime":
            return _datetime, _datetime
        if t == "timestamp":
            return _timestamp_source, _timestamp_lake
        if t == "time":
            return _time, _time
        if t == "json":
            return _json, _json
        if t in _TEXT:
            return _text, _text
        if t in _GEOMETRY:
            return _geometry_source, _bytes
        if t in _BINARY:
            return _bytes, _bytes
        return _text, _text


@dataclass
class TableDiff:
    """The comparison of one source table with its lake table."""

    source: str
    target: str
    source_rows: int = 0
    lake_rows: int = 0
    missing: list[tuple[Any, ...]] = field(default_factory=list)
    extra: list[tuple[Any, ...]] = field(default_factory=list)
    different: list[tuple[Any, ...]] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.different) and self.source_rows == self.lake_rows

    def describe(self, limit: int = 10) -> str:
        if self.equal:
            return f"{self.source} == {self.target}: {self.source_rows} rows, all equal"
        parts = [
            f"{self.source} != {self.target}: {self.source_rows} source rows, {self.lake_rows} lake rows"
        ]
        for what, keys in (("missing in lake", self.missing), ("only in lake", self.extra),
                           ("different values", self.different)):  # fmt: skip
            if keys:
                shown = ", ".join(map(str, keys[:limit]))
                more = f" (+{len(keys) - limit} more)" if len(keys) > limit else ""
                parts.append(f"  {what}: {len(keys)} key(s): {shown}{more}")
        return "\n".join(parts)


def source_columns(conn: Any, schema: str, table: str) -> tuple[list[SourceColumn], list[str]]:
    """Columns (in table order) and primary-key columns of a source table."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (schema, table),
        )
        columns = [SourceColumn(str(n), str(d), str(c)) for n, d, c in cur.fetchall()]
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s "
            "AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
            (schema, table),
        )
        keys = [str(r[0]) for r in cur.fetchall()]
    if not columns:
        raise LakeError(f"source table {schema}.{table} does not exist")
    return columns, keys


def _digest(values: Sequence[Any]) -> bytes:
    return hashlib.blake2b(repr(tuple(values)).encode(), digest_size=16).digest()


def _hash_rows(
    rows: Iterable[Sequence[Any]], norms: Sequence[Callable[[Any], Any]], key_idx: Sequence[int]
) -> tuple[dict[tuple[Any, ...], bytes], int]:
    out: dict[tuple[Any, ...], bytes] = {}
    n = 0
    for row in rows:
        n += 1
        values = [None if v is None else f(v) for f, v in zip(norms, row, strict=True)]
        out[tuple(values[i] for i in key_idx)] = _digest(values)
    return out, n


def quote_mysql(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def verify_table(
    conn: Any,
    spark: SparkSession,
    source: str,
    target: str,
    key_columns: Sequence[str] | None = None,
) -> TableDiff:
    """Compare one source table (``schema.table``) with its lake table.

    :param conn: a pymysql connection to the source.
    :param key_columns: the row key when the source has no primary key.
    """
    schema, _, table = source.partition(".")
    columns, pk = source_columns(conn, schema, table)
    keys = list(key_columns or pk)
    if not keys:
        raise LakeError(f"{source} has no primary key: give key columns to verify it")
    names = [c.name for c in columns]
    key_idx = [names.index(k) for k in keys]
    src_norm, lake_norm = zip(*(c.normalizers() for c in columns), strict=True)
    diff = TableDiff(source, target)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        select = ", ".join(quote_mysql(n) for n in names)
        cur.execute(f"SELECT {select} FROM {quote_mysql(schema)}.{quote_mysql(table)}")
        source_hashes, diff.source_rows = _hash_rows(cur.fetchall(), src_norm, key_idx)
    lake_name = quote_parts(parse_name(target))
    if not _exists(spark, lake_name):
        lake_hashes: dict[tuple[Any, ...], bytes] = {}
    else:
        frame = spark.table(lake_name)
        missing_cols = [n for n in names if n not in frame.columns]
        if missing_cols:
            raise LakeError(f"lake table {target} lacks source column(s) {', '.join(missing_cols)}")
        if "_cdc_deleted" in frame.columns:
            frame = frame.where("NOT `_cdc_deleted`")
        frame = frame.select(*[f"`{n.replace('`', '``')}`" for n in names])
        lake_hashes, diff.lake_rows = _hash_rows(frame.toLocalIterator(), lake_norm, key_idx)
    for key, digest in source_hashes.items():
        other = lake_hashes.get(key)
        if other is None:
            diff.missing.append(key)
        elif other != digest:
            diff.different.append(key)
    diff.extra = [k for k in lake_hashes if k not in source_hashes]
    return diff


def _exists(spark: SparkSession, name: str) -> bool:
    try:
        spark.sql(f"DESCRIBE TABLE {name}").collect()
        return True
    except Exception:
        return False


def verify_tables(
    conn: Any,
    spark: SparkSession,
    tables: Mapping[str, str],
    key_columns: Mapping[str, Sequence[str]] | None = None,
) -> list[TableDiff]:
    """:func:`verify_table` for every ``source -> target`` pair."""
    return [verify_table(conn, spark, s, t, (key_columns or {}).get(s)) for s, t in sorted(tables.items())]
