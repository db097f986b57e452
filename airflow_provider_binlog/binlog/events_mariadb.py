"""Bodies of MariaDB's own events (codes 160-165) and MariaDB event compression.

Wire layouts (little-endian)::

    ANNOTATE_ROWS       sql (rest)
    BINLOG_CHECKPOINT   u32 name_len, file name
    GTID                u64 seq_no, u32 domain_id, u8 flags2, [u64 commit_id if FL_GROUP_COMMIT_ID],
                        [u32 format_id, u8 gtrid_len, u8 bqual_len, data  if FL_PREPARED_XA|FL_COMPLETED_XA],
                        [u8 flags_extra, [u8 extra_engines if FL_EXTRA_MULTI_ENGINE],
                         [u64 sa_seq_no if FL_COMMIT_ALTER|FL_ROLLBACK_ALTER]]  (zero padding otherwise)
                        the GTID's server id is the event header's server_id
    GTID_LIST           u32 (count in bits 0-27, flags in 28-31), (u32 domain, u32 server, u64 seq)*
    START_ENCRYPTION    u8 scheme, u32 key_version, nonce[12]  (in a file: raises UnsupportedError)
    QUERY_COMPRESSED    a QUERY_EVENT whose statement is compressed: decoded by
                        :class:`.events_query.QueryEvent` (see :mod:`.compression`)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntFlag

from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.errors import DecodeError, UnsupportedError
from airflow_provider_binlog.binlog.event import DecodeContext, register
from airflow_provider_binlog.binlog.events import decode_text
from airflow_provider_binlog.binlog.gtid import MariadbGtid, MariadbGtidList
from airflow_provider_binlog.binlog.reader import Reader


@register(EventType.ANNOTATE_ROWS_EVENT)
@dataclass(frozen=True, slots=True)
class AnnotateRowsEvent:
    """The statement behind the following row events (``binlog_annotate_row_events``)."""

    sql: str

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> AnnotateRowsEvent:
        return cls(decode_text(buf))


@register(EventType.BINLOG_CHECKPOINT_EVENT)
@dataclass(frozen=True, slots=True)
class BinlogCheckpointEvent:
    """The oldest binlog file crash recovery still needs."""

    file: str

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> BinlogCheckpointEvent:
        r = Reader(buf)
        return cls(decode_text(r.bytes(r.u32())))


class MariadbGtidFlag(IntFlag):
    FL_STANDALONE = 1
    FL_GROUP_COMMIT_ID = 2
    FL_TRANSACTIONAL = 4
    FL_ALLOW_PARALLEL = 8
    FL_WAITED = 16
    FL_DDL = 32
    FL_PREPARED_XA = 64
    FL_COMPLETED_XA = 128


class MariadbGtidExtraFlag(IntFlag):
    FL_EXTRA_MULTI_ENGINE_E1 = 1
    FL_START_ALTER_E1 = 2
    FL_COMMIT_ALTER_E1 = 4
    FL_ROLLBACK_ALTER_E1 = 8
    FL_EXTRA_THREAD_ID = 16


GTID_HEAD = struct.Struct("<QIB")  # seq_no, domain_id, flags2
_FL_GROUP_COMMIT_ID = int(MariadbGtidFlag.FL_GROUP_COMMIT_ID)
_FL_XA = int(MariadbGtidFlag.FL_PREPARED_XA | MariadbGtidFlag.FL_COMPLETED_XA)
_FL_NEEDS_MORE = _FL_GROUP_COMMIT_ID | _FL_XA
_FL_EXTRA_MULTI_ENGINE = int(MariadbGtidExtraFlag.FL_EXTRA_MULTI_ENGINE_E1)
_FL_ALTER_SEQ = int(MariadbGtidExtraFlag.FL_COMMIT_ALTER_E1 | MariadbGtidExtraFlag.FL_ROLLBACK_ALTER_E1)


@register(EventType.GTID_EVENT)
@dataclass(frozen=True, slots=True)
class MariadbGtidEvent:
    """Starts a MariaDB event group: ``domain-server-seq``, flags, group commit id, XA id.

    ``standalone`` groups (DDL, non-transactional) have no XID/COMMIT after them.
    """

    domain_id: int
    server_id: int
    seq_no: int
    flags: int
    commit_id: int | None = None
    xa_format_id: int | None = None
    xa_gtrid: bytes | None = None
    xa_bqual: bytes | None = None
    flags_extra: int = 0
    extra_engines: int | None = None
    start_alter_seq_no: int | None = None

    @property
    def gtid(self) -> MariadbGtid:
        return MariadbGtid(self.domain_id, self.server_id, self.seq_no)

    @property
    def standalone(self) -> bool:
        return bool(self.flags & 1)  # FL_STANDALONE

    def __str__(self) -> str:
        return str(self.gtid)

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> MariadbGtidEvent:
        if len(buf) < GTID_HEAD.size:
            raise DecodeError(f"truncated: MariaDB GTID event of {len(buf)} bytes")
        seq_no, domain_id, flags = GTID_HEAD.unpack_from(buf, 0)
        server_id = ctx.header.server_id if ctx.header is not None else 0
        if not flags & _FL_NEEDS_MORE and (len(buf) == GTID_HEAD.size or not any(buf[GTID_HEAD.size :])):
            return cls(domain_id, server_id, seq_no, flags)  # the common case: zero padding only
        r = Reader(buf, GTID_HEAD.size)
        commit_id = xa_format_id = xa_gtrid = xa_bqual = extra_engines = start_alter = None
        flags_extra = 0
        if flags & _FL_GROUP_COMMIT_ID:
            commit_id = r.u64()
        if flags & _FL_XA:
            xa_format_id = r.u32()
            gl, bl = r.u8(), r.u8()
            xa_gtrid, xa_bqual = r.bytes(gl), r.bytes(bl)
        if r.remaining():
            flags_extra = r.u8()
            if flags_extra & _FL_EXTRA_MULTI_ENGINE:
                extra_engines = r.u8()
            if flags_extra & _FL_ALTER_SEQ:
                start_alter = r.u64()
        return cls(
            domain_id,
            server_id,
            seq_no,
            flags,
            commit_id,
            xa_format_id,
            xa_gtrid,
            xa_bqual,
            flags_extra,
            extra_engines,
            start_alter,
        )


@register(EventType.GTID_LIST_EVENT)
@dataclass(frozen=True, slots=True)
class GtidListEvent:
    """The binlog state at the start of a MariaDB binlog file (last GTID per domain and server)."""

    gtids: MariadbGtidList
    flags: int = 0

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> GtidListEvent:
        r = Reader(buf)
        word = r.u32()
        count, flags = word & 0x0FFFFFFF, word >> 28
        if count * 16 > r.remaining():
            raise DecodeError(f"GTID_LIST claims {count} GTIDs, only {r.remaining()} bytes left")
        gtids = []
        for _ in range(count):
            domain, server = r.u32(), r.u32()
            gtids.append(MariadbGtid(domain, server, r.u64()))
        return cls(MariadbGtidList(tuple(gtids)), flags)


@register(EventType.START_ENCRYPTION_EVENT)
@dataclass(frozen=True, slots=True)
class StartEncryptionEvent:
    """Marks the rest of a MariaDB binlog file as encrypted.

    In a binlog file the events after it are encrypted, which this package does not support:
    decoding it raises :class:`UnsupportedError`. Over the replication protocol
    (``ctx.from_server``) the server sends it as an ignorable marker and decrypts what follows,
    so it decodes normally.
    """

    scheme: int
    key_version: int
    nonce: bytes

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> StartEncryptionEvent:
        if not ctx.from_server:
            where = f" at {ctx.position}" if ctx.position else ""
            raise UnsupportedError(
                f"encrypted binlogs are unsupported: START_ENCRYPTION_EVENT{where}; the rest of this "
                "binlog file is encrypted (encrypt_binlog=ON). Read it through the replication "
                "protocol, where the server decrypts, or disable binlog encryption."
            )
        r = Reader(buf)
        return cls(r.u8(), r.u32(), r.bytes(12))
