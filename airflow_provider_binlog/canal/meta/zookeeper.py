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
``set`` (or a ``create`` for "must not exist") run under ``client.retry``; a retry that finds the
version already bumped by its own earlier attempt (the reply was lost, the write was not)
recognises its own bytes and succeeds instead of reporting a false conflict.

Digest authentication: :func:`connect` adds ``digest`` auth data and, by default, creates nodes
with an ACL that gives all permissions to that identity only (:func:`digest_acl`). A client with
the wrong password then gets :class:`~airflow_provider_binlog.canal.errors.MetaAuthError`.
Passwords never appear in reprs, logs or error messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.security import ACL, make_digest_acl

from airflow_provider_binlog.canal.errors import MetaAuthError, MetaConflictError, MetaError
from airflow_provider_binlog.canal.meta.base import MetaManager, Version
from airflow_provider_binlog.errors import ConfigurationError

T = TypeVar("T")


def digest_acl(username: str, password: str) -> list[ACL]:
    """An ACL list granting every permission to the digest identity ``username:password`` only."""
    return [make_digest_acl(username, password, all=True)]


@dataclass(frozen=True)
class ZooKeeperConfig:
    """How to reach ZooKeeper.

    :param hosts: ``host:port[,host:port...]``.
    :param chroot: a chroot path such as ``/cdc`` (created when missing), or ``None``.
    :param username: digest auth user, or ``None`` for no auth.
    :param password: digest auth password (never shown in reprs).
    :param timeout: session timeout in seconds.
    :param connect_timeout: seconds to wait for the first connection.
    """

    hosts: str
    chroot: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = 10.0
    connect_timeout: float = 15.0

    def __post_init__(self) -> None:
        if self.chroot is not None and (not self.chroot.startswith("/") or self.chroot.endswith("/")):
            raise ConfigurationError(f"invalid ZooKeeper chroot {self.chroot!r}: expected /path")
        if (self.username is None) != (self.password is None):
            raise ConfigurationError("ZooKeeper digest auth needs both a username and a password")

    @property
    def acl(self) -> list[ACL] | None:
        if self.username is None or self.password is None:
            return None
        return digest_acl(self.username, self.password)


def connect(config: ZooKeeperConfig) -> KazooClient:
    """Start a :class:`KazooClient` for ``config``: chroot (created if missing), digest auth and
    a default ACL restricted to that identity."""
    auth = None
    if config.username is not None:
        auth = [("digest", f"{config.username}:{config.password}")]
    if config.chroot:
        root = KazooClient(hosts=config.hosts, timeout=config.timeout, auth_data=auth)
        try:
            root.start(timeout=config.connect_timeout)
            root.retry(root.ensure_path, config.chroot)
        except KazooException as exc:
            raise MetaError(f"cannot create ZooKeeper chroot {config.chroot}: {type(exc).__name__}") from None
        finally:
            root.stop()
            root.close()
    client = KazooClient(
        hosts=config.hosts + (config.chroot or ""),
        timeout=config.timeout,
        auth_data=auth,
        default_acl=config.acl,
    )
    try:
        client.start(timeout=config.connect_timeout)
    except Exception as exc:
        client.close()
        raise MetaError(f"cannot connect to ZooKeeper at {config.hosts}: {type(exc).__name__}") from None
    return client


class ZooKeeperMetaManager(MetaManager):
    """Meta data in ZooKeeper (see the module docstring).

    :param client: a started :class:`KazooClient` (optionally chrooted and authenticated).
    :param acl: ACL for the nodes this manager creates (default: the client's default ACL).
    """

    def __init__(self, client: KazooClient, acl: Sequence[ACL] | None = None) -> None:
        self.client = client
        self.acl = list(acl) if acl is not None else None

    def __repr__(self) -> str:
        return f"ZooKeeperMetaManager(hosts={self.client.hosts!r})"

    def _call(self, path: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return self.client.retry(func, *args, **kwargs)
        except NoAuthError:
            raise MetaAuthError(f"ZooKeeper refused access to {path} (ACL / digest credentials)") from None
        except (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError):
            raise
        except KazooException as exc:
            raise MetaError(f"ZooKeeper error on {path}: {type(exc).__name__}") from None

    def _read(self, path: str) -> tuple[bytes | None, Version]:
        try:
            data, stat = self._call(path, self.client.get, path)
        except NoNodeError:
            return None, None
        return data, stat.version

    def _ensure_parent(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0]
        if parent:
            self._call(parent, self.client.ensure_path, parent, acl=self.acl)

    def _write(self, path: str, data: bytes, expected: Version) -> Version:
        if expected is None:
            self._ensure_parent(path)
            try:
                self._call(path, self.client.create, path, data, acl=self.acl)
                return 0
            except NodeExistsError:
                current, version = self._read(path)
                if current == data and version == 0:
                    return 0  # our own create, retried after its reply was lost
                raise MetaConflictError(f"{path} already exists (version {version})") from None
        try:
            stat = self._call(path, self.client.set, path, data, version=expected)
            return stat.version
        except BadVersionError:
            current, version = self._read(path)
            if current == data and version == expected + 1:
                return version  # our own set, retried after its reply was lost
            raise MetaConflictError(f"{path} changed: expected version {expected}, found {version}") from None
        except NoNodeError:
            raise MetaConflictError(f"{path} was deleted (expected version {expected})") from None

    def _delete(self, path: str, expected: Version = ...) -> None:
        version = -1 if expected is ... else expected
        try:
            self._call(path, self.client.delete, path, version=version, recursive=expected is ...)
        except NoNodeError:
            return
        except BadVersionError:
            raise MetaConflictError(f"{path} changed: expected version {expected}") from None
        except NotEmptyError:
            raise MetaError(f"{path} has children; delete them first") from None

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._call(path, self.client.get_children, path))
        except NoNodeError:
            return []
