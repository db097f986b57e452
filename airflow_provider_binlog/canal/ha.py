"""One live consumer per destination and client id, through canal's EPHEMERAL ``running`` node,
and a fencing token that refuses the cursor writes of a consumer that lost it.

Znodes (kazoo recipe style; the client is injected)::

    /otter/canal/destinations/{destination}/{clientId}/running         EPHEMERAL
        {"active":true,"address":"{host}:{pid}","clientId":1001,"host":"...","label":"...","pid":123}
    /otter/canal/destinations/{destination}/{clientId}/provider/epoch  PERSISTENT
        the running payload plus {"session":"0x..."}; its znode version is the epoch

``active``, ``address`` and ``clientId`` are the fields canal's own client-HA node carries; ``host``,
``pid`` and ``label`` (e.g. the Airflow dag/task/try) say who holds it. The epoch node is this
provider's; canal's own nodes are left as canal writes them.

* :meth:`RunningNode.acquire` creates the running node and bumps the epoch (compare-and-set on its
  version) in one transaction, so every acquire has an epoch of its own and nothing else moves it.
  The holder remembers that version as its :class:`~airflow_provider_binlog.canal.meta.base.Fence`.
  When another session holds the node, it watches the node and waits up to ``timeout`` for it to
  go; then it raises :class:`~airflow_provider_binlog.canal.errors.RunningHeldError` naming the
  holder.
* Fencing: a meta manager the node is attached to
  (:meth:`~airflow_provider_binlog.canal.meta.base.MetaManager.attach_fence`; the
  :class:`~airflow_provider_binlog.canal.instance.CanalInstance` does it) writes the cursor and the
  marks as ``check(epoch, version)`` plus the write, one transaction. An ack that passed
  :meth:`RunningNode.check` just before the session expired, and reaches ZooKeeper after another
  consumer acquired, fails as a whole with :class:`~airflow_provider_binlog.canal.errors.FencedError`.
* :meth:`RunningNode.release` (from :meth:`RunningNode.close`) is best effort and bounded by
  ``release_timeout``: a ZooKeeper that does not answer leaves the node to the session's end.
* A session listener flips a flag on SUSPENDED (connection lost, session maybe alive) and LOST
  (session expired: the ephemeral node is gone and someone else may hold it now); CONNECTED clears
  SUSPENDED (the same session is back; after LOST the node must be acquired again).
  :meth:`RunningNode.check` raises :class:`~airflow_provider_binlog.canal.errors.SessionLostError`
  after loss; while suspended it waits up to ``reconnect_wait`` (default: twice the session timeout) for
  the connection to come back, so a short ZooKeeper outage delays an ack instead of failing it. The
  instance calls it before every ack and every cursor write, so consumption stops before any
  further ack.

Unsubscribing deletes the epoch node with the client node; do not unsubscribe a destination client
that is being consumed (a new epoch node starts again at version 0).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NoAuthError, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState, WatchedEvent, ZnodeStat
from kazoo.security import ACL

from airflow_provider_binlog.canal.errors import MetaAuthError, MetaError, RunningHeldError, SessionLostError
from airflow_provider_binlog.canal.meta.base import Fence, client_path
from airflow_provider_binlog.canal.meta.model import ClientIdentity

log = logging.getLogger(__name__)


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
    :param acl: ACL of the nodes (default: the client's default ACL).
    :param reconnect_wait: seconds :meth:`check` waits for a suspended connection to come back
        (default: twice the session timeout, as the meta manager's ``retry_for``).
    :param release_timeout: seconds :meth:`release` waits for ZooKeeper before it leaves the node
        to the session's end.
    """

    def __init__(
        self,
        client: KazooClient,
        identity: ClientIdentity,
        label: str = "",
        acl: Sequence[ACL] | None = None,
        reconnect_wait: float | None = None,
        release_timeout: float = 5.0,
    ) -> None:
        self.client = client
        self.identity = identity
        self.label = label
        self.acl = list(acl) if acl is not None else None
        self.path = client_path(identity) + "/running"
        self.epoch_path = client_path(identity) + "/provider/epoch"
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._reconnect_wait = reconnect_wait
        self.release_timeout = release_timeout
        self._held = False
        self._suspended = False
        self._lost = False
        self._session_id: int | None = None
        self._epoch: int | None = None
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
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

    @property
    def reconnect_wait(self) -> float:
        if self._reconnect_wait is not None:
            return self._reconnect_wait
        return 2 * float(getattr(self.client, "_session_timeout", 10_000)) / 1000.0

    def _listener(self, state: str) -> None:
        with self._lock:
            if state == KazooState.LOST:
                self._lost = True
            elif state == KazooState.SUSPENDED:
                self._suspended = True
            elif state == KazooState.CONNECTED:
                self._suspended = False
            self._changed.notify_all()

    def fence(self) -> Fence | None:
        """The fencing token of the last acquire (kept after a loss, so that the stale holder's
        writes are refused), or ``None`` when this node was never acquired."""
        with self._lock:
            if self._epoch is None:
                return None
            return Fence(self.epoch_path, self._epoch, self._session_id)

    def _session(self) -> int | None:
        return self.client.client_id[0] if self.client.client_id else None

    def _create_and_bump(self, data: bytes) -> list[Any]:
        """Create the running node and bump the epoch read just before, as one transaction."""
        try:
            _, stat = self.client.get(self.epoch_path)
            version: int | None = stat.version
        except NoNodeError:
            version = None
        epoch = json.loads(data)
        epoch["session"] = f"0x{self._session() or 0:x}"
        epoch_data = json.dumps(epoch, separators=(",", ":"), sort_keys=True).encode()
        txn = self.client.transaction()
        txn.create(self.path, data, acl=self.acl, ephemeral=True)
        if version is None:
            txn.create(self.epoch_path, epoch_data, acl=self.acl)
        else:
            txn.set_data(self.epoch_path, epoch_data, version=version)
        return list(txn.commit())

    def _take(self, session: int | None, epoch: int | None) -> None:
        with self._lock:
            self._held = True
            self._lost = False
            self._suspended = False
            self._session_id = session
            self._epoch = epoch

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
        while True:
            try:
                for parent in (self.path.rsplit("/", 1)[0], self.epoch_path.rsplit("/", 1)[0]):
                    self.client.retry(self.client.ensure_path, parent, acl=self.acl)
                created, bumped = self.client.retry(self._create_and_bump, data)
            except NoAuthError:
                raise MetaAuthError(f"ZooKeeper refused access to {self.path}") from None
            except KazooException as exc:
                raise MetaError(f"cannot create {self.path}: {type(exc).__name__}") from None
            if isinstance(created, NoAuthError) or isinstance(bumped, NoAuthError):
                raise MetaAuthError(f"ZooKeeper refused access to {self.path} or {self.epoch_path}")
            if not isinstance(created, Exception) and not isinstance(bumped, Exception):
                # set_data answers the new stat; a create (the first epoch) its path: version 0
                self._take(self._session(), bumped.version if isinstance(bumped, ZnodeStat) else 0)
                return
            if not isinstance(created, NodeExistsError):
                if isinstance(bumped, (BadVersionError, NodeExistsError, NoNodeError)):
                    continue  # the epoch moved between the read and the transaction: read it again
                raise MetaError(
                    f"cannot create {self.path} and bump {self.epoch_path}: "
                    f"{type(created).__name__}, {type(bumped).__name__}"
                )
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
                # ours: a create whose reply was lost; the epoch moved with it and only moves with it
                try:
                    _, epoch = self.client.retry(self.client.get, self.epoch_path)
                except NoNodeError:
                    epoch = None
                except KazooException as exc:
                    raise MetaError(f"cannot read {self.epoch_path}: {type(exc).__name__}") from None
                with self._lock:
                    self._held = True
                    self._session_id = stat.ephemeralOwner
                    self._epoch = epoch.version if epoch is not None else None
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
        """Raise :class:`SessionLostError` unless this consumer holds the node on a live session.

        While the connection is suspended it waits up to :attr:`reconnect_wait` for it to come back
        on the same session (then it passes) or for the session to be lost (then it raises).
        """
        if not self._held:
            raise SessionLostError(f"{self.path} is not held by this consumer")
        wait = self.reconnect_wait
        with self._changed:
            if self._suspended and not self._lost and wait > 0:
                self._changed.wait_for(lambda: self._lost or not self._suspended, wait)
            lost, suspended = self._lost, self._suspended
        if lost:
            raise SessionLostError(
                f"the ZooKeeper session holding {self.path} expired; another consumer may have taken "
                "over, so this one must stop and start again from the stored cursor"
            )
        if suspended:
            raise SessionLostError(
                f"the ZooKeeper connection holding {self.path} is suspended and was not back within "
                f"{wait:g} s; no ack until it is back"
            )

    def release(self, timeout: float | None = None) -> None:
        """Delete the node if this session holds it (idempotent); best effort and bounded.

        The node is ephemeral: when ZooKeeper does not answer within ``timeout`` (default
        :attr:`release_timeout`), it goes with the session (closed by the caller, or expired after
        the session timeout), so a cleanup never waits on a ZooKeeper outage.
        """
        with self._lock:
            held, self._held = self._held, False
        if not held or self._lost:
            return
        bound = self.release_timeout if timeout is None else timeout
        deadline = time.monotonic() + bound
        try:
            _, stat = self.client.get_async(self.path).get(timeout=bound)
            if self.client.client_id and stat.ephemeralOwner == self.client.client_id[0]:
                remaining = max(deadline - time.monotonic(), 0.01)
                self.client.delete_async(self.path, version=stat.version).get(timeout=remaining)
        except NoNodeError:
            pass
        except Exception as exc:  # a timeout, a lost connection: the session's end removes it
            log.warning(
                "%s not deleted (%s within %g s); it goes with the ZooKeeper session",
                self.path, type(exc).__name__, bound,
            )  # fmt: skip

    def close(self) -> None:
        """Release and stop listening to the session."""
        self.release()
        self.client.remove_listener(self._listener)

    def __enter__(self) -> RunningNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
