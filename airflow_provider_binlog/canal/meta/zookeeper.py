"""The ZooKeeper meta manager: canal's own znode layout, compare-and-set writes, chroot, digest ACLs.

Znode layout (canal's, readable and writable by canal itself; see also :mod:`.base`)::

    /otter/canal/destinations/{destination}/{clientId}                 PERSISTENT, empty
    /otter/canal/destinations/{destination}/{clientId}/filter          PERSISTENT filter, raw UTF-8
    /otter/canal/destinations/{destination}/{clientId}/cursor          PERSISTENT LogPosition JSON
    /otter/canal/destinations/{destination}/{clientId}/mark/{batchId:010d}
                                                                        PERSISTENT PositionRange JSON
    /otter/canal/destinations/{destination}/{clientId}/running         EPHEMERAL (canal.ha)
    /otter/canal/destinations/{destination}/{clientId}/provider/...    PERSISTENT provider records

The client is injected (kazoo recipe style) and may carry a chroot (``host:port/chroot``); paths
here are always the canal paths, ZooKeeper prefixes the chroot. Every write is a versioned
``set`` (or a ``create`` for "must not exist"); a retry that finds the version already bumped by
its own earlier attempt (the reply was lost, the write was not) recognises its own bytes and
succeeds instead of reporting a false conflict.

Retries: every call is retried through ConnectionLoss / OperationTimeout with backoff for at most
``retry_for`` seconds (default: twice the session timeout), so a ZooKeeper outage shorter than that
delays a call instead of failing it; then :class:`~airflow_provider_binlog.canal.errors.MetaError`
names ZooKeeper. A request that timed out may still be sent once the connection is back (kazoo
keeps it queued); a fenced one is still checked against the epoch then.

Fencing: with an HA node attached (:meth:`ZooKeeperMetaManager.attach_fence`, see :mod:`..ha`) a
cursor or mark write or delete of that client is one transaction, ``check(epoch, version)`` plus
the write; a stale holder's write fails as a whole with
:class:`~airflow_provider_binlog.canal.errors.FencedError` and changes nothing. A fenced call is
never retried across a session expiry: it raises
:class:`~airflow_provider_binlog.canal.errors.SessionLostError` at once (unfenced calls carry on on
kazoo's next session, as before).

Digest authentication: :func:`.zookeeper_client.connect_zookeeper` adds ``digest`` auth data and,
with ``acl="creator"``, creates nodes with an ACL that gives all permissions to that identity only.
A client with the wrong password gets :class:`~airflow_provider_binlog.canal.errors.MetaAuthError`.
Passwords never appear in reprs, logs or error messages.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.interfaces import IAsyncResult
from kazoo.security import ACL

from airflow_provider_binlog.canal.errors import (
    FencedError,
    MetaAuthError,
    MetaConflictError,
    MetaError,
    SessionLostError,
)
from airflow_provider_binlog.canal.meta.base import Fence, FenceSource, MetaManager, Version, client_path
from airflow_provider_binlog.canal.meta.model import ClientIdentity

CONNECTION_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}
"""kazoo's reconnect policy here: forever, at most a second apart (kazoo's default backs off to an
hour, so a server back after a few seconds would be seen only several seconds later)."""


def _refused(path: str) -> str:
    return f"ZooKeeper refused access to {path} (ACL / digest credentials)"


class ZooKeeperMetaManager(MetaManager):
    """Meta data in ZooKeeper (see the module docstring).

    :param client: a started :class:`KazooClient` (optionally chrooted and authenticated).
    :param acl: ACL for the nodes this manager creates (default: the client's default ACL).
    :param retry_for: seconds a call keeps retrying through a lost connection (default: twice the
        session timeout: a restarted server restores the session with a fresh timeout, so it may
        outlive the outage by one). Past it the call fails; a lost session never waits that long.
    """

    def __init__(
        self, client: KazooClient, acl: Sequence[ACL] | None = None, retry_for: float | None = None
    ) -> None:
        self.client = client
        self.acl = list(acl) if acl is not None else None
        self._retry_for = retry_for
        self._fences: dict[str, FenceSource] = {}

    def __repr__(self) -> str:
        return f"ZooKeeperMetaManager(hosts={self.client.hosts!r})"

    @property
    def retry_for(self) -> float:
        if self._retry_for is not None:
            return self._retry_for
        return 2 * float(getattr(self.client, "_session_timeout", 10_000)) / 1000.0

    # -- calls --------------------------------------------------------------------------------

    def _call(self, path: str, start: Callable[[], IAsyncResult], fence: Fence | None = None) -> Any:
        """Run ``start()`` (which sends one request) until it answers, for at most :attr:`retry_for`.

        A lost connection (ConnectionLoss, OperationTimeout) is retried with backoff. A session
        expiry is retried on kazoo's next session unless the call is ``fence``d: then it raises
        :class:`SessionLostError` at once. Node errors (no node, exists, bad version, not empty)
        are raised as kazoo's for the caller to judge.
        """
        deadline = time.monotonic() + self.retry_for
        delay = 0.1
        while True:
            if fence is not None:
                self._check_session(fence, path)
            try:
                return start().get(timeout=max(deadline - time.monotonic(), 0.01))
            except NoAuthError:
                raise MetaAuthError(_refused(path)) from None
            except (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError):
                raise
            except SessionExpiredError:
                if fence is not None:
                    raise SessionLostError(self._expired_message(path)) from None
            except (ConnectionLoss, OperationTimeoutError):
                pass
            except self.client.handler.timeout_exception:
                raise MetaError(
                    f"ZooKeeper did not answer on {path} within {self.retry_for:g} s (connection lost)"
                ) from None
            except KazooException as exc:
                raise MetaError(f"ZooKeeper error on {path}: {type(exc).__name__}") from None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise MetaError(f"ZooKeeper connection lost on {path}; gave up after {self.retry_for:g} s")
            time.sleep(min(delay * random.uniform(0.8, 1.2), remaining))
            delay = min(delay * 2, 1.0)

    def _check_session(self, fence: Fence, path: str) -> None:
        """A fenced call goes out on the session that acquired the running node, or not at all."""
        session = self.client.client_id[0] if self.client.client_id else None
        if fence.session_id is None or session is None or session == fence.session_id:
            return
        try:
            _, stat = self.client.get_async(fence.path).get(timeout=self.retry_for)
            moved = stat.version != fence.version
        except NoNodeError:
            moved = True
        except (KazooException, self.client.handler.timeout_exception):
            moved = False
        if moved:
            raise FencedError(self._fenced_message(path, fence), self._destination(fence))
        raise SessionLostError(self._expired_message(path))

    @staticmethod
    def _destination(fence: Fence) -> str:
        return fence.path.split("/")[-4]  # .../destinations/{destination}/{clientId}/provider/epoch

    @staticmethod
    def _fenced_message(path: str, fence: Fence) -> str:
        return (
            f"destination {ZooKeeperMetaManager._destination(fence)!r}: another consumer took over "
            f"(the epoch moved on from version {fence.version}), so {path} was not written; this run "
            "must stop and start again from the stored cursor"
        )

    @staticmethod
    def _expired_message(path: str) -> str:
        return (
            f"the ZooKeeper session of the consumer writing {path} expired; another consumer may have "
            "taken over, so this one must stop and start again from the stored cursor"
        )

    # -- node operations ----------------------------------------------------------------------

    def _read(self, path: str) -> tuple[bytes | None, Version]:
        try:
            data, stat = self._call(path, lambda: self.client.get_async(path))
        except NoNodeError:
            return None, None
        return data, stat.version

    def _ensure_parent(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0]
        if parent:
            self._call(parent, lambda: self.client.ensure_path_async(parent, acl=self.acl))

    def _create(self, path: str, create: Callable[[], object]) -> None:
        """``create()`` (a create of ``path``); when its parent is missing, make it and create again
        (one round trip for a node whose parent exists, as a batch's mark's does after the first)."""
        try:
            create()
        except NoNodeError:
            self._ensure_parent(path)
            create()

    def _write(self, path: str, data: bytes, expected: Version) -> Version:
        if expected is None:
            try:
                self._create(
                    path, lambda: self._call(path, lambda: self.client.create_async(path, data, acl=self.acl))
                )
                return 0
            except NodeExistsError:
                return self._own_create(path, data)
        try:
            stat = self._call(path, lambda: self.client.set_async(path, data, version=expected))
            return stat.version
        except BadVersionError:
            return self._own_set(path, data, expected)
        except NoNodeError:
            raise MetaConflictError(f"{path} was deleted (expected version {expected})") from None

    def _own_create(self, path: str, data: bytes) -> Version:
        """After NodeExists: our own create, retried after its reply was lost, or a conflict."""
        current, version = self._read(path)
        if current == data and version == 0:
            return 0
        raise MetaConflictError(f"{path} already exists (version {version})")

    def _own_set(self, path: str, data: bytes, expected: int) -> Version:
        """After BadVersion: our own set, retried after its reply was lost, or a conflict."""
        current, version = self._read(path)
        if current == data and version == expected + 1:
            return version
        raise MetaConflictError(f"{path} changed: expected version {expected}, found {version}")

    def _delete(self, path: str, expected: Version = ...) -> None:
        if expected is ...:
            self._delete_tree(path)
            return
        try:
            self._call(path, lambda: self.client.delete_async(path, version=expected))
        except NoNodeError:
            return
        except BadVersionError:
            raise MetaConflictError(f"{path} changed: expected version {expected}") from None
        except NotEmptyError:
            raise MetaError(f"{path} has children; delete them first") from None

    def _delete_tree(self, path: str, attempts: int = 5) -> None:
        for _ in range(attempts):
            for name in self._children(path):
                self._delete_tree(f"{path}/{name}")
            try:
                self._call(path, lambda: self.client.delete_async(path))
                return
            except NoNodeError:
                return
            except NotEmptyError:
                continue  # a child was created meanwhile
        raise MetaError(f"{path} kept getting new children; not deleted")

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._call(path, lambda: self.client.get_children_async(path)))
        except NoNodeError:
            return []

    # -- fenced writes --------------------------------------------------------------------------

    def attach_fence(self, client: ClientIdentity, source: FenceSource | None) -> None:
        key = client_path(client)
        if source is None:
            self._fences.pop(key, None)
        else:
            self._fences[key] = source

    def _fence(self, client: ClientIdentity) -> Fence | None:
        source = self._fences.get(client_path(client))
        return source.fence() if source is not None else None

    def _commit(self, client: ClientIdentity, path: str, fence: Fence, op: Callable[[Any], None]) -> Any:
        """``check(epoch, version)`` and ``op(transaction)`` as one transaction; the op's result.

        :raises FencedError: the epoch moved on (another consumer acquired the running node).
        :raises NoNodeError, NodeExistsError, BadVersionError, NotEmptyError: the op failed.
        """

        def start() -> IAsyncResult:
            txn = self.client.transaction()
            txn.check(fence.path, fence.version)
            op(txn)
            return txn.commit_async()

        checked, *results = self._call(path, start, fence)
        if isinstance(checked, (BadVersionError, NoNodeError)):
            raise FencedError(self._fenced_message(path, fence), client.destination)
        # the ops before a failed one are rolled back, the ones after it not run: raise its error
        failed = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        result = failed[0] if failed else results[0]
        if isinstance(result, NoAuthError):
            raise MetaAuthError(_refused(path))
        if isinstance(result, (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError)):
            raise result
        if isinstance(result, Exception):
            raise MetaError(f"ZooKeeper error on {path}: {type(result).__name__}")
        return result

    def _fenced_write(self, client: ClientIdentity, path: str, data: bytes, expected: Version) -> Version:
        fence = self._fence(client)
        if fence is None:
            return self._write(path, data, expected)
        if expected is None:
            try:
                self._create(
                    path,
                    lambda: self._commit(
                        client, path, fence, lambda txn: txn.create(path, data, acl=self.acl)
                    ),
                )
                return 0
            except NodeExistsError:
                return self._own_create(path, data)
        try:
            stat = self._commit(client, path, fence, lambda txn: txn.set_data(path, data, version=expected))
            return stat.version
        except BadVersionError:
            return self._own_set(path, data, expected)
        except NoNodeError:
            raise MetaConflictError(f"{path} was deleted (expected version {expected})") from None

    def remove_marks(self, client: ClientIdentity, batch_ids: Sequence[int]) -> None:
        """The marks removed in one transaction with the fence's check (one by one when unfenced,
        or when one of them is gone already)."""
        fence = self._fence(client)
        if fence is None or len(batch_ids) < 2:
            super().remove_marks(client, batch_ids)
            return
        paths = [self._mark_path(client, batch_id) for batch_id in batch_ids]

        def delete_all(txn: Any) -> None:
            for path in paths:
                txn.delete(path)

        try:
            self._commit(client, paths[0], fence, delete_all)
        except NoNodeError:  # our own delete, retried after its reply was lost, or removed elsewhere
            super().remove_marks(client, batch_ids)

    def _fenced_delete(self, client: ClientIdentity, path: str, expected: Version = ...) -> None:
        fence = self._fence(client)
        if fence is None:
            self._delete(path, expected)
            return
        version = -1 if expected is ... else expected
        try:
            self._commit(client, path, fence, lambda txn: txn.delete(path, version=version))
        except NoNodeError:
            return  # gone already (or our own delete, retried after its reply was lost)
        except BadVersionError:
            raise MetaConflictError(f"{path} changed: expected version {expected}") from None
        except NotEmptyError:
            raise MetaError(f"{path} has children; delete them first") from None
