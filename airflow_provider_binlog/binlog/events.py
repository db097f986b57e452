"""Bodies of the non-row events MySQL (5.7-9.x) writes, and the ones MySQL and MariaDB share.

Each body is a frozen, slotted dataclass decoded from the event body alone (common header and
checksum already stripped by the parser) plus the :class:`~.event.DecodeContext`. MariaDB-only
events are in :mod:`.events_mariadb`; TABLE_MAP and row events in :mod:`.table_map` / :mod:`.rows`.

Wire layouts (little-endian; ``lenenc`` = length-encoded integer, ``varlen`` = mysql::serialization
integer, see :mod:`.gtid`)::

    FORMAT_DESCRIPTION  u16 binlog_version, char[50] server_version, u32 create_time,
                        u8 header_len, u8 post_header_len[n], [u8 checksum_alg, u32 crc]
    ROTATE              u64 position, file name (rest)
    QUERY               u32 thread_id, u32 exec_time, u8 db_len, u16 error_code, u16 status_len,
                        status vars, db, NUL, sql (rest)
    XID                 u64 xid
    XA_PREPARE          u8 one_phase, u32 format_id, u32 gtrid_len, u32 bqual_len, data
    INTVAR              u8 type, u64 value
    RAND                u64 seed1, u64 seed2
    USER_VAR            u32 name_len, name, u8 is_null, [u8 type, u32 charset, u32 len, value, [u8 flags]]
    ROWS_QUERY          u8 (ignored length), sql (rest)
    GTID / ANONYMOUS    u8 flags, uuid[16], u64 gno, [u8 lc_type=2, i64 last_committed, i64 seq_no,
                        [u56 immediate_commit_ts (bit 55: original follows), [u56 original_commit_ts],
                        [lenenc transaction_length, [u32 immediate_server_version (bit 31: original
                        follows), [u32 original_server_version], [u64 commit_group_ticket]]]]]
    GTID_TAGGED         u8 serialization version (2), varlen payload_size, varlen last_non_ignorable,
                        (varlen field_id, value)*: 0 flags, 1 uuid (16 varlen bytes), 2 gno (signed),
                        3 tag (varlen len + bytes), 4 last_committed, 5 sequence_number,
                        6 immediate_commit_ts, 7 original_commit_ts, 8 transaction_length,
                        9 immediate_server_version, 10 original_server_version, 11 commit_group_ticket
    PREVIOUS_GTIDS      a GTID set in Gtid_set::encode form (tagged or untagged)
    HEARTBEAT           log file name (rest); the header's log_pos is the position
    HEARTBEAT_V2        (lenenc field, lenenc len, value)*: 1 file name, 2 position (lenenc), 0 end
    INCIDENT            u16 incident, u8 msg_len, message
    BEGIN_LOAD_QUERY    u32 file_id, data (rest); APPEND_BLOCK the same; DELETE_FILE u32 file_id
    TRANSACTION_PAYLOAD (lenenc field, lenenc len, lenenc value)*: 1 size, 2 compression (0 zstd,
                        255 none), 3 uncompressed size, 0 end; then the payload
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from airflow_provider_binlog.binlog.constants import ChecksumAlg, EventType
from airflow_provider_binlog.binlog.errors import DecodeError
from airflow_provider_binlog.binlog.event import DecodeContext, register
from airflow_provider_binlog.binlog.reader import Reader

FDE_FIXED = struct.Struct("<H50sIB")  # binlog_version, server_version, create_timestamp, header_length
U64 = struct.Struct("<Q")

CHECKSUM_VERSION_MYSQL = (5, 6, 1)
CHECKSUM_VERSION_MARIADB = (5, 3, 0)


def decode_text(raw: bytes | memoryview, charset: str = "utf-8") -> str:
    """Text from the server; bytes that are not valid in ``charset`` are kept as surrogate escapes."""
    return bytes(raw).decode(charset, errors="surrogateescape")


def version_tuple(version: str) -> tuple[int, int, int]:
    """``"8.0.32-log"`` -> ``(8, 0, 32)``; MariaDB's ``"5.5.5-10.11.6-MariaDB"`` -> ``(10, 11, 6)``."""
    text = version
    if text.startswith("5.5.5-") and "mariadb" in text.lower():
        text = text[6:]
    nums: list[int] = []
    for part in text.split("-", 1)[0].split(".")[:3]:
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        nums.append(int(digits) if digits else 0)
    while len(nums) < 3:
        nums.append(0)
    return nums[0], nums[1], nums[2]


def flavor_of(version: str) -> str:
    """``"mariadb"`` when the server version says MariaDB, else ``"mysql"``."""
    return "mariadb" if "mariadb" in version.lower() else "mysql"


def has_checksum_alg(version: str) -> bool:
    """Whether a FORMAT_DESCRIPTION_EVENT from this server version ends with the checksum algorithm."""
    floor = CHECKSUM_VERSION_MARIADB if flavor_of(version) == "mariadb" else CHECKSUM_VERSION_MYSQL
    return version_tuple(version) >= floor


