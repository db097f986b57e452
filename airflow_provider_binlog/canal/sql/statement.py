"""Which tables a DML statement logged in statement format writes (for QUERY events).

A QUERY event that holds ``INSERT``/``REPLACE``/``UPDATE``/``DELETE``/``LOAD DATA`` (from a session
with ``binlog_format=STATEMENT`` or ``MIXED``) changes rows that the binlog does not hold as row
images. :func:`dml_tables` names the tables such a statement may write, and :func:`routed_dml`
those of them a filter routes, so the converter can hand the statement on for each routed one (see
``DdlKind.STATEMENT_DML`` in :mod:`.change`) and the sensor can count it as a change. It errs on
the side of naming too many: for multi-table ``UPDATE`` and ``DELETE`` every table of the table
references is named (a table only read there is named too), never fewer than are written.

Forms::

    [WITH ...] INSERT|REPLACE [LOW_PRIORITY|DELAYED|HIGH_PRIORITY] [IGNORE] [INTO] t ...
    [WITH ...] UPDATE [LOW_PRIORITY] [IGNORE] table_references SET ...
    [WITH ...] DELETE [LOW_PRIORITY] [QUICK] [IGNORE] FROM t ...
    DELETE ... t1[.*], t2 FROM table_references ...       DELETE ... FROM t1, t2 USING table_references ...
    LOAD DATA|XML [LOW_PRIORITY|CONCURRENT] [LOCAL] INFILE '...' [REPLACE|IGNORE] INTO TABLE t ...
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_provider_binlog.binlog.events_query import ExecuteLoadQueryEvent, QueryEvent
from airflow_provider_binlog.canal.sql.ddl import Tok, tokenize

_INSERT_MODIFIERS = {"LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE"}
_UPDATE_MODIFIERS = {"LOW_PRIORITY", "IGNORE"}
_DELETE_MODIFIERS = {"LOW_PRIORITY", "QUICK", "IGNORE"}
_JOINS = {"JOIN", "STRAIGHT_JOIN"}
# words that end a table reference list (at parenthesis depth 0)
_REFS_END = {"SET", "WHERE", "ORDER", "LIMIT", "USING", "RETURNING", "FROM"}
_DML = {"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD"}

Table = tuple[str, str]
SYSTEM_SCHEMAS = frozenset({"mysql"})
"""Schemas whose statement-format writes are the server's own business (never routed here)."""


def is_dml(sql: str) -> bool:
    """Whether the statement's verb (after comments and a ``WITH`` clause) is a DML verb."""
    toks = tokenize(sql)
    i = _skip_with(toks, 0)
    return i < len(toks) and toks[i].upper in _DML


def dml_tables(sql: str, default_schema: str = "") -> list[Table] | None:
    """The tables a DML statement may write, or ``None`` when the statement is not DML.

    :param sql: the statement text of a QUERY event.
    :param default_schema: the event's default database (for unqualified names).
    :return: ``(schema, table)`` pairs in statement order, without duplicates; an empty list when
        the statement is DML but no table could be named (callers treat that as "any table").
    """
    toks = tokenize(sql)
    i = _skip_with(toks, 0)
    if i >= len(toks):
        return None
    verb = toks[i].upper
    if verb not in _DML:
        return None
    p = _Names(toks, i + 1, default_schema)
    try:
        if verb in ("INSERT", "REPLACE"):
            p.skip_words(_INSERT_MODIFIERS)
            p.eat("INTO")
            p.name()
        elif verb == "UPDATE":
            p.skip_words(_UPDATE_MODIFIERS)
            p.references()
        elif verb == "DELETE":
            p.skip_words(_DELETE_MODIFIERS)
            if p.eat("FROM"):
                p.references()  # the deleted tables (or the single table)
                if p.eat("USING"):
                    p.references()
            else:  # DELETE t1, t2 FROM table_references
                p.references()
                if p.eat("FROM"):
                    p.references()
        else:  # LOAD DATA | LOAD XML
            if p.word() not in ("DATA", "XML"):
                return None
            while p.i < len(toks) and toks[p.i].upper != "INTO":
                p.i += 1
            p.eat("INTO")
            p.eat("TABLE")
            p.name()
    except IndexError:
        pass  # cut short: what was named so far (an empty list means "any table")
    out: list[Table] = []
    for t in p.found:
        if t not in out:
            out.append(t)
    return out


def routed_dml(sql: str, default_schema: str, matches: Callable[[str, str], bool]) -> list[Table] | None:
    """The routed tables a statement-format DML writes.

    :param matches: the filter (``TableFilter.matches``).
    :return: ``None`` when the statement is not DML or writes no routed table (tables of
        :data:`SYSTEM_SCHEMAS` never count); an empty list when it is DML but its tables could not be
        named (it may write a routed one).
    """
    tables = dml_tables(sql, default_schema)
    if tables is None:
        return None
    if not tables:
        return []
    routed = [(s, t) for s, t in tables if s.lower() not in SYSTEM_SCHEMAS and matches(s, t)]
    return routed or None


