"""The Spark SQL text the merge runs, as pure functions (no Spark): table DDL, the ``MERGE INTO`` of a
folded piece, the append of an append-only target, and the TRUNCATE of a target.

Every identifier goes through :func:`..sql.quote` (column and view names) or is a table name already
quoted by :func:`..sql.quote_parts` (the ``table`` argument of every function here); values are
SQL string literals (:func:`sql_string`). In a ``MERGE``, ``t`` is the target and ``s`` the staged
view, whose ``_cdc_action`` column says what each staged row is: ``U`` (upsert: the row's columns
are its after image) or ``D`` (delete: only its key columns are set).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence

from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.options import (
    ACTION_COLUMN,
    DELETED_COLUMN,
    OP_COLUMN,
    POSITION_COLUMN,
    TS_COLUMN,
)
from airflow_provider_binlog.lake.sql import parse_name, quote, quote_parts
from airflow_provider_binlog.lake.types import LakeColumn

_META = (OP_COLUMN, TS_COLUMN, POSITION_COLUMN)


def sql_string(value: str) -> str:
    """A Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def column_list(names: Sequence[str], alias: str = "") -> str:
    """``names`` quoted and comma-separated, each after ``alias.`` when an alias is given."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + quote(n) for n in names)


# ---- table DDL -----------------------------------------------------------------------------------


def _partition_column(text: str, spec: str) -> str:
    parts = parse_name(text.strip())
    if len(parts) != 1:
        raise LakeError(f"invalid partition field {spec!r}: put a column name holding dots in backticks")
    return quote(parts[0])


def partition_field(spec: str) -> str:
    """Turn ``col``, ``days(col)`` or ``bucket(16, col)`` into SQL with the column quoted."""
    spec = spec.strip()
    if spec.endswith(")") and "(" in spec:
        fn, _, inner = spec[:-1].partition("(")
        args = [a.strip() for a in inner.rsplit(",", 1)]
        if not fn.strip().isidentifier():
            raise LakeError(f"invalid partition transform {spec!r}")
        column = _partition_column(args[-1], spec)
        if len(args) == 2:
            if not args[0].isdigit():
                raise LakeError(f"invalid partition transform {spec!r}")
            return f"{fn.strip()}({args[0]}, {column})"
        return f"{fn.strip()}({column})"
    return _partition_column(spec, spec)


def create_namespace_sql(parts: Sequence[str]) -> str | None:
    """``CREATE NAMESPACE IF NOT EXISTS`` of the table ``parts`` (``None``: a one-part name has none)."""
    if len(parts) < 2:
        return None
    return f"CREATE NAMESPACE IF NOT EXISTS {quote_parts(parts[:-1])}"


def create_table_sql(
    table: str,
    columns: Sequence[LakeColumn],
    partition_by: Sequence[str] = (),
    properties: Mapping[str, str] | None = None,
) -> str:
    """``CREATE TABLE IF NOT EXISTS`` an Iceberg table.

    :param partition_by: partition fields (see :func:`partition_field`).
    :param properties: table properties (keys and values become string literals).
    """
    cols = ", ".join(f"{quote(c.name)} {c.type.sql}" for c in columns)
    partition = ""
    if partition_by:
        partition = " PARTITIONED BY (" + ", ".join(partition_field(p) for p in partition_by) + ")"
    props = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in (properties or {}).items())
    return f"CREATE TABLE IF NOT EXISTS {table} ({cols}) USING iceberg{partition} TBLPROPERTIES ({props})"


def add_column_sql(table: str, column: LakeColumn) -> str:
    """``ALTER TABLE ... ADD COLUMN`` (a new source column)."""
    return f"ALTER TABLE {table} ADD COLUMN {quote(column.name)} {column.type.sql}"


def alter_column_type_sql(table: str, column: LakeColumn) -> str:
    """``ALTER TABLE ... ALTER COLUMN ... TYPE`` (an allowed widening)."""
    return f"ALTER TABLE {table} ALTER COLUMN {quote(column.name)} TYPE {column.type.sql}"


# ---- the merge of a piece ------------------------------------------------------------------------


def key_condition(
    keys: Sequence[str], null_safe: bool, key_ranges: Mapping[str, tuple[int, int]] | None = None
) -> str:
    """The ``ON`` condition matching staged rows to table rows by ``keys``.

    :param null_safe: compare with ``<=>`` (configured key columns may be NULL), else ``=`` (a
        primary key is never NULL, and ``=`` lets Spark plan a plain equi-join).
    :param key_ranges: integer key column -> ``(lowest, highest)`` of the staged rows (none of them
        NULL there): the condition also bounds the table's side to that range, which matches exactly
        the same rows (a table row outside it equals no staged key) but lets Iceberg skip every data
        file whose column bounds lie outside it (new keys above the table's: no file is read).
    """
    op = "<=>" if null_safe else "="
    parts = [f"t.{quote(k)} {op} s.{quote(k)}" for k in keys]
    for k, (lo, hi) in (key_ranges or {}).items():
        parts.append(f"t.{quote(k)} >= {int(lo)} AND t.{quote(k)} <= {int(hi)}")
    return " AND ".join(parts)


def matched_actions_sql(table: str, view: str, keys: Sequence[str], null_safe: bool) -> str:
    """Count the staged rows per action whose key the table holds (``count_changes``): rows
    ``(action, count)``; upserts not matched are inserts."""
    action = f"s.{quote(ACTION_COLUMN)}"
    return (
        f"SELECT {action}, count(*) FROM {quote(view)} s LEFT SEMI JOIN "
        f"(SELECT {column_list(keys)} FROM {table}) t ON {key_condition(keys, null_safe)} "
        f"GROUP BY {action}"
    )


def merge_sql(
    table: str,
    view: str,
    names: Sequence[str],
    keys: Sequence[str],
    *,
    null_safe: bool = False,
    deletes: bool = True,
    upserts: bool = True,
    soft_delete: bool = False,
    with_meta: bool = False,
    key_ranges: Mapping[str, tuple[int, int]] | None = None,
) -> str:
    """The ``MERGE INTO`` applying a staged piece: deletes (or soft deletes) of the keys staged as
    ``D``, updates and inserts of the rows staged as ``U``.

    A key change was folded into a delete of the old key and an upsert of the new one (see
    :mod:`.collapse`), so it needs no clause of its own.

    :param names: the source columns (staged and in the table), keys among them.
    :param null_safe: as for :func:`key_condition`.
    :param deletes: the piece stages deletes (else no delete clause).
    :param upserts: the piece stages upserts (else no update or insert clause).
    :param soft_delete: a delete sets ``_cdc_deleted = true`` (an upsert sets it ``false``).
    :param with_meta: the view and table have ``_cdc_op``, ``_cdc_ts`` and ``_cdc_position``,
        set from the view by every clause.
    :param key_ranges: as for :func:`key_condition`.
    """
    if not (deletes or upserts):
        raise ValueError("a MERGE needs deletes or upserts")
    action = f"s.{quote(ACTION_COLUMN)}"
    deleted = quote(DELETED_COLUMN)
    meta_set = [f"t.{quote(c)} = s.{quote(c)}" for c in _META] if with_meta else []
    clauses = []
    if deletes:
        if soft_delete:
            sets = ", ".join([f"t.{deleted} = true", *meta_set])
            clauses.append(f"WHEN MATCHED AND {action} = 'D' THEN UPDATE SET {sets}")
        else:
            clauses.append(f"WHEN MATCHED AND {action} = 'D' THEN DELETE")
    if upserts:
        assign = [f"t.{quote(n)} = s.{quote(n)}" for n in names] + meta_set
        insert_cols = [quote(n) for n in names]
        insert_vals = [f"s.{quote(n)}" for n in names]
        if with_meta:
            insert_cols += [quote(c) for c in _META]
            insert_vals += [f"s.{quote(c)}" for c in _META]
        if soft_delete:
            assign.append(f"t.{deleted} = false")
            insert_cols.append(deleted)
            insert_vals.append("false")
        clauses.append(f"WHEN MATCHED AND {action} = 'U' THEN UPDATE SET {', '.join(assign)}")
        clauses.append(
            f"WHEN NOT MATCHED AND {action} = 'U' THEN INSERT ({', '.join(insert_cols)}) "
            f"VALUES ({', '.join(insert_vals)})"
        )
    on = key_condition(keys, null_safe, key_ranges)
    return f"MERGE INTO {table} t USING {quote(view)} s ON {on} " + " ".join(clauses)


def new_keys_sql(
    view: str, names: Sequence[str], *, soft_delete: bool = False, with_meta: bool = False
) -> tuple[str, list[str]]:
    """``(query, columns)``: the rows the ``MERGE`` of :func:`merge_sql` inserts when the table holds
    none of the staged keys (every upsert, with the values of its ``INSERT`` clause, each column
    named as the table's; see :mod:`.new_keys`), and the table columns they fill."""
    columns = [*names, *(_META if with_meta else ()), *((DELETED_COLUMN,) if soft_delete else ())]
    values = [f"s.{quote(n)}" for n in names]
    values += [f"s.{quote(c)}" for c in _META] if with_meta else []
    values += ["false"] if soft_delete else []
    select = ", ".join(f"{v} AS {quote(c)}" for v, c in zip(values, columns, strict=True))
    action = f"s.{quote(ACTION_COLUMN)}"
    return f"SELECT {select} FROM {quote(view)} s WHERE {action} = 'U'", columns


def key_range_predicate(key_ranges: Mapping[str, tuple[int, int]]) -> str:
    """Every ranged key column within its range, on the table's columns (no alias)."""
    return " AND ".join(
        f"{quote(k)} >= {int(lo)} AND {quote(k)} <= {int(hi)}" for k, (lo, hi) in key_ranges.items()
    )


# ---- append-only and TRUNCATE --------------------------------------------------------------------


def append_sql(table: str, view: str, names: Sequence[str]) -> str:
    """Insert every row of the staged view (columns ``names``, in the view and the table)."""
    cols = column_list(names)
    return f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {quote(view)}"


def truncate_sql(
    table: str,
    soft_delete: bool,
    meta: tuple[datetime.datetime, str] | None = None,
    where: str | None = None,
) -> tuple[str, str]:
    """``(count query, statement)`` of a TRUNCATE: the query counts the rows it removes (one row, one
    column); the statement deletes every row or, with ``soft_delete``, marks the live ones deleted.

    :param meta: with ``soft_delete`` and metadata columns, the TRUNCATE's commit time (UTC) and
        position, written into the rows it marks (``_cdc_op = 'truncate'``).
    :param where: only the rows matching this predicate (one shard's, see :mod:`.shards`).
    """
    if not soft_delete:
        scoped = f" WHERE {where}" if where else ""
        return f"SELECT count(*) FROM {table}{scoped}", f"DELETE FROM {table}{scoped}"
    deleted = quote(DELETED_COLUMN)
    live = f"{deleted} IS DISTINCT FROM true" + (f" AND ({where})" if where else "")
    sets = [f"{deleted} = true"]
    if meta is not None:
        ts, position = meta
        stamp = ts.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S") + "+00:00"
        sets += [
            f"{quote(OP_COLUMN)} = 'truncate'",
            f"{quote(TS_COLUMN)} = TIMESTAMP {sql_string(stamp)}",
            f"{quote(POSITION_COLUMN)} = {sql_string(position)}",
        ]
    return f"SELECT count(*) FROM {table} WHERE {live}", f"UPDATE {table} SET {', '.join(sets)} WHERE {live}"
