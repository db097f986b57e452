"""Archived binlog files as a source: start in the archive, continue on the live server.

An archive is a directory (or a ``pyarrow.fs`` URI: ``file://``, ``s3://``, ``gs://``, ``hdfs://``
... with the filesystem libraries the user has) holding binlog files under their server names
(``mysql-bin.000042``), as ``mysqlbinlog --read-from-remote-server --raw`` or a copy of the
server's binlog directory leaves them. Other files (``mysql-bin.index``, notes) are ignored.

:class:`ArchiveClient` wraps a :class:`~..binlog.client.ReplicationClient`: every question goes to
the server, except that its binlog list also holds the archived files older than the server's
oldest, and a dump that starts in such a file reads the archive with the same decoder
(:func:`~..binlog.files.read_binlog_stream`) up to the server's oldest file, then continues with a
live dump at ``<oldest>:4``: the file the last archived one rotates into. The reader, filter,
store, schema history and marks see one stream of events, as from the server.

Gaps fail before anything is read (:class:`ArchiveGapError`, naming the missing files): a file
missing in the middle of the archive, or the archive ending before the server's oldest file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from airflow_provider_binlog.binlog.event import DecodeContext, Event
from airflow_provider_binlog.binlog.files import read_binlog_stream
from airflow_provider_binlog.binlog.gtid_tracker import GtidTracker
from airflow_provider_binlog.binlog.parser import BinlogParser
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import CanalError

_NAME = re.compile(r"^(?P<base>.+)\.(?P<number>\d{6,})$")


class ArchiveGapError(CanalError):
    """The archive and the server together do not hold every binlog file from the start on."""


def _number(name: str) -> int:
    m = _NAME.match(name)
    return int(m.group("number")) if m else -1


def _name_like(name: str, number: int) -> str:
    """``mysql-bin.000007`` for ``name`` = ``mysql-bin.000003`` and ``number`` = 7."""
    m = _NAME.match(name)
    assert m is not None
    return f"{m.group('base')}.{number:0{len(m.group('number'))}d}"


class BinlogArchive:
    """Binlog files in a directory or under a ``pyarrow.fs`` URI.

    :param uri: a local directory, or a URI ``pyarrow.fs.FileSystem.from_uri`` understands.
    """

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._fs: Any = None
        if "://" in uri:
            import pyarrow.fs  # object stores: the filesystem libraries the user has

            self._fs, self.root = pyarrow.fs.FileSystem.from_uri(uri)
        else:
            self.root = os.path.abspath(uri)
            if not os.path.isdir(self.root):
                raise ArchiveGapError(f"binlog archive {uri}: no such directory")

    def __repr__(self) -> str:
        return f"BinlogArchive({self.uri!r})"

    def files(self, base: str | None = None) -> list[str]:
        """The binlog file names in the archive, oldest first (only those named ``base.NNNNNN``
        when ``base`` is given)."""
        if self._fs is None:
            names = [n for n in os.listdir(self.root) if os.path.isfile(os.path.join(self.root, n))]
        else:
            import pyarrow.fs

            infos = self._fs.get_file_info(pyarrow.fs.FileSelector(self.root, recursive=False))
            names = [i.base_name for i in infos if i.type == pyarrow.fs.FileType.File]
        found = []
        for name in names:
            m = _NAME.match(name)
            if m and (base is None or m.group("base") == base):
                found.append(name)
        return sorted(found, key=_number)

    def size(self, name: str) -> int:
        if self._fs is None:
            return os.path.getsize(os.path.join(self.root, name))
        return int(self._fs.get_file_info(f"{self.root.rstrip('/')}/{name}").size)

    def open(self, name: str) -> BinaryIO:
        if self._fs is None:
            return open(os.path.join(self.root, name), "rb")
        return self._fs.open_input_file(f"{self.root.rstrip('/')}/{name}")  # type: ignore[no-any-return,unused-ignore]


@dataclass(frozen=True)
class ArchivePlan:
    """What a read from ``start`` takes from where.

    :param archived: the archive's files to read, in order (the first from ``start``).
    :param live: where the live dump continues (``None``: the archive alone reaches the stop).
    """

    archived: tuple[str, ...]
    live: BinlogPosition | None


class ArchiveClient:
    """A replication client that reads what the server no longer has from an archive (see the
    module docstring). Everything else is the wrapped client's.

    :param client: the server's :class:`~..binlog.client.ReplicationClient`.
    :param archive: the archived files.
    """

    def __init__(self, client: Any, archive: BinlogArchive) -> None:
        self.client = client
        self.archive = archive

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def __repr__(self) -> str:
        return f"ArchiveClient({self.client!r}, {self.archive!r})"

    @property
    def config(self) -> Any:
        return self.client.config

    def side(self) -> ArchiveClient:
        """The same with a replica server id of its own (scans beside a running dump)."""
        from airflow_provider_binlog.binlog.client import ReplicationClient, _default_server_id

        config = dataclasses.replace(self.client.config, server_id=_default_server_id())
        return ArchiveClient(ReplicationClient(config), self.archive)

    def _server_names(self) -> list[str]:
        return [name for name, _ in self.client.binlog_files()]

    def binlog_files(self) -> list[tuple[str, int]]:
        """The archived files older than the server's oldest, then the server's (``(name, size)``)."""
        server = self.client.binlog_files()
        oldest = _number(server[0][0]) if server else None
        m = _NAME.match(server[0][0]) if server else None
        names = self.archive.files(m.group("base") if m else None)
        older = [(n, self.archive.size(n)) for n in names if oldest is None or _number(n) < oldest]
        return older + list(server)

    def plan(self, start: BinlogPosition, stop_at: BinlogPosition | None = None) -> ArchivePlan:
        """The archived files a read from ``start`` needs and where it continues on the server.

        :raises ArchiveGapError: a file between ``start`` and the server's oldest is in neither.
        """
        server = self._server_names()
        if start.file in server:
            return ArchivePlan((), start)
        m = _NAME.match(start.file)
        if m is None:
            raise ArchiveGapError(f"{start} names no binlog file (expected NAME.NNNNNN)")
        have = set(self.archive.files(m.group("base")))
        if start.file not in have:
            oldest = server[0] if server else "none"
            raise ArchiveGapError(
                f"{start.file} is neither in the binlog archive {self.archive.uri} nor on "
                f"{self.client.config.address} (oldest there: {oldest}); the changes from {start} cannot "
                "be read"
            )
        first = start.file_number
        last = _number(server[0]) - 1 if server else max(_number(n) for n in have)
        if stop_at is not None and stop_at.file_number <= last:
            last = stop_at.file_number
        wanted = [_name_like(start.file, n) for n in range(first, last + 1)]
        missing = [n for n in wanted if n not in have]
        if missing:
            runs = _runs(missing)
            where = (
                f"before the server's oldest binlog {server[0]} on {self.client.config.address}"
                if server
                else "in the archive"
            )
            raise ArchiveGapError(
                f"binlog gap: {runs} missing from the archive {self.archive.uri} between {start.file} and "
                f"{wanted[-1]} ({where}); the changes in {'it' if len(missing) == 1 else 'them'} cannot be "
                "read. Add the missing file(s) to the archive, or start after the gap"
            )
        live = None
        if server and (stop_at is None or stop_at.file_number > last):
            live = BinlogPosition(server[0], 4)
        return ArchivePlan(tuple(wanted), live)

    def dump(
        self,
        start: BinlogPosition | None = None,
        *,
        gtid: Any = None,
        blocking: bool = True,
        stop_at: BinlogPosition | None = None,
        include_heartbeats: bool = False,
        ctx: DecodeContext | None = None,
        annotate_rows: bool | None = None,
    ) -> Any:
        """A dump as :meth:`ReplicationClient.dump`, starting in the archive when ``start``'s file
        is no longer on the server (a GTID start is the server's). ``annotate_rows`` applies to the
        live part; archived files hold the ANNOTATE_ROWS events the server wrote."""
        if start is None or start.file in self._server_names():
            return self.client.dump(
                start, gtid=gtid, blocking=blocking, stop_at=stop_at,
                include_heartbeats=include_heartbeats, ctx=ctx, annotate_rows=annotate_rows,
            )  # fmt: skip
        plan = self.plan(start, stop_at)
        return ArchiveStream(self, plan, start, stop_at, blocking, include_heartbeats, ctx, annotate_rows)


def _runs(names: list[str]) -> str:
    """``a.000003`` / ``a.000003 .. a.000005`` (consecutive runs joined by commas)."""
    out: list[str] = []
    begin = prev = names[0]
    for name in [*names[1:], None]:
        if name is not None and _number(name) == _number(prev) + 1:
            prev = name
            continue
        out.append(begin if begin == prev else f"{begin} .. {prev}")
        if name is not None:
            begin = prev = name
    return ", ".join(out)


class ArchiveStream:
    """Events from the archive, then (where the plan says) from a live dump; the interface of
    :class:`~..binlog.client.BinlogStream` the reader uses (``parser.ctx``, ``position``,
    ``gtid_position``, ``close``)."""

    def __init__(
        self,
        owner: ArchiveClient,
        plan: ArchivePlan,
        start: BinlogPosition,
        stop_at: BinlogPosition | None,
        blocking: bool,
        include_heartbeats: bool,
        ctx: DecodeContext | None,
        annotate_rows: bool | None = None,
    ) -> None:
        self.owner = owner
        self.annotate_rows = annotate_rows
        self.plan = plan
        self.start = start
        self.stop_at = stop_at
        self.blocking = blocking or stop_at is not None
        self.include_heartbeats = include_heartbeats
        self.parser = BinlogParser(start.file, start.pos, ctx=ctx)
        self.tracker = GtidTracker(None)
        self._live: Any = None
        self._file: BinaryIO | None = None
        self._iter: Iterator[Event] | None = None
        self.closed = False

    def __repr__(self) -> str:
        return f"ArchiveStream({self.owner.archive!r}, position={self.position})"

    @property
    def position(self) -> BinlogPosition | None:
        return self._live.position if self._live is not None else self.parser.position

    @property
    def gtid_position(self) -> Any:
        return self._live.gtid_position if self._live is not None else self.tracker.position

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        if self._iter is None:
            self._iter = self._events()
        return next(self._iter)

    def __enter__(self) -> ArchiveStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.closed = True
        if self._file is not None:
            with contextlib.suppress(Exception):
                self._file.close()
        if self._live is not None:
            self._live.close()

    def _reached(self) -> bool:
        stop = self.stop_at
        return stop is not None and self.position is not None and self.position >= stop

    def _events(self) -> Iterator[Event]:
        update = self.tracker.update
        for name in self.plan.archived:
            if self.closed or self._reached():
                return
            begin = self.start.pos if name == self.start.file else 4
            self._file = self.owner.archive.open(name)
            try:
                for event in read_binlog_stream(self._file, name, start=begin, parser=self.parser):
                    if self.closed:
                        return
                    update(event)
                    yield event
                    if self._reached():
                        return
            finally:
                self._file.close()
                self._file = None
        live_at = self.plan.live
        if live_at is None or self.closed or self._reached():
            return
        live = self.owner.client.dump(
            live_at, blocking=self.blocking, stop_at=self.stop_at,
            include_heartbeats=self.include_heartbeats, annotate_rows=self.annotate_rows,
        )  # fmt: skip
        live.parser.ctx.schema_resolver = self.parser.ctx.schema_resolver
        live.tracker.position = self.tracker.position
        self._live = live
        yield from live
