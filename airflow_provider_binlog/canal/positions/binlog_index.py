"""The binlog index of a server: its binlog files (``SHOW BINARY LOGS``) and when each began.

A file's start time is the timestamp of its FORMAT_DESCRIPTION event (read by a short
non-blocking dump of the file's first events, with a replica server id of its own). A closed
file never changes, so its start time is cached in the process, keyed by the server's address,
the file's name and its size (a server whose binlog was reset and has written a file of the same
name again gives it another size, except by coincidence; the head file is read each time).

:meth:`BinlogIndex.file_at` answers "which file holds the instant T" with a binary search over
those start times: ``log2(files)`` short dumps the first time, none for cached files after.
"""

from __future__ import annotations

import threading
from typing import Any

from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import StartPositionError

_LOCK = threading.Lock()
_STARTS: dict[tuple[str, str, int], int] = {}  # (address, file, size) -> FORMAT_DESCRIPTION time


def clear_cache() -> None:
    """Forget every cached file start time (tests)."""
    with _LOCK:
        _STARTS.clear()


class BinlogIndex:
    """The binlog files of one server and their start times.

    :param client: a :class:`~..binlog.client.ReplicationClient` of the server.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.files: list[tuple[str, int]] = client.binlog_files()
        self.reads = 0  # dumps made for start times (tests: the cache's effect)
        if not self.files:
            raise StartPositionError(f"{client.config.address} has no binlog files")

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.files]

    def start_time(self, index: int) -> int | None:
        """Unix time the ``index``-th file began (``None``: its first events could not be read)."""
        name, size = self.files[index]
        key = (self.client.config.address, name, size)
        closed = index < len(self.files) - 1
        if closed:
            with _LOCK:
                cached = _STARTS.get(key)
            if cached is not None:
                return cached
        found = self._read_start(name)
        if found is not None and closed:
            with _LOCK:
                _STARTS[key] = found
        return found

    def _read_start(self, name: str) -> int | None:
        from airflow_provider_binlog.canal.side import side_client

        self.reads += 1
        fde = EventType.FORMAT_DESCRIPTION_EVENT
        start, first = BinlogPosition(name, 4), BinlogPosition(name, 5)
        with side_client(self.client).dump(start, stop_at=first) as stream:
            for event in stream:
                if event.header.type_code == fde and event.header.timestamp:
                    return int(event.header.timestamp)
        return None

    def file_at(self, when: float) -> str:
        """The last file that began at or before ``when`` (the oldest file when all began later):
        the one file whose transactions may straddle ``when``."""
        lo, hi = 0, len(self.files) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            t = self.start_time(mid)
            if t is not None and t <= when:
                lo = mid
            else:
                hi = mid - 1
        return self.files[lo][0]
