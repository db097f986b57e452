"""A table's partitioning as the schema history keeps it, and the rows a partition holds.

Why: ``ALTER TABLE t TRUNCATE PARTITION p`` and ``DROP PARTITION p`` remove rows without row
events. When the history knows ``t``'s partitioning at that point, and the partitions are ranges or
lists of plain columns, the lake can delete exactly those rows (:class:`DeleteRows`, run by
:mod:`airflow_provider_binlog.lake.ddl.actions`) instead of loading the table again.

What is kept (:class:`Partitioning`): the method (``RANGE``, ``RANGE COLUMNS``, ``LIST``,
``LIST COLUMNS``, ``HASH``, ``KEY``, ``LINEAR ...``, MariaDB's ``SYSTEM_TIME``), the expression as
written, the plain columns it names (none when it is an expression), each partition's name and
bounds as literals (``VALUES LESS THAN (...)`` / ``MAXVALUE``, ``VALUES IN (...)``), and whether
it is subpartitioned. Its sources: ``information_schema.PARTITIONS`` at the history's bootstrap
(:func:`from_information_schema_rows`) and the DDL in the stream (``CREATE TABLE ... PARTITION
BY``, ``ALTER TABLE ... PARTITION BY / ADD / DROP / REORGANIZE / COALESCE / REMOVE PARTITIONING``:
:func:`parse_partition_by`, :func:`parse_alter_partition`, :func:`after_alter`).

A history version knows its partitioning when it is a :class:`PartitionedTableSchema` (a
:class:`~airflow_provider_binlog.binlog.columns.TableSchema` with the field ``partitioning``;
:data:`NOT_PARTITIONED` when known to have none). A plain ``TableSchema`` means "not known": from a
re-read of ``information_schema`` at a point other than the bootstrap (it shows today's
partitioning, not the one at that position), a statement not followed completely, a record stored
before partitioning was kept. Then a partition operation re-snapshots, as before.

MySQL's rules followed by :func:`partition_rows`:

* RANGE: partition ``i`` holds ``bound[i-1] <= expr < bound[i]`` (columns compared as tuples,
  ``MAXVALUE`` above every value); NULL sorts below every value, so it falls in the first range.
* LIST: a partition holds the values (tuples) it lists; NULL only where NULL is listed.

Only integer, DATE and DATETIME columns are compared here (strings compare by collation in MySQL,
TIMESTAMP by the session's time zone): anything else is "not exact".
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.canal.sql.tokens import Tok, TokenCursor, tokenize

Literal = tuple[str, str]
"""A bound as written: ``("num", "-5")``, ``("str", "2024-01-01")``, ``("null", "")``, ``("max", "")``
or ``("expr", text)`` (a function or anything not a plain literal: never compared here)."""


@dataclass(frozen=True)
class PartitionDef:
    """One partition.

    :param name: its name.
    :param less_than: RANGE: the ``VALUES LESS THAN`` literals (one per column), else ``None``.
    :param values_in: LIST: the listed values, each a tuple of literals (one per column), else ``None``.
    """

    name: str
    less_than: tuple[Literal, ...] | None = None
    values_in: tuple[tuple[Literal, ...], ...] | None = None


@dataclass(frozen=True)
class Partitioning:
    """How a table is partitioned (see the module docstring); ``method == ""``: not partitioned.

    :param method: upper case, e.g. ``RANGE COLUMNS``, ``LINEAR HASH``.
    :param expression: the expression or column list as written (for messages).
    :param columns: the plain columns partitioned by (``()`` when the expression is not one column).
    :param partitions: the partitions in order (RANGE: ascending bounds).
    :param subpartitioned: ``SUBPARTITION BY`` given.
    """

    method: str
    expression: str = ""
    columns: tuple[str, ...] = ()
    partitions: tuple[PartitionDef, ...] = ()
    subpartitioned: bool = False

    def find(self, name: str) -> int | None:
        """The index of the partition ``name`` (case-insensitive), ``None`` when absent."""
        low = name.lower()
        return next((i for i, d in enumerate(self.partitions) if d.name.lower() == low), None)


NOT_PARTITIONED = Partitioning("")


@dataclass(frozen=True)
class PartitionClause:
    """One ALTER TABLE partition clause as read.

    :param verb: ``add``, ``drop``, ``truncate``, ``exchange``, ``reorganize``, ``coalesce``,
        ``maintain`` (analyze, check, optimize, rebuild, repair), ``remove`` (REMOVE PARTITIONING),
        ``by`` (PARTITION BY), ``discard``, ``import``, ``convert``.
    :param partitions: the partitions it names.
    :param all_partitions: ``... PARTITION ALL``.
    :param definitions: ADD PARTITION / REORGANIZE ... INTO: the new partitions, when read.
    :param partitioning: PARTITION BY: the new partitioning (``None``: not read).
    :param other: EXCHANGE PARTITION ... WITH TABLE: that table.
    :param read: the clause was read completely.
    """

    verb: str
    partitions: tuple[str, ...] = ()
    all_partitions: bool = False
    definitions: tuple[PartitionDef, ...] | None = None
    partitioning: Partitioning | None = None
    other: tuple[str, str] | None = None
    read: bool = False


class Clause(Protocol):
    """An ALTER TABLE clause as :mod:`.ddl` reads it (``AlterOp``): what :func:`after_alter` needs."""

    @property
    def op(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def part(self) -> PartitionClause | None: ...


@dataclass(frozen=True, slots=True)
class PartitionedTableSchema(TableSchema):
    """A table schema whose partitioning is known (:data:`NOT_PARTITIONED`: it has none)."""

    partitioning: Partitioning = NOT_PARTITIONED


def partitioning_of(ts: TableSchema | None) -> Partitioning | None:
    """The partitioning a history version knows, ``None`` when not known."""
    return ts.partitioning if isinstance(ts, PartitionedTableSchema) else None


def with_partitioning(ts: TableSchema, partitioning: Partitioning | None) -> TableSchema:
    """``ts`` knowing ``partitioning`` (``None``: a plain ``TableSchema``, partitioning not known)."""
    if partitioning is None:
        return TableSchema(ts.schema, ts.table, ts.columns, ts.primary_key, ts.unique_keys)
    return PartitionedTableSchema(
        ts.schema, ts.table, ts.columns, ts.primary_key, ts.unique_keys, partitioning=partitioning
    )


# ---- JSON (the schema history's records) ----------------------------------------------------------


def to_json(p: Partitioning | None) -> dict[str, Any] | None:
    """The record's ``partitioning`` field (``None``: not known)."""
    if p is None:
        return None
    return {
        "method": p.method,
        "expression": p.expression,
        "columns": list(p.columns),
        "sub": p.subpartitioned,
        "partitions": [
            {
                "name": d.name,
                "less_than": [list(x) for x in d.less_than] if d.less_than is not None else None,
                "values_in": [[list(x) for x in v] for v in d.values_in] if d.values_in is not None else None,
            }
            for d in p.partitions
        ],
    }


