"""Schema history: a table's columns as they were at each binlog position, kept per destination.

Why: with ``binlog_row_metadata=MINIMAL`` (MySQL < 8.0.1, MariaDB < 10.5, or by choice) a TABLE_MAP
carries only column types, no names, signedness, charsets or ENUM/SET labels. Asking
``information_schema`` when an old event is decoded gives today's columns, which is wrong for
rows written before a later ``ADD``/``DROP COLUMN``. So the history keeps **versions keyed by
binlog position** and moves forward with the DDL it sees in the stream:

1. **Bootstrap**: :meth:`SchemaHistory.bootstrap` snapshots the filtered tables from
   ``information_schema`` together with the server's head position at that moment; the
   instance calls it when a destination is first subscribed, before reading.
2. **DDL**: each CREATE/ALTER (ADD/DROP/MODIFY/CHANGE/RENAME COLUMN, primary key)/RENAME/DROP
   TABLE in the stream is parsed (:mod:`.ddl`) and applied to the version in effect just before
   it, giving a new version at the DDL's position. Re-reading the same DDL later (a restart, a
   rollback) finds the version already there and keeps it. A statement the parser cannot follow
   completely marks the table "unknown from here"; it is then re-read from ``information_schema``
   (correct when the DDL is the table's latest, otherwise caught by the TABLE_MAP check below).
3. **Resolve**: for a TABLE_MAP at position P the version with the greatest position <= P is
   used. The binlog parser checks it against the TABLE_MAP (column count and type family) and
   raises on a mismatch, so a wrong version is an error, never a silent misassignment.
4. With ``binlog_row_metadata=FULL`` the binlog names every column itself; the history then only
   records what the TABLE_MAPs say (for :class:`~.change.DdlEntry`) and is never needed to decode.

Limits: positions before the bootstrap with no earlier version use the bootstrap snapshot
(valid unless the table changed in between; a changed column count or type is detected, a
same-typed rename is not). A character column without ``CHARACTER SET``/``COLLATE`` takes the
table's default collation: from its CREATE (``DEFAULT CHARSET``/``COLLATE``, else the database's
default) or a later ``ALTER ... [DEFAULT] CHARSET``/``CONVERT TO`` seen by this process, else the
table's as ``information_schema`` has it now (names resolve as :class:`Collations` says). A TEXT
column left without a collation would be typed ``binary`` in the lake while its rows are text.

Stored in the meta manager under the client node (one record per table)::

    .../{clientId}/provider/schema/{schema}.{table}   JSON list of versions, oldest first:
        [{"at": [file_number, pos], "pos": "mysql-bin.000003:1234", "source": "bootstrap"|"ddl"|
          "information_schema"|"table_map", "dropped": false,
          "columns": [{"name","type","unsigned","collation","charset","enum","set","nullable",
                       "precision","scale","fsp","meta"}...],
          "pk": ["id"], "unique": [["PRIMARY", ["id"], true], ["uk", ["a", "b"], false]],
          "partitioning": {...} | null}, ...]

``unique``: the unique keys that may be the primary key, in the server's key order (``pk`` is the
one the server chose: see :class:`~airflow_provider_binlog.binlog.columns.TableSchema`).

``partitioning`` (:mod:`.partitions`): the table's partitioning when known (``{"method": ""}``: not
partitioned), ``null`` or absent when not known (records written before it was kept load so).

Names outside ``[A-Za-z0-9_.-]`` are escaped as ``=HH`` per UTF-8 byte.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pymysql

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType
from airflow_provider_binlog.binlog.mariadb_types import PLUGIN_TYPES
from airflow_provider_binlog.binlog.position import BinlogPosition, file_number
from airflow_provider_binlog.canal import hidden_columns
from airflow_provider_binlog.canal.errors import MetaConflictError
from airflow_provider_binlog.canal.meta.base import MetaManager
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.sql import partitions
from airflow_provider_binlog.canal.sql.ddl import ColumnSpec, DdlStatement, KeySpec, tokenize

log = logging.getLogger(__name__)
T = ColumnType
Key = tuple[int, int]

TYPE_NAMES: dict[str, ColumnType] = {
    "tinyint": T.TINY, "bool": T.TINY, "boolean": T.TINY, "smallint": T.SHORT, "mediumint": T.INT24,
    "int": T.LONG, "integer": T.LONG, "bigint": T.LONGLONG, "decimal": T.NEWDECIMAL,
    "numeric": T.NEWDECIMAL, "dec": T.NEWDECIMAL, "fixed": T.NEWDECIMAL, "float": T.FLOAT,
    "double": T.DOUBLE, "real": T.DOUBLE, "bit": T.BIT, "date": T.DATE, "datetime": T.DATETIME2,
    "timestamp": T.TIMESTAMP2, "time": T.TIME2, "year": T.YEAR, "char": T.STRING,
    "binary": T.STRING, "varchar": T.VARCHAR, "varbinary": T.VARCHAR, "tinytext": T.TINY_BLOB,
    "tinyblob": T.TINY_BLOB, "text": T.BLOB, "blob": T.BLOB, "mediumtext": T.MEDIUM_BLOB,
    "mediumblob": T.MEDIUM_BLOB, "longtext": T.LONG_BLOB, "longblob": T.LONG_BLOB, "json": T.JSON,
    "enum": T.ENUM, "set": T.SET, "geometry": T.GEOMETRY, "point": T.GEOMETRY,
    "linestring": T.GEOMETRY, "polygon": T.GEOMETRY, "multipoint": T.GEOMETRY,
    "multilinestring": T.GEOMETRY, "multipolygon": T.GEOMETRY, "geometrycollection": T.GEOMETRY,
    "geomcollection": T.GEOMETRY, "vector": T.VECTOR, "uuid": T.STRING, "inet6": T.STRING,
    "inet4": T.STRING,
}  # fmt: skip
_TEXT = {
    "char",
    "varchar",
    "tinytext",
    "text",
    "mediumtext",
    "longtext",
    "enum",
    "set",
    "character",
    "nchar",
    "nvarchar",
}


def _escape(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", lambda m: "".join(f"={b:02x}" for b in m.group().encode()), name)


def position_key(pos: BinlogPosition) -> Key:
    return (pos.file_number, pos.pos)


def column_to_json(c: ColumnDef) -> dict[str, Any]:
    return {
        "name": c.name,
        "type": int(c.type),
        "unsigned": c.unsigned,
        "collation": c.collation,
        "charset": c.charset,
        "enum": list(c.enum_values) if c.enum_values is not None else None,
        "set": list(c.set_values) if c.set_values is not None else None,
        "nullable": c.nullable,
        "precision": c.precision,
        "scale": c.scale,
        "fsp": c.fsp,
        "meta": c.meta,
        **({"plugin_type": c.plugin_type} if c.plugin_type is not None else {}),
        **({"zerofill": True} if c.zerofill else {}),
    }


def column_from_json(d: dict[str, Any]) -> ColumnDef:
    return ColumnDef(
        name=d["name"],
        type=ColumnType(d["type"]),
        unsigned=bool(d.get("unsigned")),
        collation=d.get("collation"),
        charset=d.get("charset"),
        enum_values=tuple(d["enum"]) if d.get("enum") is not None else None,
        set_values=tuple(d["set"]) if d.get("set") is not None else None,
        nullable=bool(d.get("nullable", True)),
        precision=d.get("precision"),
        scale=d.get("scale"),
        fsp=d.get("fsp"),
        meta=int(d.get("meta") or 0),
        plugin_type=d.get("plugin_type"),
        zerofill=bool(d.get("zerofill")),
    )


_PLUGIN_MARK = "plugin_types"
"""Set on stored versions whose columns name MariaDB's UUID/INET6/INET4 (``plugin_type``); a version
without it was recorded before: see :func:`_old_plugin_shape`."""


def _old_plugin_shape(c: ColumnDef) -> bool:
    """Whether ``c`` (of a version recorded before ``plugin_type``) may be a UUID/INET6 (a text
    column without collation) or an INET4 (an INT) as the history recorded them then."""
    return c.plugin_type is None and (
        (c.type == T.STRING and c.collation is None) or (c.type == T.LONG and not c.zerofill)
    )


def _with_plugin_now(c: ColumnDef, plugins: dict[str, str]) -> ColumnDef:
    """``c`` with the plugin type its column has now, when it has the old shape of that type."""
    found = plugins.get(c.name)
    if found is None or not _old_plugin_shape(c) or (c.type == T.LONG) != (found == "inet4"):
        return c
    extra = _plugin(found)
    return replace(c, type=T.STRING, unsigned=False, charset=None, **extra)


def _plugin(type_name: str | None) -> dict[str, Any]:
    """The :class:`ColumnDef` fields of MariaDB's UUID/INET6/INET4 (a TABLE_MAP's BINARY(n), named by
    the history so the decoder gives their text: :mod:`~airflow_provider_binlog.binlog.mariadb_types`)."""
    if type_name not in PLUGIN_TYPES:
        return {}
    return {"plugin_type": type_name, "collation": 63, "max_length": PLUGIN_TYPES[type_name]}


_TEMPORAL_FSP = (T.TIME2, T.DATETIME2, T.TIMESTAMP2)


def type_details(
    ctype: ColumnType, precision: int | None, scale: int | None, fsp: int | None
) -> dict[str, Any]:
    """The :class:`ColumnDef` fields a TABLE_MAP would give a column of this declared size.

    Lake types depend on them (``DECIMAL(12,2)``, ``BIT(8)``), so a schema read from DDL or from
    ``information_schema`` must map to the same lake type as the TABLE_MAP of the same column.

    :param precision: DECIMAL precision or BIT length as declared (``None``: the type's default).
    :param scale: DECIMAL scale (``None``: 0).
    :param fsp: fractional-seconds precision of TIME/DATETIME/TIMESTAMP (``None``: 0).
    """
    if ctype == T.NEWDECIMAL:
        p, s = (10 if precision is None else precision), (scale or 0)
        return {"precision": p, "scale": s, "meta": p << 8 | s}
    if ctype == T.BIT:
        n = 1 if precision is None else precision
        return {"meta": (n // 8) << 8 | (n % 8)}
    if ctype in _TEMPORAL_FSP:
        return {"fsp": fsp or 0, "meta": fsp or 0}
    return {}


class Collations:
    """Collation and charset names to ids, read once from ``information_schema``.

    Names resolve as the server resolves them: ``utf8`` is ``utf8mb3`` (every MySQL; MariaDB while
    ``old_mode`` has ``UTF8_IS_UTF8MB3``, its default, else ``utf8mb4``), and a collation written
    either way (``utf8_unicode_ci``, or MySQL 8.0.30+'s ``utf8mb3_unicode_ci``) is found whichever
    name the server lists. MariaDB 10.10+'s names without a charset (``uca1400_ai_ci``) take the
    charset in effect, and a collation the server does not list falls back to its charset's default
    (the charset, which decides the codec and the lake type, is what matters).

    :param rows: ``(name, id, charset, is_default)``.
    :param utf8: what ``utf8`` names.
    """

    def __init__(self, rows: Iterable[tuple[str, int, str, bool]], utf8: str = "utf8mb3") -> None:
        self.by_name: dict[str, int] = {}
        self.default_for: dict[str, int] = {}
        self.charset_of: dict[int, str] = {}
        self.utf8 = utf8
        for name, cid, charset, is_default in rows:
            if name is None or cid is None:
                continue  # MariaDB 10.10+ lists collation aliases without ids
            self.by_name.setdefault(name.lower(), int(cid))
            if charset is not None:
                self.charset_of.setdefault(int(cid), charset.lower())
                if is_default:
                    self.default_for.setdefault(charset.lower(), int(cid))

    def _charsets(self, name: str) -> list[str]:
        n = name.lower()
        if n == "utf8":
            return list(dict.fromkeys([self.utf8, "utf8mb3", "utf8"]))
        if n == "utf8mb3":
            return ["utf8mb3", "utf8"]
        return [n]

    def charset_default(self, charset: str) -> int | None:
        """The default collation id of a charset name (aliases as in the class docstring)."""
        for c in self._charsets(charset):
            if c in self.default_for:
                return self.default_for[c]
        return None

    def resolve(self, collation: str | None, charset: str | None) -> int | None:
        """The collation id of a ``COLLATE`` name, else of a ``CHARACTER SET`` name (its default).

        :param charset: with ``collation``: the charset in effect (for MariaDB's short names).
        """
        if collation:
            n = collation.lower()
            names = [n]
            prefix, _, rest = n.partition("_")
            if rest and prefix in ("utf8", "utf8mb3"):
                names += [f"{c}_{rest}" for c in self._charsets(prefix)]
            if charset:
                names += [f"{c}_{n}" for c in self._charsets(charset)]
            for name in names:
                if name in self.by_name:
                    return self.by_name[name]
            found = self.charset_default(prefix)
            if found is not None:
                return found
        if charset:
            return self.charset_default(charset)
        return None

    def binary_of(self, collation: int | None) -> int | None:
        """The ``_bin`` collation of a collation's charset (``CHAR(n) BINARY``), else ``collation``."""
        charset = self.charset_name(collation)
        return self.resolve(f"{charset}_bin", None) if charset else collation

    def charset_name(self, collation: int | None) -> str | None:
        """The charset name of a collation id, ``None`` when unknown."""
        return None if collation is None else self.charset_of.get(collation)

    def codec(self, collation: int | None) -> str | None:
        """:func:`~airflow_provider_binlog.binlog.table_map.collation_codec`, also for ids only the
        server lists (MariaDB 10.10+'s ``uca1400`` collations)."""
        from airflow_provider_binlog.binlog.table_map import CHARSET_CODECS, collation_codec

        found = collation_codec(collation)
        if found is None and collation is not None and collation != 63 and collation in self.charset_of:
            found = CHARSET_CODECS.get(self.charset_of[collation])
        return found


def spec_to_column(spec: ColumnSpec, collations: Collations | None, table_default: int | None) -> ColumnDef:
    """A :class:`ColumnDef` from a DDL column definition (enough for the TABLE_MAP check and names).

    :param table_default: the table's default collation id (``None``: unknown); a character column
        without ``CHARACTER SET``/``COLLATE`` has it.
    """
    ctype = TYPE_NAMES.get(spec.type_name, T.STRING)
    collation = None
    plugin = _plugin(spec.type_name)
    if plugin or spec.type_name in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        collation = 63
    elif spec.type_name in _TEXT and collations is not None:
        if spec.collation or spec.charset:
            context = spec.charset or collations.charset_name(table_default)
            collation = collations.resolve(spec.collation, context)
        else:
            collation = table_default
        if spec.binary and not spec.collation:
            collation = collations.binary_of(collation)
    from airflow_provider_binlog.binlog.table_map import collation_codec

    args = spec.args
    first = args[0] if args else None
    return ColumnDef(
        name=spec.name,
        type=ctype,
        nullable=spec.generated or not (spec.not_null or spec.primary),
        unsigned=spec.unsigned,
        collation=collation,
        charset=collations.codec(collation) if collations is not None else collation_codec(collation),
        enum_values=spec.labels if ctype == T.ENUM else None,
        set_values=spec.labels if ctype == T.SET else None,
        plugin_type=plugin.get("plugin_type"),
        max_length=plugin.get("max_length"),
        zerofill=spec.zerofill,
        **type_details(ctype, first, args[1] if len(args) > 1 else None, first),
    )


_LONG_UNIQUE = frozenset({T.TINY_BLOB, T.BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.JSON, T.GEOMETRY})
"""Types whose whole-column unique key is a hash the server never makes the primary key."""


def _canonical(cols: Iterable[ColumnDef], names: Iterable[str]) -> tuple[str, ...]:
    """Key column names as the columns are named (identifiers are case-insensitive).

    :raises KeyError: a name that is not a column.
    """
    by_name = {c.name.lower(): c.name for c in cols}
    return tuple(by_name[n.lower()] for n in names)


UniqueKey = tuple[str, tuple[str, ...], bool | None]
"""A unique key as the history keeps it (``None``: made by the statement being applied)."""


def _add_unique(cols: list[ColumnDef], keys: list[UniqueKey], key: KeySpec, taken: set[str]) -> None:
    """Append a ``UNIQUE`` key that can be the primary key (named as the server names it)."""
    columns = _canonical(cols, key.columns)
    name = key.name
    if name is None:  # the server names it after its first column: a, a_2, a_3...
        name, n = columns[0], 2
        while name.lower() in taken:
            name, n = f"{columns[0]}_{n}", n + 1
    taken.add(name.lower())
    types = {c.name: c.type for c in cols}
    if key.shaped and columns and not any(types[c] in _LONG_UNIQUE for c in columns):
        keys.append((name, columns, None))


_KEY_CHANGES = frozenset({"add_unique", "add_index", "drop_index", "add_pk", "drop_pk"})


def _keyed(schema: str, table: str, cols: Iterable[ColumnDef], keys: Iterable[UniqueKey]) -> TableSchema:
    """A table whose primary key is the one the server chooses: the declared one, else its first
    unique key in the server's key order when that key's columns are all NOT NULL now.

    The server orders keys: the primary key, unique keys made on NOT NULL columns, other unique
    keys, each group in the order it had before (a new key after the existing ones), re-sorted at
    every ALTER. "Made on NOT NULL columns" is decided when the keys are made (``None`` here: by the
    statement being applied; ``CREATE``, ``LIKE``, an ``ALTER`` that adds or drops a key) and lost
    once one of its columns allows NULL: a ``MODIFY ... NOT NULL`` alone makes a key the primary key
    only when it is first anyway (as MariaDB 10.11 does).
    """
    cols = tuple(cols)
    nullable = {c.name for c in cols if c.nullable}
    made = [(k, kc, (flag is not False) and not any(c in nullable for c in kc)) for k, kc, flag in keys]

    def group(key: tuple[str, tuple[str, ...], bool]) -> int:
        if key[0].upper() == "PRIMARY":
            return 0
        return 1 if key[2] else 2

    ordered = tuple(sorted(made, key=group))
    first = ordered[0][1] if ordered else ()
    pk = first if not any(c in nullable for c in first) else ()
    return TableSchema(schema, table, cols, pk, ordered)


def _unique_rows(
    key_rows: Iterable[tuple[Any, ...]], column_rows: Iterable[tuple[Any, ...]]
) -> list[UniqueKey]:
    """The unique keys that can be the primary key, from ``information_schema.STATISTICS`` rows
    ``(index, column, seq, sub_part, index_type)``; the one the server chose is the one whose
    columns are marked ``PRI`` in ``COLUMNS`` (``column_rows``), first whatever its name. Without one,
    no key was made on NOT NULL columns (whatever they are now)."""
    parts: dict[str, list[tuple[int, str]]] = {}
    shaped: dict[str, bool] = {}
    for index, column, seq, sub_part, index_type in key_rows:
        parts.setdefault(str(index), []).append((int(seq), str(column)))
        ok = sub_part is None and str(index_type).upper() != "HASH" and column is not None
        shaped[str(index)] = shaped.get(str(index), True) and ok
    chosen = {str(r[0]) for r in column_rows if str(r[5]).upper() == "PRI"}
    flag: bool | None = None if chosen else False
    keys: list[UniqueKey] = [(n, tuple(c for _, c in sorted(p)), flag) for n, p in parts.items() if shaped[n]]
    for i, (_, columns, _) in enumerate(keys):
        if chosen and set(columns) == chosen:
            keys.insert(0, keys.pop(i))
            break
    return keys


def _labels(column_type: str) -> tuple[str, ...]:
    inner = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return tuple(t.text for t in tokenize(inner) if t.kind == "str")


class SchemaHistory:
    """Table schema versions by binlog position (see the module docstring).

    :param meta: where versions persist (``None``: in memory only).
    :param identity: the destination client owning the history.
    :param connect: returns a pymysql connection able to read ``information_schema``; ``None``
        when only the binlog's own metadata and the DDL are available.
    """

    def __init__(
        self,
        meta: MetaManager | None = None,
        identity: ClientIdentity | None = None,
        connect: Callable[[], Any] | None = None,
    ) -> None:
        self.meta = meta
        self.identity = identity
        self.connect = connect
        self._versions: dict[tuple[str, str], list[tuple[Key, TableSchema | None, str]]] = {}
        self._loaded: set[tuple[str, str]] = set()
        self._collations: Collations | None = None
        self._table_defaults: dict[tuple[str, str], int | None] = {}
        """A table's default collation id as the DDL seen here (or ``information_schema``) gave it."""
        self._schema_defaults: dict[str, int | None] = {}
        self._hidden: dict[int, tuple[TableSchema, int, TableSchema]] = {}  # id(ts): with hash columns
        self._plugins_unchecked: set[tuple[str, str]] = set()  # old versions not checked for plugin types
        self._lock = threading.RLock()
        self.current: Key = (0, 0)

    # -- storage --------------------------------------------------------------------------------

    def _record_key(self, schema: str, table: str) -> str:
        return f"schema/{_escape(schema)}.{_escape(table)}"

    def _load(self, schema: str, table: str) -> list[tuple[Key, TableSchema | None, str]]:
        name = (schema, table)
        if name in self._loaded:
            return self._versions.setdefault(name, [])
        self._loaded.add(name)
        versions: list[tuple[Key, TableSchema | None, str]] = []
        if self.meta is not None and self.identity is not None:
            stored = self.meta.get_json(self.identity, self._record_key(schema, table)).value or []
            plugins: dict[str, str] | None = None
            for v in stored:
                ts = None
                if not v.get("dropped"):
                    columns = [column_from_json(c) for c in v["columns"]]
                    if not v.get(_PLUGIN_MARK) and any(_old_plugin_shape(c) for c in columns):
                        if plugins is None:
                            plugins = self._plugin_columns_now(schema, table)
                        columns = [_with_plugin_now(c, plugins) for c in columns]
                    ts = TableSchema(
                        schema,
                        table,
                        tuple(columns),
                        tuple(v.get("pk") or ()),
                        tuple(
                            (str(u[0]), tuple(u[1]), bool(u[2:3] != [False])) for u in v.get("unique") or ()
                        ),
                    )
                    ts = partitions.with_partitioning(ts, partitions.from_json(v.get("partitioning")))
                versions.append(((int(v["at"][0]), int(v["at"][1])), ts, v.get("source", "")))
        self._versions[name] = sorted(versions, key=lambda x: x[0])
        return self._versions[name]

    def _plugin_columns_now(self, schema: str, table: str) -> dict[str, str]:
        """``{column: uuid|inet6|inet4}`` of the table now, for versions recorded before the history
        named MariaDB's plugin types (their UUID/INET6 columns were a text column without collation,
        INET4 an INT); no connection: ``{}``, and the versions stay unmarked (checked at a later load)."""
        if self.connect is None:
            self._plugins_unchecked.add((schema, table))
            return {}
        try:
            rows = self._query(
                "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s",
                (schema, table),
            )
        except pymysql.Error as exc:
            log.warning("plugin types of %s.%s not read: %s", schema, table, exc)
            self._plugins_unchecked.add((schema, table))
            return {}
        return {str(n): str(t).lower() for n, t in rows if str(t).lower() in PLUGIN_TYPES}

    def _save(self, schema: str, table: str) -> None:
        if self.meta is None or self.identity is None:
            return
        versions = self._versions.get((schema, table), [])
        doc = [
            {
                "at": list(key),
                "source": source,
                "dropped": ts is None,
                "columns": [column_to_json(c) for c in ts.columns] if ts else [],
                "pk": list(ts.primary_key) if ts else [],
                "unique": [[k, list(c), made] for k, c, made in ts.unique_keys] if ts else [],
                "partitioning": partitions.to_json(partitions.partitioning_of(ts)),
                **({_PLUGIN_MARK: True} if (schema, table) not in self._plugins_unchecked else {}),
            }
            for key, ts, source in versions
        ]
        for _ in range(5):
            _, version = self.meta.get_json(self.identity, self._record_key(schema, table))
            try:
                self.meta.set_json(self.identity, self._record_key(schema, table), doc, version)
                return
            except MetaConflictError:
                continue

    def versions(self, schema: str, table: str) -> list[tuple[Key, TableSchema | None, str]]:
        """All known versions of a table, oldest first: ``(position key, schema or None, source)``."""
        with self._lock:
            return list(self._load(schema, table))

    def record(self, schema: str, table: str, key: Key, ts: TableSchema | None, source: str) -> bool:
        """Add a version at ``key`` unless one exists there already; return whether it was added."""
        with self._lock:
            versions = self._load(schema, table)
            if any(k == key for k, _, _ in versions):
                return False
            versions.append((key, ts, source))
            versions.sort(key=lambda x: x[0])
            self._save(schema, table)
            return True

    def at(self, schema: str, table: str, key: Key) -> tuple[TableSchema | None, str] | None:
        """The version in effect at ``key`` (``None``: nothing known; ``(None, src)``: dropped)."""
        with self._lock:
            found = None
            for k, ts, source in self._load(schema, table):
                if k <= key:
                    found = (ts, source)
                else:
                    break
            return found

    # -- information_schema ---------------------------------------------------------------------

    def _query(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        if self.connect is None:
            return []
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        finally:
            conn.close()

    def collations(self) -> Collations | None:
        if self._collations is None and self.connect is not None:
            rows = self._query(
                "SELECT COLLATION_NAME, ID, CHARACTER_SET_NAME, IS_DEFAULT = 'Yes' "
                "FROM information_schema.COLLATIONS"
            )
            # MariaDB 10.10+: the full names of the collations listed without a charset (MySQL: no
            # such columns, COLLATIONS has every name)
            with contextlib.suppress(pymysql.err.MySQLError):
                rows += self._query(
                    "SELECT FULL_COLLATION_NAME, ID, CHARACTER_SET_NAME, IS_DEFAULT = 'Yes' "
                    "FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY"
                )
            mode = self._query("SHOW VARIABLES LIKE 'old_mode'")  # MariaDB only
            utf8 = "utf8mb3"
            if mode and "UTF8_IS_UTF8MB3" not in str(mode[0][1]).upper():
                utf8 = "utf8mb4"
            self._collations = Collations(rows, utf8)
        return self._collations

    def _schema_default(self, schema: str) -> int | None:
        """The database's default collation id (the server's when the database is not there now)."""
        if schema not in self._schema_defaults:
            rows = self._query(
                "SELECT DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
                (schema,),
            ) or self._query("SELECT @@collation_server")
            self._schema_defaults[schema] = self._collation_of(rows)
        return self._schema_defaults[schema]

    def _collation_of(self, rows: list[tuple[Any, ...]]) -> int | None:
        """The id of the collation name in the first column of the first row (``None``: none)."""
        coll = self.collations()
        if coll is None or not rows or not rows[0][0]:
            return None
        return coll.resolve(str(rows[0][0]), None)

    def _table_collation_now(self, schema: str, table: str) -> int | None:
        return self._collation_of(
            self._query(
                "SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s",
                (schema, table),
            )
        )

    def _table_default(self, schema: str, table: str) -> int | None:
        """The table's default collation id: as its CREATE here or ``information_schema`` gave it,
        else the table's as it is now, else its database's."""
        name = (schema, table)
        if name not in self._table_defaults:
            found = self._table_collation_now(schema, table)
            self._table_defaults[name] = found if found is not None else self._schema_default(schema)
        return self._table_defaults[name]

    def from_information_schema(
        self, schema: str, table: str, with_partitioning: bool = False
    ) -> TableSchema | None:
        """The table's columns now, or ``None`` when it does not exist (or no connection).

        :param with_partitioning: also read its partitioning (:mod:`.partitions`; only where "now"
            is the position the version is recorded at: the bootstrap). Without it, the version does
            not know its partitioning.
        """
        if self.connect is None:
            return None
        rows = self._query(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COLLATION_NAME, IS_NULLABLE, COLUMN_KEY, "
            "NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_OCTET_LENGTH "
            "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "ORDER BY ORDINAL_POSITION",
            (schema, table),
        )
        if not rows:
            return None
        coll = self.collations()
        cols = []
        for name, data_type, column_type, collation, nullable, _key, prec, scale, fsp, octets in rows:
            data_type = str(data_type).lower()
            column_type = str(column_type).lower()
            ctype = TYPE_NAMES.get(data_type, T.STRING)
            cid = coll.resolve(str(collation), None) if (coll and collation) else None
            if cid is None and data_type in (
                "binary",
                "varbinary",
                "tinyblob",
                "blob",
                "mediumblob",
                "longblob",
            ):
                cid = 63
            labels = _labels(str(column_type)) if ctype in (T.ENUM, T.SET) else None
            plugin = _plugin(data_type)
            cols.append(
                ColumnDef(
                    name=str(name),
                    type=ctype,
                    unsigned="unsigned" in column_type,
                    collation=plugin.get("collation", cid),
                    charset=coll.codec(plugin.get("collation", cid)) if coll is not None else None,
                    enum_values=labels if ctype == T.ENUM else None,
                    set_values=labels if ctype == T.SET else None,
                    nullable=str(nullable).upper() == "YES",
                    max_length=plugin.get("max_length", int(octets) if octets is not None else None),
                    plugin_type=plugin.get("plugin_type"),
                    zerofill="zerofill" in column_type,
                    **type_details(
                        ctype,
                        int(prec) if prec is not None else None,
                        int(scale) if scale is not None else None,
                        int(fsp) if fsp is not None else None,
                    ),
                )
            )
        # unique keys in the server's key order (the order STATISTICS lists them in)
        key_rows = self._query(
            "SELECT INDEX_NAME, COLUMN_NAME, SEQ_IN_INDEX, SUB_PART, INDEX_TYPE FROM "
            "information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0",
            (schema, table),
        )
        table_default = self._table_collation_now(schema, table)
        if table_default is not None:
            self._table_defaults[(schema, table)] = table_default
        ts = _keyed(schema, table, cols, _unique_rows(key_rows, rows))
        if with_partitioning:
            ts = partitions.with_partitioning(ts, self.partitioning_from_information_schema(schema, table))
        return ts

    def partitioning_from_information_schema(self, schema: str, table: str) -> partitions.Partitioning | None:
        """The table's partitioning now (``None``: not read; see
        :func:`.partitions.from_information_schema_rows`)."""
        try:
            rows = self._query(
                "SELECT PARTITION_NAME, PARTITION_METHOD, SUBPARTITION_METHOD, PARTITION_EXPRESSION, "
                "PARTITION_DESCRIPTION FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = %s AND "
                "TABLE_NAME = %s ORDER BY PARTITION_ORDINAL_POSITION, SUBPARTITION_ORDINAL_POSITION",
                (schema, table),
            )
            return partitions.from_information_schema_rows(rows)
        except Exception as exc:  # the partitioning is an optimisation: unknown means re-snapshot
            log.warning("partitions of %s.%s not read from information_schema: %s", schema, table, exc)
            return None

    def bootstrap(self, tables: Iterable[tuple[str, str]], position: BinlogPosition) -> int:
        """Snapshot ``tables`` from ``information_schema`` as of ``position`` (the head now).

        Tables that already have a version are left alone. Returns the number recorded.
        """
        n = 0
        for schema, table in tables:
            if self.versions(schema, table):
                continue
            ts = self.from_information_schema(schema, table, with_partitioning=True)
            if ts is not None and self.record(schema, table, position_key(position), ts, "bootstrap"):
                n += 1
        return n

    def list_tables(self, matches: Callable[[str, str], bool]) -> list[tuple[str, str]]:
        """Base tables on the server for which ``matches(schema, table)`` is true."""
        rows = self._query(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
            "AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')"
        )
        return [(str(s), str(t)) for s, t in rows if matches(str(s), str(t))]

    # -- DDL ------------------------------------------------------------------------------------

    def apply_ddl(
        self, stmt: DdlStatement, position: BinlogPosition
    ) -> dict[tuple[str, str], TableSchema | None]:
        """Apply a parsed DDL at ``position``; return the tables' schemas after it.

        Idempotent per position: a version already recorded there is returned unchanged.
        """
        key = position_key(position)
        out: dict[tuple[str, str], TableSchema | None] = {}
        with self._lock:
            if stmt.kind == "create":
                for schema, table in stmt.tables:
                    seen, ts = self._existing(schema, table, key)
                    if not seen:
                        ts = self._created(stmt, schema, table, key)
                        self.record(schema, table, key, ts, "ddl" if ts else "information_schema")
                    out[(schema, table)] = ts
            elif stmt.kind == "alter":
                for schema, table in stmt.tables:
                    seen, ts = self._existing(schema, table, key)
                    if not seen:
                        prev = self.at(schema, table, (key[0], key[1] - 1))
                        base = prev[0] if prev else None
                        ts = self._altered(base, stmt) if (base is not None and stmt.complete) else None
                        if ts is not None:
                            before = partitions.partitioning_of(base)
                            after = partitions.after_alter(before, stmt.ops, stmt.partitioning_unread)
                            ts = partitions.with_partitioning(ts, after)
                        if ts is None:
                            ts = self.from_information_schema(schema, table)
                            self.record(schema, table, key, ts, "information_schema")
                        else:
                            self.record(schema, table, key, ts, "ddl")
                    out[(schema, table)] = ts
            elif stmt.kind == "drop":
                for schema, table in stmt.tables:
                    self.record(schema, table, key, None, "ddl")
                    out[(schema, table)] = None
            for (s1, t1), (s2, t2) in stmt.renames:
                if stmt.kind == "alter" and (s1, t1) in out:
                    base = out[(s1, t1)]
                else:
                    prev = self.at(s1, t1, key)
                    base = prev[0] if prev else None
                moved = replace(base, schema=s2, table=t2) if base is not None else None
                # the old name stops existing at this statement (replacing an ALTER's own version)
                versions = self._load(s1, t1)
                versions[:] = sorted([v for v in versions if v[0] != key] + [(key, None, "ddl")])
                self._save(s1, t1)
                out.pop((s1, t1), None)
                self.record(s2, t2, key, moved, "ddl")
                out[(s2, t2)] = moved
        return out

    def _existing(self, schema: str, table: str, key: Key) -> tuple[bool, TableSchema | None]:
        for k, ts, _ in self._load(schema, table):
            if k == key:
                return True, ts
        return False, None

    def _created(self, stmt: DdlStatement, schema: str, table: str, key: Key) -> TableSchema | None:
        if stmt.like is not None:
            prev = self.at(stmt.like[0], stmt.like[1], key)
            if not prev or prev[0] is None:
                return None
            like = prev[0]  # the copy's keys are made anew: on its columns' NULL-ness now
            keys: list[UniqueKey] = [(k, kc, None) for k, kc, _ in like.unique_keys]
            if not keys and like.primary_key:
                keys = [("PRIMARY", like.primary_key, True)]
            return _keyed(schema, table, like.columns, keys)
        if not stmt.complete or not stmt.columns:
            return self.from_information_schema(schema, table)
        coll = self.collations()
        default = None
        if coll is not None:
            if stmt.default_collation or stmt.default_charset:
                default = coll.resolve(stmt.default_collation, stmt.default_charset)
            else:
                default = self._schema_default(schema)
        self._table_defaults[(schema, table)] = default
        cols = [spec_to_column(c, coll, default) for c in stmt.columns]
        keys = []
        try:
            if stmt.primary_key:
                pk = _canonical(cols, stmt.primary_key)
                keys.append(("PRIMARY", pk, True))
                cols = [replace(c, nullable=False) if c.name in pk else c for c in cols]
            taken = {"primary"}
            for unique in stmt.unique_keys:
                _add_unique(cols, keys, unique, taken)
        except KeyError as exc:
            log.warning(
                "CREATE TABLE %s.%s: key on unknown column %s; using information_schema", schema, table, exc
            )
            return self.from_information_schema(schema, table)
        return partitions.with_partitioning(_keyed(schema, table, cols, keys), stmt.partitioning)

    def _altered(self, base: TableSchema, stmt: DdlStatement) -> TableSchema | None:
        cols = list(base.columns)
        keys: list[UniqueKey] = list(base.unique_keys)
        if not keys and base.primary_key:
            keys = [("PRIMARY", base.primary_key, True)]
        taken = {"primary"} | {k[0].lower() for k in keys}
        coll = self.collations()
        cs = self._table_default(base.schema, base.table) if coll is not None else None

        def index(name: str) -> int:
            for i, c in enumerate(cols):
                if c.name.lower() == name.lower():
                    return i
            raise KeyError(name)

        def place(col: ColumnDef, first: bool, after: str | None) -> None:
            if first:
                cols.insert(0, col)
            elif after is not None:
                cols.insert(index(after) + 1, col)
            else:
                cols.append(col)

        def rename(old: str, new: str) -> None:
            keys[:] = [(k, tuple(new if c.lower() == old.lower() else c for c in kc), f) for k, kc, f in keys]

        try:
            for op in stmt.ops:
                if op.if_exists and op.op in ("add", "drop", "modify", "change"):
                    there = any(c.name.lower() == op.name.lower() for c in cols)
                    if there == (op.op == "add"):
                        continue  # IF [NOT] EXISTS: the server did nothing for this clause
                if op.op == "add" and op.spec is not None:
                    place(spec_to_column(op.spec, coll, cs), op.first, op.after)
                elif op.op == "drop":
                    gone = cols.pop(index(op.name)).name
                    cut = ((k, tuple(c for c in kc if c != gone), f) for k, kc, f in keys)
                    keys[:] = [key for key in cut if key[1]]
                elif op.op in ("modify", "change") and op.spec is not None:
                    i = index(op.name)
                    old = cols.pop(i)
                    new = spec_to_column(op.spec, coll, cs)
                    if op.first or op.after is not None:
                        place(new, op.first, op.after)
                    else:
                        cols.insert(i, new)
                    if old.name != new.name:  # CHANGE, or MODIFY spelling the name in another case
                        rename(old.name, new.name)
                elif op.op == "rename_column":
                    i = index(op.name)
                    rename(cols[i].name, op.new_name)
                    cols[i] = replace(cols[i], name=op.new_name)
                elif op.op == "add_pk":
                    pk = _canonical(cols, op.columns)
                    keys[:] = [("PRIMARY", pk, True)] + [k for k in keys if k[0].upper() != "PRIMARY"]
                    cols = [replace(c, nullable=False) if c.name in pk else c for c in cols]
                elif op.op == "drop_pk":
                    keys[:] = [k for k in keys if k[0].upper() != "PRIMARY"]
                elif op.op == "add_unique" and op.key is not None:
                    _add_unique(cols, keys, op.key, taken)
                elif op.op == "drop_index":
                    keys[:] = [k for k in keys if k[0].lower() != op.name.lower()]
                    taken.discard(op.name.lower())
                elif op.op == "rename_index":
                    keys[:] = [
                        (op.new_name if k.lower() == op.name.lower() else k, kc, f) for k, kc, f in keys
                    ]
                    taken.add(op.new_name.lower())
                elif op.op in ("table_charset", "convert_charset") and coll is not None:
                    cs = coll.resolve(op.new_name or None, op.name or coll.charset_name(cs)) or cs
                    self._table_defaults[(base.schema, base.table)] = cs
                    if op.op == "convert_charset":  # every character column takes the new charset
                        cols = [
                            replace(c, collation=cs, charset=coll.codec(cs))
                            if c.collation is not None and c.collation != 63
                            else c
                            for c in cols
                        ]
        except KeyError as exc:
            log.warning(
                "DDL on %s.%s names unknown column %s; using information_schema", base.schema, base.table, exc
            )
            return None
        if any(op.op in _KEY_CHANGES for op in stmt.ops):  # the keys are made anew
            keys[:] = [(k, kc, None) for k, kc, _ in keys]
        return _keyed(base.schema, base.table, cols, keys)

    # -- the parser hook ------------------------------------------------------------------------

    def resolve(self, table_map: Any, key: Key | None = None) -> TableSchema | None:
        """``DecodeContext.schema_resolver``: the version in effect at ``key`` (default
        :attr:`current`).

        Falls back to ``information_schema`` (recorded at that position) when the table has no
        version yet.
        """
        schema, table = table_map.schema, table_map.table
        key = key if key is not None else self.current
        found = self.at(schema, table, key)
        if found is not None and found[0] is not None:
            return self._with_hidden(table_map, found[0])
        ts = self.from_information_schema(schema, table)
        if ts is not None:
            self.record(schema, table, key, ts, "information_schema")
            ts = self._with_hidden(table_map, ts)
        return ts

    def _with_hidden(self, table_map: Any, ts: TableSchema) -> TableSchema:
        """``ts`` with MariaDB's hidden hash columns when ``table_map`` has that many more trailing
        BIGINTs and the server has that many HASH unique keys on the table
        (:mod:`.hidden_columns`); else ``ts`` (a count mismatch then stops decoding)."""
        extra = hidden_columns.trailing_extra(table_map, ts)
        if not extra:
            return ts
        memo = self._hidden.get(id(ts))
        if memo is not None and memo[0] is ts and memo[1] == extra:
            return memo[2]
        try:
            keys = hidden_columns.hash_key_count(self._query, table_map.schema, table_map.table)
        except pymysql.Error as exc:
            log.warning("hash keys of %s.%s not read: %s", table_map.schema, table_map.table, exc)
            keys = 0
        out = hidden_columns.with_hash_columns(ts, extra) if keys == extra else ts
        if len(self._hidden) >= 1024:
            self._hidden.clear()
        self._hidden[id(ts)] = (ts, extra, out)
        return out

    def set_position(self, file: str, pos: int) -> None:
        """Tell the history where the parser is (the instance calls it before each event)."""
        self.current = (file_number(file), pos)
