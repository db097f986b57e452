"""Schedule-aligned stop points: where a run for an interval ending at instant T stops, reproducibly.

The rule: the run applies every transaction before the first one (in binlog order) whose commit
time is at or after T, and nothing after. A transaction's commit time is the timestamp of the
event that ends it (XID, ``COMMIT``, ``XA PREPARE``/``XA COMMIT``, or a DDL statement itself),
in whole seconds as the binlog holds it, so "before T" is ``time < T``. Once such a transaction
exists the stop point is a function of the binlog alone: a rerun of the interval, today or next
month, stops at the same place and applies the same transactions.

While no such transaction exists yet the stop point is not decided: the server may still write a
transaction committed before T. :func:`interval_stop` then waits, polling the server's head, until
either a transaction at or after T appears, or the server's own clock is ``settle`` seconds past
the end of T's whole second (every transaction it writes from then on has a commit time at or
after T: the head is the stop; a T with a fraction, as a manual run's, waits for its second to
end, since a transaction later in that second is stamped with the second, before T), bounded by
``wait`` seconds; past the bound it raises :class:`IntervalNotReachedError` (or, with
``on_unreached="head"``, stops at the head and says that a rerun may stop later).

The search reads the binlog index (:class:`~.binlog_index.BinlogIndex`: file start times, cached)
to find the one file that holds T and scans that file (and, when T falls after its last
transaction, the next transaction after it), instead of every file from the oldest.

Both ends of an interval are :class:`CommitPoint`: the position after the last transaction, the
GTID position there and that transaction's commit time. :func:`transactions` is the scanner,
usable on any event iterator (a server dump or :func:`~..binlog.files.read_binlog_file`).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.event import Event
from airflow_provider_binlog.binlog.events_gtid import GtidEvent, PreviousGtidsEvent
from airflow_provider_binlog.binlog.events_mariadb import GtidListEvent, MariadbGtidEvent
from airflow_provider_binlog.binlog.gtid import MariadbGtidList, MysqlGtidSet
from airflow_provider_binlog.binlog.gtid_tracker import GtidTracker
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import CanalError
from airflow_provider_binlog.canal.positions.binlog_index import BinlogIndex
from airflow_provider_binlog.errors import ConfigurationError

UNREACHED_MODES = ("fail", "head")
_STARTS = frozenset(
    int(c)
    for c in (
        EventType.GTID_LOG_EVENT,
        EventType.ANONYMOUS_GTID_LOG_EVENT,
        EventType.GTID_TAGGED_LOG_EVENT,
        EventType.GTID_EVENT,
        EventType.QUERY_EVENT,
        EventType.QUERY_COMPRESSED_EVENT,
    )
)


class IntervalNotReachedError(CanalError):
    """The server has not reached the interval's end yet and the bounded wait is over."""


def iso(ts: float) -> str:
    """``2026-11-21T10:00:00+00:00`` (UTC, fractions kept when there are any)."""
    spec = "seconds" if float(ts).is_integer() else "milliseconds"
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec=spec)


@dataclass(frozen=True)
class Transaction:
    """One transaction as the binlog holds it.

    :param start: its first event (GTID or ``BEGIN``).
    :param end: the position after its last event (where the next one may start).
    :param time: its commit time (the ending event's timestamp, seconds).
    :param gtid: the GTID position after it (MySQL's executed set, MariaDB's per-domain list;
        ``None`` when the scan saw no GTIDs).
    """

    start: BinlogPosition
    end: BinlogPosition
    time: int
    gtid: str | None


@dataclass(frozen=True)
class CommitPoint:
    """One end of an interval: the position after a transaction, the GTID position there, the
    transaction's commit time (``None`` each when unknown, e.g. nothing committed before it)."""

    position: BinlogPosition | None
    gtid: str | None = None
    time: int | None = None

    @classmethod
    def after(cls, txn: Transaction) -> CommitPoint:
        return cls(txn.end, txn.gtid, txn.time)

    def as_dict(self) -> dict[str, Any]:
        """The summary's form (``start_from`` takes it back: :func:`~.points.parse_point`)."""
        return {
            "position": str(self.position) if self.position else None,
            "gtid": self.gtid,
            "time": iso(self.time) if self.time is not None else None,
        }

    def __str__(self) -> str:
        parts = [str(self.position) if self.position else "?"]
        if self.gtid:
            parts.append(f"gtid {self.gtid}")
        if self.time is not None:
            parts.append(f"committed {iso(self.time)}")
        return ", ".join(parts)