def from_json(d: dict[str, Any] | None) -> Partitioning | None:
    """A record's ``partitioning`` field back (absent or ``None``: not known)."""
    if not d:
        return None

    def lit(x: Sequence[str]) -> Literal:
        return (str(x[0]), str(x[1]))

    parts = tuple(
        PartitionDef(
            str(e["name"]),
            tuple(lit(x) for x in e["less_than"]) if e.get("less_than") is not None else None,
            tuple(tuple(lit(x) for x in v) for v in e["values_in"])
            if e.get("values_in") is not None
            else None,
        )
        for e in d.get("partitions") or ()
    )
    return Partitioning(
        str(d.get("method") or ""),
        str(d.get("expression") or ""),
        tuple(d.get("columns") or ()),
        parts,
        bool(d.get("sub")),
    )


# ---- parsing (DDL clauses and information_schema) -------------------------------------------------


def _is_p(t: Tok | None, ch: str) -> bool:
    return t is not None and t.kind == "p" and t.text == ch


def _group(p: TokenCursor) -> list[Tok]:
    """The tokens inside a balanced ``( ... )`` at the cursor (consumed); ``[]`` when none."""
    if not p.eat_p("("):
        return []
    depth, out = 1, []
    while p.peek() is not None:
        t = p.t[p.i]
        p.i += 1
        if _is_p(t, "("):
            depth += 1
        elif _is_p(t, ")"):
            depth -= 1
            if depth == 0:
                break
        out.append(t)
    return out


