"""An asset watcher's watermark: which committed changes of a destination's tables were reported.

A watcher (:class:`~..triggers.watch.BinlogWatchTrigger`) reports *ranges*: the committed matching
changes between the later of the destination's cursor and its watermark, and the server's head at
the poll. A reported range moves the watermark to the range's end, compare-and-set in the meta
store, so no range is reported twice (also not by a second triggerer running the same watcher: the
one whose write loses reports nothing) and a restart goes on from the watermark::

    /otter/canal/destinations/{destination}/{clientId}/provider/watch/{name}
        JSON {"from": "file:pos", "to": "file:pos", "counts": {"schema.table": n}, "reported": iso}

A destination without a cursor gets its start pinned as the cursor (as the sensor does), and that
first poll reports a range even when it holds no change (``first: true``), so the load's first run,
and its initial snapshot, do not wait for a change.

Coalescing: one poll reports at most one range, however many transactions it holds; while a run
of the load holds the destination (its ``running`` node exists) nothing is reported, so commits
made during a load give at most one range after it, and none when the load read them all (the
cursor then is past them).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.committed import Committed, committed
from airflow_provider_binlog.canal.errors import MetaConflictError
from airflow_provider_binlog.canal.filter import TableFilter, exclude_text
from airflow_provider_binlog.canal.meta.base import check_key
from airflow_provider_binlog.canal.positions.start import StartPoint
from airflow_provider_binlog.canal.routing import Routes, source_regex
from airflow_provider_binlog.canal.side import side_client

log = logging.getLogger(__name__)

WATCH_PREFIX = "watch"


def tables_filter(
    tables: Mapping[str, str] | Sequence[str] | str | None,
    exclude: str | Sequence[str] | None = None,
    shadow_tables: bool = False,
) -> TableFilter:
    """The filter of ``tables`` as the operator and the sensor take them: the operator's routing
    mapping (its keys), a list of ``schema.table`` names or globs, or a canal include string."""
    text = exclude_text(exclude)
    if isinstance(tables, Mapping):
        return Routes(dict(tables), exclude=text, shadow_tables=shadow_tables).filter()
    if tables is None:
        include = ""
    elif isinstance(tables, str):
        include = tables
    else:
        include = ",".join(source_regex(t, shadow_tables) for t in tables)
    return TableFilter(include=include, exclude=text)


@dataclass(frozen=True)
class ChangeRange:
    """Committed matching changes, folded: ``start`` (the first change), ``end`` (just after the
    last commit), changes per table and the number of transactions."""

    start: str
    end: str
    counts: dict[str, int] = field(default_factory=dict)
    transactions: int = 0

    @property
    def changes(self) -> int:
        return sum(self.counts.values())


def fold(transactions: Iterable[Committed]) -> ChangeRange | None:
    """One range of all ``transactions`` (``None`` when there are none)."""
    start = end = ""
    counts: dict[str, int] = {}
    n = 0
    for txn in transactions:
        start = start or txn.first
        end = txn.end
        n += 1
        for table, c in txn.counts.items():
            counts[table] = counts.get(table, 0) + c
    return ChangeRange(start, end, counts, n) if n else None


def read_from(point: StartPoint, *after: BinlogPosition | None) -> StartPoint:
    """Where the next scan starts: the later of the cursor's ``point`` and the ``after`` positions
    (the watermark, the head a scan already reached); on a tie the cursor's point (its skip of the
    consumed event applies). A cursor by GTID alone gives way to any position."""
    best = max((p for p in after if p is not None), default=None)
    if best is None or (point.position is not None and point.position >= best):
        return point
    return StartPoint(best, None, None, "watermark")


@dataclass(frozen=True)
class Report:
    """A range to report and the watermark version it was computed against."""

    range: ChangeRange
    after: str | None
    version: Any
    first: bool = False

    def payload(self, destination: str, name: str) -> dict[str, Any]:
        return {
            "destination": destination,
            "watcher": name,
            "from": self.range.start,
            "to": self.range.end,
            "after": self.after,
            "tables": sorted(self.range.counts),
            "counts": dict(sorted(self.range.counts.items())),
            "changes": self.range.changes,
            "transactions": self.range.transactions,
            "first": self.first,
        }


class Watcher:
    """Poll one destination for unreported committed changes (see the module docstring).

    :param instance: the destination's :class:`~.instance.CanalInstance` (not subscribed): its meta
        store, source client, filter, start and ``running`` node are used; one per watcher, kept
        across polls (one ZooKeeper session).
    :param name: the watermark's name (several watchers of one destination keep their own).
    """

    def __init__(self, instance: Any, name: str) -> None:
        self.instance = instance
        self.name = name
        self.key = self.check_name(name)
        self._scanned: BinlogPosition | None = None  # nothing unreported before this (this run)

    @staticmethod
    def check_name(name: str) -> str:
        """The watermark's record key; a name that cannot be one raises ``ConfigurationError``."""
        return check_key(f"{WATCH_PREFIX}/{name}")

    def watermark(self) -> tuple[dict[str, Any] | None, Any]:
        value, version = self.instance.meta.get_json(self.instance.identity, self.key)
        return (value if isinstance(value, dict) else None), version

    def held_by(self) -> dict[str, Any] | None:
        """The payload of the run holding the destination, ``None`` when none does (or no HA)."""
        running = self.instance.running
        return None if running is None else running.holder()

    def poll(self) -> Report | None:
        """The unreported range now, not yet recorded (:meth:`commit` does), or ``None``: nothing
        new, or a run holds the destination."""
        if self.held_by() is not None:
            return None
        meta, identity = self.instance.meta, self.instance.identity
        new = meta.get_cursor(identity).value is None
        point = self.instance.pin_start()  # as the sensor: the load starts where this counts from
        new = new and meta.get_cursor(identity).value is not None
        mark, version = self.watermark()
        to = BinlogPosition.parse(mark["to"]) if mark and mark.get("to") else None
        start = read_from(point, to, self._scanned)
        head = self.instance.client.head_position()
        found = None
        if start.position is None or start.position < head:
            scanner = side_client(self.instance.client)
            with scanner.dump(
                start.position, gtid=None if start.position else start.gtid, stop_at=head
            ) as stream:
                found = fold(committed(stream, self.instance.config.filter, start.skip_through))
        self._scanned = head
        after = to or point.position
        if found is None and new and point.position is not None:
            # the destination's first run: its initial snapshot should not wait for a change
            found = ChangeRange(str(point.position), str(point.position))
        if found is None:
            return None
        return Report(found, str(after) if after else point.gtid, version, first=new)

    def commit(self, report: Report) -> bool:
        """Move the watermark to the range's end (compare-and-set); ``False`` when another watcher
        moved it first (then that one reports, and this one scans again from there)."""
        record = {
            "from": report.range.start,
            "to": report.range.end,
            "counts": report.range.counts,
            "reported": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }
        try:
            self.instance.meta.set_json(self.instance.identity, self.key, record, report.version)
        except MetaConflictError:
            log.info(
                "destination %s: watcher %s: the watermark moved meanwhile (another triggerer runs it?): "
                "not reported here", self.instance.config.destination, self.name,
            )  # fmt: skip
            self._scanned = None
            return False
        return True


__all__ = ["ChangeRange", "Report", "Watcher", "fold", "read_from", "tables_filter"]
