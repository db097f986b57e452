"""Where a destination starts reading, in canal's order.

1. the stored cursor (the ack point of the last acknowledged transaction; reading resumes at that
   event and drops it, since canal's cursors say ``included: false``);
2. else the configured start: a ``file:position`` (an event's start; rewound to the start of the
   transaction it falls in; a position inside an event is refused, naming the nearest event
   starts, since it is no place the server wrote), a GTID set (MySQL ``uuid:1-5``, MariaDB
   ``0-1-42``: the server positions the dump after it), or a timestamp (the first transaction
   committed at or after it: the rule that ends an interval there, :mod:`.interval`, so
   consecutive intervals tile the binlog; the head while the server has not reached it);
3. else the server's head position.

A start position in a binlog file the server no longer has raises
:class:`~airflow_provider_binlog.canal.errors.StartPositionError` naming the position, the oldest
binlog still there and what to do about it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from airflow_provider_binlog.binlog.client import ReplicationClient
from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.errors import PurgedBinlogError
from airflow_provider_binlog.binlog.event import Event
from airflow_provider_binlog.binlog.events_gtid import GtidEvent
from airflow_provider_binlog.binlog.events_mariadb import MariadbGtidEvent
from airflow_provider_binlog.binlog.events_query import QueryEvent
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import PurgedPositionError, StartPositionError
from airflow_provider_binlog.canal.meta.model import LogPosition
from airflow_provider_binlog.canal.side import side_client
from airflow_provider_binlog.errors import ConfigurationError

_FAR = 1 << 62


@dataclass(frozen=True)
class StartSpec:
    """A configured start for a destination without a cursor (at most one field set).

    :param position: ``file:position``.
    :param gtid: a GTID set in the server's own form.
    :param timestamp: seconds since the epoch, or an aware ``datetime``.
    """

    position: str | None = None
    gtid: str | None = None
    timestamp: float | dt.datetime | None = None

    def __post_init__(self) -> None:
        given = [x for x in (self.position, self.gtid, self.timestamp) if x is not None]
        if len(given) > 1:
            raise ConfigurationError("give at most one of start position, start GTID and start timestamp")
        if self.position is not None:
            BinlogPosition.parse(self.position)

    @property
    def epoch(self) -> float | None:
        ts = self.timestamp
        if ts is None:
            return None
        if isinstance(ts, dt.datetime):
            if ts.tzinfo is None:
                raise ConfigurationError("start timestamp must be timezone-aware")
            return ts.timestamp()
        return float(ts)


@dataclass(frozen=True)
class StartPoint:
    """Where to dump from.

    :param position: ``file:pos`` to dump from (``None`` with a GTID start).
    :param gtid: GTID set to dump after (when ``position`` is ``None``).
    :param skip_through: entries whose order key is at or below this are dropped (the
        already-consumed cursor event): ``(file_number, pos, payload, row)``.
    :param reason: ``cursor``, ``position``, ``gtid``, ``timestamp`` or ``head``.
    """

    position: BinlogPosition | None
    gtid: str | None = None
    skip_through: tuple[int, int, int, int] | None = None
    reason: str = ""

    def __str__(self) -> str:
        return str(self.position) if self.position else f"GTID {self.gtid}"


def check_available(
    client: ReplicationClient, position: BinlogPosition, what: str = "start position"
) -> None:
    """Raise :class:`StartPositionError` when ``position``'s file is no longer on the server
    (:class:`PurgedPositionError` when it was purged)."""
    files = client.binlog_files()
    names = [name for name, _ in files]
    if position.file in names:
        return
    oldest = names[0] if names else "none"
    if names and position.file_number > BinlogPosition(names[-1], 0).file_number:
        raise StartPositionError(
            f"{what} {position} is beyond the newest binlog on {client.config.address} ({names[-1]}); "
            "check the position (was the server's binlog reset?)"
        )
    raise PurgedPositionError(
        f"{what} {position} is in {position.file}, which was purged from {client.config.address}; "
        f"the oldest binlog there is {oldest}. The changes in between cannot be read any more: take a "
        "new snapshot of the tables and start this destination from the position of that snapshot "
        "(or from a timestamp or GTID the server still has)."
    )


def _is_end(event: Event) -> bool:
    body = event.body
    if event.header.type_code in (EventType.XID_EVENT, EventType.XA_PREPARE_LOG_EVENT):
        return True
    if isinstance(body, QueryEvent):
        sql = body.sql.strip().upper()
        return sql != "BEGIN" and not sql.startswith("XA ")
    return False


def _is_begin(event: Event) -> bool:
    body = event.body
    if isinstance(body, GtidEvent | MariadbGtidEvent):
        return True
    return isinstance(body, QueryEvent) and body.sql.strip().upper() == "BEGIN"


def transaction_start(client: ReplicationClient, position: BinlogPosition) -> BinlogPosition:
    """The start of the transaction ``position`` falls in (``position`` itself between transactions).

    Scans ``position``'s file from its beginning.

    :raises StartPositionError: ``position`` is inside an event (not where one starts); the message
        names the event and the nearest event starts before and after it.
    """
    if position.pos <= 4:
        return BinlogPosition(position.file, 4)
    open_at: BinlogPosition | None = None
    with side_client(client).dump(BinlogPosition(position.file, 4), stop_at=position) as stream:
        for event in stream:
            if event.file != position.file or event.end_pos <= event.pos:
                continue  # fake ROTATE and other artificial events
            if event.pos >= position.pos:
                break
            if event.end_pos > position.pos:  # position is inside this event
                raise StartPositionError(mid_event_message(position, event, "start position"))
            if _is_begin(event):
                open_at = open_at or event.position
            elif _is_end(event):
                open_at = None
    return open_at or position


def check_event_start(
    client: ReplicationClient, position: BinlogPosition, what: str = "start position"
) -> None:
    """Raise :class:`StartPositionError` unless an event starts at ``position`` (or the file's end):
    a position inside an event, inside the file header or past the file's end is no place the server
    can send from (it answers a misleading error 1236). Purged or unknown files as
    :func:`check_available`. Scans ``position``'s file from its beginning.

    :param what: how the message names the position (e.g. ``--from``).
    """
    check_available(client, position, what)
    size = dict(client.binlog_files()).get(position.file)
    if position.pos < 4:
        first = BinlogPosition(position.file, 4)
        raise StartPositionError(
            f"{what} {position} is inside the file header; the first event starts at {first}"
        )
    if size is not None and position.pos > size:
        raise StartPositionError(
            f"{what} {position} is past the end of {position.file} ({size} bytes); the last place to "
            f"start in it is {BinlogPosition(position.file, size)}"
        )
    with side_client(client).dump(BinlogPosition(position.file, 4), stop_at=position) as stream:
        for event in stream:
            if event.file != position.file or event.end_pos <= event.pos:
                continue  # fake ROTATE and other artificial events
            if event.pos >= position.pos:
                return
            if event.end_pos > position.pos:
                raise StartPositionError(mid_event_message(position, event, what))


def mid_event_message(position: BinlogPosition, event: Event, what: str) -> str:
    """``what`` ``position`` lies inside ``event``: the message naming the nearest event starts."""
    after = BinlogPosition(position.file, event.end_pos)
    return (
        f"{what} {position} is inside a {event.type_name} event ({event.position} .. {after}), not "
        f"where an event starts; the nearest events start at {event.position} and {after}. Give one "
        "of those (a position inside a transaction is moved to the transaction's start)"
    )


def _first_event_time(client: ReplicationClient, file: str) -> int | None:
    with side_client(client).dump(BinlogPosition(file, 4), stop_at=BinlogPosition(file, 5)) as stream:
        for event in stream:
            if event.header.type_code == EventType.FORMAT_DESCRIPTION_EVENT and event.header.timestamp:
                return event.header.timestamp
    return None


def find_by_timestamp(client: ReplicationClient, when: float) -> BinlogPosition:
    """The first transaction whose first event's timestamp is at or after ``when`` (else the head)."""
    files = [name for name, _ in client.binlog_files()]
    if not files:
        raise StartPositionError(f"{client.config.address} has no binlog files")
    head = client.head_position()
    lo, hi = 0, len(files) - 1  # find the last file created at or before `when`
    while lo < hi:
        mid = (lo + hi + 1) // 2
        t = _first_event_time(client, files[mid])
        if t is not None and t <= when:
            lo = mid
        else:
            hi = mid - 1
    in_txn = False
    with side_client(client).dump(BinlogPosition(files[lo], 4), stop_at=head) as stream:
        for event in stream:
            if event.end_pos <= event.pos:
                continue
            starts = not in_txn and (_is_begin(event) or _is_end(event))
            if starts and event.header.timestamp >= when:
                return event.position
            if _is_begin(event):
                in_txn = True
            if _is_end(event):
                in_txn = False
    return head


def start_at_time(client: ReplicationClient, when: float) -> BinlogPosition:
    """The first transaction committed at or after ``when`` (where an interval ending at ``when``
    stops, :func:`~.interval.interval_stop`); the head while the server has not reached ``when``."""
    import logging

    from airflow_provider_binlog.canal.positions.interval import interval_stop

    def report(level: int, line: str) -> None:
        logging.getLogger(__name__).info("start timestamp: %s", line.split(": stopping at the head")[0])

    return interval_stop(client, when, wait=0, on_unreached="head", report=report).stop


def resolve_start(
    client: ReplicationClient, cursor: LogPosition | None, spec: StartSpec | None = None
) -> StartPoint:
    """Decide where to start (see the module docstring)."""
    spec = spec or StartSpec()
    if cursor is not None and cursor.binlog_position is not None:
        pos = cursor.binlog_position
        check_available(client, pos, "stored cursor")
        skip = None if cursor.included else (pos.file_number, pos.pos, _FAR, _FAR)
        return StartPoint(pos, None, skip, "cursor")
    if cursor is not None and cursor.gtid:
        return StartPoint(None, cursor.gtid, None, "cursor")
    if spec.position is not None:
        pos = BinlogPosition.parse(spec.position)
        check_available(client, pos)
        try:
            start = transaction_start(client, pos)
        except PurgedBinlogError as exc:
            raise StartPositionError(str(exc)) from None
        return StartPoint(start, None, None, "position")
    if spec.gtid is not None:
        return StartPoint(None, spec.gtid.strip(), None, "gtid")
    epoch = spec.epoch
    if epoch is not None:
        return StartPoint(start_at_time(client, epoch), None, None, "timestamp")
    return StartPoint(client.head_position(), None, None, "head")


def describe(point: StartPoint) -> dict[str, Any]:
    return {
        "reason": point.reason,
        "position": str(point.position) if point.position else None,
        "gtid": point.gtid,
    }