def _split(toks: Sequence[Tok]) -> list[list[Tok]]:
    """Split tokens at top-level commas."""
    items: list[list[Tok]] = [[]]
    depth = 0
    for t in toks:
        if _is_p(t, "("):
            depth += 1
        elif _is_p(t, ")"):
            depth -= 1
        if depth == 0 and _is_p(t, ","):
            items.append([])
        else:
            items[-1].append(t)
    return [i for i in items if i] if any(items) else []


def _text(toks: Sequence[Tok]) -> str:
    return " ".join(
        f"`{t.text}`" if t.kind == "qid" else repr(t.text) if t.kind == "str" else t.text for t in toks
    )


def _literal(toks: Sequence[Tok]) -> Literal:
    if len(toks) == 1:
        t = toks[0]
        if t.kind == "num":
            return ("num", t.text)
        if t.kind == "str":
            return ("str", t.text)
        if t.upper == "MAXVALUE":
            return ("max", "")
        if t.upper == "NULL":
            return ("null", "")
    if len(toks) == 2 and toks[0].kind == "p" and toks[0].text in "+-" and toks[1].kind == "num":
        return ("num", ("-" if toks[0].text == "-" else "") + toks[1].text)
    return ("expr", _text(toks))


def _values(toks: Sequence[Tok]) -> tuple[Literal, ...]:
    return tuple(_literal(item) for item in _split(toks))


def _list_values(toks: Sequence[Tok]) -> tuple[tuple[Literal, ...], ...]:
    out = []
    for item in _split(toks):
        if _is_p(item[0], "(") and _is_p(item[-1], ")"):
            out.append(_values(item[1:-1]))
        else:
            out.append((_literal(item),))
    return tuple(out)


def _columns_of(toks: Sequence[Tok]) -> tuple[str, ...]:
    """The plain columns a RANGE/LIST expression or a COLUMNS list names (``()``: an expression)."""
    items = _split(toks)
    if items and all(len(i) == 1 and i[0].kind in ("id", "qid") for i in items):
        return tuple(i[0].text for i in items)
    return ()


def parse_partition_by(p: TokenCursor) -> Partitioning | None:
    """After ``PARTITION BY``: read the partitioning up to the end of the definitions; ``None``
    when it cannot be read (the cursor is then somewhere inside it)."""
    linear = p.eat("LINEAR")
    method = p.up()
    p.i += 1
    expr: list[Tok] = []
    columns: tuple[str, ...] = ()
    if method == "HASH":
        expr = _group(p)
    elif method == "KEY":
        if p.eat("ALGORITHM"):
            p.eat_p("=")
            p.i += 1
        expr = _group(p)
        columns = _columns_of(expr)
    elif method in ("RANGE", "LIST"):
        if p.eat("COLUMNS"):
            method += " COLUMNS"
        expr = _group(p)
        columns = _columns_of(expr)
    else:
        return None  # SYSTEM_TIME and the like: not followed
    if linear:
        method = "LINEAR " + method
    if p.eat("PARTITIONS"):
        p.i += 1
    sub = False
    if p.up() == "SUBPARTITION" and p.up(1) == "BY":
        sub = True
        p.i += 2
        p.eat("LINEAR")
        if p.eat("KEY"):
            if p.eat("ALGORITHM"):
                p.eat_p("=")
                p.i += 1
        else:
            p.eat("HASH")
        p.skip_parens()  # the subpartitioning expression
        if p.eat("SUBPARTITIONS"):
            p.i += 1
    parts: tuple[PartitionDef, ...] = ()
    if _is_p(p.peek(), "("):
        defs = parse_definitions(p)
        if defs is None:
            return None
        parts = defs
    return Partitioning(method, _text(expr), columns, parts, sub)


