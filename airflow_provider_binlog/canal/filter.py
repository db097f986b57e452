"""canal's table filter: which ``schema.table`` a destination reads, and which of its columns.

Syntax (the same strings canal takes in ``canal.instance.filter.*``):

* **include** (``canal.instance.filter.regex``): comma-separated Perl-style regular expressions,
  each matched against ``schema.table``, case-insensitively and **anchored at both ends** (the
  whole name must match, as canal's ``Perl5Matcher.matches`` does). Empty means every table.
  Examples: ``.*\\..*`` (everything), ``shop\\..*`` (every table of ``shop``),
  ``shop\\.orders,shop\\.order_items``, ``shop\\.orders_\\d+`` (sharded tables).
* **exclude** (``canal.instance.filter.black.regex``): same syntax; a table matching it is dropped
  even when it matches the include list. Empty means nothing is excluded.
* **columns** (``canal.instance.filter.field``): ``schema.table:col1/col2,schema.table2:col3``;
  the table name is literal (not a regex) and case-insensitive. A listed table keeps only those
  columns; primary-key columns are always kept, because the merge needs them.
* **exclude columns** (``canal.instance.filter.black.field``): same syntax; those columns are dropped.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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


def _parse_columns(text: str | None, what: str) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for item in split_patterns(text):
        name, sep, cols = item.partition(":")
        name = name.strip()
        if not sep or "." not in name:
            raise ConfigurationError(f"invalid {what} entry {item!r}: expected schema.table:col1/col2")
        columns = frozenset(c.strip().lower() for c in cols.split("/") if c.strip())
        out[name.lower()] = out.get(name.lower(), frozenset()) | columns
    return out


@dataclass(frozen=True)
class TableFilter:
    """A destination's filter in canal's syntax (see the module docstring).

    :param include: comma-separated regexes on ``schema.table``; empty = all tables.
    :param exclude: comma-separated regexes of tables to drop; empty = none.
    :param columns: ``schema.table:col1/col2,...`` columns to keep per table.
    :param exclude_columns: ``schema.table:col1/col2,...`` columns to drop per table.
    """

    include: str = ""
    exclude: str = ""
    columns: str = ""
    exclude_columns: str = ""
    _include_re: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _exclude_re: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _keep: dict[str, frozenset[str]] = field(init=False, repr=False, compare=False)
    _drop: dict[str, frozenset[str]] = field(init=False, repr=False, compare=False)
    _cache: dict[tuple[str, str], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        inc = split_patterns(self.include)
        exc = split_patterns(self.exclude)
        object.__setattr__(self, "_include_re", _compile(inc, "filter"))
        object.__setattr__(self, "_exclude_re", _compile(exc, "black-list filter"))
        object.__setattr__(self, "_keep", _parse_columns(self.columns, "column filter"))
        object.__setattr__(self, "_drop", _parse_columns(self.exclude_columns, "column black-list"))
        object.__setattr__(self, "_cache", {})
        for p in suspicious_patterns(self.include) + suspicious_patterns(self.exclude):
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
            hit = (self._include_re is None or self._include_re.fullmatch(name) is not None) and (
                self._exclude_re is None or self._exclude_re.fullmatch(name) is None
            )
            if len(self._cache) < 100_000:
                self._cache[key] = hit
        return hit

    def has_column_rules(self, schema: str, table: str) -> bool:
        name = f"{schema}.{table}".lower()
        return name in self._keep or name in self._drop

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