def transactions(
    events: Iterable[Event], gtid: MysqlGtidSet | MariadbGtidList | None = None
) -> Iterator[Transaction]:
    """The complete transactions of an event stream that starts between transactions, in order.

    The GTID position starts at ``gtid`` and is taken from a file's PREVIOUS_GTIDS (MySQL) or
    GTID_LIST (MariaDB) event when the stream begins at a file's start; artificial events (a
    dump's fake ROTATE) are skipped.
    """
    tracker = GtidTracker(gtid)
    start: BinlogPosition | None = None
    for event in events:
        if event.end_pos <= event.pos:
            continue
        body = event.body
        if isinstance(body, PreviousGtidsEvent | GtidListEvent):
            if start is None:
                tracker.position = body.gtid_set if isinstance(body, PreviousGtidsEvent) else body.gtids
            continue
        if start is None and event.header.type_code in _STARTS:
            start = event.position
        if tracker.update(event):
            pos = tracker.position
            yield Transaction(
                start or event.position,
                BinlogPosition(event.file, event.end_pos),
                int(event.header.timestamp),
                str(pos) if pos is not None and pos else None,
            )
            start = None
        elif isinstance(body, GtidEvent | MariadbGtidEvent) and start != event.position:
            start = event.position  # a GTID after a transaction that never ended (cut short)


@dataclass(frozen=True)
class IntervalStop:
    """Where a run for an interval ending at :attr:`when` stops.

    :param when: the instant (unix seconds).
    :param stop: the position the reader stops at (the first transaction at or after ``when``,
        or the head).
    :param last: the last transaction before ``when`` the scan saw (``None``: none in the part it
        scanned; the run's own start is then the interval's end too).
    :param reason: how the stop was decided, for the task log.
    :param waited: seconds spent waiting for the server to reach ``when``.
    :param reached: ``False`` when ``on_unreached="head"`` stopped at the head before the server
        reached ``when`` (a rerun may stop later).
    """

    when: float
    stop: BinlogPosition
    last: Transaction | None
    reason: str
    waited: float = 0.0
    reached: bool = True

    @property
    def end(self) -> CommitPoint | None:
        return CommitPoint.after(self.last) if self.last is not None else None


def _server_clock(client: Any) -> float:
    conn = client.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT UNIX_TIMESTAMP(NOW(6))")
            (now,) = cur.fetchone()
        return float(now)
    finally:
        conn.close()


def _scan(
    client: Any, start: BinlogPosition, head: BinlogPosition, when: float, gtid: Any
) -> tuple[Transaction | None, Transaction | None, Any]:
    """Scan ``start`` .. ``head``: (the first transaction at or after ``when``, the last one before
    it, the GTID position at the end of the scan)."""
    from airflow_provider_binlog.canal.side import side_client

    with side_client(client).dump(start, stop_at=head) as stream:
        seen: list[Transaction] = []
        found, last = split_at(_noting(transactions(stream, gtid), seen), when)
    if found is None and seen:
        gtid = _parse_gtid(seen[-1].gtid, gtid)
    return found, last, gtid


def _noting(txns: Iterable[Transaction], seen: list[Transaction]) -> Iterator[Transaction]:
    for txn in txns:
        seen[:] = [txn]
        yield txn


def split_at(txns: Iterable[Transaction], when: float) -> tuple[Transaction | None, Transaction | None]:
    """(the first transaction committed at or after ``when``, the last one before it): the interval
    rule on transactions in binlog order (stops reading at the first)."""
    last = None
    for txn in txns:
        if txn.time >= when:
            return txn, last
        last = txn
    return None, last


def _parse_gtid(text: str | None, like: Any) -> Any:
    if text is None:
        return like
    if isinstance(like, MysqlGtidSet) or (like is None and ":" in text):
        return MysqlGtidSet.parse(text)
    return MariadbGtidList.parse(text)


