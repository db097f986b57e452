"""Routing: which source tables a destination reads and which lake table each one lands in.

A route maps a source name to a target name. The source is ``schema.table`` written literally or
as a glob (``*`` any run of characters, ``?`` one character; matched case-insensitively, like
canal's filter, so that every table the filter lets through has a route); a part holding dots is
written in backticks (``shop.`z.w```). The target may use ``{schema}`` and ``{table}``::

    {"shop.orders": "lake.shop.orders", "shop.*": "lake.shop.{table}", "crm_*.*": "lake.{schema}.{table}"}

**Filling in.** A target is a ``[catalog.]namespace.table`` name whose parts may be in backticks
(see :mod:`.names`). It is split into its parts *before* ``{schema}`` and ``{table}`` are filled in,
so a name is always placed inside the one part that holds its placeholder, whatever it contains:
table ``z.w`` of ``db`` under ``lake.{schema}.{table}`` is ``lake.db.`z.w``` (namespace ``db``,
table ``z.w``), never namespace ``db.z``, table ``w``; ``x`;drop`` is ``lake.db.`x``;drop```.
Parts that need it come back in backticks (:func:`.names.name_text`), so the lake layer's
``parse_name`` reads back exactly the parts that were filled in.

**Refused names.** Some source names cannot become a lake table part: :func:`part_problem` says
which (a ``/``, a ``.`` or ``..`` part, a control character, more than 255 bytes; a schema holding a
``.``, whose ``schema.table`` key would be ambiguous). :meth:`Routes.target_for` gives ``None`` for
them and :meth:`Routes.refusal` the reason; the instance stops at such a table's first row change,
naming the table, its ``file:pos`` and the way forward: ``exclude=`` it, or route it elsewhere.

**Exclusion.** ``exclude`` is canal's black list (``canal.instance.filter.black.regex``): items
separated by commas (or a list), each a glob like the sources above or a canal regex (see
:mod:`.filter`). An excluded table has no route, is not read, and is never refused.

**Shadow tables of online schema-change tools.** gh-ost builds ``_t_gho`` (and logs to ``_t_ghc``,
parks the old table as ``_t_del``), pt-online-schema-change builds ``_t_new`` (and parks ``_t_old``);
they swap the copy in with one ``RENAME TABLE``. Such tables are transient copies, never lake
tables: a glob route does not take a table named like :data:`SHADOW_TABLE` (``_`` + name +
``_gho|_ghc|_del|_new|_old``, case-insensitive). :meth:`Routes.filter` reads the copy tables
(``_t_gho``, ``_t_new``: :func:`copy_regex`) of routed names, whose row events the drain keeps in a
staging table beside ``t``'s lake table and swaps in at the cut-over (:mod:`.online_copy`); the
changelog and parked tables are not read. The swap itself reaches the lake as a RENAME of the
routed name (:func:`..operations.rename_operation`). To load shadow tables as lake tables of their own
instead: an exact route, a glob whose table part itself ends with the suffix (``shop._*_new``), or
``Routes(shadow_tables=True)``.

**Regex sources.** A source holding any of ``\\ [ ] ( ) { } | ^ $ +`` is canal's regex on
``schema.table`` (matched whole, case-insensitively), as an ``exclude`` item is:
``shop\\.orders_[0-9]+`` (an unescaped ``.`` matches any character, the dot too). It is tried after
the globs; the copy tables of online schema-change tools are not read for it.

Exact routes win over globs; among globs the first that matches wins. :meth:`Routes.filter`
turns the sources into canal's include filter (``.`` escaped, see :mod:`.filter`), so a table
that matches a glob is read even when it is created after the run started.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from airflow_provider_binlog.canal.filter import TableFilter, exclude_text
from airflow_provider_binlog.canal.names import name_text, parse_name
from airflow_provider_binlog.errors import ConfigurationError

MAX_PART_BYTES = 255
"""The longest name part in UTF-8 bytes: a file name on common file systems (a Hadoop catalog makes
each part a directory)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

