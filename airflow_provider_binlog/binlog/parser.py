"""Framing, checksums and dispatch: raw events in, :class:`~.event.Event` envelopes out.

One raw event is the 19-byte common header, the body and, when the binlog has checksums, a
4-byte CRC32 (``zlib.crc32`` of everything before it)::

    u32 timestamp  u8 type  u32 server_id  u32 event_size  u32 log_pos (end offset)  u16 flags
    body[event_size - 19 - checksum_len]  [u32 crc32]

The parser keeps the state bodies need (:class:`~.event.DecodeContext`): the checksum length and
post-header lengths from the FORMAT_DESCRIPTION_EVENT, the flavor from its server version, and
every TABLE_MAP seen (``ctx.tables[table_id]``). It also tracks the position after the last
complete event, following ROTATE events, so a client can resume from :attr:`BinlogParser.position`.

Special cases:

* FORMAT_DESCRIPTION_EVENT is decoded before its checksum is stripped (its last 5 bytes say
  whether there is one) and then verified like any other event.
* TRANSACTION_PAYLOAD_EVENT (MySQL 8.0.20+) is yielded, then its inner events, inflated with a
  streaming zstd reader so the uncompressed transaction is never held whole. Inner events carry
  no checksum; each is yielded with ``payload_index`` k and the payload event's ``pos``/``end_pos``.
* MariaDB's WRITE/UPDATE/DELETE_ROWS_COMPRESSED events (166-171) have their row data (after the
  column bitmaps) inflated here; the result is decoded by the body class registered for the
  uncompressed code (23-25 for the V1 variants 166-168, 30-32 for 169-171), with
  ``ctx.header.type_code`` set to that code while it decodes. The envelope keeps the real header.
* Codes with no registered body become :class:`~.event.UnknownEvent` keeping their bytes (whether
  to skip one is the consumer's decision: the canal instance skips only those the server flagged
  LOG_EVENT_IGNORABLE_F, see :mod:`airflow_provider_binlog.canal.unreadable`).
* Any failure while decoding a body is a :class:`~.errors.DecodeError` naming the event type and
  ``file:pos``; a CRC mismatch is always a :class:`~.errors.ChecksumError`. Encrypted binlogs raise
  :class:`~.errors.UnsupportedError`.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Iterator
from typing import Any

# importing these modules registers every body class
from airflow_provider_binlog.binlog import (  # noqa: F401
    events_gtid,
    events_mariadb,
    events_query,
    rows,
    table_map,
)
from airflow_provider_binlog.binlog.constants import (
    CHECKSUM_LEN,
    EVENT_HEADER_LEN,
    ChecksumAlg,
    EventFlag,
    EventType,
)
from airflow_provider_binlog.binlog.errors import BinlogError, ChecksumError, DecodeError
from airflow_provider_binlog.binlog.event import (
    REGISTRY,
    DecodeContext,
    Event,
    EventHeader,
    UnknownEvent,
)
from airflow_provider_binlog.binlog.events import (
    FormatDescriptionEvent,
    PayloadCompression,
    TransactionPayloadEvent,
)
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.binlog.reader import Reader

U32 = struct.Struct("<I")
FLAGS_OFFSET = 17

ROWS_COMPRESSED: dict[int, int] = {
    int(compressed): int(plain)
    for compressed, plain in (
        (EventType.WRITE_ROWS_COMPRESSED_EVENT_V1, EventType.WRITE_ROWS_EVENT_V1),
        (EventType.UPDATE_ROWS_COMPRESSED_EVENT_V1, EventType.UPDATE_ROWS_EVENT_V1),
        (EventType.DELETE_ROWS_COMPRESSED_EVENT_V1, EventType.DELETE_ROWS_EVENT_V1),
        (EventType.WRITE_ROWS_COMPRESSED_EVENT, EventType.WRITE_ROWS_EVENT_V2),
        (EventType.UPDATE_ROWS_COMPRESSED_EVENT, EventType.UPDATE_ROWS_EVENT_V2),
        (EventType.DELETE_ROWS_COMPRESSED_EVENT, EventType.DELETE_ROWS_EVENT_V2),
    )
}
_UPDATE_CODES = frozenset({EventType.UPDATE_ROWS_EVENT_V1, EventType.UPDATE_ROWS_EVENT_V2})
_V2_CODES = frozenset(
    {EventType.WRITE_ROWS_EVENT_V2, EventType.UPDATE_ROWS_EVENT_V2, EventType.DELETE_ROWS_EVENT_V2}
)
# Events whose header log_pos is not "end of this event in the current file".
_POSITIONLESS = frozenset({EventType.HEARTBEAT_LOG_EVENT, EventType.HEARTBEAT_LOG_EVENT_V2})
_READ_CHUNK = 1 << 20
_FDE = int(EventType.FORMAT_DESCRIPTION_EVENT)
_ROTATE = int(EventType.ROTATE_EVENT)
_TABLE_MAP = int(EventType.TABLE_MAP_EVENT)
_PAYLOAD = int(EventType.TRANSACTION_PAYLOAD_EVENT)
_IN_USE = int(EventFlag.LOG_EVENT_BINLOG_IN_USE_F)


def crc32_ok(raw: bytes | memoryview) -> bool:
    """Whether the last 4 bytes of ``raw`` are the CRC32 of the rest.

    A FORMAT_DESCRIPTION_EVENT's checksum is computed with LOG_EVENT_BINLOG_IN_USE_F clear (the
    server sets and clears that flag in place without rewriting the checksum), so it is checked so.
    """
    n = len(raw) - CHECKSUM_LEN
    stored = U32.unpack_from(raw, n)[0]
    if zlib.crc32(raw[:n]) == stored:
        return True
    if raw[4] == _FDE and raw[FLAGS_OFFSET] & _IN_USE:
        copy = bytearray(raw[:n])
        copy[FLAGS_OFFSET] &= ~_IN_USE & 0xFF
        return zlib.crc32(copy) == stored
    return False


def verify_crc32(raw: bytes | memoryview, where: str, type_name: str) -> None:
    """Raise :class:`ChecksumError` (naming ``type_name`` and ``where``) unless :func:`crc32_ok`."""
    if not crc32_ok(raw):
        stored = U32.unpack_from(raw, len(raw) - CHECKSUM_LEN)[0]
        actual = zlib.crc32(raw[: len(raw) - CHECKSUM_LEN])
        raise ChecksumError(
            f"checksum mismatch: stored CRC32 0x{stored:08x}, computed 0x{actual:08x}",
            event_type=type_name,
            position=where,
        )


class BinlogParser:
    """Decode a sequence of raw events from one binlog stream (a dump connection or files).

    :param file: the binlog file the first event comes from (a dump starts with a ROTATE that
        sets it anyway).
    :param pos: offset of the first event in ``file``.
    :param checksum: whether events carry a CRC32 before the first FORMAT_DESCRIPTION_EVENT says
        so (a dump's leading fake ROTATE does when ``@@binlog_checksum`` is CRC32).
    :param verify_checksum: verify CRC32s (always on, except to read deliberately damaged files).
    :param ctx: a decode context to share (e.g. one with a schema resolver); a new one by default.
    """

    def __init__(
        self,
        file: str = "",
        pos: int = 4,
        *,
        checksum: bool = False,
        verify_checksum: bool = True,
        ctx: DecodeContext | None = None,
    ) -> None:
        self.ctx = ctx if ctx is not None else DecodeContext()
        self.ctx.checksum_len = CHECKSUM_LEN if checksum else 0
        self.ctx.file = file
        self.file = file
        self.next_pos = pos
        self.verify_checksum = verify_checksum
        self.format_description: FormatDescriptionEvent | None = None

    @property
    def position(self) -> BinlogPosition:
        """Position just after the last complete event (following ROTATEs)."""
        return BinlogPosition(self.file, self.next_pos)

    def set_file(self, file: str, pos: int = 4) -> None:
        """Continue with another file (reading files one after another)."""
        self.file = self.ctx.file = file
        self.next_pos = pos

    # ------------------------------------------------------------------ one event

    def parse(self, raw: bytes | memoryview, offset: int | None = None) -> Iterator[Event]:
        """Decode one raw event; yield its envelope (and, for a TRANSACTION_PAYLOAD, its inner events).

        :param raw: exactly one event: header, body, checksum.
        :param offset: the event's offset in its file when known (reading files); else it is taken
            from the header's ``log_pos``.
        """
        view = raw if isinstance(raw, memoryview) else memoryview(raw)
        if len(view) < EVENT_HEADER_LEN:
            pos = offset if offset is not None else self.next_pos
            raise DecodeError(
                f"truncated: {len(view)} bytes, less than an event header", position=f"{self.file}:{pos}"
            )
        header = EventHeader.unpack(view)
        code = header.type_code
        size = header.event_size
        if offset is not None:
            start, end = offset, offset + size
        elif code in _POSITIONLESS or header.log_pos < size or not header.log_pos:
            start = end = self.next_pos  # artificial (fake ROTATE, heartbeats...): no own place
        else:
            start, end = header.log_pos - size, header.log_pos
        if size != len(view):
            raise DecodeError(
                f"event_size {size} does not match the {len(view)} bytes received",
                event_type=header.type_name,
                position=f"{self.file}:{start}",
            )
        ctx = self.ctx
        ctx.header = header
        ctx.file = self.file
        ctx.start = start

        if code == _FDE:
            body: Any = self._decode(FormatDescriptionEvent, view[EVENT_HEADER_LEN:], header, start)
            fde: FormatDescriptionEvent = body
            if fde.checksum_alg == ChecksumAlg.CRC32:
                if size < EVENT_HEADER_LEN + CHECKSUM_LEN:
                    raise DecodeError(
                        "truncated checksum", event_type=header.type_name, position=f"{self.file}:{start}"
                    )
                if self.verify_checksum:
                    verify_crc32(view, f"{self.file}:{start}", header.type_name)
            self._apply_fde(fde)
        else:
            n = ctx.checksum_len
            if size < EVENT_HEADER_LEN + n:
                raise DecodeError(
                    "truncated: no room for the checksum",
                    event_type=header.type_name,
                    position=f"{self.file}:{start}",
                )
            if n and self.verify_checksum and not crc32_ok(view):
                verify_crc32(view, f"{self.file}:{start}", header.type_name)
            body = self._decode_body(code, view[EVENT_HEADER_LEN : size - n], header, start)

        # the event is complete: move the position on before handing it out
        event = Event(header, body, self.file, start, end)
        if code == _ROTATE:
            self.set_file(body.next_file, body.position)
        elif end > start:
            self.next_pos = end
        if code == _TABLE_MAP:
            table_id = getattr(body, "table_id", None)
            if table_id is not None:
                ctx.tables[table_id] = body
        yield event

        if code == _PAYLOAD:
            payload: TransactionPayloadEvent = body
            data = view[EVENT_HEADER_LEN : size - ctx.checksum_len]
            yield from self._payload_events(payload, data[payload.payload_offset :], event)

    def _apply_fde(self, fde: FormatDescriptionEvent) -> None:
        self.format_description = fde
        ctx = self.ctx
        ctx.checksum_len = CHECKSUM_LEN if fde.checksum_alg == ChecksumAlg.CRC32 else 0
        ctx.post_header_len = dict(fde.post_header_len)
        ctx.flavor = fde.flavor
        ctx.server_version = fde.server_version

    def _decode(self, cls: Any, data: memoryview, header: EventHeader, start: int, note: str = "") -> Any:
        try:
            return cls.decode(data, self.ctx)
        except DecodeError as exc:
            raise exc.located(event_type=header.type_name + note, position=f"{self.file}:{start}") from exc
        except BinlogError:
            raise
        except Exception as exc:
            raise DecodeError(
                f"cannot decode body: {type(exc).__name__}: {exc}",
                event_type=header.type_name + note,
                position=f"{self.file}:{start}",
            ) from exc

    def _decode_body(
        self, code: int, data: memoryview, header: EventHeader, start: int, note: str = ""
    ) -> Any:
        cls = REGISTRY.get(code)
        if cls is not None:
            return self._decode(cls, data, header, start, note)
        base = ROWS_COMPRESSED.get(code)
        if base is None or base not in REGISTRY:
            return UnknownEvent(code, bytes(data))
        try:
            inflated = self._inflate_rows(base, data)
        except DecodeError as exc:
            raise exc.located(event_type=header.type_name + note, position=f"{self.file}:{start}") from exc
        self.ctx.header = dataclasses.replace(header, type_code=base)
        try:
            return self._decode(REGISTRY[base], memoryview(inflated), header, start, note)
        finally:
            self.ctx.header = header

    def _inflate_rows(self, base: int, data: memoryview) -> bytes:
        """Rebuild an uncompressed row event body from a MariaDB compressed one."""
        from airflow_provider_binlog.binlog.compression import mariadb_uncompress

        r = Reader(data)
        r.skip(self.ctx.table_id_size(base))
        r.skip(2)  # flags
        if base in _V2_CODES:
            extra = r.u16()
            if extra < 2:
                raise DecodeError(f"row event extra-data length {extra} < 2")
            r.skip(extra - 2)
        width = r.packed_int()
        r.skip((width + 7) // 8 * (2 if base in _UPDATE_CODES else 1))
        return bytes(data[: r.pos]) + mariadb_uncompress(data[r.pos :])

    # ------------------------------------------------------------------ TRANSACTION_PAYLOAD

    def _payload_events(
        self, payload: TransactionPayloadEvent, data: memoryview, outer: Event
    ) -> Iterator[Event]:
        tname = EventType.TRANSACTION_PAYLOAD_EVENT.name
        where = f"{outer.file}:{outer.pos}"
        if payload.compression == PayloadCompression.ZSTD:
            import zstandard

            try:
                stream: Any = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
            except zstandard.ZstdError as exc:
                raise DecodeError(f"bad zstd payload: {exc}", event_type=tname, position=where) from exc
        elif payload.compression == PayloadCompression.NONE:
            import io

            stream = io.BytesIO(data)
        else:
            raise DecodeError(
                f"unknown payload compression {payload.compression}", event_type=tname, position=where
            )
        limit = payload.uncompressed_size or None
        consumed = 0
        index = 0
        ctx = self.ctx
        while True:
            head = self._read_exact(stream, EVENT_HEADER_LEN, tname, where, allow_eof=True)
            if head is None:
                break
            header = EventHeader.unpack(head)
            note = f" (inside TRANSACTION_PAYLOAD_EVENT, index {index})"
            iname = header.type_name + note
            too_big = limit is not None and consumed + header.event_size > limit
            if header.event_size < EVENT_HEADER_LEN or too_big:
                raise DecodeError(
                    f"inner event size {header.event_size} does not fit the payload",
                    event_type=iname,
                    position=where,
                )
            body_raw = self._read_exact(stream, header.event_size - EVENT_HEADER_LEN, iname, where)
            assert body_raw is not None
            consumed += header.event_size
            ctx.header = header
            body = self._decode_body(header.type_code, memoryview(body_raw), header, outer.pos, note)
            table_id = getattr(body, "table_id", None)
            if header.type_code == EventType.TABLE_MAP_EVENT and table_id is not None:
                ctx.tables[table_id] = body
            yield Event(header, body, outer.file, outer.pos, outer.end_pos, payload_index=index)
            index += 1
        if limit is not None and consumed != limit:
            raise DecodeError(
                f"payload inflates to {consumed} bytes, header says {limit}", event_type=tname, position=where
            )

    @staticmethod
    def _read_exact(stream: Any, n: int, tname: str, where: str, allow_eof: bool = False) -> bytes | None:
        parts: list[bytes] = []
        got = 0
        try:
            while got < n:
                chunk = stream.read(min(n - got, _READ_CHUNK))
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
        except Exception as exc:  # zstandard.ZstdError and friends
            raise DecodeError(f"cannot inflate payload: {exc}", event_type=tname, position=where) from exc
        if got == 0 and allow_eof:
            return None
        if got < n:
            raise DecodeError(
                f"truncated payload: needed {n} bytes, got {got}", event_type=tname, position=where
            )
        return b"".join(parts)