def interval_stop(
    client: Any,
    when: float,
    *,
    wait: float = 300.0,
    poll: float = 5.0,
    settle: float = 2.0,
    on_unreached: str = "fail",
    report: Callable[[int, str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    server_clock: Callable[[Any], float] = _server_clock,
) -> IntervalStop:
    """The stop point of an interval ending at ``when`` (see the module docstring).

    :param client: a :class:`~..binlog.client.ReplicationClient` of the source.
    :param when: the interval's end, unix seconds.
    :param wait: seconds to wait at most for the server to reach ``when``.
    :param poll: seconds between looks at the server's head while waiting.
    :param settle: how far past ``when`` (rounded up to its whole second) the server's clock must be
        before an idle server's head counts as the stop (a transaction committed just before
        ``when`` may reach the binlog a moment later).
    :param on_unreached: ``fail`` (raise :class:`IntervalNotReachedError`) or ``head`` (stop at the
        head, saying so) when the wait is over.
    :param report: ``report(level, line)`` for the wait's messages.
    """
    if on_unreached not in UNREACHED_MODES:
        raise ConfigurationError(
            f"on_unreached must be one of {', '.join(UNREACHED_MODES)}, not {on_unreached!r}"
        )
    say = report or (lambda level, line: logging.getLogger(__name__).log(level, "%s", line))
    index = BinlogIndex(client)
    first_file = index.file_at(when)
    scan_from = BinlogPosition(first_file, 4)
    began = time.monotonic()
    # binlog times are whole seconds: from the clock's second ceil(T) on, every stamp is >= T
    decided_at = math.ceil(when) + settle
    gtid: Any = None
    last: Transaction | None = None
    while True:
        head = client.head_position()
        if head > scan_from:
            found, seen, gtid = _scan(client, scan_from, head, when, gtid)
            last = seen or last
            if found is not None:
                reason = (
                    f"the first transaction committed at or after {iso(when)} starts at {found.start} "
                    f"(committed {iso(found.time)})"
                )
                last = last or _last_in_file_before(client, index, first_file)
                return IntervalStop(when, found.start, last, reason, time.monotonic() - began)
            scan_from = head
        now = server_clock(client)
        waited = time.monotonic() - began
        if now >= decided_at:
            reason = (
                f"no transaction committed at or after {iso(when)} yet and the server's clock reads "
                f"{iso(round(now, 3))}: the head {head} is the stop"
            )
            last = last or _last_in_file_before(client, index, first_file)
            return IntervalStop(when, head, last, reason, waited)
        newest = f"its newest transaction committed {iso(last.time)}" if last else "no transaction since"
        state = (
            f"the server has not reached the interval's end {iso(when)}: {newest}, its head is {head} "
            f"and its clock reads {iso(round(now, 3))}"
        )
        if waited >= wait:
            if on_unreached == "head":
                say(
                    logging.WARNING,
                    f"{state}; waited {waited:.0f} s (stop_wait={wait:g}): stopping at the head as "
                    "on_unreached='head' says. A rerun of this interval may stop later and apply more",
                )
                last = last or _last_in_file_before(client, index, first_file)
                return IntervalStop(when, head, last, "the head (interval end not reached)", waited, False)
            raise IntervalNotReachedError(
                f"{state}; waited {waited:.0f} s (stop_wait={wait:g}). The interval cannot end "
                "reproducibly before the server passes its end: run it again later (an Airflow retry "
                "does), raise stop_wait, check the server's clock, or use on_unreached='head' to stop "
                "at the head"
            )
        pause = max(0.05, min(poll, wait - waited, decided_at - now))
        say(logging.INFO, f"{state}; waiting up to {wait - waited:.0f} s more (next look in {pause:.1f} s)")
        sleep(pause)


def _last_in_file_before(client: Any, index: BinlogIndex, file: str) -> Transaction | None:
    """The last transaction of the file before ``file`` (``None``: ``file`` is the oldest, or that
    file holds none): the interval's last transaction when ``file`` holds none before the stop."""
    from airflow_provider_binlog.canal.side import side_client

    names = index.names
    at = names.index(file)
    if at == 0:
        return None
    last = None
    with side_client(client).dump(BinlogPosition(names[at - 1], 4), stop_at=BinlogPosition(file, 4)) as s:
        for txn in transactions(s):
            if txn.start.file != names[at - 1]:
                break
            last = txn
    return last


def commit_point_at(client: Any, position: BinlogPosition, after_event: bool = False) -> CommitPoint:
    """The interval start at ``position``: the GTID position there and the commit time of the
    transaction that ends there (scans ``position``'s file from its start; time and GTIDs ``None``
    when no transaction precedes it in that file).

    :param after_event: ``position`` is the start of a transaction's last event (a stored cursor:
        that event was consumed): the point is after that transaction.
    """
    from airflow_provider_binlog.canal.side import side_client

    if position.pos <= 4:
        return CommitPoint(position)
    last: Transaction | None = None
    stop = client.head_position() if after_event else position
    with side_client(client).dump(BinlogPosition(position.file, 4), stop_at=stop) as stream:
        for txn in transactions(stream):
            if txn.end <= position:
                last = txn
                continue
            if after_event and txn.start <= position:
                last = txn
            break
    if last is None:
        return CommitPoint(position)
    return CommitPoint(last.end if after_event else position, last.gtid, last.time)
