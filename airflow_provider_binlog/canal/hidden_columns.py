"""MariaDB's hidden long-unique hash columns (``DB_ROW_HASH_n``).

A ``UNIQUE`` key MariaDB (10.4+) cannot build as a B-tree (a whole ``TEXT``/``BLOB`` column, a key
longer than the engine allows, or ``USING HASH``) is enforced with a hidden ``BIGINT`` column per
such key, named ``DB_ROW_HASH_1``, ``DB_ROW_HASH_2``, ... and kept after the table's own columns.
Row images and TABLE_MAPs carry it (with ``binlog_row_metadata=FULL`` under that name);
``information_schema``, ``SHOW CREATE TABLE``, ``SELECT *`` and the DDL do not show it. So:

* the rows a table's changes carry leave it out (:func:`hidden_names`, :func:`visible_schema`):
  the lake holds the table's own columns, as the snapshot's ``SELECT`` does;
* with MINIMAL metadata the schema history (which has the table's own columns only) is extended by
  as many trailing ``BIGINT`` columns as the TABLE_MAP has more, when the server lists that many
  ``HASH`` unique keys for the table (:func:`hash_key_count`, :func:`with_hash_columns`); otherwise
  the count mismatch stops decoding, as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType

HASH_PREFIX = "DB_ROW_HASH_"
_HASH_NAME = re.compile(r"DB_ROW_HASH_[0-9]+\Z")

_VISIBLE: dict[int, tuple[TableSchema, TableSchema]] = {}


def hidden_names(ts: TableSchema) -> frozenset[str]:
    """The names of ``ts``'s trailing hidden hash columns (``BIGINT`` named ``DB_ROW_HASH_n``)."""
    names = []
    for col in reversed(ts.columns):
        if col.type != ColumnType.LONGLONG or not _HASH_NAME.match(col.name):
            break
        names.append(col.name)
    return frozenset(names)


def visible_schema(ts: TableSchema) -> TableSchema:
    """``ts`` without its hidden hash columns (``ts`` itself when it has none); cached per object."""
    known = _VISIBLE.get(id(ts))
    if known is not None and known[0] is ts:
        return known[1]
    hidden = hidden_names(ts)
    out = ts if not hidden else replace(ts, columns=tuple(c for c in ts.columns if c.name not in hidden))
    if len(_VISIBLE) >= 4096:
        _VISIBLE.clear()
    _VISIBLE[id(ts)] = (ts, out)
    return out


def trailing_extra(table_map: Any, ts: TableSchema) -> int:
    """How many more columns ``table_map`` has than ``ts``, when all of those are ``BIGINT`` (the
    shape of hidden hash columns) and ``ts`` has none of its own; else 0."""
    extra = table_map.column_count - len(ts.columns)
    if extra <= 0 or hidden_names(ts):
        return 0
    tail = table_map.table_schema.columns[-extra:]
    return extra if all(c.type == ColumnType.LONGLONG for c in tail) else 0


def with_hash_columns(ts: TableSchema, extra: int) -> TableSchema:
    """``ts`` followed by ``extra`` hidden hash columns, named as the server names them."""
    hashes = tuple(
        ColumnDef(name=f"{HASH_PREFIX}{i}", type=ColumnType.LONGLONG, unsigned=True)
        for i in range(1, extra + 1)
    )
    return replace(ts, columns=(*ts.columns, *hashes))


def hash_key_count(query: Callable[..., list[tuple[Any, ...]]], schema: str, table: str) -> int:
    """The number of unique keys the server enforces with a hidden hash column on ``schema.table``
    now (``INDEX_TYPE`` ``HASH``; a MEMORY table's hash indexes have none)."""
    rows = query(
        "SELECT COUNT(DISTINCT s.INDEX_NAME) FROM information_schema.STATISTICS s JOIN "
        "information_schema.TABLES t ON t.TABLE_SCHEMA = s.TABLE_SCHEMA AND t.TABLE_NAME = s.TABLE_NAME "
        "WHERE s.TABLE_SCHEMA = %s AND s.TABLE_NAME = %s AND s.NON_UNIQUE = 0 AND s.INDEX_TYPE = 'HASH' "
        "AND t.ENGINE NOT IN ('MEMORY', 'HEAP')",
        (schema, table),
    )
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0