# --------------------------------------------------------------------------- FORMAT_DESCRIPTION


@register(EventType.FORMAT_DESCRIPTION_EVENT)
@dataclass(frozen=True, slots=True)
class FormatDescriptionEvent:
    """The first event of every binlog: format version, server version, post-header lengths, checksum.

    ``buf`` handed to :meth:`decode` still ends with the 5 checksum-algorithm bytes (the parser
    cannot know whether to strip a checksum before reading this event).

    :param post_header_len: post-header length per event type code.
    :param checksum_alg: the binlog's checksum algorithm (``UNDEF`` for servers before checksums).
    """

    binlog_version: int
    server_version: str
    create_timestamp: int
    header_length: int
    post_header_len: dict[int, int]
    checksum_alg: ChecksumAlg | int

    @property
    def flavor(self) -> str:
        return flavor_of(self.server_version)

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> FormatDescriptionEvent:
        r = Reader(buf)
        binlog_version, raw_version, created, header_len = FDE_FIXED.unpack_from(buf, r.need(FDE_FIXED.size))
        if binlog_version != 4:
            raise DecodeError(f"unsupported binlog format version {binlog_version} (only v4 is)")
        version = decode_text(raw_version.split(b"\0", 1)[0], "ascii")
        alg: ChecksumAlg | int = ChecksumAlg.UNDEF
        end = len(buf)
        if has_checksum_alg(version):
            if end - r.pos < 5:
                raise DecodeError("truncated: FORMAT_DESCRIPTION_EVENT lacks its checksum algorithm")
            end -= 5
            raw_alg = buf[end]
            try:
                alg = ChecksumAlg(raw_alg)
            except ValueError:
                alg = raw_alg
        lengths = bytes(buf[r.pos : end])
        return cls(
            binlog_version=binlog_version,
            server_version=version,
            create_timestamp=created,
            header_length=header_len,
            post_header_len={code: n for code, n in enumerate(lengths, start=1)},
            checksum_alg=alg,
        )


# --------------------------------------------------------------------------- ROTATE / STOP / HEARTBEAT


@register(EventType.ROTATE_EVENT)
@dataclass(frozen=True, slots=True)
class RotateEvent:
    """The next binlog file and position. ``artificial`` for the fake rotate a dump begins with."""

    position: int
    next_file: str
    artificial: bool = False

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> RotateEvent:
        r = Reader(buf)
        position = r.u64()
        name = decode_text(r.rest())
        h = ctx.header
        artificial = h is not None and (h.log_pos == 0 or h.timestamp == 0 or bool(h.flags & 0x20))
        return cls(position, name, artificial)


@register(EventType.STOP_EVENT)
@dataclass(frozen=True, slots=True)
class StopEvent:
    """The server stopped; the binlog ends here."""

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> StopEvent:
        return cls()


@register(EventType.HEARTBEAT_LOG_EVENT)
@dataclass(frozen=True, slots=True)
class HeartbeatEvent:
    """Sent by the source while idle. ``position`` is the header's log_pos (v1) or the v2 field."""

    log_file: str
    position: int

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> HeartbeatEvent:
        h = ctx.header
        return cls(decode_text(buf), h.log_pos if h is not None else 0)


@register(EventType.HEARTBEAT_LOG_EVENT_V2)
@dataclass(frozen=True, slots=True)
class HeartbeatEventV2:
    """MySQL 8.0.26+ heartbeat with a 64-bit position."""

    log_file: str
    position: int

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> HeartbeatEventV2:
        r = Reader(buf)
        name, position = "", 0
        while r.remaining():
            code = r.packed_int()
            if code == 0:
                break
            n = r.packed_int()
            value = Reader(r.take(n))
            if code == 1:
                name = decode_text(value.rest())
            elif code == 2:
                position = value.packed_int()
        return cls(name, position)


@register(EventType.INCIDENT_EVENT)
@dataclass(frozen=True, slots=True)
class IncidentEvent:
    """Something happened on the source that replicas cannot follow (e.g. lost events)."""

    incident: int
    message: str

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> IncidentEvent:
        r = Reader(buf)
        incident = r.u16()
        message = decode_text(r.bytes(r.u8())) if r.remaining() else ""
        return cls(incident, message)


@register(
    EventType.TRANSACTION_CONTEXT_EVENT,
    EventType.VIEW_CHANGE_EVENT,
    EventType.IGNORABLE_LOG_EVENT,
)
@dataclass(frozen=True, slots=True)
class OpaqueEvent:
    """Group-replication bookkeeping and ignorable events: recognised, kept as bytes."""

    data: bytes

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> OpaqueEvent:
        return cls(bytes(buf))


# --------------------------------------------------------------------------- LOAD DATA (statement format)


