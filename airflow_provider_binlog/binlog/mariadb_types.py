"""MariaDB's plugin data types whose row images are fixed binary strings: their text forms.

MariaDB (10.5+) writes ``UUID``, ``INET6`` and ``INET4`` columns in a TABLE_MAP as ``BINARY(16)``
and ``BINARY(4)`` (type STRING, binary collation) and says nothing more about them, even with
``binlog_row_metadata=FULL``; a client's ``SELECT`` gets their text. The decoder turns the bytes
into that text when the column's :attr:`~.columns.ColumnDef.plugin_type` names the type (the
schema history knows it from ``information_schema.COLUMNS.DATA_TYPE`` or the DDL), so the binlog
path gives the value the snapshot's ``SELECT`` reads. Checked against MariaDB 10.11 (see the
tests): the binlog carries a UUID in its text order (no segment swap, also for time-based
UUIDs), an INET6 as its 16 address bytes, most significant first, an INET4 as 4 bytes likewise.

Text forms (as MariaDB prints them): UUID lower-case ``8-4-4-4-12`` hex; INET4 dotted quad;
INET6 lower-case hex groups without leading zeros, the longest run of zero groups (also a single
one; the first of equal runs) as ``::``, IPv4-mapped (``::ffff:1.2.3.4``) and IPv4-compatible
addresses with a dotted quad (compatible: the first 12 bytes zero and the 13th or 14th not, so
``::1.2.3.4`` but ``::244f``).
"""

from __future__ import annotations

from collections.abc import Callable

PLUGIN_TYPES: dict[str, int] = {"uuid": 16, "inet6": 16, "inet4": 4}
"""Plugin type name -> its binary length in the row image."""


def uuid_text(b: bytes) -> str:
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def inet4_text(b: bytes) -> str:
    return f"{b[0]}.{b[1]}.{b[2]}.{b[3]}"


def inet6_text(b: bytes) -> str:
    words = [b[i] << 8 | b[i + 1] for i in range(0, 16, 2)]
    if not any(words[:6]) and words[6]:
        return "::" + inet4_text(b[12:])
    if not any(words[:5]) and words[5] == 0xFFFF:
        return "::ffff:" + inet4_text(b[12:])
    best, length, i = -1, 0, 0
    while i < 8:
        j = i
        while j < 8 and words[j] == 0:
            j += 1
        if j - i > length:
            best, length = i, j - i
        i = max(j, i + 1)
    if best < 0:
        return ":".join(f"{w:x}" for w in words)
    head = ":".join(f"{w:x}" for w in words[:best])
    tail = ":".join(f"{w:x}" for w in words[best + length :])
    return f"{head}::{tail}"


_TEXT: dict[str, Callable[[bytes], str]] = {"uuid": uuid_text, "inet6": inet6_text, "inet4": inet4_text}


def text_function(plugin_type: str) -> Callable[[bytes], str]:
    """The function turning a row image's bytes of ``plugin_type`` into MariaDB's text."""
    return _TEXT[plugin_type]