def parse_definitions(p: TokenCursor) -> tuple[PartitionDef, ...] | None:
    """At ``(``: read ``(PARTITION name VALUES ..., ...)``; ``None`` when not understood."""
    body = _group(p)
    out: list[PartitionDef] = []
    for item in _split(body):
        if len(item) < 2 or item[0].upper != "PARTITION" or item[1].kind not in ("id", "qid", "str"):
            return None
        name, rest = item[1].text, item[2:]
        less: tuple[Literal, ...] | None = None
        values: tuple[tuple[Literal, ...], ...] | None = None
        if (
            len(rest) >= 3
            and rest[0].upper == "VALUES"
            and rest[1].upper == "LESS"
            and rest[2].upper == "THAN"
        ):
            if len(rest) > 3 and rest[3].upper == "MAXVALUE":
                less = (("max", ""),)
            elif len(rest) > 3 and _is_p(rest[3], "("):
                less = _values(_inner(rest, 3))
            else:
                return None
        elif len(rest) >= 2 and rest[0].upper == "VALUES" and rest[1].upper == "IN" and _is_p(rest[2], "("):
            values = _list_values(_inner(rest, 2))
        out.append(PartitionDef(name, less, values))
    return tuple(out)


def _inner(toks: Sequence[Tok], start: int) -> list[Tok]:
    """The tokens inside the parenthesis group opening at ``toks[start]``."""
    depth, out = 0, []
    for t in toks[start:]:
        if _is_p(t, "("):
            depth += 1
            if depth == 1:
                continue
        elif _is_p(t, ")"):
            depth -= 1
            if depth == 0:
                break
        out.append(t)
    return out


def _names(p: TokenCursor) -> tuple[str, ...]:
    names = []
    while p.peek() is not None and p.peek().kind in ("id", "qid", "str"):  # type: ignore[union-attr]
        names.append(p.ident())
        if not p.eat_p(","):
            break
    return tuple(names)


def parse_alter_partition(p: TokenCursor, verb: str) -> PartitionClause:
    """Read one ALTER TABLE partition clause to the end of the statement (they stand alone).

    :param verb: ``add``, ``drop``, ``truncate``, ``exchange``, ``reorganize``, ``coalesce``,
        ``maintain``, ``remove``, ``by``, ``discard``, ``import``, ``convert``; the cursor is at the
        word after the verb (``PARTITION``, ``BY``...).
    """
    try:
        if verb == "by":
            p.eat("BY")
            return PartitionClause("by", partitioning=parse_partition_by(p), read=True)
        p.eat("PARTITION", "PARTITIONING")
        if verb == "add":
            if _is_p(p.peek(), "("):
                defs = parse_definitions(p)
                return PartitionClause("add", definitions=defs, read=defs is not None)
            return PartitionClause("add", read=p.eat("PARTITIONS"))  # HASH/KEY: PARTITIONS n
        if verb in ("drop", "truncate", "maintain", "discard", "import"):
            if p.eat("IF"):  # MariaDB: DROP PARTITION IF EXISTS (a missing name: not followed)
                p.eat("EXISTS")
            if p.eat("ALL"):
                return PartitionClause(verb, all_partitions=True, read=True)
            names = _names(p)
            return PartitionClause(verb, partitions=names, read=bool(names))
        if verb == "exchange":
            names = _names(p)
            other = None
            if p.eat("WITH") and p.eat("TABLE"):
                other = p.qualified()
            return PartitionClause(verb, partitions=names, other=other, read=other is not None)
        if verb == "reorganize":
            names = _names(p)
            if names and p.eat("INTO"):
                defs = parse_definitions(p)
                return PartitionClause(verb, partitions=names, definitions=defs, read=defs is not None)
            return PartitionClause(verb, partitions=names, read=not names)
        if verb == "coalesce":
            return PartitionClause(verb, read=True)
        if verb == "remove":
            return PartitionClause(verb, read=True)
    except (ValueError, IndexError):
        pass
    finally:
        p.i = len(p.t)
    return PartitionClause(verb)


def _rows_value(v: Any) -> str | None:
    return None if v is None else str(v)