@register(EventType.BEGIN_LOAD_QUERY_EVENT, EventType.APPEND_BLOCK_EVENT)
@dataclass(frozen=True, slots=True)
class LoadBlockEvent:
    """A block of a ``LOAD DATA`` file (u32 file_id, then the bytes): BEGIN_LOAD_QUERY starts the
    file, APPEND_BLOCK adds to it; EXECUTE_LOAD_QUERY (see :mod:`.events_query`) runs it."""

    file_id: int
    data: bytes

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> LoadBlockEvent:
        r = Reader(buf)
        return cls(r.u32(), r.rest())


@register(EventType.DELETE_FILE_EVENT)
@dataclass(frozen=True, slots=True)
class DeleteFileEvent:
    """A ``LOAD DATA`` that failed: forget the file (u32 file_id)."""

    file_id: int

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> DeleteFileEvent:
        return cls(Reader(buf).u32())


# --------------------------------------------------------------------------- transaction ends


@register(EventType.XID_EVENT)
@dataclass(frozen=True, slots=True)
class XidEvent:
    """The commit of a transaction on a transactional engine."""

    xid: int

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> XidEvent:
        return cls(Reader(buf).u64())


@register(EventType.XA_PREPARE_LOG_EVENT)
@dataclass(frozen=True, slots=True)
class XaPrepareEvent:
    """``XA PREPARE`` (or one-phase ``XA COMMIT``) of an XA transaction."""

    one_phase: bool
    format_id: int
    gtrid: bytes
    bqual: bytes

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> XaPrepareEvent:
        r = Reader(buf)
        one_phase = bool(r.u8())
        format_id = r.u32()
        gl, bl = r.u32(), r.u32()
        if gl > 64 or bl > 64:
            raise DecodeError(f"XA id too long (gtrid {gl}, bqual {bl})")
        return cls(one_phase, format_id, r.bytes(gl), r.bytes(bl))


# --------------------------------------------------------------------------- statement context


class IntvarType(IntEnum):
    INVALID_INT_EVENT = 0
    LAST_INSERT_ID_EVENT = 1
    INSERT_ID_EVENT = 2


@register(EventType.INTVAR_EVENT)
@dataclass(frozen=True, slots=True)
class IntvarEvent:
    """LAST_INSERT_ID() or the next auto-increment value for the following statement."""

    type: int
    value: int

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> IntvarEvent:
        r = Reader(buf)
        return cls(r.u8(), r.u64())


@register(EventType.RAND_EVENT)
@dataclass(frozen=True, slots=True)
class RandEvent:
    """RAND() seeds for the following statement."""

    seed1: int
    seed2: int

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> RandEvent:
        r = Reader(buf)
        return cls(r.u64(), r.u64())


@register(EventType.USER_VAR_EVENT)
@dataclass(frozen=True, slots=True)
class UserVarEvent:
    """A user variable the following statement uses. ``value`` is the raw stored bytes."""

    name: str
    is_null: bool
    value_type: int | None = None
    charset: int | None = None
    value: bytes | None = None
    flags: int | None = None

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> UserVarEvent:
        r = Reader(buf)
        name = decode_text(r.bytes(r.u32()))
        is_null = bool(r.u8())
        if is_null:
            return cls(name, True)
        value_type, charset = r.u8(), r.u32()
        value = r.bytes(r.u32())
        flags = r.u8() if r.remaining() else None
        return cls(name, False, value_type, charset, value, flags)


@register(EventType.ROWS_QUERY_LOG_EVENT)
@dataclass(frozen=True, slots=True)
class RowsQueryEvent:
    """The statement that produced the following row events (``binlog_rows_query_log_events``)."""

    sql: str

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> RowsQueryEvent:
        r = Reader(buf)
        r.skip(1)
        return cls(decode_text(r.rest()))


# --------------------------------------------------------------------------- TRANSACTION_PAYLOAD


class PayloadCompression(IntEnum):
    ZSTD = 0
    NONE = 255


@register(EventType.TRANSACTION_PAYLOAD_EVENT)
@dataclass(frozen=True, slots=True)
class TransactionPayloadEvent:
    """A compressed transaction (``binlog_transaction_compression``); the parser yields its inner
    events right after it. ``payload_offset`` is where the payload starts in the body.
    """

    compression: int
    payload_size: int
    uncompressed_size: int
    payload_offset: int

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> TransactionPayloadEvent:
        r = Reader(buf)
        v = {1: None, 2: 0, 3: 0}
        while r.remaining():
            code = r.packed_int()
            if code == 0:
                break
            value = Reader(r.take(r.packed_int()))
            if code in v:
                v[code] = value.packed_int()
        size = v[1] if v[1] is not None else r.remaining()
        if size != r.remaining():
            raise DecodeError(f"TRANSACTION_PAYLOAD_EVENT says {size} payload bytes, has {r.remaining()}")
        return cls(int(v[2] or 0), int(size), int(v[3] or 0), r.pos)
