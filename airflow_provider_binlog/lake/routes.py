"""Which target table each source table's entries go to (:class:`TargetRoutes`; the patterns that
choose a target for a table are :mod:`airflow_provider_binlog.canal.routing`). Pure Python (no Spark).

A target is known by its quoted multi-part name (:func:`..sql.quote_parts`), the form every
statement uses; :meth:`TargetRoutes.display` gives the dotted name a user wrote, for counts and errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from airflow_provider_binlog.canal.change import DdlEntry, Entry, RowChange
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.native import fold_native
from airflow_provider_binlog.lake.sql import name_text, parse_name, quote_parts

Resolver = Callable[[str, str], "str | None"]
"""``(schema, table) -> target or None`` for a source without a route yet."""


class TargetRoutes:
    """Source ``schema.table`` -> target, with the targets' parsed names.

    :param tables: source ``schema.table`` -> target name (``catalog.namespace.table``; parts with
        dots or backticks in backticks).
    """

    def __init__(self, tables: Mapping[str, str] | None = None) -> None:
        self.by_source: dict[str, str] = {}
        """Source ``schema.table`` -> quoted target name."""
        self.parts: dict[str, tuple[str, ...]] = {}
        """Quoted target name -> its parts."""
        self._unrouted: set[tuple[str, str]] = set()  # sources the resolver has no route for
        for source, target in (tables or {}).items():
            parts = parse_name(target)
            quoted = quote_parts(parts)
            self.by_source[source] = quoted
            self.parts[quoted] = parts

    def add(self, source: str, target: str) -> None:
        """Route ``source`` to ``target`` from now on; re-adding the same route is a no-op.

        :raises LakeError: ``source`` is routed to another target.
        """
        parts = parse_name(target)
        quoted = quote_parts(parts)
        current = self.by_source.get(source)
        if current == quoted:
            return
        if current is not None:
            raise LakeError(f"{source} is routed to both {self.display(current)} and {target}")
        self.by_source[source] = quoted
        self.parts[quoted] = parts

    def targets(self) -> list[str]:
        """Every routed target (quoted), sorted."""
        return sorted(set(self.by_source.values()))

    def display(self, target: str) -> str:
        """The dotted name of a quoted target name (itself when not routed)."""
        parts = self.parts.get(target)
        return name_text(parts) if parts else target  # parts holding dots etc. in backticks

    def split(
        self, entries: Iterable[Entry], resolve: Resolver | None = None
    ) -> tuple[dict[str, list[Entry]], int]:
        """Group entries by target; return them and how many row changes were routed. Entries of
        other sources, and entries of no table, are left out. A target's entries are in the order
        given when they come from one source table; from several, the groups of each source follow
        each other (the merger sorts a target's entries by order key).

        :param resolve: asked once per source without a route; a target it names becomes a route.
        """
        by_target: dict[str, list[Entry]] = {}
        rows = 0
        for schema, table, group, changes in _sources(entries):
            target = self._target(schema, table, resolve)
            if target is None:
                continue
            rows += changes
            held = by_target.get(target)
            if held is None:
                by_target[target] = group
            else:
                held.extend(group)
        return by_target, rows

    def _target(self, schema: str, table: str, resolve: Resolver | None) -> str | None:
        """The quoted target of ``schema.table``, asking ``resolve`` once for a source without one."""
        name = f"{schema}.{table}"
        target = self.by_source.get(name)
        source = (schema, table)
        if target is None and resolve is not None and source not in self._unrouted:
            found = resolve(schema, table)
            if found is None:
                self._unrouted.add(source)
            else:
                self.add(name, found)
                target = self.by_source[name]
        return target


def _sources(entries: Iterable[Entry]) -> list[tuple[str, str, list[Entry], int]]:
    """``(schema, table, its entries, how many are row changes)`` per source table of the entries, in
    the order the tables first come (row changes and DDL of a table; other entries left out)."""
    native = fold_native.NATIVE
    if native is not None and type(entries) in (list, tuple):  # a batch's entries are a tuple
        found: list[tuple[str, str, list[Entry], int]] = native[0].sources(native[1], entries, DdlEntry)
        return found
    groups: dict[tuple[str, str], list[Entry]] = {}
    changes: dict[tuple[str, str], int] = {}
    for e in entries:
        if type(e) is RowChange:
            source = (e.schema, e.table)
            changes[source] = changes.get(source, 0) + 1
        elif type(e) is DdlEntry and e.table is not None:
            source = (e.schema, e.table)
        else:
            continue
        groups.setdefault(source, []).append(e)
    return [(*source, group, changes.get(source, 0)) for source, group in groups.items()]
