"""One reader at a time of a destination client on a canal server, taken on the client side.

canal serves one consumer per destination and client id, and a ``rollback`` gives back *every*
unacked batch of that client: a second connection that peeks (getWithoutAck, then rollback), or
merely connects (a connection starts with a rollback), hands a running consumer's in-flight
batches out again. So the operator's canal run holds this for its whole drain, and the sensor takes
it without waiting (a held one means "a run is draining: count later") for its bounded peek.

Where it lives:

* with a ZooKeeper client (a ``canal`` connection in canal's cluster mode): a kazoo lock at
  ``/otter/canal/destinations/{destination}/{clientId}/provider/hold`` (this provider's node
  beside canal's; a contender's node is EPHEMERAL_SEQUENTIAL and names its holder), so it holds
  across machines;
* otherwise: an exclusive ``flock`` on ``{directory}/{server}-{destination}-{clientId}.lock``
  (default directory: ``binlog-cdc-canal-holds`` in the temporary directory; the file holds the
  holder's name while held): it excludes readers on this machine only; give
  the connection ``zookeeper_hosts`` when tasks of one destination run on several machines.

Every wait is bounded (``acquire(wait)``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from airflow_provider_binlog.canal.errors import CanalError
from airflow_provider_binlog.canal.meta.base import client_path
from airflow_provider_binlog.canal.meta.model import ClientIdentity

_UNSAFE = re.compile(r"[^A-Za-z0-9_.@=+-]")


class ClientHeldError(CanalError):
    """Another reader held the destination client longer than the wait."""


class ClientHold:
    """The hold of one destination client (see the module docstring).

    :param destination: the destination.
    :param client_id: canal's client id.
    :param server: ``host:port`` of the canal server (names the lock file; not used with ZooKeeper).
    :param zookeeper: a started kazoo client, or ``None`` for a lock file.
    :param directory: where lock files go.
    :param label: who holds it (e.g. ``dag/task/run/try``), shown to whoever finds it held.
    """

    def __init__(
        self,
        destination: str,
        client_id: int,
        server: str,
        zookeeper: Any = None,
        directory: str | os.PathLike[str] | None = None,
        label: str = "",
    ) -> None:
        self.destination = destination
        self.client_id = client_id
        self.server = server
        self.zookeeper = zookeeper
        self.label = label
        self.who = f"{socket.gethostname()} pid {os.getpid()}" + (f" ({label})" if label else "")
        if zookeeper is not None:
            self.where = client_path(ClientIdentity(destination, client_id)) + "/provider/hold"
            self._lock: Any = zookeeper.Lock(self.where, self.who)
        else:
            name = "-".join(_UNSAFE.sub("_", p) for p in (server, destination, str(client_id)))
            self.where = str(
                Path(directory or Path(tempfile.gettempdir()) / "binlog-cdc-canal-holds") / f"{name}.lock"
            )
        self._fd: int | None = None
        self.held = False

    def __repr__(self) -> str:
        return f"ClientHold({self.where!r}, held={self.held})"

    def acquire(self, wait: float = 0.0) -> bool:
        """Take the hold, waiting up to ``wait`` seconds (0: not at all); ``False`` when another
        reader has it."""
        if self.held:
            return True
        if self.zookeeper is not None:
            from kazoo.exceptions import LockTimeout

            try:
                got = bool(self._lock.acquire(blocking=wait > 0, timeout=wait if wait > 0 else None))
            except LockTimeout:
                got = False
        else:
            got = self._acquire_file(wait)
        self.held = got
        return got

    def _acquire_file(self, wait: float) -> bool:
        Path(self.where).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.where, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        os.ftruncate(fd, 0)
        os.pwrite(fd, self.who.encode(), 0)
        self._fd = fd
        return True

    def holder(self) -> str | None:
        """Who holds it now (``None``: nobody, or not known)."""
        if self.zookeeper is not None:
            with contextlib.suppress(Exception):
                contenders = self._lock.contenders()
                return str(contenders[0]) if contenders else None
            return None
        with contextlib.suppress(OSError):
            return Path(self.where).read_text().strip() or None
        return None

    def release(self) -> None:
        """Give the hold back (idempotent)."""
        if not self.held:
            return
        self.held = False
        if self.zookeeper is not None:
            with contextlib.suppress(Exception):
                self._lock.release()
            return
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor drops the flock

    def hold(self, wait: float) -> ClientHold:
        """Take it for a ``with`` block, waiting up to ``wait``; :class:`ClientHeldError` names the
        holder when it stays held."""
        if not self.acquire(wait):
            raise ClientHeldError(
                f"destination {self.destination} client {self.client_id}: another reader holds it "
                f"({self.holder() or 'unknown holder'}) after {wait:g} s; it is released when that "
                "run ends"
            )
        return self

    def __enter__(self) -> ClientHold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