def from_information_schema_rows(rows: Iterable[Sequence[Any]]) -> Partitioning | None:
    """The partitioning from ``information_schema.PARTITIONS`` rows of one table: ``(PARTITION_NAME,
    PARTITION_METHOD, SUBPARTITION_METHOD, PARTITION_EXPRESSION, PARTITION_DESCRIPTION)`` in
    partition then subpartition order. No rows or one row without a name: not partitioned.
    ``None``: a method or description not read here (then the partitioning is not known)."""
    rows = list(rows)
    if not rows:
        return None  # the table is gone: nothing known
    if rows[0][0] is None:
        return NOT_PARTITIONED
    method = str(rows[0][1] or "").upper()
    expr = tokenize(str(rows[0][3] or ""))
    columns = _columns_of(expr)
    sub = any(r[2] for r in rows)
    parts: list[PartitionDef] = []
    seen: set[str] = set()
    for name, _m, _s, _e, description in rows:
        if str(name) in seen:
            continue  # one row per subpartition
        seen.add(str(name))
        desc = tokenize(_rows_value(description) or "")
        if method.endswith("RANGE") or method == "RANGE COLUMNS":
            parts.append(PartitionDef(str(name), less_than=_values(desc)))
        elif method in ("LIST", "LIST COLUMNS"):
            parts.append(PartitionDef(str(name), values_in=_list_values(desc)))
        else:
            parts.append(PartitionDef(str(name)))
    if method not in ("RANGE", "RANGE COLUMNS", "LIST", "LIST COLUMNS", "HASH", "LINEAR HASH", "KEY",
                      "LINEAR KEY"):  # fmt: skip
        return None
    return Partitioning(method, _text(expr), columns, tuple(parts), sub)


# ---- following ALTER TABLE ------------------------------------------------------------------------

_COLUMN_OPS = ("drop", "modify", "change", "rename_column")


def after_alter(before: Partitioning | None, clauses: Iterable[Clause], unread: bool) -> Partitioning | None:
    """The partitioning after an ALTER TABLE that was understood completely (``None``: not known).

    :param clauses: the statement's clauses (``DdlStatement.ops``).
    :param unread: the statement mentions partitions in a way not read as a clause.
    """
    result = before
    for clause in clauses:
        if clause.op == "partition":
            result = _after_clause(result, clause.part)
        elif clause.op in _COLUMN_OPS and result is not None and _uses(result, clause.name):
            result = None  # a partitioning column (or one an expression may use) changed
    return None if unread else result


def _uses(p: Partitioning, column: str) -> bool:
    """The partitioning may use ``column`` (an expression: any column)."""
    return bool(p.method) and (not p.columns or column.lower() in {c.lower() for c in p.columns})


def _after_clause(p: Partitioning | None, clause: PartitionClause | None) -> Partitioning | None:
    if clause is None or not clause.read:
        return None
    verb = clause.verb
    if verb == "by":
        return clause.partitioning
    if verb == "remove":
        return NOT_PARTITIONED
    if p is None or not p.method:
        return None  # not known (or a partition clause on a table not known to be partitioned)
    hashed = p.method.endswith(("HASH", "KEY"))
    if verb in ("truncate", "maintain", "exchange", "discard", "import"):
        return p
    if hashed:
        if verb in ("add", "coalesce") or (verb == "reorganize" and not clause.partitions):
            return replace(p, partitions=())  # the names of HASH/KEY partitions are not followed
        return None
    if verb == "add" and clause.definitions is not None:
        names = {d.name.lower() for d in p.partitions}
        if any(d.name.lower() in names for d in clause.definitions):
            return None
        return replace(p, partitions=p.partitions + clause.definitions)
    if verb == "drop" and not clause.all_partitions:
        idx = [p.find(n) for n in clause.partitions]
        if any(i is None for i in idx):
            return None
        return replace(p, partitions=tuple(d for i, d in enumerate(p.partitions) if i not in idx))
    if verb == "reorganize" and clause.definitions is not None:
        found = [p.find(n) for n in clause.partitions]
        spots = [i for i in found if i is not None]
        if len(spots) != len(found) or not spots or sorted(spots) != list(range(min(spots), max(spots) + 1)):
            return None  # REORGANIZE takes adjacent partitions
        first = min(spots)
        kept = [d for i, d in enumerate(p.partitions) if i not in spots]
        return replace(p, partitions=tuple(kept[:first]) + clause.definitions + tuple(kept[first:]))
    return None


# ---- the rows of partitions (predicates) ----------------------------------------------------------


@dataclass(frozen=True)
class Less:
    """Column ``col`` (an index into :attr:`DeleteRows.columns`) sorts below ``value`` the way
    MySQL places rows: NULL below everything."""

    col: int
    value: Any


