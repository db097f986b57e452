"""Source operations and the lake: what a DDL statement on a routed table does to its lake table.

Every source operation either reaches the lake exactly, at its place in the binlog order, or stops
the run before any cursor moves past it with a :class:`SourceOperationError` that names the table,
the statement, the binlog ``file:pos`` and the way forward. Never a successful run with wrong data.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_binlog.binlog.columns import ColumnDef, InvalidDate, TableSchema, frac_text
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import CanalError
from airflow_provider_binlog.canal.sql import partitions
from airflow_provider_binlog.canal.sql.ddl import AlterOp, ColumnSpec, DdlStatement, Default
from airflow_provider_binlog.errors import ConfigurationError

#: How long a statement may be in an error message before it is cut.
STATEMENT_SHOWN = 200


def shown_statement(sql: str, limit: int = STATEMENT_SHOWN) -> str:
    """The statement on one line, cut to ``limit`` characters (``...`` marks a cut)."""
    text = " ".join(sql.split())
    return text if len(text) <= limit else text[:limit] + "..."


class SourceOperationError(CanalError):
    """A source operation (a DDL statement on a routed table) cannot reach the lake exactly: the run
    stops before it, so no cursor moves past it.

    :param table: the source table, ``schema.table``.
    :param statement: the statement text as logged (kept whole; the message shows its start).
    :param position: where the statement is in the binlog.
    :param remedy: the way forward (the option value that changes it, or the re-snapshot command).
    :param reason: why the lake cannot follow it.
    :param target: the lake table the table is routed to, when known.
    """

    def __init__(
        self,
        table: str,
        statement: str,
        position: BinlogPosition,
        remedy: str,
        reason: str = "the lake cannot apply it exactly",
        target: str | None = None,
    ) -> None:
        self.table = table
        self.statement = statement
        self.position = position
        self.remedy = remedy
        self.reason = reason
        self.target = target
        into = f" (lake table {target})" if target else ""
        super().__init__(
            f"{table}{into}: {reason}: {shown_statement(statement)!r} at {position}. Nothing at or after "
            f"{position} was applied for it and the cursor stays before it. Remedy: {remedy}"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (
            type(self),
            (self.table, self.statement, self.position, self.remedy, self.reason, self.target),
        )


class ResnapshotNeeded(SourceOperationError):
    """The policy for this operation is ``"resnapshot"``: the lake table must be loaded again from
    the source at a consistent position after the statement (``binlog-cdc resnapshot``).

    ``target`` names the lake table to replace.
    """


# ---- the policy ----------------------------------------------------------------------------------

OPERATION_CLASSES = (
    "add_column",
    "drop_column",
    "rename_column",
    "modify_column",
    "drop_table",
    "recreate_table",
    "partition",
    "rename_table",
    "unknown",
    "statement_dml",
)
"""The classes of source operations :data:`on_schema_change <Policy>` names (``statement_dml``:
rows of the table changed by a statement logged in statement format, see :data:`STATEMENT_DML`)."""

CHOICES = ("evolve", "resnapshot", "fail")
EXTRA_CHOICES = {"drop_column": ("keep",), "drop_table": ("drop",)}
"""Choices beyond evolve / resnapshot / fail: ``drop_column="keep"`` keeps the lake column (its
values as of the drop; NULL in rows written after it), ``drop_table="drop"`` drops the lake table
(``evolve`` empties it)."""

DEFAULT_POLICY = {c: ("fail" if c in ("unknown", "statement_dml") else "evolve") for c in OPERATION_CLASSES}
"""``evolve`` everywhere the lake can apply the operation exactly (where it cannot, ``evolve``
means ``resnapshot``: see :meth:`Policy.verdict`), ``fail`` for statements not understood and for
statement-format DML (a re-snapshot reads the whole table: asked for, not implied)."""

PolicyOption = str | Mapping[str, str] | None


@dataclass(frozen=True)
class Policy:
    """What to do per class of source operation (``on_schema_change``).

    :param choices: class -> ``evolve`` | ``resnapshot`` | ``fail`` (or a class's extra choice).
    """

    choices: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_POLICY))

    @classmethod
    def of(cls, option: PolicyOption | Policy) -> Policy:
        """Read ``on_schema_change``: ``None`` (the defaults), one choice for every class, or a
        mapping from class to choice (unnamed classes keep their default).

        :raises ConfigurationError: an unknown class or choice.
        """
        if isinstance(option, Policy):
            return option
        choices = dict(DEFAULT_POLICY)
        if option is None:
            return cls(choices)
        if isinstance(option, str):
            if option not in CHOICES:
                raise ConfigurationError(
                    f"on_schema_change={option!r}: expected one of {', '.join(CHOICES)}, or a mapping "
                    f"from operation class ({', '.join(OPERATION_CLASSES)}) to one of them"
                )
            return cls({c: option for c in OPERATION_CLASSES})
        for key, value in option.items():
            if key not in OPERATION_CLASSES:
                raise ConfigurationError(
                    f"on_schema_change: unknown operation class {key!r}; the classes are "
                    f"{', '.join(OPERATION_CLASSES)}"
                )
            allowed = CHOICES + EXTRA_CHOICES.get(key, ())
            if value not in allowed:
                raise ConfigurationError(
                    f"on_schema_change[{key!r}]={value!r}: expected one of {', '.join(allowed)}"
                )
            choices[key] = value
        return cls(choices)

    def verdict(self, op: Operation) -> str:
        """``evolve`` (apply ``op.actions``), ``resnapshot`` or ``fail``; an extra choice maps to
        ``evolve`` (its actions were chosen by :func:`classify`). An operation the lake cannot
        apply exactly is never evolved: ``evolve`` then means ``resnapshot``."""
        choice = self.choices.get(op.kind, "fail")
        if choice == "resnapshot" and op.table_gone:
            return "evolve"  # nothing left under this name to load again
        if choice in ("resnapshot", "fail"):
            return choice
        return "evolve" if op.exact else "resnapshot"


# ---- lake actions (pure descriptions; the lake layer runs them) ----------------------------------


@dataclass(frozen=True)
class AddColumn:
    """Add ``name`` (typed as ``column``); rows that exist get ``fill`` (a value in the decoder's
    contract, ``None`` for NULL)."""

    name: str
    column: ColumnDef
    fill: Any = None


@dataclass(frozen=True)
class RenameColumn:
    old: str
    new: str


@dataclass(frozen=True)
class DropColumn:
    name: str


@dataclass(frozen=True)
class ChangeColumn:
    """Change the type of ``name`` to that of ``column`` (the new source column).

    :param cast: how a lake value becomes the value MySQL stored: ``same`` (unchanged: nothing, or
        an Iceberg widening), ``cast`` (a plain cast: more decimal scale, integer to decimal),
        ``unsigned`` (negatives become 0, then cast: MySQL's conversion to UNSIGNED), ``text``
        (the number's decimal text, cut to ``length`` characters).
    :param null_fill: NULL becomes this (a column made NOT NULL); ``None``: NULL stays.
    :param length: characters kept by ``text``.
    """

    name: str
    column: ColumnDef
    cast: str = "same"
    null_fill: Any = None
    length: int | None = None


@dataclass(frozen=True)
class EmptyTable:
    """Delete every row (DROP TABLE with the default policy)."""


@dataclass(frozen=True)
class DropTable:
    """Drop the lake table (``drop_table="drop"``)."""


@dataclass(frozen=True)
class RestartTable:
    """The source table was created anew: the lake table loses its rows and takes ``schema``."""

    schema: TableSchema | None


DeleteRows = partitions.DeleteRows
"""Delete the rows of partitions (TRUNCATE/DROP PARTITION on a known RANGE/LIST partitioning)."""

LakeAction = (
    AddColumn | RenameColumn | DropColumn | ChangeColumn | EmptyTable | DropTable | RestartTable | DeleteRows
)


@dataclass(frozen=True)
class Operation:
    """What one DDL statement does to one routed table.

    :param kind: its class (one of :data:`OPERATION_CLASSES`, or ``noop``, ``truncate``).
    :param actions: what the lake does, in order, when the verdict is ``evolve``.
    :param exact: the actions give the lake exactly what the source holds.
    :param reason: why not, when not exact.
    """

    kind: str
    actions: tuple[LakeAction, ...] = ()
    exact: bool = True
    reason: str = ""
    table_gone: bool = False
    """The table no longer exists under this name after the statement (renamed away): there is
    nothing to re-snapshot, so ``resnapshot`` applies the actions like ``evolve``."""

    @property
    def acts(self) -> bool:
        """The lake must do something at this statement's place."""
        return bool(self.actions)


NOOP = Operation("noop")

_RANK = {"add_column": 1, "rename_column": 2, "drop_column": 3, "modify_column": 4, "partition": 5}


# ---- values existing rows get ----------------------------------------------------------------------

_INTS = frozenset({T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG})
_INT_BITS = {T.TINY: 8, T.SHORT: 16, T.INT24: 24, T.LONG: 32, T.LONGLONG: 64}
_TEXTS = frozenset({T.VARCHAR, T.VAR_STRING, T.STRING, T.TINY_BLOB, T.BLOB, T.MEDIUM_BLOB, T.LONG_BLOB})
_DECIMALS = frozenset({T.DECIMAL, T.NEWDECIMAL})
_ZERO_DATES = frozenset({T.DATE, T.NEWDATE, T.DATETIME, T.DATETIME2})


class _Unknown(Exception):
    """The value cannot be known exactly from the statement."""


def _int_range(col: ColumnDef) -> tuple[int, int]:
    bits = _INT_BITS[col.type]
    return (0, 2**bits - 1) if col.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _zero_date(col: ColumnDef) -> InvalidDate:
    if col.type in (T.DATE, T.NEWDATE):
        return InvalidDate("0000-00-00")
    return InvalidDate("0000-00-00 00:00:00" + frac_text(0, col.fsp or 0))


def implicit_default(col: ColumnDef, spec: ColumnSpec | None) -> Any:
    """MySQL's implicit default of a NOT NULL column without DEFAULT, in the decoder's contract:
    0 for numbers, ``''`` for strings, the first label of an ENUM, the zero date (an
    :class:`InvalidDate`, as the decoder makes it) for DATE and DATETIME.

    :raises _Unknown: TIMESTAMP (may be CURRENT_TIMESTAMP), JSON, TIME, geometry and the like.
    """
    t = col.type
    if t in _INTS or t in (T.YEAR, T.BIT):
        return 0
    if t in _DECIMALS:
        return decimal.Decimal(0).scaleb(-(col.scale or 0))
    if t in (T.FLOAT, T.DOUBLE):
        return 0.0
    if t in _ZERO_DATES:
        return _zero_date(col)
    if t == T.ENUM:
        labels = col.enum_values or (spec.labels if spec else None)
        if labels:
            return labels[0]
        raise _Unknown("ENUM labels unknown")
    if t == T.SET:
        return ""
    if t in _TEXTS:
        if col.is_binary:
            if t == T.STRING:
                raise _Unknown("BINARY(n) pads with zero bytes")
            return b""
        return ""
    raise _Unknown(f"no known implicit default for {t.name}")


def literal_value(col: ColumnDef, spec: ColumnSpec, default: Default) -> Any:
    """The value a constant ``DEFAULT`` gives a column, in the decoder's contract.

    :raises _Unknown: an expression, a value MySQL would round, cut or convert in a way not
        followed here (the policy then falls back to a re-snapshot).
    """
    t, kind, text = col.type, default.kind, default.text
    if kind == "null":
        return None
    if kind == "expression":
        raise _Unknown(f"the DEFAULT is an expression ({text}...)")
    if kind in ("bits", "hex"):
        number = int(text or "0", 2 if kind == "bits" else 16)
        if t == T.BIT or t in _INTS:
            return _checked_int(col, number)
        raise _Unknown("a bit or hex literal on a non-integer column")
    if t in _INTS or t in (T.YEAR, T.BIT):
        try:
            value = decimal.Decimal(text.strip())
        except decimal.InvalidOperation:
            raise _Unknown(f"{text!r} is not an integer") from None
        if value != value.to_integral_value():
            raise _Unknown(f"{text!r} would be rounded")
        if t == T.YEAR:
            number = int(value)
            if number == 0 or 1901 <= number <= 2155:
                return number
            raise _Unknown("a YEAR MySQL would convert")
        return _checked_int(col, int(value))
    if t in _DECIMALS:
        try:
            value = decimal.Decimal(text.strip())
        except decimal.InvalidOperation:
            raise _Unknown(f"{text!r} is not a number") from None
        scale = col.scale or 0
        exact = value.quantize(decimal.Decimal(1).scaleb(-scale))
        if exact != value or len(exact.as_tuple().digits) > (col.precision or 10):
            raise _Unknown(f"{text!r} would be rounded or is out of range")
        if col.unsigned and exact < 0:
            raise _Unknown("a negative default of an UNSIGNED column")
        return exact
    if t in (T.FLOAT, T.DOUBLE):
        try:
            real = float(text)
        except ValueError:
            raise _Unknown(f"{text!r} is not a number") from None
        if t == T.FLOAT:
            real = struct.unpack("<f", struct.pack("<f", real))[0]
        return real
    if t == T.ENUM:
        labels = col.enum_values or spec.labels
        if kind != "str" or not labels or text not in labels:
            raise _Unknown("an ENUM default not among the labels as written")
        return text
    if t == T.SET:
        labels = col.set_values or spec.labels
        if kind != "str" or labels is None or any(x not in labels for x in text.split(",") if x):
            raise _Unknown("a SET default not among the labels as written")
        return ",".join(x for x in labels if x in text.split(","))
    if t in _TEXTS:
        if col.is_binary:
            raise _Unknown("a binary string default")
        length = spec.args[0] if spec.args else None
        if t == T.STRING and text.endswith(" "):
            raise _Unknown("CHAR drops trailing spaces")
        if length is not None and len(text) > length:
            raise _Unknown("a default longer than the column")
        return text
    if t in (T.DATE, T.NEWDATE) and kind == "str":
        try:
            return datetime.date.fromisoformat(text.strip())
        except ValueError:
            if text.strip() == "0000-00-00":
                return _zero_date(col)
            raise _Unknown(f"the DATE {text!r}") from None
    if t in (T.DATETIME, T.DATETIME2) and kind == "str":
        stamp = text.strip()
        if stamp.startswith("0000-00-00") and not stamp[10:].strip(" :.0"):
            return _zero_date(col)
        fraction = stamp.partition(".")[2]
        if len(fraction) > (col.fsp or 0) or len(stamp) < 19:
            raise _Unknown(f"the DATETIME {text!r} would be rounded or is partial")
        try:
            return datetime.datetime.fromisoformat(stamp)
        except ValueError:
            raise _Unknown(f"the DATETIME {text!r}") from None
    raise _Unknown(f"a DEFAULT of a {t.name} column (TIMESTAMP depends on the session's time zone)")


def _checked_int(col: ColumnDef, number: int) -> int:
    if col.type == T.BIT:
        bits = (col.meta >> 8) * 8 + (col.meta & 0xFF)
        if 0 <= number < 2**bits:
            return number
        raise _Unknown("a BIT default out of range")
    lo, hi = _int_range(col)
    if lo <= number <= hi:
        return number
    raise _Unknown("an integer default out of range")


# ---- type changes --------------------------------------------------------------------------------

_CHAR_TEXT = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_LOSSLESS_TARGET_CHARSETS = frozenset({"utf8mb4", "utf8mb4_general_ci", "utf-8"})


def _digits(col: ColumnDef) -> int:
    lo, hi = _int_range(col)
    return max(len(str(lo).lstrip("-")), len(str(hi)))


def change_cast(old: ColumnDef, new: ColumnDef, spec: ColumnSpec | None) -> tuple[str, int | None]:
    """How lake values of ``old`` become what MySQL stored converting them to ``new``:
    ``(cast, length)`` for :class:`ChangeColumn`.

    :raises _Unknown: a conversion not proven equal here.
    """
    to, fr = new.type, old.type
    if fr in _INTS and to in _INTS:
        olo, ohi = _int_range(old)
        nlo, nhi = _int_range(new)
        if nlo <= olo and ohi <= nhi:
            return "same", None
        if nlo == 0 and ohi <= nhi:
            return "unsigned", None  # MySQL: negatives become 0 (strict mode refuses the ALTER)
        raise _Unknown("an integer narrowed (values may be clamped)")
    if fr in _INTS and to in _DECIMALS:
        if (new.precision or 10) - (new.scale or 0) >= _digits(old) and (not new.unsigned or old.unsigned):
            return "cast", None
        raise _Unknown("a DECIMAL too narrow for the integers")
    if (
        fr in _INTS
        and to in _TEXTS
        and not new.is_binary
        and spec is not None
        and spec.type_name in _CHAR_TEXT
    ):
        if old.zerofill:
            raise _Unknown("a ZEROFILL integer to a string (MySQL keeps the zero padding: '00007')")
        length = spec.args[0] if spec.args and spec.type_name in ("char", "varchar") else None
        if length is not None and length < _digits(old) + (0 if old.unsigned else 1):
            raise _Unknown("a string column too short for the numbers (MySQL cuts or refuses)")
        return "text", None
    if fr in _DECIMALS and to in _DECIMALS:
        os_, ns = old.scale or 0, new.scale or 0
        op, np_ = old.precision or 10, new.precision or 10
        if ns >= os_ and np_ - ns >= op - os_:
            if new.unsigned and not old.unsigned:
                return "unsigned", None
            return ("same" if ns == os_ else "cast"), None
        raise _Unknown("a DECIMAL with less scale or fewer integer digits (MySQL rounds or clamps)")
    if fr == T.FLOAT and to == T.DOUBLE:
        return "same", None
    if fr == to and fr in (T.FLOAT, T.DOUBLE):
        return "same", None
    if fr in _TEXTS | {T.ENUM, T.SET} and to in _TEXTS and not old.is_binary and not new.is_binary:
        if spec is not None and spec.args and spec.type_name in ("char", "varchar"):
            old_len = old.max_length
            if old_len is None or fr in (T.ENUM, T.SET):
                raise _Unknown("a string column that may be shorter than before")
            charset_bytes = 4 if (new.charset or "").startswith("utf") else 1
            if spec.args[0] * charset_bytes < old_len:
                raise _Unknown("a string column shorter than before")
        if new.charset == old.charset or (
            spec is not None and (spec.charset or "") in _LOSSLESS_TARGET_CHARSETS
        ):
            return "same", None
        if spec is not None and spec.charset is None and spec.collation is None:
            return "same", None  # the table's charset, as before
        raise _Unknown("a charset conversion")
    if fr == T.ENUM and to == T.ENUM:
        known = old.enum_values is not None and new.enum_values is not None
        if known and all(label in new.enum_values for label in old.enum_values):  # type: ignore[union-attr,operator]
            return "same", None
        raise _Unknown("ENUM labels removed or unknown")
    if fr == T.SET and to == T.SET:
        known = old.set_values is not None and new.set_values is not None
        if known and all(label in new.set_values for label in old.set_values):  # type: ignore[union-attr,operator]
            return "same", None
        raise _Unknown("SET labels removed or unknown")
    if fr in _TEXTS and to in _TEXTS and old.is_binary and new.is_binary and to != T.STRING:
        return "same", None  # VARBINARY/BLOB: the bytes as they were (BINARY(n) pads: not here)
    if fr in (T.DATETIME, T.DATETIME2) and to in (T.DATETIME, T.DATETIME2):
        if (new.fsp or 0) >= (old.fsp or 0):
            return "same", None
        raise _Unknown("fewer fractional digits (MySQL rounds)")
    if fr in (T.DATE, T.NEWDATE) and to in (T.DATE, T.NEWDATE):
        return "same", None
    if fr == to and fr in (T.YEAR, T.JSON, T.TIME, T.TIME2) and (new.fsp or 0) >= (old.fsp or 0):
        return "same", None
    if fr == T.BIT and to == T.BIT and new.meta >= old.meta:
        return "same", None
    raise _Unknown(f"{fr.name} to {to.name}")


# ---- classification ------------------------------------------------------------------------------


def _find(schema: TableSchema | None, name: str) -> ColumnDef | None:
    if schema is None:
        return None
    low = name.lower()
    return next((c for c in schema.columns if c.name.lower() == low), None)


Route = Callable[[str, str], "str | None"]
"""``(schema, table) -> the lake table it is routed to`` (one spelling per table), ``None``: not routed."""


def classify(
    stmt: DdlStatement | None,
    table: tuple[str, str],
    before: TableSchema | None,
    after: TableSchema | None,
    policy: Policy,
    route: Route | None = None,
) -> list[Operation]:
    """What a DDL statement does to the routed table ``table``: one :class:`Operation` per clause
    that matters (none: nothing for the lake to do).

    :param stmt: the parsed statement (:func:`..ddl.parse_ddl`).
    :param before: the table's columns just before the statement (``None``: unknown / did not exist).
    :param after: the table's columns after it (``None``: unknown / dropped).
    :param policy: for the actions of extra choices (``drop_column="keep"``, ``drop_table="drop"``).
    :param route: the routes, for a RENAME (see :func:`rename_operation`); ``None``: unknown.
    """
    if stmt is None:
        return [Operation("unknown", exact=False, reason="a statement that is not DDL")]
    kind = stmt.kind
    if stmt.versioning:
        return [SYSTEM_VERSIONING]
    if kind == "truncate":
        return [Operation("truncate")]
    if kind == "drop":
        if policy.choices.get("drop_table") == "drop":
            return [Operation("drop_table", (DropTable(),))]
        return [Operation("drop_table", (EmptyTable(),))]
    if kind == "create":
        if stmt.if_not_exists and (before is not None or after is None):
            if before is not None:
                return []  # the table existed: the statement did nothing
            return [Operation("recreate_table", exact=False, reason="CREATE TABLE IF NOT EXISTS on a table "
                              "whose earlier existence is not known")]  # fmt: skip
        return [Operation("recreate_table", (RestartTable(after),))]
    if kind == "rename":
        return [op for op in [rename_operation(stmt.renames, table, route)] if op is not NOOP]
    if kind != "alter":
        return [Operation("unknown", exact=False, reason="a statement not understood")]
    if not stmt.complete:
        return [Operation("unknown", exact=False, reason="a clause this version does not understand")]
    if stmt.renames:  # ALTER TABLE a ..., RENAME TO b: the new name is loaded whole (clauses and all)
        return [op for op in [rename_operation(stmt.renames, table, route)] if op is not NOOP]
    ops: list[Operation] = []
    columns = {c.name.lower(): c for c in before.columns} if before is not None else None
    for clause in stmt.ops:
        if clause.op == "partition":
            ops.append(_partition_clause(clause, table, before))
            continue
        guarded = (
            clause.if_exists and columns is not None and clause.op in ("add", "drop", "modify", "change")
        )
        if guarded and (clause.name.lower() in columns) == (clause.op == "add"):  # type: ignore[operator]
            continue  # IF [NOT] EXISTS: the server did nothing for this clause
        ops.append(_alter_clause(clause, columns, after, policy))
        if columns is not None:
            _track(columns, clause, after)
    return [op for op in ops if op is not NOOP]


def _partition_clause(clause: AlterOp, table: tuple[str, str], before: TableSchema | None) -> Operation:
    """A partition clause: rows that move between partitions are nothing to the lake; TRUNCATE /
    DROP PARTITION delete the partitions' rows when the history knows their bounds at this point
    (:mod:`.partitions`), else (and for EXCHANGE, CONVERT, DISCARD/IMPORT) a re-snapshot."""
    verb, part = clause.name, clause.part
    if verb in ("add", "reorganize", "coalesce", "maintain", "remove", "by"):
        return NOOP  # rows move between partitions, none is lost or added
    if verb == "exchange" and part is not None and table == part.other:
        return Operation("partition", exact=False, reason="EXCHANGE PARTITION swapped this table's rows "
                         "with a partition's, without row events")  # fmt: skip
    if verb == "truncate" and part is not None and part.all_partitions:
        return Operation("partition", (EmptyTable(),))  # every partition: the table's rows
    if verb in ("truncate", "drop"):
        try:
            return Operation("partition", (partitions.delete_action(part, before),))
        except partitions.NotExact as exc:
            why = f"the rows of the partitions cannot be told exactly ({exc})"
            return Operation("partition", exact=False, reason=f"{verb.upper()} PARTITION removes rows "
                             f"without row events, and {why}")  # fmt: skip
    return Operation(
        "partition", exact=False,
        reason=f"{verb.upper()} PARTITION removes or brings rows without row events",
    )  # fmt: skip


def _track(columns: dict[str, ColumnDef], clause: AlterOp, after: TableSchema | None) -> None:
    """Follow the working column set through one clause (for the next clauses of the statement)."""
    if clause.op == "drop":
        columns.pop(clause.name.lower(), None)
    elif clause.op == "rename_column" and clause.name.lower() in columns:
        columns[clause.new_name.lower()] = replace(columns.pop(clause.name.lower()), name=clause.new_name)
    elif clause.op in ("add", "modify", "change") and clause.spec is not None:
        columns.pop(clause.name.lower(), None)
        new = _find(after, clause.spec.name)
        if new is not None:
            columns[new.name.lower()] = new


def _alter_clause(
    clause: AlterOp, columns: dict[str, ColumnDef] | None, after: TableSchema | None, policy: Policy
) -> Operation:
    op = clause.op
    if op in (
        "add_pk", "drop_pk", "alter_column", "add_unique", "add_index", "drop_index", "rename_index",
        "table_charset",
    ):  # fmt: skip
        return NOOP  # keys: the pieces are cut where the key changes; defaults: no row changes
    if op == "convert_charset":
        if clause.name.lower() in _LOSSLESS_TARGET_CHARSETS:
            return NOOP  # every charset converts to utf8mb4 losslessly; the lake holds text
        return Operation("modify_column", exact=False, reason=f"CONVERT TO CHARACTER SET {clause.name}")
    if op == "add":
        spec = clause.spec
        assert spec is not None
        col = _find(after, spec.name)
        if col is None:
            if after is not None:
                return NOOP  # not among the columns the route keeps (columns=)
            return Operation("add_column", exact=False, reason="the new column's type is unknown")
        try:
            if spec.generated or spec.auto_increment:
                raise _Unknown("a generated or AUTO_INCREMENT column")
            if spec.default is not None:
                fill = literal_value(col, spec, spec.default)
            elif spec.not_null:
                fill = implicit_default(col, spec)
            else:
                fill = None
        except _Unknown as exc:
            return Operation("add_column", exact=False, reason=f"existing rows' value unknown: {exc}")
        return Operation("add_column", (AddColumn(col.name, col, fill),))
    if op == "drop":
        if columns is not None and clause.name.lower() not in columns:
            return NOOP  # not among the columns the route keeps
        if policy.choices.get("drop_column") == "keep":
            return Operation("drop_column")
        return Operation("drop_column", (DropColumn(clause.name),))
    if op == "rename_column":
        if columns is not None and clause.name.lower() not in columns:
            return NOOP
        return Operation("rename_column", (RenameColumn(clause.name, clause.new_name),))
    if op in ("modify", "change"):
        spec = clause.spec
        assert spec is not None
        old = columns.get(clause.name.lower()) if columns is not None else None
        new = _find(after, spec.name)
        if columns is not None and old is None and new is None:
            return NOOP  # not among the columns the route keeps
        renamed = op == "change" and clause.name != spec.name
        kind = "rename_column" if renamed else "modify_column"
        actions: list[LakeAction] = [RenameColumn(clause.name, spec.name)] if renamed else []
        if old is None or new is None:
            return Operation(
                "modify_column", exact=False, reason="the column's type before or after is unknown"
            )
        try:
            cast, length = change_cast(old, new, spec)
            null_fill = None
            if spec.not_null:
                if spec.default is not None:
                    raise _Unknown("NOT NULL with a DEFAULT (what NULLs become is not followed here)")
                null_fill = implicit_default(new, spec)
        except _Unknown as exc:
            return Operation("modify_column", tuple(actions), exact=False, reason=str(exc))
        if cast != "same" or null_fill is not None or (new.type != old.type or new.unsigned != old.unsigned):
            kind = "modify_column"
            actions.append(ChangeColumn(spec.name, new, cast, null_fill, length))
        return Operation(kind, tuple(actions)) if actions else NOOP
    return Operation("unknown", exact=False, reason=f"the clause {op!r}")


# ---- renamed tables (RENAME TABLE, ALTER TABLE ... RENAME TO, the swaps of online schema-change tools)

RenamePairs = Sequence[tuple[tuple[str, str], tuple[str, str]]]


def rename_origins(renames: RenamePairs) -> dict[tuple[str, str], tuple[str, str]]:
    """The names a RENAME leaves that hold another table's rows: new name -> the name those rows
    had before the statement. The pairs are applied in order, as MySQL does, so a swap
    ``t TO t_old, t_new TO t`` gives ``{t_old: t, t: t_new}`` (a name given back its own rows is left out)."""
    origin: dict[tuple[str, str], tuple[str, str]] = {}
    for old, new in renames:
        origin[new] = origin.pop(old, old)
    return {new: old for new, old in origin.items() if new != old}


def rename_operation(renames: RenamePairs, table: tuple[str, str], route: Route | None) -> Operation:
    """What a RENAME does to the lake table of ``table`` (a name the statement renames from or to).

    * ``table`` holds another table's rows afterwards (``a TO table``, or the swap's ``t_new TO t``):
      when that table was routed to the same lake table, nothing; else the lake table is loaded again
      from ``table`` at a point after the statement (a re-snapshot of the NEW name: ``exact=False``),
      whatever it held (it may hold the rows the name had before a swap, or nothing).
    * ``table`` is gone afterwards (renamed away): when its rows' new name is routed to another lake
      table, this one is dropped (its rows live on there, as an Iceberg rename would leave it);
      renamed out of the routes (or routes unknown): the lake table is kept as it was and is no
      longer updated.

    :param route: ``(schema, table) -> lake table or None``; ``None``: routes unknown (the new name
        is taken as routed elsewhere, and an old lake table is kept).
    """
    origins = rename_origins(renames)
    here = route(*table) if route is not None else None
    if table in origins:
        came_from = origins[table]
        if route is not None and here is not None and route(*came_from) == here:
            return NOOP  # the rows stay in the same lake table
        reason = (
            f"{'.'.join(table)} now holds the rows of {'.'.join(came_from)} (a RENAME), which its lake "
            "table does not: it is loaded again from the source"
        )
        return Operation("rename_table", exact=False, reason=reason)
    moved = {old: new for new, old in origins.items()}
    went_to = moved.get(table)
    if went_to is None:
        return NOOP  # not renamed by this statement (or renamed back)
    there = route(*went_to) if route is not None else None
    if there is None:  # renamed out of the routes: the lake table stays as it was
        return Operation("rename_table", table_gone=True)
    if there == here:
        return NOOP
    return Operation("rename_table", (DropTable(),), table_gone=True)


# ---- the decision --------------------------------------------------------------------------------

_SEVERITY = {"evolve": 0, "resnapshot": 1, "fail": 2}


def decide(ops: list[Operation], policy: Policy) -> tuple[str, Operation | None]:
    """The verdict for a statement's operations (the strictest of theirs) and the operation that
    decided it (``None`` when there is nothing to decide)."""
    verdict, deciding = "evolve", None
    for op in ops:
        v = policy.verdict(op)
        if deciding is None or _SEVERITY[v] > _SEVERITY[verdict]:
            verdict, deciding = v, op
    return verdict, deciding


def stop_error(
    verdict: str,
    op: Operation,
    table: str,
    statement: str,
    position: BinlogPosition,
    destination: str,
    target: str | None,
) -> SourceOperationError:
    """The error that stops a run at a source operation: :class:`ResnapshotNeeded` for
    ``resnapshot``, else :class:`SourceOperationError`; its remedy names the option value that
    changes the outcome and the re-snapshot command."""
    resnapshot = f"binlog-cdc resnapshot --destination {destination} --table {table}"
    if target:  # the command requires it: the remedy must work as written
        resnapshot += f" --target {target}"
    why = f"{op.kind.replace('_', ' ')}: {op.reason}" if op.reason else op.kind.replace("_", " ")
    if verdict == "resnapshot":
        if op.exact:
            remedy = (
                f"re-snapshot the table ({resnapshot}), as on_schema_change asks for {op.kind}; or set "
                f'on_schema_change={{"{op.kind}": "evolve"}} to apply it in the lake'
            )
        else:
            remedy = (
                f"re-snapshot the table ({resnapshot}) at a position after this statement; the lake "
                f'cannot apply it exactly. on_schema_change={{"{op.kind}": "fail"}} stops here without '
                "asking for a re-snapshot"
            )
        return ResnapshotNeeded(table, statement, position, remedy, f"needs a re-snapshot ({why})", target)
    options = f'on_schema_change={{"{op.kind}": "evolve"}}' if op.exact else None
    if op.kind == SYSTEM_VERSIONING.kind:
        remedy = (
            "exclude the table from the routes (exclude=), or drop its versioning on the source "
            f"(ALTER TABLE {table} DROP SYSTEM VERSIONING) and then re-snapshot it ({resnapshot})"
        )
    elif op.kind == "unknown":
        remedy = (
            f"this statement is not understood here, so its effect on the lake cannot be known: "
            f"re-snapshot the table ({resnapshot}), or exclude it from the routes (exclude=)"
        )
    elif options:
        remedy = f"set {options} to apply it in the lake, or re-snapshot the table ({resnapshot})"
    else:
        remedy = (
            f"re-snapshot the table ({resnapshot}), or set "
            f'on_schema_change={{"{op.kind}": "resnapshot"}} to have the run ask for it'
        )
    return SourceOperationError(table, statement, position, remedy, f"stopped at {why}", target)


SYSTEM_VERSIONING = Operation(
    "system_versioning",
    exact=False,
    reason="WITH SYSTEM VERSIONING: every later update and delete of the table also writes a history "
    "row (its row images carry the hidden row_start/row_end), which the lake would hold as rows of "
    "the table although the source's SELECT does not show them",
)
"""A table made system-versioned (MariaDB): not an operation class one can choose for; it always
stops (:meth:`Policy.verdict` of a kind without a choice is ``fail``)."""


# ---- statement-format DML ------------------------------------------------------------------------

STATEMENT_DML = Operation(
    "statement_dml",
    exact=False,
    reason="rows changed by a statement logged in statement format (binlog_format=STATEMENT or MIXED, "
    "LOAD DATA as a statement): the binlog holds the statement, not the rows",
)
"""What a statement-format DML entry (``DdlKind.STATEMENT_DML``) does to its routed table: nothing
the lake can apply; only a re-snapshot after it brings the table back."""

_LOG_ROWS = (
    "make the source log rows (SET GLOBAL binlog_format=ROW, and SET SESSION binlog_format=ROW in the "
    "sessions or applications that set STATEMENT or MIXED)"
)


def statement_dml_error(
    policy: Policy,
    table: str,
    statement: str,
    position: BinlogPosition,
    destination: str,
    target: str | None,
) -> SourceOperationError:
    """The error a statement-format DML on a routed table raises from the fold (the lake's mark of
    the table does not cover it): :class:`ResnapshotNeeded` when ``on_schema_change`` asks for
    ``statement_dml="resnapshot"`` (``evolve`` too: it cannot be applied exactly), else
    :class:`SourceOperationError` whose remedy names row format, the re-snapshot command and the
    option."""
    command = f"binlog-cdc resnapshot --destination {destination} --table {table}"
    if target:
        command += f" --target {target}"
    if policy.verdict(STATEMENT_DML) == "resnapshot":
        remedy = (
            f"the table is re-snapshotted at a position after this statement ({command}), as "
            f"on_schema_change asks for statement_dml; {_LOG_ROWS} so that it is not needed again; "
            'on_schema_change={"statement_dml": "fail"} stops here instead'
        )
        why = f"needs a re-snapshot (statement dml: {STATEMENT_DML.reason})"
        return ResnapshotNeeded(table, statement, position, remedy, why, target)
    remedy = (
        f"{_LOG_ROWS}; then re-snapshot the table at a position after this statement ({command}, or "
        "drain.resnapshot.resnapshot from Python) and run again: the lake then holds the statement's "
        'effect and skips it. Or set on_schema_change={"statement_dml": "resnapshot"} to have the run '
        "re-snapshot the table itself"
    )
    return SourceOperationError(
        table, statement, position, remedy, f"stopped at statement dml: {STATEMENT_DML.reason}", target
    )
