"""One small cursor over a ``memoryview`` for variable-length fields; every overrun is a DecodeError."""

from __future__ import annotations

import builtins
import struct

from airflow_provider_binlog.binlog.errors import DecodeError

U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")


class Reader:
    """Read little-endian fields from ``buf[pos:end]``.

    :param buf: the bytes (a memoryview is not copied).
    :param pos: first byte to read.
    :param end: one past the last readable byte (default: the end of ``buf``).
    """

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = memoryview(buf) if not isinstance(buf, memoryview) else buf
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int) -> int:
        """Reserve ``n`` bytes and return their start offset; raise DecodeError if they are not there."""
        p = self.pos
        if n < 0 or p + n > self.end:
            raise DecodeError(f"truncated: need {n} bytes at offset {p}, {self.end - p} left")
        self.pos = p + n
        return p

    def u8(self) -> int:
        return self.buf[self.need(1)]

    def u16(self) -> int:
        return U16.unpack_from(self.buf, self.need(2))[0]

    def u24(self) -> int:
        p = self.need(3)
        return int.from_bytes(self.buf[p : p + 3], "little")

    def u32(self) -> int:
        return U32.unpack_from(self.buf, self.need(4))[0]

    def u48(self) -> int:
        p = self.need(6)
        return int.from_bytes(self.buf[p : p + 6], "little")

    def u64(self) -> int:
        return U64.unpack_from(self.buf, self.need(8))[0]

    def uint(self, n: int) -> int:
        """An ``n``-byte little-endian unsigned integer."""
        p = self.need(n)
        return int.from_bytes(self.buf[p : p + n], "little")

    def packed_int(self) -> int:
        """A length-encoded integer (``0xfc`` + 2 bytes, ``0xfd`` + 3, ``0xfe`` + 8)."""
        first = self.u8()
        if first < 0xFB:
            return first
        if first == 0xFC:
            return self.u16()
        if first == 0xFD:
            return self.u24()
        if first == 0xFE:
            return self.u64()
        raise DecodeError(f"invalid length-encoded integer prefix 0x{first:02x} at offset {self.pos - 1}")

    def take(self, n: int) -> memoryview:
        """The next ``n`` bytes as a memoryview (no copy)."""
        p = self.need(n)
        return self.buf[p : p + n]

    def bytes(self, n: int) -> builtins.bytes:
        p = self.need(n)
        return bytes(self.buf[p : p + n])

    def packed_bytes(self) -> builtins.bytes:
        """A length-encoded string as bytes."""
        return self.bytes(self.packed_int())

    def cstring(self) -> builtins.bytes:
        """Bytes up to a NUL (consumed, not returned)."""
        buf, p, end = self.buf, self.pos, self.end
        i = p
        while i < end and buf[i] != 0:
            i += 1
        if i >= end:
            raise DecodeError(f"truncated: unterminated string at offset {p}")
        self.pos = i + 1
        return bytes(buf[p:i])

    def rest(self) -> builtins.bytes:
        p, self.pos = self.pos, self.end
        return bytes(self.buf[p : self.end])

    def skip(self, n: int) -> None:
        self.need(n)