@dataclass(frozen=True)
class Equal:
    """Column ``col`` equals ``value`` (``None``: the column is NULL)."""

    col: int
    value: Any


@dataclass(frozen=True)
class Const:
    value: bool


@dataclass(frozen=True)
class And:
    items: tuple[Pred, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Pred, ...]


@dataclass(frozen=True)
class Not:
    item: Pred


Pred = Less | Equal | Const | And | Or | Not
TRUE, FALSE = Const(True), Const(False)


def _and(*items: Pred) -> Pred:
    if any(i == FALSE for i in items):
        return FALSE
    kept = tuple(i for i in items if i != TRUE)
    return kept[0] if len(kept) == 1 else And(kept) if kept else TRUE


def _or(*items: Pred) -> Pred:
    if any(i == TRUE for i in items):
        return TRUE
    kept = tuple(i for i in items if i != FALSE)
    return kept[0] if len(kept) == 1 else Or(kept) if kept else FALSE


def _not(item: Pred) -> Pred:
    if isinstance(item, Const):
        return Const(not item.value)
    return Not(item)


@dataclass(frozen=True)
class DeleteRows:
    """Delete the lake rows for which ``where`` holds (the rows of partitions a TRUNCATE or DROP
    PARTITION removed).

    :param columns: the columns ``where`` compares (as the lake table holds them).
    :param where: the predicate; values are in the decoder's contract (``int``, ``date``, ``datetime``).
    :param partitions: the partitions' names (for logs).
    :param source: the source table, ``schema.table`` (for errors).
    :param ambiguous: indexes of DATE/DATETIME columns: the decoder gives NULL for zero, partial and
        invalid dates (``2024-05-00``), which MySQL places by their value, so a lake row with NULL
        there may belong to any partition; the lake stops (naming the remedy) when it holds one.
    """

    columns: tuple[ColumnDef, ...]
    where: Pred
    partitions: tuple[str, ...] = ()
    source: str = ""
    ambiguous: tuple[int, ...] = ()


class NotExact(Exception):
    """The rows of a partition cannot be told exactly here (the reason is the message)."""


_INT_TYPES = frozenset({T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG})
_DATE_TYPES = frozenset({T.DATE, T.NEWDATE})
_DATETIME_TYPES = frozenset({T.DATETIME, T.DATETIME2})
_DATETIME_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2}(\.\d{1,6})?)?$")


def bound_value(lit: Literal, col: ColumnDef) -> Any:
    """A bound literal as a value of ``col`` in the decoder's contract (``None`` for NULL).

    :raises NotExact: a literal not read here, or a column type not compared here.
    """
    kind, text = lit
    if kind == "null":
        return None
    if col.type in _INT_TYPES:
        if kind == "num" and re.fullmatch(r"-?\d+", text):
            return int(text)
        raise NotExact(f"the bound {text or kind!r} of integer column {col.name!r}")
    if col.type in _DATE_TYPES | _DATETIME_TYPES:
        if kind != "str" or not _DATETIME_TEXT.match(text.strip()):
            raise NotExact(f"the bound {text or kind!r} of column {col.name!r}")
        try:
            stamp = datetime.datetime.fromisoformat(text.strip())
        except ValueError:
            raise NotExact(f"the bound {text!r} of column {col.name!r} is not a valid date") from None
        if col.type in _DATE_TYPES:
            if stamp.time() != datetime.time():
                raise NotExact(f"the DATE bound {text!r} has a time")
            return stamp.date()
        if len(text.strip().partition(".")[2]) > (col.fsp or 0):
            raise NotExact(f"the DATETIME bound {text!r} has more fractional digits than the column")
        return stamp
    raise NotExact(f"column {col.name!r} is a {col.type.name} (compared by collation or time zone in MySQL)")


def _less_tuple(bound: Sequence[Any], start: int = 0) -> Pred:
    """Columns ``start..`` as a tuple below ``bound`` (``MAXVALUE`` is :data:`MAX`)."""
    if start == len(bound):
        return FALSE
    b = bound[start]
    if b is MAX:
        return TRUE
    return _or(Less(start, b), _and(Equal(start, b), _less_tuple(bound, start + 1)))


class _Max:
    def __repr__(self) -> str:
        return "MAXVALUE"


MAX: Any = _Max()


