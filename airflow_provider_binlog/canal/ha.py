"""One live consumer per destination and client id, through canal's EPHEMERAL ``running`` node.

Znode (kazoo recipe style; the client is injected)::

    /otter/canal/destinations/{destination}/{clientId}/running   EPHEMERAL
        {"active":true,"address":"{host}:{pid}","clientId":1001,"host":"...","label":"...","pid":123}

``active``, ``address`` and ``clientId`` are the fields canal's own client-HA node carries; ``host``,
``pid`` and ``label`` (e.g. the Airflow dag/task/try) say who holds it.

* :meth:`RunningNode.acquire` creates the node. When another session holds it, it watches the
  node and waits up to ``timeout`` for it to go; then it raises
  :class:`~airflow_provider_binlog.canal.errors.RunningHeldError` naming the holder.
* A session listener flips a flag on SUSPENDED (connection lost, session maybe alive) and LOST
  (session expired: the ephemeral node is gone and someone else may hold it now).
  :meth:`RunningNode.check` raises :class:`~airflow_provider_binlog.canal.errors.SessionLostError`
  while suspended or after loss; the instance calls it before every ack and every cursor write,
  so consumption stops before any further ack. After LOST the node must be acquired again.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState, WatchedEvent
from kazoo.security import ACL

from airflow_provider_binlog.canal.errors import MetaAuthError, MetaError, RunningHeldError, SessionLostError
from airflow_provider_binlog.canal.meta.base import client_path
from airflow_provider_binlog.canal.meta.model import ClientIdentity


def describe_holder(holder: dict[str, Any] | None) -> str:
    """``host pid 123 (label)`` for an error message."""
    if not holder:
        return "an unknown holder"
    text = f"{holder.get('host') or holder.get('address', '?')}"
    if holder.get("pid") is not None:
        text += f" pid {holder['pid']}"
    if holder.get("label"):
        text += f" ({holder['label']})"
    return text


class RunningNode:
    """The ``running`` node of one destination client.

    :param client: a started :class:`KazooClient`.
    :param identity: the destination and client id.
    :param label: who is consuming, e.g. ``dag_id/task_id/try_number``.
    :param acl: ACL of the node (default: the client's default ACL).
    """

    def __init__(
        self,
        client: KazooClient,
        identity: ClientIdentity,
        label: str = "",
        acl: Sequence[ACL] | None = None,
    ) -> None:
        self.client = client
        self.identity = identity
        self.label = label
        self.acl = list(acl) if acl is not None else None
        self.path = client_path(identity) + "/running"
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._held = False
        self._suspended = False
        self._lost = False
        self._session_id: int | None = None
        self._lock = threading.Lock()
        client.add_listener(self._listener)

    def __repr__(self) -> str:
        return f"RunningNode({self.path!r}, held={self._held})"

    @property
    def payload(self) -> dict[str, Any]:
        return {
            "active": True,
            "address": f"{self.host}:{self.pid}",
            "clientId": self.identity.client_id,
            "host": self.host,
            "label": self.label,
            "pid": self.pid,
        }

    def _listener(self, state: str) -> None:
        with self._lock:
            if state == KazooState.LOST:
                self._lost = True
            elif state == KazooState.SUSPENDED:
                self._suspended = True
            elif state == KazooState.CONNECTED:
                self._suspended = False

    @property
    def held(self) -> bool:
        """Whether this consumer holds the node and its session is connected and alive."""
        return self._held and not self._lost and not self._suspended

    def holder(self) -> dict[str, Any] | None:
        """The current holder's payload, or ``None`` when nobody holds the node."""
        try:
            data, _ = self.client.retry(self.client.get, self.path)
        except NoNodeError:
            return None
        except NoAuthError:
            raise MetaAuthError(f"ZooKeeper refused access to {self.path}") from None
        try:
            value = json.loads(data)
        except ValueError:
            return {"address": data.decode(errors="replace")}
        return value if isinstance(value, dict) else {"address": str(value)}

    def acquire(self, timeout: float = 0.0) -> None:
        """Become the destination client's one live consumer.

        :param timeout: seconds to wait for another holder to go away.
        :raises RunningHeldError: still held by someone else after ``timeout``; names the holder.
        """
        deadline = time.monotonic() + timeout
        data = json.dumps(self.payload, separators=(",", ":"), sort_keys=True).encode()
        parent = self.path.rsplit("/", 1)[0]
        while True:
            try:
                self.client.retry(self.client.ensure_path, parent, acl=self.acl)
                self.client.retry(self.client.create, self.path, data, acl=self.acl, ephemeral=True)
                with self._lock:
                    self._held = True
                    self._lost = False
                    self._suspended = False
                    self._session_id = self.client.client_id[0] if self.client.client_id else None
                return
            except NodeExistsError:
                pass
            except NoAuthError:
                raise MetaAuthError(f"ZooKeeper refused access to {self.path}") from None
            except KazooException as exc:
                raise MetaError(f"cannot create {self.path}: {type(exc).__name__}") from None
            # held: ours from an earlier create whose reply was lost, or someone else's
            gone = threading.Event()

            def watch(event: WatchedEvent, gone: threading.Event = gone) -> None:
                gone.set()

            try:
                stat = self.client.retry(self.client.exists, self.path, watch=watch)
            except KazooException as exc:
                raise MetaError(f"cannot watch {self.path}: {type(exc).__name__}") from None
            if stat is None:
                continue
            if self.client.client_id and stat.ephemeralOwner == self.client.client_id[0]:
                with self._lock:
                    self._held = True
                    self._session_id = stat.ephemeralOwner
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not gone.wait(remaining):
                holder = self.holder()
                if holder is None:
                    continue  # it just went
                raise RunningHeldError(
                    f"destination {self.identity.destination!r} client {self.identity.client_id} is "
                    f"being consumed by {describe_holder(holder)}; waited {timeout:g}s",
                    holder,
                )

    def check(self) -> None:
        """Raise :class:`SessionLostError` unless this consumer holds the node on a live session."""
        if not self._held:
            raise SessionLostError(f"{self.path} is not held by this consumer")
        if self._lost:
            raise SessionLostError(
                f"the ZooKeeper session holding {self.path} expired; another consumer may have taken "
                "over, so this one must stop and start again from the stored cursor"
            )
        if self._suspended:
            raise SessionLostError(
                f"the ZooKeeper connection holding {self.path} is suspended; no ack until it is back"
            )

    def release(self) -> None:
        """Delete the node if this session holds it (idempotent)."""
        with self._lock:
            held, self._held = self._held, False
        if not held or self._lost:
            return
        try:
            _, stat = self.client.retry(self.client.get, self.path)
            if self.client.client_id and stat.ephemeralOwner == self.client.client_id[0]:
                self.client.retry(self.client.delete, self.path, version=stat.version)
        except (NoNodeError, KazooException):
            pass  # the session's end removes it anyway

    def close(self) -> None:
        """Release and stop listening to the session."""
        self.release()
        self.client.remove_listener(self._listener)

    def __enter__(self) -> RunningNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