SHADOW_SUFFIXES = ("gho", "ghc", "del", "new", "old")
"""Table name suffixes of the shadow, changelog and parked tables of gh-ost and pt-osc."""
SHADOW_TABLE = "_.+_(?:" + "|".join(SHADOW_SUFFIXES) + ")"
"""The table names a glob route leaves out (a regex, matched whole and case-insensitively):
``_t_gho``, ``_t_ghc``, ``_t_del``, ``_t_20240101120000_del`` (gh-ost), ``_t_new``, ``__t_old`` (pt-osc)."""
_SHADOW = re.compile(SHADOW_TABLE, re.IGNORECASE | re.DOTALL)


def is_shadow_table(table: str) -> bool:
    """Whether ``table`` is named like a shadow table of gh-ost or pt-osc (:data:`SHADOW_TABLE`)."""
    return _SHADOW.fullmatch(table) is not None


def names_shadow(table_glob: str) -> bool:
    """Whether a glob's table part asks for shadow tables itself (ends with ``_gho``, ``_new``...)."""
    return table_glob.lower().endswith(tuple("_" + s for s in SHADOW_SUFFIXES))


REGEX_CHARS = frozenset("\\[](){}|^$+")
"""A source holding one of these is a regex (see the module docstring)."""


def is_regex_source(source: str) -> bool:
    """Whether ``source`` is a regex on ``schema.table`` rather than a name or glob."""
    return any(c in REGEX_CHARS for c in source)


def glob_to_regex(glob: str) -> str:
    """``shop.*`` -> ``shop\\..*`` (anchoring is the filter's job)."""
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)


def source_parts(source: str, what: str = "source") -> tuple[str, str]:
    """``(schema glob, table glob)`` of a source written ``schema.table`` (parts may be in backticks).

    :raises ConfigurationError: not two parts.
    """
    try:
        parts = parse_name(source)
    except ConfigurationError:
        parts = ()
    if len(parts) != 2:
        raise ConfigurationError(
            f"invalid {what} {source!r}: expected 'schema.table' (globs allowed: 'shop.*'; a name "
            "holding dots in backticks: 'shop.`z.w`')"
        )
    return parts[0], parts[1]


def source_regex(source: str, shadow_tables: bool = False) -> str:
    """canal's include regex for one source (``shop.*`` -> ``shop\\..*``); a glob leaves out
    :data:`SHADOW_TABLE` names unless ``shadow_tables`` or it names them (:func:`names_shadow`); a
    regex source is itself (:func:`is_regex_source`)."""
    if is_regex_source(source):
        return source
    schema, table = source_parts(source)
    skip = ""
    if any(c in table for c in "*?") and not shadow_tables and not names_shadow(table):
        skip = f"(?!{SHADOW_TABLE}$)"
    return glob_to_regex(schema) + r"\." + skip + glob_to_regex(table)


COPY_TABLE_SUFFIXES = ("gho", "new")
"""Suffixes of the shadow tables that receive an online schema-change tool's copy (see
:mod:`.online_copy`)."""


def copy_regex(source: str) -> str:
    """canal's include regex for the copy tables of one source's tables (``shop.t`` ->
    ``shop\\._(?:t)_(?:gho|new)``; a glob's table part inside the parentheses)."""
    schema, table = source_parts(source)
    suffixes = "|".join(COPY_TABLE_SUFFIXES)
    return glob_to_regex(schema) + r"\._(?:" + glob_to_regex(table) + r")_(?:" + suffixes + ")"


def _glob_match(glob: str, name: str) -> bool:
    return re.fullmatch(glob_to_regex(glob), name, re.IGNORECASE | re.DOTALL) is not None


def target_parts(target: str, source: str) -> tuple[str, ...]:
    """The parts of a target template; only ``{schema}`` and ``{table}`` may appear in them."""
    try:
        parts = parse_name(target)
    except ConfigurationError as exc:
        problem = str(exc)
        try:  # the problem as the name reads with its placeholders filled in
            parse_name(target.format(schema="schema", table="table"))
        except ConfigurationError as filled:
            problem = str(filled)
        except (KeyError, IndexError, ValueError):
            pass
        raise invalid_target(target, source, problem) from None
    for part in parts:
        try:
            fields = list(string.Formatter().parse(part))
        except ValueError:
            fields = [("", "?", "", None)]
        for _text, name, spec, conversion in fields:
            if name is not None and (name not in ("schema", "table") or spec or conversion):
                raise ConfigurationError(
                    f"target {target!r} for {source!r} may only use {{schema}} and {{table}}"
                )
    return parts


