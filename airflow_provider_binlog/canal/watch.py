"""An asset watcher's watermark: which committed changes of a destination's tables were reported.

A watcher (:class:`~..triggers.watch.BinlogWatchTrigger`) reports *ranges*: the committed matching
changes between the later of the destination's cursor and its watermark, and the server's head at
the poll. A range is recorded in two steps, each a compare-and-set in the meta store::

    /otter/canal/destinations/{destination}/{clientId}/provider/watch/{name}
        JSON {"from": "file:pos", "to": "file:pos", "counts": {"schema.table": n}, "reported": iso,
              "pending": {"from", "to", "after", "counts", "transactions", "first", "announced"}}

1. :meth:`Watcher.announce` writes the range as ``pending`` (``to`` stays the end of the last range
   Airflow stored) before its trigger event leaves the trigger;
2. :meth:`Watcher.confirm` moves ``to`` to the range's end and drops ``pending`` once Airflow has
   stored the event (the triggerer's persistence acknowledgement, see the trigger).

A poll that finds a ``pending`` range announces that same range again (nothing new is scanned
before it is confirmed): a trigger stopped or killed between its event and Airflow's storing of it
announces it after the restart; unless a load has read the range's changes meanwhile (none left
between the cursor and the range's end: the event was stored and its run loaded them, or another
run did), then the range is recorded as reported without an event, as a poll never reports what
the cursor is past. A range is never recorded twice: the write of a second watcher
computed against the same version fails (that one reports nothing).

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
    #: the watermark as Airflow stored it (without ``pending``): what :meth:`Watcher.announce` keeps
    mark: Mapping[str, Any] | None = None
    #: a pending range of an earlier trigger run, announced again
    again: bool = False

    @classmethod
    def pending(cls, mark: Mapping[str, Any], version: Any) -> Report | None:
        """The range ``mark`` holds as announced but not confirmed (``None``: there is none)."""
        p = mark.get("pending")
        if not isinstance(p, Mapping):
            return None
        found = ChangeRange(p["from"], p["to"], dict(p.get("counts") or {}), int(p.get("transactions") or 0))
        kept = {k: v for k, v in mark.items() if k != "pending"} or None
        return cls(found, p.get("after"), version, bool(p.get("first")), kept, again=True)

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
        mark, version = self.watermark()
        if mark is not None and (pending := Report.pending(mark, version)) is not None:
            if pending.first or self.unread_before(BinlogPosition.parse(pending.range.end)):
                return pending  # announced, never confirmed as stored by Airflow: announce it again
            log.info(
                "destination %s: watcher %s: the pending range to %s was read by a load meanwhile: "
                "not announced again", self.instance.config.destination, self.name, pending.range.end,
            )  # fmt: skip
            self.confirm(pending, version)
            return None
        meta, identity = self.instance.meta, self.instance.identity
        new = meta.get_cursor(identity).value is None
        point = self.instance.pin_start()  # as the sensor: the load starts where this counts from
        new = new and meta.get_cursor(identity).value is not None
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
        return Report(found, str(after) if after else point.gtid, version, first=new, mark=mark)

    def unread_before(self, end: BinlogPosition) -> bool:
        """Whether committed matching changes before ``end`` are left after the destination's cursor
        (a bounded scan from the cursor to ``end``)."""
        point = self.instance.pin_start()
        if point.position is not None and point.position >= end:
            return False
        scanner = side_client(self.instance.client)
        with scanner.dump(point.position, gtid=None if point.position else point.gtid, stop_at=end) as stream:
            return fold(committed(stream, self.instance.config.filter, point.skip_through)) is not None

    def _write(self, record: dict[str, Any], expected: Any) -> Any | None:
        try:
            return self.instance.meta.set_json(self.instance.identity, self.key, record, expected)
        except MetaConflictError:
            log.info(
                "destination %s: watcher %s: the watermark moved meanwhile (another triggerer runs it?): "
                "not reported here", self.instance.config.destination, self.name,
            )  # fmt: skip
            self._scanned = None
            return None

    def announce(self, report: Report) -> Any | None:
        """Record the range as ``pending`` (compare-and-set), before its event leaves the trigger.

        :return: the record's new version (for :meth:`confirm`), or ``None`` when another watcher
            moved the watermark first (then that one reports, and this one scans again from there).
        """
        r = report.range
        record = dict(report.mark or {})
        record["pending"] = {
            "from": r.start, "to": r.end, "after": report.after, "counts": r.counts,
            "transactions": r.transactions, "first": report.first, "announced": _now(),
        }  # fmt: skip
        return self._write(record, report.version)

    def confirm(self, report: Report, version: Any) -> bool:
        """Airflow stored the range's event: the watermark moves to its end and ``pending`` goes
        (compare-and-set against ``version``, what :meth:`announce` returned); ``False`` when the
        record changed meanwhile."""
        r = report.range
        record = {"from": r.start, "to": r.end, "counts": r.counts, "reported": _now()}
        return self._write(record, version) is not None

    def commit(self, report: Report) -> bool:
        """Announce and confirm at once (for a caller that has no acknowledgement of storage)."""
        version = self.announce(report)
        return version is not None and self.confirm(report, version)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


__all__ = ["ChangeRange", "Report", "Watcher", "fold", "read_from", "tables_filter"]
