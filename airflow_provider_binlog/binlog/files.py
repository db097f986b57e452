"""Read binlog files from disk (archived or copied binlogs) with the same decoder as the client.

A binlog file is the 4-byte magic ``\\xfebin`` followed by events back to back, the first one a
FORMAT_DESCRIPTION_EVENT. A file that ends inside an event (a copy of a binlog still being
written, or a damaged file) raises :class:`~.errors.DecodeError` naming the offset.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from airflow_provider_binlog.binlog.constants import (
    BINLOG_MAGIC,
    EVENT_HEADER_LEN,
    EventType,
    event_type_name,
)
from airflow_provider_binlog.binlog.errors import DecodeError
from airflow_provider_binlog.binlog.event import Event, EventHeader
from airflow_provider_binlog.binlog.parser import BinlogParser

MAX_EVENT_SIZE = 1 << 32


def _read(f: BinaryIO, n: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < n:
        chunk = f.read(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def read_binlog_file(
    path: str | os.PathLike[str],
    *,
    start: int = 4,
    parser: BinlogParser | None = None,
    verify_checksum: bool = True,
) -> Iterator[Event]:
    """Yield the events of one binlog file.

    :param path: the file.
    :param start: offset of the first event to yield; the FORMAT_DESCRIPTION_EVENT at offset 4 is
        always decoded first (and yielded only when ``start`` is 4).
    :param parser: a parser to continue with (keeps table maps across files); a new one by default.
    :param verify_checksum: verify CRC32s (on unless reading a deliberately damaged file).
    """
    with open(path, "rb") as f:
        name = os.path.basename(os.fspath(path))
        yield from read_binlog_stream(f, name, start=start, parser=parser, verify_checksum=verify_checksum)


def read_binlog_stream(
    f: BinaryIO,
    name: str,
    *,
    start: int = 4,
    parser: BinlogParser | None = None,
    verify_checksum: bool = True,
) -> Iterator[Event]:
    """Like :func:`read_binlog_file`, from an open binary file object whose binlog file name is ``name``."""
    if parser is None:
        parser = BinlogParser(name, verify_checksum=verify_checksum)
    parser.set_file(name, 4)
    magic = _read(f, 4)
    if magic != BINLOG_MAGIC:
        raise DecodeError(
            f"not a binlog file: magic {magic!r}, expected {BINLOG_MAGIC!r}", position=f"{name}:0"
        )
    offset = 4
    first = True
    while True:
        raw = _read_event(f, name, offset)
        if raw is None:
            return
        events = list(parser.parse(raw, offset))
        if first:
            first = False
            fde_first = bool(events) and events[0].header.type_code == EventType.FORMAT_DESCRIPTION_EVENT
            if start > 4 and fde_first:
                f.seek(start)
                offset = start
                parser.next_pos = start
                continue
        if offset >= start:
            yield from events
        offset += len(raw)
        if parser.file != name:  # a ROTATE names the next file: this one is done
            return


def _read_event(f: BinaryIO, name: str, offset: int) -> bytes | None:
    head = _read(f, EVENT_HEADER_LEN)
    if not head:
        return None
    if len(head) < EVENT_HEADER_LEN:
        raise DecodeError(
            f"truncated: file ends {len(head)} bytes into an event header",
            event_type=event_type_name(head[4]) if len(head) > 4 else None,
            position=f"{name}:{offset}",
        )
    header = EventHeader.unpack(head)
    if header.event_size < EVENT_HEADER_LEN or header.event_size > MAX_EVENT_SIZE:
        raise DecodeError(
            f"invalid event_size {header.event_size}",
            event_type=header.type_name,
            position=f"{name}:{offset}",
        )
    rest = _read(f, header.event_size - EVENT_HEADER_LEN)
    if len(rest) < header.event_size - EVENT_HEADER_LEN:
        raise DecodeError(
            f"truncated: file ends {EVENT_HEADER_LEN + len(rest)} bytes into "
            f"a {header.event_size}-byte event",
            event_type=header.type_name,
            position=f"{name}:{offset}",
        )
    return head + rest


def read_binlog_files(
    paths: Iterable[str | os.PathLike[str]], *, verify_checksum: bool = True
) -> Iterator[Event]:
    """Yield the events of several binlog files in order, sharing one parser (and its table maps)."""
    parser: BinlogParser | None = None
    for path in paths:
        if parser is None:
            parser = BinlogParser(os.path.basename(os.fspath(path)), verify_checksum=verify_checksum)
        yield from read_binlog_file(path, parser=parser)
