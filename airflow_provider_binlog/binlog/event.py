"""The common event header, the decode context, the event envelope and the body registry.

Every event body is a frozen, slotted dataclass with a ``decode(buf, ctx)`` classmethod, registered
here under its type code with :func:`register`. ``buf`` is the body only: the 19-byte common header
and the trailing checksum are already stripped by the parser. Anything a body needs beyond its own
bytes (checksum length, post-header lengths, table-id width, the table maps seen so far) is on the
:class:`DecodeContext` that the parser hands in.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from airflow_provider_binlog.binlog.constants import EventType, event_type_name
from airflow_provider_binlog.binlog.position import BinlogPosition, make_position

# timestamp, type, server_id, event_size, log_pos (end of event in the file), flags
HEADER = struct.Struct("<IBIIIH")


@dataclass(frozen=True, slots=True)
class EventHeader:
    """The 19-byte common header of a v4 event."""

    timestamp: int
    type_code: int
    server_id: int
    event_size: int
    log_pos: int
    flags: int

    @classmethod
    def unpack(cls, buf: bytes | memoryview, offset: int = 0) -> EventHeader:
        return cls(*HEADER.unpack_from(buf, offset))

    @property
    def type_name(self) -> str:
        return event_type_name(self.type_code)


class EventBody(Protocol):
    """What every registered body class provides."""

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> Any: ...


@dataclass(slots=True)
class DecodeContext:
    """Parser state that bodies need to decode themselves.

    :param checksum_len: 4 with CRC32 checksums, 0 without.
    :param post_header_len: post-header length per event type code, from the FORMAT_DESCRIPTION_EVENT.
    :param flavor: ``"mysql"`` or ``"mariadb"`` (from the server version in the FDE).
    :param file: the current binlog file name.
    :param header: header of the event being decoded.
    :param tables: TABLE_MAP bodies seen so far, by table id.
    :param schema_resolver: called with a ``TableMapEvent`` whose TABLE_MAP lacks column names,
        signedness or charsets; returns the table's ``TableSchema`` (checked against the TABLE_MAP,
        a mismatch raises DecodeError) or ``None`` to decode with what the binlog says.
    :param from_server: events arrive over the replication protocol (not from a file), so the
        server has already decrypted an encrypted binlog.
    """

    checksum_len: int = 4
    post_header_len: dict[int, int] = field(default_factory=dict)
    flavor: str = "mysql"
    server_version: str = ""
    file: str = ""
    header: EventHeader | None = None
    tables: dict[int, Any] = field(default_factory=dict)
    schema_resolver: Callable[[Any], Any] | None = None
    from_server: bool = False
    start: int = -1
    """Where the parser took the current event to start in ``file`` (for an event inside a
    TRANSACTION_PAYLOAD_EVENT, the payload's start; ``-1``: not known)."""

    def table_id_size(self, type_code: int = EventType.TABLE_MAP_EVENT) -> int:
        """Width of the table id in TABLE_MAP and row events: 4 with a 6-byte post-header, else 6."""
        return 4 if self.post_header_len.get(type_code, 8) == 6 else 6

    @property
    def position(self) -> str | None:
        """``file:position`` of the current event's first byte: from its header's ``log_pos``, else
        (an event inside a transaction payload has none) where the parser took it to start."""
        h = self.header
        if h is not None and h.log_pos != 0:
            return f"{self.file}:{h.log_pos - h.event_size}"
        return f"{self.file}:{self.start}" if self.start >= 0 else None


B = TypeVar("B")
REGISTRY: dict[int, type] = {}


def register(*codes: int) -> Callable[[type[B]], type[B]]:
    """Class decorator: decode events with these type codes with this body class."""

    def deco(cls: type[B]) -> type[B]:
        for code in codes:
            if code in REGISTRY:
                raise RuntimeError(f"event type {code} registered twice")
            REGISTRY[code] = cls
        return cls

    return deco


@dataclass(frozen=True, slots=True)
class UnknownEvent:
    """An event whose type code no supported server defines; its bytes are kept and the parser goes on
    (a replica skips it only when its header has LOG_EVENT_IGNORABLE_F: see ``canal/unreadable.py``)."""

    type_code: int
    data: bytes

    @property
    def type_name(self) -> str:
        return event_type_name(self.type_code)


@dataclass(frozen=True, slots=True)
class Event:
    """One decoded event in its place in the binlog.

    :param header: the common header.
    :param body: the decoded body (a registered body class or :class:`UnknownEvent`).
    :param file: binlog file the event was read from.
    :param pos: offset of the event's first byte in ``file``; for an event inside a
        TRANSACTION_PAYLOAD_EVENT, the payload event's offset.
    :param end_pos: offset just past the event (for inner events: past the payload event).
    :param payload_index: index of the event inside a TRANSACTION_PAYLOAD_EVENT, else ``None``.
    """

    header: EventHeader
    body: Any
    file: str
    pos: int
    end_pos: int
    payload_index: int | None = None

    @property
    def type_name(self) -> str:
        return self.header.type_name

    @property
    def position(self) -> BinlogPosition:
        return make_position(self.file, self.pos)

    @property
    def end_position(self) -> BinlogPosition:
        return make_position(self.file, self.end_pos)
