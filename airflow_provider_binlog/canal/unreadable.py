"""What the instance does with binlog it cannot read: stop, say where and why, and say what to do.

A replica may not skip what it cannot read, or the lake silently misses changes. So:

* **Unknown event types.** The parser keeps an event of a type it has no decoder for as an
  :class:`~airflow_provider_binlog.binlog.event.UnknownEvent` (``binlog-cdc events`` shows its
  bytes). The instance follows MySQL's replica rule: an unknown event whose header carries
  ``LOG_EVENT_IGNORABLE_F`` (0x80) is skipped with one warning per type code (Aurora's padding
  events are such); any other stops reading with an error naming the type code and ``file:pos``.
* **A transaction cut off by the end of its file.** A transaction never spans two binlog files; a
  ROTATE (real or the server's artificial one when it moves to the next file) while a transaction
  is open means its file was cut short (truncated at an event boundary). Reading stops there.
* **Whole transactions missing at the end of a file** (MariaDB). The GTID_LIST event at the start of
  a file holds the last GTID per domain written before it: for every domain read in the previous
  file, the last GTID read must be the listed one (:class:`FileGapCheck`). A file cut exactly
  between two transactions with no GTID of that domain read before the cut (or a MySQL source) is
  not detected: it looks like a file closed by a crash.
* **Damaged bytes.** A CRC32 mismatch (:class:`~airflow_provider_binlog.binlog.errors.ChecksumError`),
  bytes that do not decode, and the server refusing to send a file it cannot read itself (error
  1236, e.g. "binlog truncated in the middle of event") all stop reading.

Each becomes an :class:`~.errors.UnreadableBinlogError` raised to the consumer once everything read
before it was handed out: transactions before the bad place may be loaded and acked, nothing at or
after it is, so the cursor never moves past it and a later run reads it again.
"""

from __future__ import annotations

import logging

from airflow_provider_binlog.binlog.client import ReplicationClient
from airflow_provider_binlog.binlog.constants import EventFlag
from airflow_provider_binlog.binlog.errors import (
    ChecksumError,
    DecodeError,
    PurgedBinlogError,
    SchemaMismatchDecodeError,
    ServerError,
)
from airflow_provider_binlog.binlog.event import Event
from airflow_provider_binlog.binlog.events import RotateEvent
from airflow_provider_binlog.binlog.events_mariadb import GtidListEvent, MariadbGtidEvent
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import UnreadableBinlogError

log = logging.getLogger(__name__)

ER_MASTER_FATAL_READING_BINLOG = 1236
_IGNORABLE = int(EventFlag.LOG_EVENT_IGNORABLE_F)
_RESYNC = (
    "or reload the tables with a new snapshot under a new destination "
    "(BinlogToSparkOperator(destination=<new name>, snapshot='initial'))"
)


def skip_unknown(event: Event, warned: set[int], destination: str) -> None:
    """Return for an ignorable unknown event (warning once per type code); raise otherwise."""
    code = event.header.type_code
    if not event.header.flags & _IGNORABLE:
        raise DecodeError(
            f"event type {code} is unknown to this provider and the server did not mark it ignorable "
            "(LOG_EVENT_IGNORABLE_F); a replica must stop rather than skip changes it cannot read",
            event_type=event.type_name,
            position=f"{event.file}:{event.pos}",
        )
    if code not in warned:
        warned.add(code)
        log.warning(
            "destination %s: skipping %s at %s:%d (unknown type, marked ignorable by the server)",
            destination, event.type_name, event.file, event.pos,
        )  # fmt: skip


def check_rotate(event: Event, body: RotateEvent, txn_start: BinlogPosition | None) -> None:
    """Raise when a ROTATE arrives inside a transaction (begun at ``txn_start``): its file was cut short."""
    if txn_start is None:
        return
    raise DecodeError(
        f"the transaction begun at {txn_start} has no COMMIT/XID before the binlog moves on to "
        f"{body.next_file}: file {txn_start.file} was cut short (truncated?)",
        event_type=event.type_name,
        position=f"{event.file}:{event.pos}" if event.pos else None,
    )


