"""MariaDB event compression (``log_bin_compress``).

QUERY_COMPRESSED_EVENT compresses the statement text; the *_ROWS_COMPRESSED events compress the
row data after the column bitmaps. Both use::

    u8 header: bit 7 set, bits 4-6 algorithm (0 = zlib), bits 0-2 n = width of the length
    n bytes:   uncompressed length, big-endian
    zlib stream
"""

from __future__ import annotations

import zlib

from airflow_provider_binlog.binlog.errors import DecodeError


def mariadb_uncompress(buf: bytes | memoryview) -> bytes:
    """Inflate MariaDB's compressed-event format (header byte, big-endian length, zlib stream)."""
    if not len(buf):
        raise DecodeError("truncated: empty compressed data")
    head = buf[0]
    if not head & 0x80:
        raise DecodeError(f"compressed data header 0x{head:02x} lacks the compression flag")
    alg, n = (head >> 4) & 0x07, head & 0x07
    if alg != 0:
        raise DecodeError(f"unknown MariaDB compression algorithm {alg}")
    if n < 1 or n > 4 or len(buf) < 1 + n:
        raise DecodeError(f"bad compressed length width {n}")
    length = int.from_bytes(bytes(buf[1 : 1 + n]), "big")
    d = zlib.decompressobj()
    try:
        out = d.decompress(bytes(buf[1 + n :]), length + 1)
    except zlib.error as exc:
        raise DecodeError(f"corrupt compressed data: {exc}") from None
    if len(out) != length or not d.eof:
        raise DecodeError(f"compressed data inflates to {len(out)} bytes, header says {length}")
    return out