class InvalidTargetError(ConfigurationError):
    """A route's target is no ``[catalog.]namespace.table`` name."""


def invalid_target(target: str, source: str, problem: str) -> InvalidTargetError:
    """The error for a route whose target is no ``[catalog.]namespace.table`` name."""
    return InvalidTargetError(
        f"tables: the target {target!r} of {source!r} is not a valid Iceberg table name ({problem}); "
        "write it as catalog.namespace.table, e.g. 'lake.shop.orders', with any part that holds dots "
        "or backticks in backticks"
    )


def part_problem(part: str) -> str | None:
    """Why ``part`` cannot be one part of a lake table name (``None``: it can)."""
    if not part:
        return "an empty name"
    if part in (".", ".."):
        return f"the name {part!r} (a catalog on a file system reads it as a directory step)"
    if "/" in part:
        return "a '/' (a catalog on a file system makes it a nested directory)"
    if _CONTROL.search(part):
        return "a control character"
    if len(part.encode()) > MAX_PART_BYTES:
        return f"more than {MAX_PART_BYTES} bytes (a file name's limit)"
    return None


@dataclass(frozen=True)
class Routes:
    """Source-to-target routes (see the module docstring).

    :param routes: source name or glob -> target name (with optional ``{schema}``/``{table}``).
    :param exclude: tables never read: globs or canal regexes on ``schema.table``, comma-separated
        or a list (see :mod:`.filter`).
    :param shadow_tables: glob routes take shadow tables of gh-ost / pt-osc too (see the module
        docstring); by default they do not.
    """

    routes: Mapping[str, str]
    exclude: str | Sequence[str] | None = None
    shadow_tables: bool = False
    _parsed: list[tuple[str, str, tuple[str, ...], bool]] = field(init=False, repr=False, compare=False)
    _black: TableFilter = field(init=False, repr=False, compare=False)
    _regexes: list[tuple[re.Pattern[str], tuple[str, ...]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.routes:
            raise ConfigurationError("no tables to load: give at least one 'schema.table' -> target route")
        parsed, regexes = [], []
        for source, target in self.routes.items():
            if is_regex_source(source):
                try:
                    pattern = re.compile(source, re.IGNORECASE | re.DOTALL)
                except re.error as exc:
                    raise ConfigurationError(f"invalid source regex {source!r} in tables: {exc}") from None
                if not isinstance(target, str) or not target.strip():
                    raise ConfigurationError(f"invalid target {target!r} for source {source!r}")
                regexes.append((pattern, target_parts(target, source)))
                continue
            schema, table = source_parts(source, "source")
            if not all(p.strip() for p in (schema, table)):
                raise ConfigurationError(f"invalid source {source!r} in tables: an empty part")
            if not isinstance(target, str) or not target.strip():
                raise ConfigurationError(f"invalid target {target!r} for source {source!r}")
            glob = any(c in source for c in "*?")
            parsed.append((schema, table, target_parts(target, source), glob))
        object.__setattr__(self, "_parsed", parsed)
        object.__setattr__(self, "_regexes", regexes)
        object.__setattr__(self, "_black", TableFilter(exclude=exclude_text(self.exclude)))

    @property
    def exact(self) -> dict[str, str]:
        """Exact sources (``schema.table``, lower case) -> their target templates."""
        return {
            s.lower(): t
            for s, t in self.routes.items()
            if not any(c in s for c in "*?") and not is_regex_source(s)
        }

    def excluded(self, schema: str, table: str) -> bool:
        """Whether ``exclude`` names ``schema.table``."""
        return not self._black.matches(schema, table)

    def _template_for(self, schema: str, table: str) -> tuple[str, ...] | None:
        if self.excluded(schema, table):
            return None
        s, t = schema.lower(), table.lower()
        for sg, tg, template, glob in self._parsed:
            if not glob and sg.lower() == s and tg.lower() == t:
                return template
        shadow = not self.shadow_tables and is_shadow_table(table)
        for sg, tg, template, glob in self._parsed:
            if glob and _glob_match(sg, schema) and _glob_match(tg, table):
                if shadow and not names_shadow(tg):
                    continue  # a shadow table of an online schema change: not a lake table
                return template
        for pattern, template in self._regexes:
            if not shadow and pattern.fullmatch(f"{schema}.{table}"):
                return template
        return None

    def shadow_skipped(self, schema: str, table: str) -> str | None:
        """The target a glob (or regex) route would give ``schema.table`` were it not named like a
        shadow table (:data:`SHADOW_TABLE`), ``None`` when it is routed, excluded or matches no route
        anyway (what the run start warns about: :func:`~..drain.source.shadow_named`)."""
        if self.shadow_tables or not is_shadow_table(table) or self._template_for(schema, table):
            return None
        if self.excluded(schema, table):
            return None
        found = None
        for sg, tg, template, glob in self._parsed:
            if glob and _glob_match(sg, schema) and _glob_match(tg, table):
                found = template
                break
        if found is None:
            for pattern, template in self._regexes:
                if pattern.fullmatch(f"{schema}.{table}"):
                    found = template
                    break
        if found is None:
            return None
        filled = self._fill(found, schema, table)
        if any(part_problem(p) for p in filled):
            return None
        return name_text(filled)

    def _fill(self, template: tuple[str, ...], schema: str, table: str) -> tuple[str, ...]:
        return tuple(p.format(schema=schema, table=table) for p in template)

    def refusal(self, schema: str, table: str) -> str | None:
        """Why the routed table ``schema.table`` cannot become a lake table, with the way forward
        (``None``: it can, or no route takes it)."""
        template = self._template_for(schema, table)
        if template is None:
            return None
        problems = []
        if "." in schema:
            problems.append(
                f"the schema name {schema!r} holds a '.', so the key 'schema.table' of its tables is "
                "ambiguous"
            )
        for part in self._fill(template, schema, table):
            problem = part_problem(part)
            if problem is not None:
                problems.append(f"the lake name part {part!r} has {problem}")
        if not problems:
            return None
        key = name_text((schema, table))
        return (
            f"source table {key} cannot become a lake table: {'; '.join(problems)}. Exclude it with "
            f"exclude=[{key!r}] (on the operator and the sensor), or give it an exact route to a valid name"
        )

    def target_for(self, schema: str, table: str) -> str | None:
        """The target of ``schema.table`` (parts that need it in backticks), or ``None`` when no
        route matches, it is excluded, or :meth:`refusal` refuses it."""
        template = self._template_for(schema, table)
        if template is None or self.refusal(schema, table) is not None:
            return None
        return name_text(self._fill(template, schema, table))

    def static_targets(self) -> list[str]:
        """Targets known before reading anything (routes without placeholders)."""
        return sorted({t for t in self.routes.values() if "{" not in t})

    def filter(self, columns: str | None = None) -> TableFilter:
        """canal's filter for these sources: the include list (with the copy tables of online
        schema-change tools, :func:`copy_regex`), ``exclude`` as the black list, the optional column
        rules, and :meth:`refusal` (the instance stops at a refused table)."""
        include = ",".join(
            [source_regex(s, self.shadow_tables) for s in self.routes]
            + [copy_regex(s) for s in self.routes if not is_regex_source(s)]
        )
        return TableFilter(
            include=include, exclude=exclude_text(self.exclude), columns=columns or "", refuse=self.refusal
        )


def shared_targets(routes: Mapping[str, str]) -> dict[str, list[str]]:
    """Targets that more than one source table of one destination may fill, with their sources: a
    pattern whose target does not place each table it matches apart (a glob table part without
    ``{table}`` in the target, a glob schema part without ``{schema}``), or several routes naming one
    target (see :mod:`airflow_provider_binlog.lake.shards.shards`)."""
    by_target: dict[tuple[str, ...], list[str]] = {}
    spelled: dict[tuple[str, ...], str] = {}
    many: set[tuple[str, ...]] = set()
    for source, target in routes.items():
        try:
            target_parts(target, source)  # only {schema} and {table} as placeholders
            parts = tuple(p.lower() for p in parse_name(target))
            schema, table = ("*", "*") if is_regex_source(source) else source_parts(source)
        except ConfigurationError:
            continue  # an invalid route is refused elsewhere, naming it
        by_target.setdefault(parts, []).append(source)
        spelled.setdefault(parts, target)
        if (any(c in table for c in "*?") and "{table}" not in target) or (
            any(c in schema for c in "*?") and "{schema}" not in target
        ):
            many.add(parts)
    return {spelled[p]: s for p, s in by_target.items() if len(s) > 1 or p in many}
