"""MySQL's binary DECIMAL (``decimal2bin``): the reader shared by row images and binary JSON.

Below both :mod:`.values` (NEWDECIMAL columns) and :mod:`.json_binary` (DECIMAL opaque values),
so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from airflow_provider_binlog.binlog.errors import DecodeError

DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
"""Bytes of a partial group of 0-8 decimal digits."""

Reader = Callable[[bytes, int], tuple[Any, int]]
"""``f(buf, pos) -> (value, new_pos)``."""


def decimal_reader(precision: int, scale: int) -> tuple[Reader, int]:
    """NEWDECIMAL reader and its byte size (MySQL's ``decimal2bin`` layout: groups of 9 digits in
    4 bytes big-endian, leading/trailing partial groups in fewer bytes, sign in the top bit,
    negative values stored as the one's complement)."""
    intg = precision - scale
    i_full, i_rem = divmod(intg, 9)
    f_full, f_rem = divmod(scale, 9)
    int_bytes = DIG2BYTES[i_rem] + i_full * 4
    frac_bytes = f_full * 4 + DIG2BYTES[f_rem]
    size = int_bytes + frac_bytes
    if size == 0 or precision > 65 or scale > 30 or scale > precision:
        raise DecodeError(f"invalid DECIMAL({precision},{scale}) metadata")
    top = 1 << (size * 8 - 1)
    ones = (1 << (size * 8)) - 1
    frac_shift = frac_bytes * 8
    frac_mask = (1 << frac_shift) - 1
    from_bytes = int.from_bytes
    i_groups = [(k * 32, 10**9) for k in range(i_full)]  # least significant first
    simple = i_full == 0 or (i_full == 1 and i_rem == 0)

    def int_part(v: int) -> int:
        if simple:
            return v
        out = 0
        mult = 1
        for shift, base in i_groups:
            out += ((v >> shift) & 0xFFFFFFFF) * mult
            mult *= base
        return out + (v >> (i_full * 32)) * mult

    def frac_part(v: int) -> int:
        if f_full == 0:
            return v
        out = 0
        rem_bits = DIG2BYTES[f_rem] * 8
        tail = v & ((1 << rem_bits) - 1)
        v >>= rem_bits
        for k in range(f_full - 1, -1, -1):
            out = out * 10**9 + ((v >> (k * 32)) & 0xFFFFFFFF)
        return out * 10**f_rem + tail

    def read(b: bytes, p: int) -> tuple[Any, int]:
        end = p + size
        v = from_bytes(b[p:end], "big")
        if v & top:
            sign = ""
            v ^= top
        else:
            sign = "-"
            v = (v ^ ones) ^ top
        if scale:
            return Decimal(f"{sign}{int_part(v >> frac_shift)}.{frac_part(v & frac_mask):0{scale}d}"), end
        return Decimal(f"{sign}{int_part(v)}"), end

    return read, size
