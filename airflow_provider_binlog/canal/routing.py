"""Routing: which source tables a destination reads and which lake table each one lands in.

A route maps a source name to a target name. The source is ``schema.table`` written literally or
as a glob (``*`` any run of characters, ``?`` one character; matched case-insensitively, like
canal's filter, so that every table the filter lets through has a route); the target may use
``{schema}`` and ``{table}``::

    {"shop.orders": "lake.shop.orders", "shop.*": "lake.shop.{table}", "crm_*.*": "lake.{schema}.{table}"}

Exact routes win over globs; among globs the first that matches wins. :meth:`Routes.filter`
turns the sources into canal's include filter (``.`` escaped, see :mod:`.filter`), so a table
that matches a glob is read even when it is created after the run started.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.errors import ConfigurationError


def glob_to_regex(glob: str) -> str:
    """``shop.*`` -> ``shop\\..*`` (anchoring is the filter's job)."""
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)


@dataclass(frozen=True)
class Routes:
    """Source-to-target routes (see the module docstring).

    :param routes: source name or glob -> target name (with optional ``{schema}``/``{table}``).
    """

    routes: Mapping[str, str]

    def __post_init__(self) -> None:
        if not self.routes:
            raise ConfigurationError("no tables to load: give at least one 'schema.table' -> target route")
        for source, target in self.routes.items():
            if source.count(".") != 1 or not all(source.split(".")):
                raise ConfigurationError(
                    f"invalid source {source!r} in tables: expected 'schema.table' (globs allowed: 'shop.*')"
                )
            if not isinstance(target, str) or not target.strip():
                raise ConfigurationError(f"invalid target {target!r} for source {source!r}")
            try:
                target.format(schema="s", table="t")
            except (KeyError, IndexError, ValueError):
                raise ConfigurationError(
                    f"target {target!r} for {source!r} may only use {{schema}} and {{table}}"
                ) from None

    @property
    def exact(self) -> dict[str, str]:
        return {s.lower(): t for s, t in self.routes.items() if not any(c in s for c in "*?")}

    def target_for(self, schema: str, table: str) -> str | None:
        """The target of ``schema.table``, or ``None`` when no route matches."""
        name = f"{schema}.{table}"
        target = self.exact.get(name.lower())
        if target is None:
            for source, candidate in self.routes.items():
                if any(c in source for c in "*?") and re.fullmatch(
                    glob_to_regex(source), name, re.IGNORECASE
                ):
                    target = candidate
                    break
        return None if target is None else target.format(schema=schema, table=table)

    def static_targets(self) -> list[str]:
        """Targets known before reading anything (routes without placeholders)."""
        return sorted({t for t in self.routes.values() if "{" not in t})

    def filter(self, columns: str | None = None) -> TableFilter:
        """canal's include filter for these sources (plus optional column rules)."""
        include = ",".join(glob_to_regex(s) for s in self.routes)
        return TableFilter(include=include, columns=columns) if columns else TableFilter(include=include)