def partition_rows(
    partitioning: Partitioning | None, names: Sequence[str], schema: TableSchema | None
) -> DeleteRows:
    """The rows of the partitions ``names`` as a :class:`DeleteRows` over ``schema``'s columns.

    :param schema: the table's columns as the lake holds them (after ``columns=``).
    :raises NotExact: the partitioning is not known, not RANGE/LIST over plain columns, a name or a
        column is missing, or a bound or a column type is not compared here.
    """
    p = partitioning
    if p is None:
        raise NotExact("the table's partitioning at this point is not known")
    if not p.method:
        raise NotExact("the table is not known to be partitioned")
    if p.subpartitioned:
        raise NotExact("the table is subpartitioned")
    if p.method not in ("RANGE", "RANGE COLUMNS", "LIST", "LIST COLUMNS"):
        raise NotExact(f"{p.method} partitions are not ranges or lists of values")
    if not p.columns:
        raise NotExact(f"the partitioning expression {p.expression} is not a plain column")
    if schema is None:
        raise NotExact("the table's columns are not known")
    by_name = {c.name.lower(): c for c in schema.columns}
    cols = []
    for name in p.columns:
        col = by_name.get(name.lower())
        if col is None:
            raise NotExact(f"the partitioning column {name!r} is not a column of the lake table")
        cols.append(col)
    width = len(cols)
    items: list[Pred] = []
    for name in names:
        i = p.find(name)
        if i is None:
            raise NotExact(f"no partition {name!r} is known")
        d = p.partitions[i]
        if p.method.startswith("RANGE"):
            if d.less_than is None or len(d.less_than) != width:
                raise NotExact(f"the bounds of partition {d.name!r}")
            upper = _range_bound(d.less_than, cols)
            pred = _less_tuple(upper)
            if i > 0:
                prev = p.partitions[i - 1].less_than
                if prev is None or len(prev) != width:
                    raise NotExact(f"the bounds of partition {p.partitions[i - 1].name!r}")
                pred = _and(_not(_less_tuple(_range_bound(prev, cols))), pred)
            items.append(pred)
        else:
            if d.values_in is None:
                raise NotExact(f"the values of partition {d.name!r}")
            alts = []
            for value in d.values_in:
                if len(value) != width:
                    raise NotExact(f"a value of partition {d.name!r} has {len(value)} columns, not {width}")
                alts.append(_and(*(Equal(j, bound_value(lit, cols[j])) for j, lit in enumerate(value))))
            items.append(_or(*alts))
    dates = tuple(i for i, c in enumerate(cols) if c.type in _DATE_TYPES | _DATETIME_TYPES)
    return DeleteRows(tuple(cols), _or(*items), tuple(names), schema.qualified_name, dates)


def _range_bound(lits: Sequence[Literal], cols: Sequence[ColumnDef]) -> list[Any]:
    out = []
    for lit, col in zip(lits, cols, strict=True):
        if lit[0] == "max":
            out.append(MAX)
        elif lit[0] == "null":
            raise NotExact("a NULL range bound")
        else:
            out.append(bound_value(lit, col))
    return out


def evaluate(pred: Pred, row: Sequence[Any]) -> bool:
    """``pred`` on one row's values of :attr:`DeleteRows.columns` (tests and checks)."""
    if isinstance(pred, Const):
        return pred.value
    if isinstance(pred, Less):
        v = row[pred.col]
        return v is None or v < pred.value
    if isinstance(pred, Equal):
        v = row[pred.col]
        return v is None if pred.value is None else (v is not None and v == pred.value)
    if isinstance(pred, And):
        return all(evaluate(i, row) for i in pred.items)
    if isinstance(pred, Or):
        return any(evaluate(i, row) for i in pred.items)
    return not evaluate(pred.item, row)


def delete_action(clause: PartitionClause | None, before: TableSchema | None) -> DeleteRows:
    """What the lake deletes for a ``TRUNCATE``/``DROP PARTITION`` clause, given the table's
    version just before the statement.

    :raises NotExact: not known exactly (the caller re-snapshots).
    """
    if clause is None or not clause.read or not clause.partitions:
        raise NotExact("the partitions named are not read")
    return partition_rows(partitioning_of(before), clause.partitions, before)