def statement_changes(body: QueryEvent | ExecuteLoadQueryEvent, matches: Callable[[str, str], bool]) -> int:
    """How many changes a QUERY (or ``LOAD DATA``) event counts as for a waiting sensor: one per
    routed table its statement-format DML writes (one when those cannot be named), else 0."""
    query = body.query if isinstance(body, ExecuteLoadQueryEvent) else body
    routed = routed_dml(query.sql, query.schema, matches)
    return 0 if routed is None else max(len(routed), 1)


def _skip_with(toks: list[Tok], i: int) -> int:
    """Skip a leading ``WITH [RECURSIVE] name [(cols)] AS (...) [, ...]``; return the verb's index."""
    if i >= len(toks) or toks[i].upper != "WITH":
        return i
    i += 1
    depth = 0
    while i < len(toks):
        t = toks[i]
        if t.kind == "p" and t.text == "(":
            depth += 1
        elif t.kind == "p" and t.text == ")":
            depth -= 1
        elif depth == 0 and t.upper in _DML:
            return i
        i += 1
    return i


class _Names:
    """A cursor over tokens collecting table names."""

    def __init__(self, toks: list[Tok], i: int, default_schema: str) -> None:
        self.toks = toks
        self.i = i
        self.default_schema = default_schema
        self.found: list[Table] = []

    def peek(self) -> Tok:
        return self.toks[self.i]

    def word(self) -> str:
        t = self.toks[self.i]
        self.i += 1
        return t.upper

    def eat(self, word: str) -> bool:
        if self.i < len(self.toks) and self.toks[self.i].upper == word:
            self.i += 1
            return True
        return False

    def skip_words(self, words: set[str]) -> None:
        while self.i < len(self.toks) and self.toks[self.i].upper in words:
            self.i += 1

    def _is_p(self, k: int, text: str) -> bool:
        return k < len(self.toks) and self.toks[k].kind == "p" and self.toks[k].text == text

    def name(self) -> None:
        """``name`` or ``schema.name`` (``name.*`` in a DELETE list) at the cursor, recorded."""
        t = self.toks[self.i]
        if t.kind not in ("id", "qid"):
            return
        self.i += 1
        schema, table = self.default_schema, t.text
        if self._is_p(self.i, ".") and self.i + 1 < len(self.toks):
            nxt = self.toks[self.i + 1]
            if nxt.kind in ("id", "qid"):
                schema, table = t.text, nxt.text
                self.i += 2
            elif nxt.kind == "p" and nxt.text == "*":  # DELETE t.* FROM ...
                self.i += 2
        self.found.append((schema, table))

    def references(self) -> None:
        """A table reference list up to its end at depth 0: a name at its start, after each
        comma and each JOIN; ON conditions, aliases, index hints and derived tables skipped."""
        toks = self.toks
        expect = True  # a table name may come next
        joined = False  # a JOIN was seen: USING (...) is its condition, not DELETE's USING
        depth = 0
        while self.i < len(toks):
            t = toks[self.i]
            if t.kind == "p":
                if t.text == "(":
                    if expect and self.i + 1 < len(toks) and toks[self.i + 1].upper in ("SELECT", "WITH"):
                        self.i = self._close(self.i)  # a derived table: only read
                        expect = False
                        continue
                    depth += 1
                    self.i += 1
                    continue
                if t.text == ")":
                    if depth == 0:
                        return
                    depth -= 1
                elif t.text == ",":
                    expect = True
                    self.i += 1
                    continue
                elif t.text == ";":
                    return
                self.i += 1
                expect = False
                continue
            up = t.upper
            if up == "PARTITION" or (up == "USING" and joined):
                self.i += 1  # PARTITION (p0, p1) / JOIN ... USING (col)
                if self._is_p(self.i, "("):
                    self.i = self._close(self.i)
                expect = False
                continue
            if depth == 0 and up in _REFS_END:
                return
            if up in _JOINS:
                expect = joined = True
                self.i += 1
                continue
            if up == "ON":
                self._skip_condition()
                expect = False
                continue
            if expect and t.kind in ("id", "qid"):
                self.name()
                expect = False
                continue
            self.i += 1
            expect = False

    def _close(self, i: int) -> int:
        """The index after the parenthesis that closes the one at ``i``."""
        depth = 0
        while i < len(self.toks):
            t = self.toks[i]
            if t.kind == "p" and t.text == "(":
                depth += 1
            elif t.kind == "p" and t.text == ")":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return i

    def _skip_condition(self) -> None:
        """Skip ``ON <condition>`` up to the next JOIN, comma or end of the list at depth 0."""
        self.i += 1
        depth = 0
        while self.i < len(self.toks):
            t = self.toks[self.i]
            if t.kind == "p" and t.text == "(":
                depth += 1
            elif t.kind == "p" and t.text == ")":
                if depth == 0:
                    return
                depth -= 1
            elif depth == 0 and (
                (t.kind == "p" and t.text in (",", ";"))
                or t.upper in _JOINS
                or t.upper in ("LEFT", "RIGHT", "INNER", "CROSS", "NATURAL", "OUTER")
                or t.upper in _REFS_END
            ):
                return
            self.i += 1
