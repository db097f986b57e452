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
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.lake.errors import LakeError, MissingKeyError
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


@dataclass(frozen=True)
class KeyChoice:
    """The columns rows are matched on, and where they come from (for the report).

    :param columns: the key's column names.
    :param origin: ``"primary key"``, ``"unique key `name`"`` or ``"--key"``.
    """

    columns: tuple[str, ...]
    origin: str

    @property
    def text(self) -> str:
        return f"{self.origin} ({', '.join(self.columns)})"


@dataclass(frozen=True)
class RowDifference:
    """One key whose row differs: ``(column, source value, lake value)`` per differing column."""

    key: tuple[Any, ...]
    columns: tuple[tuple[str, Any, Any], ...]


@dataclass(frozen=True)
class AtPosition:
    """Where a comparison at a fixed binlog position was made (:mod:`.verify_cursor`).

    :param source_position: the binlog position of the source's consistent read.
    :param lake_position: how far the lake's commit mark says the table is (text).
    :param lake_snapshot: the Iceberg snapshot read (``None``: the table has none).
    :param changed: the keys (as the binlog decodes them) changed after the lake's position, up to
        the source's: left out of the comparison.
    :param changes: how many row changes the binlog had for the table in that range.
    """

    source_position: str
    lake_position: str
    lake_snapshot: int | None
    changed: frozenset[tuple[Any, ...]] = frozenset()
    changes: int = 0


@dataclass
class TableDiff:
    """The comparison of one source table with its lake table.

    ``missing``/``extra``/``different`` list keys in source order; ``details`` holds the differing
    columns of the first ``show`` keys of ``different``, ``column_counts`` how many differing rows
    each column differs in. ``not_compared`` counts the keys an :class:`AtPosition` comparison left
    out (changed after the lake's position).
    """

    source: str
    target: str
    source_rows: int = 0
    lake_rows: int = 0
    missing: list[tuple[Any, ...]] = field(default_factory=list)
    extra: list[tuple[Any, ...]] = field(default_factory=list)
    different: list[tuple[Any, ...]] = field(default_factory=list)
    key: KeyChoice | None = None
    details: list[RowDifference] = field(default_factory=list)
    column_counts: dict[str, int] = field(default_factory=dict)
    duplicate_source: list[tuple[Any, ...]] = field(default_factory=list)
    duplicate_lake: list[tuple[Any, ...]] = field(default_factory=list)
    at: AtPosition | None = None
    not_compared: int = 0
    excluded_source_rows: int = 0
    excluded_lake_rows: int = 0
    lake_missing: str | None = None
    """The lake table does not exist: where it was looked for (its catalog's location)."""

    @property
    def equal(self) -> bool:
        if self.missing or self.extra or self.different or self.duplicate_source or self.duplicate_lake:
            return False
        return self.source_rows - self.excluded_source_rows == self.lake_rows - self.excluded_lake_rows

    def describe(self, limit: int = 10) -> str:
        """The report: a first line, then what differs (at most ``limit`` keys of each kind)."""
        if self.equal and self.at is not None:
            compared = self.source_rows - self.excluded_source_rows
            parts = [
                f"{self.source} == {self.target}: {compared} rows compared, all equal "
                f"({self.source_rows} source rows, {self.lake_rows} lake rows)"
            ]
        elif self.equal:
            parts = [f"{self.source} == {self.target}: {self.source_rows} rows, all equal"]
        elif self.lake_missing is not None:
            return (
                f"{self.source} != {self.target}: the lake table {self.target} does not exist (looked in "
                f"{self.lake_missing}); {self.source_rows} source rows"
            )
        else:
            parts = [
                f"{self.source} != {self.target}: {self.source_rows} source rows, {self.lake_rows} lake rows"
            ]
        if self.key is not None and self.key.origin != "primary key":
            parts.append(f"  compared on {self.key.text}")
        if self.at is not None:
            at = self.at
            snap = f"Iceberg snapshot {at.lake_snapshot}" if at.lake_snapshot is not None else "no snapshot"
            parts.append(
                f"  at binlog position {at.source_position} (source, consistent snapshot); lake up to "
                f"{at.lake_position} ({snap}); changed after the lake's position: {self.not_compared} "
                "key(s), not compared"
            )
        for what, keys in (("missing in lake", self.missing), ("only in lake", self.extra),
                           ("different values", self.different),
                           ("key not unique in source", self.duplicate_source),
                           ("key not unique in lake", self.duplicate_lake)):  # fmt: skip
            if keys:
                parts.append(f"  {what}: {len(keys)} key(s): {_keys(keys, limit)}")
        if self.column_counts:
            counts = ", ".join(f"{c} ({n} row{'s' if n != 1 else ''})" for c, n in self.column_counts.items())
            parts.append(f"  differing columns: {counts}")
        for d in self.details[:limit]:
            if not d.columns:
                parts.append(f"    {_shown(d.key)}: equal when read again (changed while verifying)")
                continue
            parts.append(f"    {_shown(d.key)}:")
            width = max(len(c) for c, _, _ in d.columns)
            for column, src, lake in d.columns:
                parts.append(f"      {column:<{width}}  source {_value(src):<{_WIDTH}}  lake {_value(lake)}")
        return "\n".join(parts)


