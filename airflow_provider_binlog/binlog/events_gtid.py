"""MySQL GTID events: GTID, ANONYMOUS_GTID, GTID_TAGGED (9.x), PREVIOUS_GTIDS (layouts: :mod:`.events`)."""

from __future__ import annotations

import struct
import uuid as uuid_mod
from dataclasses import dataclass
from typing import Any

from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.errors import DecodeError
from airflow_provider_binlog.binlog.event import DecodeContext, register
from airflow_provider_binlog.binlog.events import decode_text
from airflow_provider_binlog.binlog.gtid import MysqlGtid, MysqlGtidSet, read_varlen_int, read_varlen_uint
from airflow_provider_binlog.binlog.reader import Reader

GTID_HEAD = struct.Struct("<B16sQ")  # flags, uuid, gno
GTID_FIXED = struct.Struct("<B16sQBqq")  # ... then lc typecode (2), last_committed, sequence_number
_UUID_TEXT: dict[bytes, str] = {}


def uuid_text(raw: bytes) -> str:
    """The text form of a 16-byte server UUID (cached: a binlog names few servers)."""
    text = _UUID_TEXT.get(raw)
    if text is None:
        if len(_UUID_TEXT) > 4096:
            _UUID_TEXT.clear()
        text = _UUID_TEXT[raw] = str(uuid_mod.UUID(bytes=raw))
    return text


# --------------------------------------------------------------------------- GTIDs


GTID_FLAG_MAY_HAVE_SBR = 0x01
UNDEFINED_SERVER_VERSION = 999999
U56_TOP = 1 << 55
U32_TOP = 1 << 31


@register(EventType.GTID_LOG_EVENT, EventType.ANONYMOUS_GTID_LOG_EVENT, EventType.GTID_TAGGED_LOG_EVENT)
@dataclass(frozen=True, slots=True)
class GtidEvent:
    """Starts a MySQL transaction: its GTID (``uuid:gno`` or ``uuid:tag:gno``) and commit metadata.

    Anonymous GTIDs (``gtid_mode=OFF``) have ``anonymous=True`` and no meaningful GTID. Commit
    timestamps are microseconds since the epoch (0 when the server did not write them).
    """

    flags: int
    uuid: str
    gno: int
    tag: str = ""
    anonymous: bool = False
    last_committed: int = 0
    sequence_number: int = 0
    immediate_commit_timestamp: int = 0
    original_commit_timestamp: int = 0
    transaction_length: int = 0
    immediate_server_version: int = UNDEFINED_SERVER_VERSION
    original_server_version: int = UNDEFINED_SERVER_VERSION
    commit_group_ticket: int = 0

    @property
    def gtid(self) -> MysqlGtid:
        return MysqlGtid(self.uuid, self.gno, self.tag)

    def __str__(self) -> str:
        return str(self.gtid)

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> GtidEvent:
        h = ctx.header
        code = h.type_code if h is not None else EventType.GTID_LOG_EVENT
        if code == EventType.GTID_TAGGED_LOG_EVENT:
            return cls._decode_tagged(buf)
        anonymous = code == EventType.ANONYMOUS_GTID_LOG_EVENT
        n = len(buf)
        if n >= GTID_FIXED.size and buf[25] == 2:
            flags, raw_uuid, gno, _, last_committed, sequence_number = GTID_FIXED.unpack_from(buf, 0)
        elif n >= 25:
            flags, raw_uuid, gno = GTID_HEAD.unpack_from(buf, 0)
            return cls(flags, uuid_text(raw_uuid), gno, "", anonymous)
        else:
            raise DecodeError(f"truncated: GTID event of {n} bytes")
        r = Reader(buf, GTID_FIXED.size)
        immediate_ts = original_ts = length = ticket = 0
        immediate_sv = original_sv = UNDEFINED_SERVER_VERSION
        if n - r.pos >= 7:
            immediate_ts = original_ts = r.uint(7)
            if immediate_ts & U56_TOP:
                immediate_ts &= U56_TOP - 1
                original_ts = r.uint(7)
            if r.remaining():
                length = r.packed_int()
            if r.remaining() >= 4:
                immediate_sv = original_sv = r.u32()
                if immediate_sv & U32_TOP:
                    immediate_sv &= U32_TOP - 1
                    original_sv = r.u32()
            if r.remaining() >= 8:
                ticket = r.u64()
        return cls(
            flags,
            uuid_text(raw_uuid),
            gno,
            "",
            anonymous,
            last_committed,
            sequence_number,
            immediate_ts,
            original_ts,
            length,
            immediate_sv,
            original_sv,
            ticket,
        )

    @classmethod
    def _decode_tagged(cls, buf: memoryview) -> GtidEvent:
        r = Reader(buf)
        version = r.u8()
        if version != 2:
            raise DecodeError(f"unsupported GTID_TAGGED_LOG_EVENT serialization version {version}")
        size = read_varlen_uint(r)
        last_non_ignorable = read_varlen_uint(r)
        if size < r.pos or size > len(buf):
            raise DecodeError(f"GTID_TAGGED_LOG_EVENT payload size {size} outside the event ({len(buf)})")
        fields = Reader(buf, r.pos, size)
        v: dict[str, Any] = {}
        seen_ocs = seen_osv = False
        while fields.remaining():
            fid = read_varlen_uint(fields)
            if fid == 0:
                v["flags"] = read_varlen_uint(fields)
            elif fid == 1:
                raw_uuid = bytes(read_varlen_uint(fields) & 0xFF for _ in range(16))
                v["uuid"] = str(uuid_mod.UUID(bytes=raw_uuid))
            elif fid == 2:
                v["gno"] = read_varlen_int(fields)
            elif fid == 3:
                raw = fields.bytes(read_varlen_uint(fields))
                v["tag"] = decode_text(raw, "ascii").lower()
            elif fid == 4:
                v["last_committed"] = read_varlen_int(fields)
            elif fid == 5:
                v["sequence_number"] = read_varlen_int(fields)
            elif fid == 6:
                v["immediate_commit_timestamp"] = read_varlen_uint(fields)
            elif fid == 7:
                v["original_commit_timestamp"] = read_varlen_uint(fields)
                seen_ocs = True
            elif fid == 8:
                v["transaction_length"] = read_varlen_uint(fields)
            elif fid == 9:
                v["immediate_server_version"] = read_varlen_uint(fields)
            elif fid == 10:
                v["original_server_version"] = read_varlen_uint(fields)
                seen_osv = True
            elif fid == 11:
                v["commit_group_ticket"] = read_varlen_uint(fields)
            elif fid <= last_non_ignorable:
                raise DecodeError(f"GTID_TAGGED_LOG_EVENT has unknown required field {fid}")
            else:
                break  # an ignorable field of unknown length: nothing after it can be read
        if "uuid" not in v or "gno" not in v:
            raise DecodeError("GTID_TAGGED_LOG_EVENT lacks its uuid or gno")
        if not seen_ocs:
            v["original_commit_timestamp"] = v.get("immediate_commit_timestamp", 0)
        if not seen_osv:
            v["original_server_version"] = v.get("immediate_server_version", UNDEFINED_SERVER_VERSION)
        v.setdefault("flags", 0)
        return cls(**v)


@register(EventType.PREVIOUS_GTIDS_LOG_EVENT)
@dataclass(frozen=True, slots=True)
class PreviousGtidsEvent:
    """The GTIDs executed before this binlog file (a MySQL GTID set, possibly tagged)."""

    gtid_set: MysqlGtidSet

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> PreviousGtidsEvent:
        return cls(MysqlGtidSet.decode(Reader(buf)))
