"""Just enough of MySQL's DDL grammar to follow a table's columns through the binlog.

:func:`parse_ddl` classifies a QUERY_EVENT's statement and extracts what the schema history needs:

* ``CREATE TABLE [IF NOT EXISTS] t (col type ..., PRIMARY KEY (...), ...)`` -> columns and key
  (``CREATE TABLE ... LIKE other`` and ``... AS SELECT`` are recognised, not expanded);
* ``ALTER TABLE t ADD [COLUMN] c type [FIRST|AFTER x]``, ``ADD (c1 type, ...)``,
  ``DROP [COLUMN] [IF EXISTS] c``, ``MODIFY [COLUMN] c type``, ``CHANGE [COLUMN] old new type``,
  ``RENAME COLUMN a TO b``, ``RENAME [TO|AS] t2``, ``ADD PRIMARY KEY (...)``, ``DROP PRIMARY KEY``;
  other clauses (indexes, engine, options) are skipped;
* ``RENAME TABLE a TO b [, c TO d]``, ``DROP TABLE [IF EXISTS] a, b``, ``TRUNCATE [TABLE] t``.

Anything else (``CREATE DATABASE``, ``GRANT``, statement-format DML...) is ``kind="other"`` with no
tables, or ``None`` for statements that are not DDL at all (``BEGIN``, ``COMMIT``, DML).
A clause this parser does not understand sets :attr:`DdlStatement.complete` to ``False``; the
schema history then falls back to ``information_schema`` for that table (see :mod:`.schema`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from airflow_provider_binlog.canal.sql import partitions
from airflow_provider_binlog.canal.sql.partitions import PartitionClause, Partitioning
from airflow_provider_binlog.canal.sql.tokens import Tok, TokenCursor, tokenize

__all__ = ["AlterOp", "ColumnSpec", "DdlStatement", "Default", "KeySpec", "Tok", "parse_ddl", "tokenize"]


@dataclass(frozen=True)
class ColumnSpec:
    """A column definition as written in DDL.

    :param name: column name.
    :param type_name: lower-case type name (``int``, ``varchar``, ``enum``...).
    :param unsigned: ``UNSIGNED`` given.
    :param labels: ENUM/SET labels.
    :param charset: ``CHARACTER SET``/``CHARSET`` given, else ``None``.
    :param collation: ``COLLATE`` given, else ``None``.
    :param primary: inline ``PRIMARY KEY``.
    :param args: numbers inside the type's parentheses (length, precision, scale).
    :param not_null: ``NOT NULL`` given (or implied by an inline ``PRIMARY KEY``).
    :param default: the ``DEFAULT`` clause, ``None`` when there is none.
    :param auto_increment: ``AUTO_INCREMENT`` given.
    :param generated: a generated column (``[GENERATED ALWAYS] AS (expr)``).
    :param zerofill: ``ZEROFILL`` given.
    :param unique: inline ``UNIQUE [KEY]`` (a unique key named after the column).
    :param binary: the ``BINARY`` attribute of a character column (its charset's ``_bin`` collation).
    """

    name: str
    type_name: str
    unsigned: bool = False
    labels: tuple[str, ...] | None = None
    charset: str | None = None
    collation: str | None = None
    primary: bool = False
    args: tuple[int, ...] = ()
    not_null: bool = False
    default: Default | None = None
    auto_increment: bool = False
    generated: bool = False
    zerofill: bool = False
    unique: bool = False
    binary: bool = False


@dataclass(frozen=True)
class KeySpec:
    """A ``UNIQUE`` key as written.

    :param name: its name (``CONSTRAINT name`` or the index name), ``None`` when not given (the
        server names it after its first column).
    :param columns: its columns.
    :param shaped: it can be the table's primary key when its columns are NOT NULL (no prefix
        length, no ``USING HASH``).
    """

    name: str | None
    columns: tuple[str, ...]
    shaped: bool = True


@dataclass(frozen=True)
class Default:
    """A column's ``DEFAULT`` clause as written.

    :param kind: ``null`` (``DEFAULT NULL``), ``str`` (a quoted string, with its introducer or
        temporal prefix in ``prefix``), ``num`` (a number, sign included), ``bits`` (``b'0101'``),
        ``hex`` (``x'0a'`` / ``0x0a``) or ``expression`` (anything else: ``CURRENT_TIMESTAMP``,
        ``(expr)``, functions; its value cannot be known from the statement).
    :param text: the literal (unquoted), or the expression's first token.
    :param prefix: ``DATE``/``TIME``/``TIMESTAMP`` before a string literal, else ``""``.
    """

    kind: str
    text: str = ""
    prefix: str = ""


@dataclass(frozen=True)
class AlterOp:
    """One ALTER TABLE clause that changes columns or the key.

    :param op: ``add``, ``drop``, ``modify``, ``change``, ``rename_column``, ``add_pk``, ``drop_pk``,
        ``alter_column`` (``ALTER [COLUMN] c SET/DROP DEFAULT``...: no effect on rows),
        ``partition`` (``name`` holds the verb: ``add``, ``drop``, ``truncate``, ``exchange``,
        ``reorganize``, ``coalesce``, ``convert``, ``discard``, ``import``, ``maintain`` (analyze,
        check, optimize, rebuild, repair), ``remove`` (REMOVE PARTITIONING), ``by`` (PARTITION BY))
        or ``convert_charset`` (``CONVERT TO CHARACTER SET``; ``name`` holds the charset, ``new_name``
        the ``COLLATE`` given or ``""``) or ``table_charset`` (``[DEFAULT] CHARSET = x`` /
        ``COLLATE = y``: the default of columns added later; ``name``/``new_name`` likewise);
        ``add_unique`` (``key``), ``add_index`` (a key that is not unique), ``drop_index`` (``name``),
        ``rename_index`` (``name`` to ``new_name``).
    :param name: the column it applies to (the old name for change/rename).
    :param spec: the new definition (add/modify/change).
    :param new_name: the new name (rename_column).
    :param first: ``FIRST`` given.
    :param after: ``AFTER col`` given.
    :param columns: the key columns (add_pk).
    :param part: a partition clause as read (:class:`.partitions.PartitionClause`).
    """

    op: str
    name: str = ""
    spec: ColumnSpec | None = None
    new_name: str = ""
    first: bool = False
    after: str | None = None
    columns: tuple[str, ...] = ()
    part: PartitionClause | None = None
    key: KeySpec | None = None
    if_exists: bool = False
    """``ADD COLUMN IF NOT EXISTS`` / ``DROP|MODIFY|CHANGE [COLUMN] IF EXISTS`` (MariaDB): the clause
    does nothing when the column is already there / not there."""


@dataclass(frozen=True)
class DdlStatement:
    """What a DDL statement does to tables.

    :param kind: ``create``, ``alter``, ``drop``, ``rename``, ``truncate`` or ``other``.
    :param tables: the affected ``(schema, table)`` pairs (for rename: the old names).
    :param renames: ``((schema, old), (schema, new))`` pairs (RENAME TABLE / ALTER ... RENAME TO).
    :param columns: CREATE TABLE columns.
    :param primary_key: CREATE TABLE primary key.
    :param ops: ALTER TABLE clauses.
    :param complete: ``False`` when part of the statement was not understood.
    :param like: CREATE TABLE ... LIKE source.
    """

    kind: str
    tables: tuple[tuple[str, str], ...] = ()
    renames: tuple[tuple[tuple[str, str], tuple[str, str]], ...] = ()
    columns: tuple[ColumnSpec, ...] = ()
    primary_key: tuple[str, ...] = ()
    ops: tuple[AlterOp, ...] = ()
    complete: bool = True
    like: tuple[str, str] | None = None
    default_charset: str | None = field(default=None)
    default_collation: str | None = None
    """CREATE TABLE: the table option ``COLLATE`` (``None``: not given)."""
    if_not_exists: bool = False
    """``CREATE TABLE IF NOT EXISTS`` / ``DROP TABLE IF EXISTS``."""
    partitioning: Partitioning | None = None
    """CREATE TABLE: the table's partitioning (``NOT_PARTITIONED`` without ``PARTITION BY``;
    ``None``: a ``PARTITION BY`` not read)."""
    partitioning_unread: bool = False
    """ALTER TABLE: the statement mentions partitions in a way not read as a partition clause."""
    unique_keys: tuple[KeySpec, ...] = ()
    """CREATE TABLE: its unique keys (inline ones included), as written."""
    versioning: bool = False
    """``WITH SYSTEM VERSIONING`` (CREATE, or a column's) / ``ADD SYSTEM VERSIONING`` (ALTER,
    MariaDB): the table keeps history rows, which its row events carry."""


_DDL_START = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(CREATE|ALTER|DROP|RENAME|TRUNCATE)\b", re.IGNORECASE | re.DOTALL
)
_NOT_DDL_CREATE = {"DATABASE", "SCHEMA", "USER", "ROLE", "FUNCTION", "PROCEDURE", "TRIGGER", "EVENT",
                   "VIEW", "SERVER", "TABLESPACE", "LOGFILE", "SEQUENCE", "SPATIAL", "INDEX",
                   "UNIQUE", "FULLTEXT", "DEFINER", "OR", "ALGORITHM", "SQL", "AGGREGATE"}  # fmt: skip


_SYNONYMS = {
    "character": "char", "integer": "int", "int1": "tinyint", "int2": "smallint", "int3": "mediumint",
    "middleint": "mediumint", "int4": "int", "int8": "bigint", "float4": "float", "float8": "double",
    "real": "double", "dec": "decimal", "numeric": "decimal", "fixed": "decimal", "bool": "tinyint",
    "boolean": "tinyint",
}  # fmt: skip
"""Type names the server stores as another (``REAL`` is ``DOUBLE`` unless ``sql_mode`` has
``REAL_AS_FLOAT``)."""


class _P(TokenCursor):
    def __init__(self, toks: list[Tok], default_schema: str) -> None:
        super().__init__(toks, default_schema)
        self.table: tuple[str, str] | None = None
        self.verb = ""

    def charset_clause(self) -> str:
        """At ``CHARSET`` or ``CHARACTER``: read ``CHARSET [=] name`` / ``CHARACTER SET [=] name``."""
        self.i += 1
        if self.up() == "SET":
            self.i += 1
        self.eat_p("=")
        return self.ident().lower()

    def skip_clause(self) -> None:
        """Skip to the next top-level comma or closing parenthesis / end."""
        while self.i < len(self.t):
            t = self.t[self.i]
            if t.kind == "p" and t.text in (",", ")", ";"):
                return
            if t.kind == "p" and t.text == "(":
                self.skip_parens()
                continue
            self.i += 1

    def name_list(self) -> tuple[str, ...]:
        names: list[str] = []
        if not self.eat_p("("):
            return ()
        while True:
            names.append(self.ident())
            if self.peek() is not None and self.peek().kind == "p" and self.peek().text == "(":  # type: ignore[union-attr]
                self.skip_parens()  # prefix length
            self.eat("ASC", "DESC")
            if self.eat_p(","):
                continue
            self.eat_p(")")
            return tuple(names)

    def column_spec(self, name: str) -> ColumnSpec:
        type_name, national = self.type_words()
        args: list[int] = []
        labels: list[str] | None = None
        if self.eat_p("("):
            if type_name in ("enum", "set"):
                labels = []
            while self.i < len(self.t):
                t = self.t[self.i]
                self.i += 1
                if t.kind == "p" and t.text == ")":
                    break
                if t.kind == "str" and labels is not None:
                    labels.append(t.text)
                elif t.kind == "num":
                    args.append(int(float(t.text)))
        unsigned = charset = collation = None
        primary = not_null = auto_increment = generated = zerofill = unique = binary = False
        default: Default | None = None
        # attributes up to the end of this definition
        while self.i < len(self.t):
            t = self.t[self.i]
            if t.kind == "p" and t.text in (",", ")", ";"):
                break
            u = t.upper
            if u == "DEFAULT":
                self.i += 1
                default = self.default_value()
                continue
            if u == "NOT" and self.up(1) == "NULL":
                not_null = True
                self.i += 2
                continue
            if u == "AUTO_INCREMENT":
                auto_increment = True
            elif u in ("AS", "GENERATED"):
                generated = True
            elif u == "ZEROFILL":
                zerofill = unsigned = True
            elif u == "UNSIGNED":
                unsigned = True
            elif u == "BINARY":
                binary = True  # CHAR(n) BINARY: the charset's binary collation
            elif u in ("ASCII", "UNICODE") and charset is None:
                charset = "latin1" if u == "ASCII" else "ucs2"  # CHAR(n) ASCII / UNICODE
            elif u in ("CHARSET", "CHARACTER"):
                charset = self.charset_clause()
                continue
            elif u == "COLLATE":
                self.i += 1
                self.eat_p("=")
                collation = self.ident().lower()
                continue
            elif u == "PRIMARY" and self.up(1) == "KEY":
                primary = not_null = True
                self.i += 1
            elif u == "UNIQUE":
                unique = True
                self.i += 1
                self.eat("KEY")
                continue
            elif u == "KEY":  # KEY alone is PRIMARY KEY
                primary = not_null = True
            elif u in ("FIRST", "AFTER"):
                break
            if t.kind == "p" and t.text == "(":
                self.skip_parens()
                continue
            self.i += 1
        if type_name == "serial":
            type_name, unsigned, not_null, auto_increment = "bigint", True, True, True
        elif type_name == "float" and len(args) == 1 and args[0] > 24:
            type_name, args = "double", []  # FLOAT(p): a DOUBLE from 25 bits of precision on
        elif type_name == "float" and len(args) == 1:
            args = []
        if national and charset is None:
            charset = "utf8mb3"  # NCHAR, NVARCHAR, NATIONAL ...: the server's national charset
        return ColumnSpec(
            name, type_name, bool(unsigned), tuple(labels) if labels is not None else None, charset,
            collation, primary, tuple(args), not_null, default, auto_increment, generated, zerofill,
            unique and not primary, binary,
        )  # fmt: skip

    def key_parts(self) -> tuple[tuple[str, ...], bool]:
        """At ``(``: a key's columns, and whether one has a prefix length (or is an expression)."""
        names: list[str] = []
        prefix = False
        if not self.eat_p("("):
            return (), True
        while self.peek() is not None:
            t = self.peek()
            assert t is not None
            if t.kind == "p" and t.text == "(":
                self.skip_parens()  # an expression (MySQL 8's functional key part)
                prefix = True
            else:
                names.append(self.ident())
            if self.peek() is not None and self.peek().kind == "p" and self.peek().text == "(":  # type: ignore[union-attr]
                self.skip_parens()
                prefix = True
            self.eat("ASC", "DESC")
            if self.eat_p(","):
                continue
            self.eat_p(")")
            break
        return tuple(names), prefix

    def unique_key(self, name: str | None) -> KeySpec:
        """At ``UNIQUE``: read ``UNIQUE [KEY|INDEX] [IF NOT EXISTS] [name] [USING t] (cols) ...``."""
        self.i += 1
        self.eat("KEY", "INDEX")
        if self.up() == "IF":
            self.i += 1
            self.eat("NOT")
            self.eat("EXISTS")
        t = self.peek()
        if t is not None and t.kind in ("id", "qid") and t.upper not in ("USING", "TYPE"):
            name = self.ident()
        hashed = False
        while self.up() in ("USING", "TYPE"):
            self.i += 1
            hashed = hashed or self.up() == "HASH"
            self.i += 1
        columns, prefix = self.key_parts()
        while self.peek() is not None and not (self.peek().kind == "p" and self.peek().text in (",", ")")):  # type: ignore[union-attr]
            hashed = hashed or (self.up() == "HASH" and self.up(-1) in ("USING", "TYPE"))
            if self.peek().kind == "p" and self.peek().text == "(":  # type: ignore[union-attr]
                self.skip_parens()
                continue
            self.i += 1
        return KeySpec(name, columns, not (prefix or hashed))

    def type_words(self) -> tuple[str, bool]:
        """Read a column's type name, synonyms folded to the name the server reports
        (``information_schema.COLUMNS.DATA_TYPE``); and whether it is a national character type."""
        word = self.ident().lower()
        national = word in ("national", "nchar", "nvarchar")
        if word == "national":
            word = self.ident().lower()  # NATIONAL CHAR / CHARACTER / VARCHAR
        if word == "nchar":
            word = "char"
        elif word == "nvarchar":
            word = "varchar"
        if word == "long":  # LONG, LONG VARCHAR, LONG CHAR VARYING: MEDIUMTEXT; LONG VARBINARY
            if self.up() == "VARBINARY":
                self.i += 1
                return "mediumblob", False
            if self.up() in ("VARCHAR", "CHAR", "CHARACTER"):
                self.i += 1
                self.eat("VARYING")
            return "mediumtext", False
        if word == "double" and self.up() == "PRECISION":
            self.i += 1
        if word in ("char", "character") and self.up() in ("VARYING", "VARCHAR"):
            self.i += 1
            word = "varchar"
        return _SYNONYMS.get(word, word), national

    def default_value(self) -> Default:
        """After ``DEFAULT``: read the default (see :class:`Default`)."""
        t = self.peek()
        if t is None:
            raise ValueError("default expected")
        self.i += 1
        if t.kind == "str":
            return Default("str", t.text)
        if t.kind == "p" and t.text in "+-" and self.peek() is not None and self.peek().kind == "num":  # type: ignore[union-attr]
            num = self.ident_num()
            return self.number(num if t.text == "+" else "-" + num)
        if t.kind == "num":
            nxt = self.peek()
            if t.text == "0" and nxt is not None and nxt.kind == "id" and nxt.upper.startswith("X"):
                return Default("hex", self.ident()[1:])  # 0x0a: "0" then "x0a"
            return self.number(t.text)
        if t.kind == "id":
            u = t.upper
            nxt = self.peek()
            if u == "NULL":
                return Default("null")
            if u in ("TRUE", "FALSE"):
                return Default("num", "1" if u == "TRUE" else "0")
            if nxt is not None and nxt.kind == "str":
                if u == "B":
                    self.i += 1
                    return Default("bits", nxt.text)
                if u == "X":
                    self.i += 1
                    return Default("hex", nxt.text)
                if u in ("DATE", "TIME", "TIMESTAMP"):
                    self.i += 1
                    return Default("str", nxt.text, prefix=u)
                if u.startswith("_"):  # a charset introducer: _utf8mb4'text'
                    self.i += 1
                    return Default("str", nxt.text)
        if t.kind == "p" and t.text == "(":
            self.i -= 1
            self.skip_parens()
            return Default("expression", "(")
        return Default("expression", t.text)  # CURRENT_TIMESTAMP, NOW(), UUID()...: as an expression

    def number(self, text: str) -> Default:
        nxt = self.peek()
        if nxt is not None and nxt.kind == "id" and nxt.upper[:1] == "E":  # 1e3: not read exactly here
            return Default("expression", text)
        return Default("num", text)

    def ident_num(self) -> str:
        t = self.peek()
        assert t is not None
        self.i += 1
        return t.text


def _create(p: _P) -> DdlStatement:
    p.eat("TEMPORARY")
    if not p.eat("TABLE"):
        return DdlStatement("other")
    ine = False
    if p.eat("IF"):
        p.eat("NOT")
        ine = p.eat("EXISTS")
    table = p.table = p.qualified()
    if p.eat("LIKE"):
        return DdlStatement("create", (table,), like=p.qualified(), if_not_exists=ine)
    if p.eat_p("(") and p.up() == "LIKE":
        p.i += 1
        return DdlStatement("create", (table,), like=p.qualified(), if_not_exists=ine)
    if p.peek() is None or not (p.t[p.i - 1].kind == "p" and p.t[p.i - 1].text == "("):
        return DdlStatement("create", (table,), complete=False, if_not_exists=ine)  # ... AS SELECT
    columns: list[ColumnSpec] = []
    pk: tuple[str, ...] = ()
    uniques: list[KeySpec] = []
    while p.peek() is not None:
        u = p.up()
        symbol = None
        if u == "CONSTRAINT":
            p.i += 1
            nxt = p.peek()
            if p.up() not in ("PRIMARY", "UNIQUE") and nxt is not None and nxt.kind in ("id", "qid"):
                symbol = p.ident()
            u = p.up()
        if u == "UNIQUE":
            uniques.append(p.unique_key(symbol))
            p.skip_clause()
        elif u == "PRIMARY" and p.up(1) == "KEY":
            p.i += 2
            while p.peek() is not None and not (p.peek().kind == "p" and p.peek().text == "("):  # type: ignore[union-attr]
                p.i += 1  # USING BTREE, index name
            pk = p.name_list()
            p.skip_clause()
        elif u in ("KEY", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK", "PERIOD", "SYSTEM"):
            p.skip_clause()
        else:
            name = p.ident()
            spec = p.column_spec(name)
            columns.append(spec)
            if spec.primary:
                pk = (spec.name,)
            if spec.unique:
                uniques.append(KeySpec(None, (spec.name,)))
        if p.eat_p(","):
            continue
        p.eat_p(")")
        break
    charset, collation, partitioning = _table_options(p)
    return DdlStatement(
        "create", (table,), columns=tuple(columns), primary_key=pk, default_charset=charset,
        default_collation=collation, if_not_exists=ine, partitioning=partitioning,
        unique_keys=tuple(uniques),
    )  # fmt: skip


def _table_options(p: _P) -> tuple[str | None, str | None, Partitioning | None]:
    """After CREATE TABLE's columns: the default charset and collation, and the partitioning."""
    charset = collation = None
    partitioning: Partitioning | None = partitions.NOT_PARTITIONED
    while p.peek() is not None:
        u = p.up()
        if u in ("CHARSET", "CHARACTER"):
            charset = p.charset_clause()
            continue
        if u == "COLLATE":
            p.i += 1
            p.eat_p("=")
            collation = p.ident().lower()
            continue
        if u == "PARTITION" and p.up(1) == "BY":
            p.i += 2
            try:
                partitioning = partitions.parse_partition_by(p)
            except (ValueError, IndexError):
                partitioning = None
            continue
        if u in ("PARTITION", "PARTITIONS", "SUBPARTITION"):
            partitioning = None  # a partition clause not read
        p.i += 1
    return charset, collation, partitioning


def _alter(p: _P) -> DdlStatement:
    p.eat("ONLINE", "IGNORE")
    if not p.eat("TABLE"):
        return DdlStatement("other")
    if p.eat("IF"):
        p.eat("EXISTS")
    table = p.table = p.qualified()
    ops: list[AlterOp] = []
    renames: list[tuple[tuple[str, str], tuple[str, str]]] = []
    complete = True
    while p.peek() is not None:
        u = p.up()
        if u == "ADD":
            p.i += 1
            p.eat("COLUMN")
            guarded = p.eat("IF")
            if guarded:
                p.eat("NOT")
                p.eat("EXISTS")
            u2 = p.up()
            symbol = None
            if u2 == "CONSTRAINT":
                p.i += 1
                if p.up() not in ("PRIMARY", "UNIQUE"):
                    symbol = p.ident()
                u2 = p.up()
            if u2 == "UNIQUE":
                ops.append(AlterOp("add_unique", key=p.unique_key(symbol)))
                p.skip_clause()
            elif u2 == "PRIMARY" and p.up(1) == "KEY":
                p.i += 2
                while p.peek() is not None and not (p.peek().kind == "p" and p.peek().text == "("):  # type: ignore[union-attr]
                    p.i += 1
                ops.append(AlterOp("add_pk", columns=p.name_list()))
                p.skip_clause()
            elif u2 == "PARTITION":
                ops.append(_partition(p, "add"))
            elif u2 in (
                "KEY",
                "INDEX",
                "UNIQUE",
                "FULLTEXT",
                "SPATIAL",
                "FOREIGN",
                "CHECK",
                "PERIOD",
                "SYSTEM",
            ):
                if u2 in ("KEY", "INDEX", "FULLTEXT", "SPATIAL"):
                    ops.append(AlterOp("add_index"))  # re-sorts the keys (see schema._keyed)
                p.skip_clause()
            elif p.eat_p("("):
                while True:
                    name = p.ident()
                    spec = p.column_spec(name)
                    ops.append(AlterOp("add", name, spec))
                    ops.extend(_inline_keys(spec))
                    if p.eat_p(","):
                        continue
                    p.eat_p(")")
                    break
            else:
                name = p.ident()
                spec = p.column_spec(name)
                first, after = _placement(p)
                ops.append(AlterOp("add", name, spec, first=first, after=after, if_exists=guarded))
                ops.extend(_inline_keys(spec))
        elif u == "DROP":
            p.i += 1
            if p.up() == "PRIMARY" and p.up(1) == "KEY":
                p.i += 2
                ops.append(AlterOp("drop_pk"))
            elif p.up() == "PARTITION":
                # partition operations stand alone in a statement (names, commas...)
                ops.append(_partition(p, "drop"))
            elif p.up() in ("INDEX", "KEY", "CONSTRAINT"):
                p.i += 1
                if p.up() == "IF":
                    p.i += 1
                    p.eat("EXISTS")
                ops.append(AlterOp("drop_index", p.ident()))
                p.skip_clause()
            elif p.up() in _INDEX_WORDS:
                p.skip_clause()
            else:
                p.eat("COLUMN")
                guarded = p.eat("IF")
                if guarded:
                    p.eat("EXISTS")
                ops.append(AlterOp("drop", p.ident(), if_exists=guarded))
                p.skip_clause()
        elif u == "MODIFY":
            p.i += 1
            p.eat("COLUMN")
            guarded = p.eat("IF")
            if guarded:
                p.eat("EXISTS")
            name = p.ident()
            spec = p.column_spec(name)
            first, after = _placement(p)
            ops.append(AlterOp("modify", name, spec, first=first, after=after, if_exists=guarded))
            ops.extend(_inline_keys(spec))
        elif u == "CHANGE":
            p.i += 1
            p.eat("COLUMN")
            guarded = p.eat("IF")
            if guarded:
                p.eat("EXISTS")
            old = p.ident()
            new = p.ident()
            spec = p.column_spec(new)
            first, after = _placement(p)
            ops.append(
                AlterOp("change", old, spec, new_name=new, first=first, after=after, if_exists=guarded)
            )
            ops.extend(_inline_keys(spec))
        elif u == "RENAME":
            p.i += 1
            if p.eat("COLUMN"):
                old = p.ident()
                p.eat("TO")
                ops.append(AlterOp("rename_column", old, new_name=p.ident()))
            elif p.up() in ("INDEX", "KEY"):
                p.i += 1
                old = p.ident()
                p.eat("TO")
                ops.append(AlterOp("rename_index", old, new_name=p.ident()))
                p.skip_clause()
            else:
                p.eat("TO", "AS")
                renames.append((table, p.qualified()))
        elif u == "ALTER":
            ops.append(AlterOp("alter_column"))
            p.skip_clause()  # ALTER [COLUMN] c SET DEFAULT ...: no effect on the rows or their format
        elif u in _PARTITION_VERBS and (p.up(1) in ("PARTITION", "PARTITIONING") or u == "COALESCE"):
            p.i += 1  # partition operations stand alone in a statement
            ops.append(_partition(p, _PARTITION_VERBS[u]))
        elif u == "PARTITION" and p.up(1) == "BY":
            p.i += 1  # the partitioning is the statement's last clause
            ops.append(_partition(p, "by"))
        elif u == "CONVERT" and p.up(1) in ("PARTITION", "TABLE"):
            ops.append(AlterOp("partition", "convert"))  # MariaDB: a partition out to a table or in
            p.i = len(p.t)
        elif u == "CONVERT" and p.up(1) == "TO":
            p.i += 2
            charset = p.charset_clause() if p.up() in ("CHARSET", "CHARACTER") else ""
            collation = ""
            if p.up() == "COLLATE":
                p.i += 1
                p.eat_p("=")
                collation = p.ident().lower()
            ops.append(AlterOp("convert_charset", charset, new_name=collation))
            p.skip_clause()
        elif u in ("CHARSET", "CHARACTER", "COLLATE") or (
            u == "DEFAULT" and p.up(1) in ("CHARSET", "CHARACTER", "COLLATE")
        ):
            p.eat("DEFAULT")
            charset = collation = ""
            while p.up() in ("CHARSET", "CHARACTER", "COLLATE"):
                if p.up() == "COLLATE":
                    p.i += 1
                    p.eat_p("=")
                    collation = p.ident().lower()
                else:
                    charset = p.charset_clause()
            ops.append(AlterOp("table_charset", charset, new_name=collation))
            p.skip_clause()
        elif u in ("ALGORITHM", "LOCK", "ENGINE", "ROW_FORMAT", "COMMENT", "AUTO_INCREMENT", "FORCE",
                   "DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "CONVERT", "ORDER", "KEY_BLOCK_SIZE",
                   "STATS_PERSISTENT", "PACK_KEYS", "CHECKSUM", "DISABLE", "ENABLE", "WAIT", "NOWAIT",
                   "ADD_COLUMN", *_ROW_NEUTRAL_OPTIONS):  # fmt: skip
            if u == "CONVERT":
                complete = False  # a CONVERT clause not read above
            p.skip_clause()
        else:
            complete = False
            p.skip_clause()
        if not p.eat_p(",") and p.peek() is not None:
            p.i += 1
    tables: tuple[tuple[str, str], ...] = (table,)
    for clause in ops:  # EXCHANGE PARTITION: the other table's rows change too
        other = clause.part.other if clause.part is not None else None
        if other is not None and other != table:
            tables += (other,)
    unread = any(t.upper in ("PARTITION", "PARTITIONING") for t in p.t) and not any(
        o.op == "partition" for o in ops
    )
    return DdlStatement(
        "alter", tables, renames=tuple(renames), ops=tuple(ops), complete=complete, partitioning_unread=unread
    )


_INDEX_WORDS = frozenset(
    {"KEY", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK", "PERIOD", "SYSTEM"}
)
_PARTITION_VERBS = {
    "TRUNCATE": "truncate", "EXCHANGE": "exchange", "REORGANIZE": "reorganize", "COALESCE": "coalesce",
    "ANALYZE": "maintain", "CHECK": "maintain", "OPTIMIZE": "maintain", "REBUILD": "maintain",
    "REPAIR": "maintain", "REMOVE": "remove", "DISCARD": "discard", "IMPORT": "import",
}  # fmt: skip


_ROW_NEUTRAL_OPTIONS = (
    "MAX_ROWS", "MIN_ROWS", "AVG_ROW_LENGTH", "STATS_SAMPLE_PAGES", "STATS_AUTO_RECALC",
    "DELAY_KEY_WRITE", "ENCRYPTED", "ENCRYPTION_KEY_ID", "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL",
    "PAGE_CHECKSUM", "TABLE_CHECKSUM", "TRANSACTIONAL", "COMPRESSION", "ENCRYPTION", "IETF_QUOTES",
)  # fmt: skip
"""ALTER TABLE options that change how rows are stored, never which rows or columns there are
(``UNION``, ``INSERT_METHOD``, ``SEQUENCE``, ``ENGINE`` of another kind are not among them)."""


def _partition(p: _P, verb: str) -> AlterOp:
    """A partition clause (they stand alone: read to the statement's end)."""
    return AlterOp("partition", verb, part=partitions.parse_alter_partition(p, verb))


def _inline_keys(spec: ColumnSpec) -> list[AlterOp]:
    """The keys a column definition in an ALTER declares (``PRIMARY KEY``, ``UNIQUE``)."""
    if spec.primary:
        return [AlterOp("add_pk", columns=(spec.name,))]
    if spec.unique:
        return [AlterOp("add_unique", key=KeySpec(None, (spec.name,)))]
    return []


def _placement(p: _P) -> tuple[bool, str | None]:
    if p.eat("FIRST"):
        return True, None
    if p.eat("AFTER"):
        return False, p.ident()
    return False, None


def _versioned(stmt: DdlStatement, tokens: list[Tok]) -> DdlStatement:
    """``stmt`` marked :attr:`DdlStatement.versioning` when its words hold ``WITH``/``ADD SYSTEM
    VERSIONING``."""
    words = [t.text.upper() if t.kind == "id" else "" for t in tokens]
    for i in range(len(words) - 2):
        if words[i] in ("WITH", "ADD") and words[i + 1] == "SYSTEM" and words[i + 2] == "VERSIONING":
            return replace(stmt, versioning=True)
    return stmt


def parse_ddl(sql: str, default_schema: str = "") -> DdlStatement | None:
    """Classify a statement; ``None`` when it is not DDL (BEGIN, COMMIT, DML, SAVEPOINT...).

    :param sql: the statement text from a QUERY_EVENT.
    :param default_schema: the event's default database, for unqualified names.
    """
    m = _DDL_START.match(sql)
    if not m:
        return None
    p = _P(tokenize(sql), default_schema)
    try:
        verb = p.verb = p.ident().upper()
        if verb == "CREATE":
            p.eat("OR")
            p.eat("REPLACE")
            if p.up() in _NOT_DDL_CREATE and p.up() != "OR":
                return DdlStatement("other")
            return _versioned(_create(p), p.t)
        if verb == "ALTER":
            return _versioned(_alter(p), p.t)
        if verb == "DROP":
            p.eat("TEMPORARY")
            if not p.eat("TABLE", "TABLES"):
                return DdlStatement("other")
            ie = False
            if p.eat("IF"):
                ie = p.eat("EXISTS")
            tables = [p.qualified()]
            while p.eat_p(","):
                tables.append(p.qualified())
            return DdlStatement("drop", tuple(tables), if_not_exists=ie)
        if verb == "RENAME":
            if not p.eat("TABLE", "TABLES"):
                return DdlStatement("other")
            pairs = []
            while True:
                old = p.qualified()
                p.eat("TO")
                pairs.append((old, p.qualified()))
                if not p.eat_p(","):
                    break
            return DdlStatement("rename", tuple(o for o, _ in pairs), renames=tuple(pairs))
        if verb == "TRUNCATE":
            p.eat("TABLE")
            return DdlStatement("truncate", (p.qualified(),))
    except (ValueError, IndexError):
        if p.table is not None:
            return DdlStatement(p.verb.lower(), (p.table,), complete=False)
        return DdlStatement("other", complete=False)
    return DdlStatement("other")