class FileGapCheck:
    """Compare the last GTID read per domain with the next file's GTID_LIST (see the module docstring).

    One per dump connection: what it saw before a reconnect does not count.
    """

    def __init__(self) -> None:
        self._seen: dict[int, int] = {}  # domain -> last seq_no read since the last GTID_LIST

    def gtid(self, body: MariadbGtidEvent) -> None:
        self._seen[body.domain_id] = body.seq_no

    def gtid_list(self, event: Event, body: GtidListEvent) -> None:
        """Raise when the list says a domain wrote beyond the last GTID read for it."""
        listed: dict[int, int] = {}
        for g in body.gtids.gtids:
            listed[g.domain_id] = max(g.seq_no, listed.get(g.domain_id, 0))
        seen, self._seen = self._seen, {}
        for domain, seq in sorted(seen.items()):
            if listed.get(domain, seq) > seq:
                raise DecodeError(
                    f"transactions are missing: the last GTID of domain {domain} read before {event.file} "
                    f"has sequence {seq}, but the GTID_LIST of {event.file} says {listed[domain]} was "
                    "written before it: the previous file was cut short (truncated?)",
                    event_type=event.type_name,
                    position=f"{event.file}:{event.pos}",
                )


def unreadable(
    exc: BaseException, destination: str, client: ReplicationClient, after: object
) -> UnreadableBinlogError | None:
    """The :class:`UnreadableBinlogError` for ``exc``, or ``None`` when ``exc`` is something else.

    :param exc: what stopped the reading thread.
    :param destination: for the message.
    :param client: the source (whether it writes checksums).
    :param after: the end of the last complete transaction read (for server-side errors, which
        carry no position of ours).
    """
    if isinstance(exc, DecodeError):
        what = "" if exc.position else f" after {after}"
        if isinstance(exc, ChecksumError):
            fix = (
                "The binlog file on the source is damaged: restore it from a backup or a replica, " + _RESYNC
            )
        elif isinstance(exc, SchemaMismatchDecodeError):
            fix = (
                "The binlog is not damaged: the row images carry no column names "
                "(binlog_row_metadata=MINIMAL) and the columns known for the table differ from them. "
                "Set binlog_row_metadata=FULL on the source (SET GLOBAL, and in its configuration), then "
                "reload the tables with a new snapshot under a new destination "
                "(BinlogToSparkOperator(destination=<new name>, snapshot='initial')): its binlog starts "
                "after the change, with the names in every TABLE_MAP"
            )
        elif exc.reason.startswith("event type "):
            fix = "Upgrade airflow-provider-binlog if a newer version decodes this event type, " + _RESYNC
        else:
            fix = "The binlog file on the source is damaged or cut short: restore it, " + _RESYNC
            if client.server_info().binlog_checksum != "CRC32":
                fix += (
                    ". The source writes no checksums (binlog_checksum=NONE), so damage shows only when "
                    "it breaks decoding: set binlog_checksum=CRC32"
                )
        position, event_type = exc.position, exc.event_type
    elif (
        isinstance(exc, ServerError)
        and not isinstance(exc, PurgedBinlogError)
        and exc.code == ER_MASTER_FATAL_READING_BINLOG
    ):
        what = f" after {after}"
        fix = "The source cannot read its own binlog file (damaged or cut short): restore it, " + _RESYNC
        position, event_type = None, None
    else:
        return None
    handover = (
        f" (the new destination takes over the lake tables {destination} wrote once each is handed "
        f"over: ALTER TABLE <lake table> UNSET TBLPROPERTIES ('binlog-cdc.writer.{destination}'))"
    )
    return UnreadableBinlogError(
        f"destination {destination}: cannot read the binlog{what}: {exc}. Nothing from there on was "
        f"loaded and the cursor stays before it. {fix}{handover}.",
        position,
        event_type,
    )