_WIDTH = 24
_SHOWN = 40


def _keys(keys: Sequence[tuple[Any, ...]], limit: int) -> str:
    shown = ", ".join(map(str, keys[:limit]))
    more = f" (+{len(keys) - limit} more)" if len(keys) > limit else ""
    return shown + more


def _shown(key: tuple[Any, ...]) -> str:
    return _cut(str(key))


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 1]}…({len(text)} chars)"


def _value(v: Any) -> str:
    """A canonical value as the report shows it: short, one line."""
    if v is None:
        return "NULL"
    if isinstance(v, bytes):
        return _cut("0x" + v.hex())
    if isinstance(v, decimal.Decimal):
        return _cut(str(v))
    if isinstance(v, dt.date | dt.datetime):
        return _cut(v.isoformat())
    return _cut(repr(v))


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


def unique_keys(conn: Any, schema: str, table: str) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """The table's unique keys other than the declared primary key, in the server's key order (the
    order ``STATISTICS`` lists them in: a key the server made the primary key, for want of a declared
    one, first): ``(index name, columns, nullable columns)``."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT INDEX_NAME, COLUMN_NAME, SEQ_IN_INDEX FROM information_schema.STATISTICS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0 AND INDEX_NAME <> 'PRIMARY'",
            (schema, table),
        )
        rows = cur.fetchall()
        cur.execute(
            "SELECT COLUMN_NAME, IS_NULLABLE, COLUMN_KEY FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (schema, table),
        )
        described = {
            str(n): (str(nullable).upper() == "YES", str(k).upper() == "PRI") for n, nullable, k in cur
        }
    parts: dict[str, list[tuple[int, str]]] = {}
    for index, column, seq in rows:
        parts.setdefault(str(index), []).append((int(seq), str(column)))
    keys = [(name, tuple(c for _, c in sorted(p))) for name, p in parts.items()]
    chosen = {n for n, (_, pri) in described.items() if pri}
    keys.sort(key=lambda k: not (chosen and set(k[1]) == chosen))  # the server's choice first
    return [(name, cols, tuple(c for c in cols if described.get(c, (True, False))[0])) for name, cols in keys]


def choose_key(
    conn: Any, source: str, columns: Sequence[SourceColumn], pk: Sequence[str], given: Sequence[str] | None
) -> KeyChoice:
    """The key rows are matched on: ``given`` (``--key``), else the primary key, else the first
    unique key whose columns are all NOT NULL.

    :raises MissingKeyError: none of these; the message names the table and the remedy.
    """
    names = {c.name.lower(): c.name for c in columns}
    if given:
        unknown = [k for k in given if k.lower() not in names]
        if unknown:
            raise ConfigurationError(f"--key: {source} has no column(s) {', '.join(unknown)}")
        return KeyChoice(tuple(names[k.lower()] for k in given), "--key")
    if pk:
        return KeyChoice(tuple(pk), "primary key")
    schema, _, table = source.partition(".")
    nullable = []
    for index, cols, nulls in unique_keys(conn, schema, table):
        if not nulls:
            return KeyChoice(cols, f"unique key {quote_mysql(index)}")
        nullable.append(f"{quote_mysql(index)} ({', '.join(cols)}) allows NULL in {', '.join(nulls)}")
    why = f"; its unique key {'; '.join(nullable)}" if nullable else ""
    raise MissingKeyError(
        f"{source} has no primary key and no unique key whose columns are all NOT NULL{why}: rows "
        f"cannot be matched; give the columns that identify a row with --key col[,col] "
        f"(verify_table key_columns=)"
    )


def _digest(values: Sequence[Any]) -> bytes:
    return hashlib.blake2b(repr(tuple(values)).encode(), digest_size=16).digest()


def _column_digests(values: Sequence[Any]) -> bytes:
    return b"".join(hashlib.blake2b(repr(v).encode(), digest_size=8).digest() for v in values)


def _normalized(rows: Iterable[Sequence[Any]], norms: Sequence[Callable[[Any], Any]]) -> Iterator[list[Any]]:
    for row in rows:
        yield [None if v is None else f(v) for f, v in zip(norms, row, strict=True)]


def _hash_rows(
    rows: Iterable[Sequence[Any]], norms: Sequence[Callable[[Any], Any]], key_idx: Sequence[int]
) -> tuple[dict[tuple[Any, ...], bytes], int, list[tuple[Any, ...]]]:
    """``{key: row digest}``, the row count and the keys seen more than once."""
    out: dict[tuple[Any, ...], bytes] = {}
    duplicates: dict[tuple[Any, ...], None] = {}
    n = 0
    for values in _normalized(rows, norms):
        n += 1
        key = tuple(values[i] for i in key_idx)
        if key in out:
            duplicates[key] = None
        out[key] = _digest(values)
    return out, n, list(duplicates)


def quote_mysql(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class _Sides:
    """Reads one table's rows from both sides, as often as needed, always the same rows: the source
    inside one transaction (the caller's or a consistent snapshot of its own), the lake at one
    Iceberg snapshot."""

    def __init__(
        self, conn: Any, spark: SparkSession, source: str, target: str, names: list[str], snapshot: int | None
    ) -> None:
        self.conn = conn
        self.spark = spark
        schema, _, table = source.partition(".")
        select = ", ".join(quote_mysql(n) for n in names)
        self.select = f"SELECT {select} FROM {quote_mysql(schema)}.{quote_mysql(table)}"
        self.names = names
        self.target = target
        self.lake_name = quote_parts(parse_name(target))
        self.snapshot = snapshot

    def source_rows(self) -> Iterator[tuple[Any, ...]]:
        import pymysql.cursors

        with self.conn.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute(self.select)
            yield from cur

    def lake_rows(self) -> Iterator[Any]:
        spark = self.spark
        version = f" VERSION AS OF {int(self.snapshot)}" if self.snapshot is not None else ""
        frame = spark.sql(f"SELECT * FROM {self.lake_name}{version}")
        missing_cols = [n for n in self.names if n not in frame.columns]
        if missing_cols:
            raise LakeError(f"lake table {self.target} lacks source column(s) {', '.join(missing_cols)}")
        if "_cdc_deleted" in frame.columns:
            frame = frame.where("NOT `_cdc_deleted`")
        frame = frame.select(*[f"`{n.replace('`', '``')}`" for n in self.names])
        return frame.toLocalIterator()


def catalog_location(spark: SparkSession, target: str) -> str:
    """Where the catalog of ``target`` keeps its tables, as its Spark configuration says
    (``catalog lake, warehouse /data/warehouse``), for a report of a table that is not there."""
    catalog = parse_name(target)[0]
    prefix = f"spark.sql.catalog.{catalog}"
    found = [f"catalog {catalog}"]
    for key in ("type", "catalog-impl", "uri", "warehouse"):
        value = spark.conf.get(f"{prefix}.{key}", None)
        if value:  # a URI without its user info and query (they may hold credentials)
            found.append(f"{key} {re.sub(r'//[^/@]*@', '//', value).split('?', 1)[0]}")
    return ", ".join(found)


def lake_snapshot(spark: SparkSession, target: str) -> tuple[bool, int | None]:
    """``(exists, current snapshot id)`` of a lake table, read fresh from its catalog."""
    from airflow_provider_binlog.lake.commits import load_iceberg_table

    table = load_iceberg_table(spark, quote_parts(parse_name(target)))
    if table is None:
        return False, None
    table.refresh()
    snap = table.currentSnapshot()
    return True, None if snap is None else int(snap.snapshotId())


def verify_table(
    conn: Any,
    spark: SparkSession,
    source: str,
    target: str,
    key_columns: Sequence[str] | None = None,
    *,
    show: int = 10,
    at: AtPosition | None = None,
) -> TableDiff:
    """Compare one source table (``schema.table``) with its lake table.

    Without ``at``, the source is read inside a consistent-snapshot transaction of its own (when
    ``conn`` is in autocommit mode; ended here) and the lake at its current Iceberg snapshot, so
    the second read of the differing rows sees what the first saw. With ``at``, ``conn`` is
    already inside the consistent snapshot :mod:`.verify_cursor` opened, the lake is read at
    ``at.lake_snapshot``, and the keys in ``at.changed`` are left out.

    :param conn: a pymysql connection to the source.
    :param key_columns: the row key (default: the primary key, else the first unique key whose
        columns are all NOT NULL).
    :param show: how many differing keys get their differing columns read (side by side).
    :raises MissingKeyError: no key given and none found.
    """
    # an autocommit connection gets a transaction of its own; one inside a transaction reads in it
    own_transaction = at is None and bool(conn.get_autocommit())
    if own_transaction:
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    try:
        return _verify(conn, spark, source, target, key_columns, show, at)
    finally:
        if own_transaction:
            with conn.cursor() as cur:
                cur.execute("ROLLBACK")


def _verify(
    conn: Any,
    spark: SparkSession,
    source: str,
    target: str,
    key_columns: Sequence[str] | None,
    show: int,
    at: AtPosition | None,
) -> TableDiff:
    schema, _, table = source.partition(".")
    columns, pk = source_columns(conn, schema, table)
    key = choose_key(conn, source, columns, pk, key_columns)
    names = [c.name for c in columns]
    key_idx = [names.index(k) for k in key.columns]
    src_norm, lake_norm = zip(*(c.normalizers() for c in columns), strict=True)
    diff = TableDiff(source, target, key=key, at=at)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
    if at is not None:
        exists, snapshot = True, at.lake_snapshot
    else:
        exists, snapshot = lake_snapshot(spark, target)
    if not exists:
        diff.lake_missing = catalog_location(spark, target)
    sides = _Sides(conn, spark, source, target, names, snapshot)
    source_hashes, diff.source_rows, diff.duplicate_source = _hash_rows(
        sides.source_rows(), src_norm, key_idx
    )
    lake_hashes: dict[tuple[Any, ...], bytes] = {}
    if exists:
        lake_hashes, diff.lake_rows, diff.duplicate_lake = _hash_rows(sides.lake_rows(), lake_norm, key_idx)
    if at is not None:
        changed = _keys_normalized(at.changed, [src_norm[i] for i in key_idx])
        diff.not_compared = len(changed)
        for k in changed:
            if source_hashes.pop(k, None) is not None:
                diff.excluded_source_rows += 1
            if lake_hashes.pop(k, None) is not None:
                diff.excluded_lake_rows += 1
    for k, digest in source_hashes.items():
        other = lake_hashes.get(k)
        if other is None:
            diff.missing.append(k)
        elif other != digest:
            diff.different.append(k)
    diff.extra = [k for k in lake_hashes if k not in source_hashes]
    if diff.different:
        _explain(diff, sides, src_norm, lake_norm, key_idx, names, show)
    return diff


def _keys_normalized(
    keys: Iterable[tuple[Any, ...]], norms: Sequence[Callable[[Any], Any]]
) -> set[tuple[Any, ...]]:
    out = set()
    for raw in keys:
        try:
            out.add(tuple(None if v is None else f(v) for f, v in zip(norms, raw, strict=True)))
        except (TypeError, ValueError, decimal.InvalidOperation):
            out.add(tuple(raw))  # left as decoded: at worst this key shows as a difference
    return out


def _explain(
    diff: TableDiff,
    sides: _Sides,
    src_norm: Sequence[Callable[[Any], Any]],
    lake_norm: Sequence[Callable[[Any], Any]],
    key_idx: Sequence[int],
    names: Sequence[str],
    show: int,
) -> None:
    """Second pass over both sides for the differing keys only: which columns differ (all of them
    counted, 8-byte digests per column), and the values of the first ``show`` keys."""
    wanted = set(diff.different)
    shown = set(diff.different[: max(show, 0)])
    src_digests: dict[tuple[Any, ...], bytes] = {}
    src_values: dict[tuple[Any, ...], list[Any]] = {}
    for values in _normalized(sides.source_rows(), src_norm):
        k = tuple(values[i] for i in key_idx)
        if k in wanted:
            src_digests[k] = _column_digests(values)
            if k in shown:
                src_values[k] = values
    counts = dict.fromkeys(names, 0)
    lake_values: dict[tuple[Any, ...], list[Any]] = {}
    differing: dict[tuple[Any, ...], list[int]] = {}
    for values in _normalized(sides.lake_rows(), lake_norm):
        k = tuple(values[i] for i in key_idx)
        theirs = src_digests.get(k)
        if theirs is None:
            continue
        ours = _column_digests(values)
        cols = [i for i in range(len(names)) if ours[8 * i : 8 * i + 8] != theirs[8 * i : 8 * i + 8]]
        differing[k] = cols
        for i in cols:
            counts[names[i]] += 1
        if k in shown:
            lake_values[k] = values
    diff.column_counts = {c: n for c, n in sorted(counts.items(), key=lambda x: -x[1]) if n}
    for k in diff.different[: max(show, 0)]:
        src, lake = src_values.get(k), lake_values.get(k)
        if src is None or lake is None:
            diff.details.append(RowDifference(k, ()))
            continue
        diff.details.append(
            RowDifference(k, tuple((names[i], src[i], lake[i]) for i in differing.get(k, ())))
        )


def verify_tables(
    conn: Any,
    spark: SparkSession,
    tables: Mapping[str, str],
    key_columns: Mapping[str, Sequence[str]] | None = None,
    show: int = 10,
) -> list[TableDiff]:
    """:func:`verify_table` for every ``source -> target`` pair."""
    keys = key_columns or {}
    return [verify_table(conn, spark, s, t, keys.get(s), show=show) for s, t in sorted(tables.items())]
