"""canal's table filter: which ``schema.table`` a destination reads, and which of its columns.

Syntax (the same strings canal takes in ``canal.instance.filter.*``):

* **include** (``canal.instance.filter.regex``): comma-separated Perl-style regular expressions,
  each matched against ``schema.table``, case-insensitively and **anchored at both ends** (the
  whole name must match, as canal's ``Perl5Matcher.matches`` does). Empty means every table.
  Examples: ``.*\\..*`` (everything), ``shop\\..*`` (every table of ``shop``),
  ``shop\\.orders,shop\\.order_items``, ``shop\\.orders_\\d+`` (sharded tables).
* **exclude** (``canal.instance.filter.black.regex``): a table matching it is dropped even when it
  matches the include list. Empty means nothing is excluded. Each comma-separated item is either a
  canal regex (as above) or a **glob** on ``schema.table`` as the operator's ``tables`` take them
  (``shop.tmp_*``, ``shop.`z.w```: ``*`` and ``?`` wildcards, ``.`` the literal separator, a part
  holding dots in backticks), matched on the schema and the table apart, case-insensitively. An
  item is a glob when it holds none of ``\\ [ ] ( ) { } | ^ $ +`` and reads as exactly two parts;
  otherwise it is a regex. So ``shop.audit`` excludes just that table (as a regex it would also
  exclude ``shopXaudit``), and ``shop\\.tmp_.*`` is canal's regex.
* **columns** (``canal.instance.filter.field``): ``schema.table:col1/col2,schema.table2:col3``;
  the table name is literal (not a regex) and case-insensitive. A listed table keeps only those
  columns, and the list must hold its primary-key columns (the merge needs them):
  :meth:`TableFilter.table_schema` raises at the table's first row change otherwise.
* **exclude columns** (``canal.instance.filter.black.field``): same syntax; those columns are
  dropped (a primary-key column may not be dropped).

Row changes of a table with column rules carry the projected :class:`TableSchema` (the kept
columns only), so the lake table is made of exactly those columns.

**The unescaped ``.`` mistake.** In a regex ``.`` means *any character*, so ``shop.*`` does not
mean "the tables of ``shop``": it matches ``shopping.orders`` and ``shop_archive.orders`` too, and
``shop.order.*`` matches table ``x`` of a schema called ``shop_order``. Write the separator as
``\\.``: ``shop\\..*``. :func:`suspicious_patterns` flags patterns where that is probably what
happened, and :class:`TableFilter` logs a warning for them (the pattern is still used as written,
as canal does).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.canal.names import parse_name
from airflow_provider_binlog.errors import ConfigurationError

log = logging.getLogger(__name__)


def split_patterns(text: str | None) -> list[str]:
    """Split a comma-separated filter string into its patterns (blank items dropped).

    A comma inside ``{m,n}`` is part of the pattern, not a separator.
    """
    if not text:
        return []
    out: list[str] = []
    buf: list[str] = []
    depth = 0
    escaped = False
    for ch in text:
        if escaped:
            buf.append(ch)
            escaped = False
            continue
        if ch == "\\":
            buf.append(ch)
            escaped = True
            continue
        if ch == "{":
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(buf).strip())
            buf = []
            continue
        buf.append(ch)
    out.append("".join(buf).strip())
    return [p for p in out if p]


def _compile(patterns: list[str], what: str) -> re.Pattern[str] | None:
    if not patterns:
        return None
    for p in patterns:
        try:
            re.compile(p)
        except re.error as exc:
            raise ConfigurationError(f"invalid {what} pattern {p!r}: {exc}") from None
    # canal sorts longer patterns first before joining; with fullmatch the order does not change
    # the result, but keeping it makes the compiled form easy to compare with canal's logs.
    joined = "|".join(f"(?:{p})" for p in sorted(patterns, key=len, reverse=True))
    return re.compile(joined, re.IGNORECASE | re.DOTALL)


_BARE_DOT = re.compile(r"(?<!\\)((?:\\\\)*)\.(?![*+?{])")


def suspicious_patterns(text: str | None) -> list[str]:
    """Return the patterns of a filter string that contain an unescaped ``.`` that is probably a
    literal schema/table separator (a ``.`` not followed by a quantifier, or a leading ``name.*``
    with no ``\\.`` anywhere, like ``shop.*``).

    :param text: the comma-separated filter string.
    """
    out = []
    for p in split_patterns(text):
        if "\\." in p or p in (".*", ".*\\..*", ".+"):
            continue
        stripped = re.sub(r"\[[^\]]*\]", "", p)  # dots inside character classes are literal
        if "." in stripped and (_BARE_DOT.search(stripped) or not stripped.startswith(".")):
            out.append(p)
    return out


_REGEX_ONLY = frozenset("\\[](){}|^$+")


def exclude_text(exclude: str | Sequence[str] | None) -> str:
    """An ``exclude`` given as a string or a list, as one comma-separated filter string."""
    if exclude is None:
        return ""
    if isinstance(exclude, str):
        return exclude
    return ",".join(exclude)


def as_glob(item: str) -> tuple[str, str] | None:
    """``(schema glob, table glob)`` when a black-list item is a glob, ``None`` when it is a regex
    (see the module docstring)."""
    if any(c in _REGEX_ONLY for c in item):
        return None
    try:
        parts = parse_name(item)
    except ConfigurationError:
        return None
    return (parts[0], parts[1]) if len(parts) == 2 else None


def _glob_re(glob: str) -> re.Pattern[str]:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile(body, re.IGNORECASE | re.DOTALL)


def _parse_columns(text: str | None, what: str) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for item in split_patterns(text):
        name, sep, cols = item.partition(":")
        name = name.strip()
        if not sep or "." not in name:
            raise ConfigurationError(f"invalid {what} entry {item!r}: expected schema.table:col1/col2")
        columns = frozenset(c.strip().lower() for c in cols.split("/") if c.strip())
        if not columns:
            raise ConfigurationError(f"invalid {what} entry {item!r}: no columns after ':'")
        out[name.lower()] = out.get(name.lower(), frozenset()) | columns
    return out


@dataclass(frozen=True)
class TableFilter:
    """A destination's filter in canal's syntax (see the module docstring).

    :param include: comma-separated regexes on ``schema.table``; empty = all tables.
    :param exclude: comma-separated regexes or globs of tables to drop; empty = none.
    :param columns: ``schema.table:col1/col2,...`` columns to keep per table.
    :param exclude_columns: ``schema.table:col1/col2,...`` columns to drop per table.
    :param refuse: ``(schema, table) -> reason or None``: a table that passes the filter but cannot
        be loaded (see :meth:`..routing.Routes.refusal`); :meth:`table_schema` raises the reason.
    """

    include: str = ""
    exclude: str = ""
    columns: str = ""
    exclude_columns: str = ""
    refuse: Callable[[str, str], str | None] | None = field(default=None, repr=False, compare=False)
    _include_re: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _exclude_re: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _exclude_globs: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = field(
        init=False, repr=False, compare=False
    )
    _keep: dict[str, frozenset[str]] = field(init=False, repr=False, compare=False)
    _drop: dict[str, frozenset[str]] = field(init=False, repr=False, compare=False)
    _cache: dict[tuple[str, str], bool] = field(init=False, repr=False, compare=False)
    _schemas: dict[int, tuple[TableSchema, TableSchema]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        inc = split_patterns(self.include)
        regexes, globs = [], []
        for item in split_patterns(self.exclude):
            glob = as_glob(item)
            if glob is None:
                regexes.append(item)
            else:
                globs.append((_glob_re(glob[0]), _glob_re(glob[1])))
        object.__setattr__(self, "_include_re", _compile(inc, "filter"))
        object.__setattr__(self, "_exclude_re", _compile(regexes, "black-list filter"))
        object.__setattr__(self, "_exclude_globs", tuple(globs))
        object.__setattr__(self, "_keep", _parse_columns(self.columns, "column filter"))
        object.__setattr__(self, "_drop", _parse_columns(self.exclude_columns, "column black-list"))
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_schemas", {})
        for p in suspicious_patterns(self.include) + suspicious_patterns(",".join(regexes)):
            log.warning(
                "filter pattern %r has an unescaped '.', which matches any character "
                "(e.g. 'shop.*' also matches 'shopping.orders'); write the separator as '\\.'",
                p,
            )

    @property
    def canal_string(self) -> str:
        """The include filter as canal stores it in the ``filter`` znode."""
        return self.include

    def matches(self, schema: str, table: str | None) -> bool:
        """Whether changes of ``schema.table`` pass the filter.

        :param schema: database name.
        :param table: table name; ``None`` for statements not about one table (matched as
            ``schema.``, as canal does).
        """
        key = (schema, table or "")
        hit = self._cache.get(key)
        if hit is None:
            name = f"{schema}.{table or ''}"
            hit = (
                (self._include_re is None or self._include_re.fullmatch(name) is not None)
                and (self._exclude_re is None or self._exclude_re.fullmatch(name) is None)
                and not any(s.fullmatch(schema) and t.fullmatch(table or "") for s, t in self._exclude_globs)
            )
            if len(self._cache) < 100_000:
                self._cache[key] = hit
        return hit

    def has_column_rules(self, schema: str, table: str) -> bool:
        name = f"{schema}.{table}".lower()
        return name in self._keep or name in self._drop

    def table_schema(self, ts: TableSchema, where: object = None) -> TableSchema:
        """The schema the row changes of ``ts``'s table carry: ``ts`` itself, or with column rules
        the kept columns only (in table order). Computed once per schema object.

        :param where: the binlog position of the change, for errors.
        :raises ConfigurationError: the table is refused (``refuse``), or its column rules would
            drop a primary-key column.
        """
        known = self._schemas.get(id(ts))
        if known is not None and known[0] is ts:
            return known[1]
        at = f" at {where}" if where is not None else ""
        if self.refuse is not None:
            reason = self.refuse(ts.schema, ts.table)
            if reason is not None:
                raise ConfigurationError(f"{reason} (a row change of it{at}; the cursor stays before it)")
        out = ts
        name = ts.qualified_name.lower()
        keep, drop = self._keep.get(name), self._drop.get(name)
        if keep is not None or drop is not None:
            lost = [
                k for k in ts.primary_key
                if (keep is not None and k.lower() not in keep) or (drop is not None and k.lower() in drop)
            ]  # fmt: skip
            if lost:
                wanted = {k.lower() for k in ts.primary_key} | (keep or frozenset())
                cols = "/".join(c.name for c in ts.columns if c.name.lower() in wanted)
                raise ConfigurationError(
                    f"columns: the column rules of {ts.qualified_name} leave out its primary-key column(s) "
                    f"{', '.join(lost)}{at}; the lake merges rows by the key, so the selection must hold it: "
                    f"e.g. columns='{ts.qualified_name}:{cols}'"
                )
            names = {c.name.lower() for c in ts.columns}
            unknown = sorted((keep or frozenset()) - names)
            if unknown:
                log.warning(
                    "columns: %s has no column(s) %s%s (listed in the column filter)",
                    ts.qualified_name, ", ".join(unknown), at,
                )  # fmt: skip
            kept = tuple(
                c for c in ts.columns
                if (keep is None or c.name.lower() in keep) and (drop is None or c.name.lower() not in drop)
            )  # fmt: skip
            out = replace(ts, columns=kept)
        if len(self._schemas) >= 10_000:
            self._schemas.clear()
        self._schemas[id(ts)] = (ts, out)
        return out

    def project(
        self, schema: str, table: str, row: Mapping[str, Any] | None, primary_key: Iterable[str] = ()
    ) -> dict[str, Any] | None:
        """Apply the column lists of ``schema.table`` to a row image; primary-key columns stay.

        :param row: the row image keyed by column name (``None`` passes through).
        :param primary_key: the table's primary-key columns (never dropped).
        """
        if row is None:
            return None
        name = f"{schema}.{table}".lower()
        keep = self._keep.get(name)
        drop = self._drop.get(name)
        if keep is None and drop is None:
            return dict(row)
        pk = {c.lower() for c in primary_key}
        out = {}
        for col, value in row.items():
            low = col.lower()
            if low not in pk:
                if keep is not None and low not in keep:
                    continue
                if drop is not None and low in drop:
                    continue
            out[col] = value
        return out
