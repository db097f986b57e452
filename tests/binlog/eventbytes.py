"""Build raw binlog events for parser tests (header + body + CRC32)."""

from __future__ import annotations

import struct
import zlib

from airflow_provider_binlog.binlog.event import HEADER


def raw_event(
    code: int,
    body: bytes,
    *,
    end: int = 0,
    checksum: bool = True,
    timestamp: int = 1_700_000_000,
    server_id: int = 7,
    flags: int = 0,
) -> bytes:
    """One event; ``end`` is the header's log_pos (0 = artificial)."""
    size = 19 + len(body) + (4 if checksum else 0)
    raw = HEADER.pack(timestamp, code, server_id, size, end, flags) + body
    if checksum:
        raw += struct.pack("<I", zlib.crc32(raw))
    return raw


def mariadb_compress(data: bytes) -> bytes:
    """MariaDB's compressed-event format: header byte, big-endian length, zlib stream."""
    n = max(1, (len(data).bit_length() + 7) // 8)
    return bytes([0x80 | n]) + len(data).to_bytes(n, "big") + zlib.compress(data)
