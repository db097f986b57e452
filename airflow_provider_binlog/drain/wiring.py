"""The one place that builds a destination's canal side from plain configuration: ZooKeeper client,
meta manager, running node and :class:`~..canal.instance.CanalInstance`.

::

    wiring = Wiring(ZooKeeperConfig("zk1:2181,zk2:2181", chroot="/binlog-cdc"))  # or meta_dir=...
    config = InstanceConfig("shop", source, TableFilter("shop\\\\..*"))
    instance = wiring.instance(config, label="dag/task/try")
    ...
    instance.close()
    wiring.close()                                   # the ZooKeeper client

The Airflow hooks turn connections into :class:`ZooKeeperConfig` and
:class:`~..binlog.client.ReplicationConfig` and call this; the CLI, the dev tools and the benchmarks
call it directly. Passwords never show in a repr, a log line or an error message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from airflow_provider_binlog.canal.errors import MetaAuthError
from airflow_provider_binlog.errors import ConfigurationError

if TYPE_CHECKING:
    from airflow_provider_binlog.binlog.client import ReplicationConfig
    from airflow_provider_binlog.canal.ha import RunningNode
    from airflow_provider_binlog.canal.instance import CanalInstance, InstanceConfig
    from airflow_provider_binlog.canal.meta.base import MetaManager
    from airflow_provider_binlog.canal.meta.model import ClientIdentity


@dataclass(frozen=True)
class ZooKeeperConfig:
    """A ZooKeeper ensemble for cursors, marks and the ``running`` node.

    :param hosts: ``zk1:2181,zk2:2181``.
    :param chroot: the root of every node (``/binlog-cdc``; created when missing), ``""`` for ``/``.
    :param timeout: session and connect timeout in seconds.
    :param acl: ``creator`` (nodes readable and writable only by the digest user) or ``open``.
    :param user: digest user (``None``: no credentials).
    :param password: digest password (never in a repr).
    :param origin: where these settings come from, named in errors (e.g. ``connection 'zk'``).
    """

    hosts: str
    chroot: str = ""
    timeout: float = 15.0
    acl: str = "open"
    user: str | None = None
    password: str = field(default="", repr=False)
    origin: str = ""

    @classmethod
    def from_uri(cls, uri: str, origin: str = "") -> ZooKeeperConfig:
        """``zookeeper://user:secret@zk1:2181,zk2:2181/chroot?acl=creator&timeout=10`` (the form of
        an Airflow ``zookeeper`` connection URI)."""
        parts = urlsplit(uri)
        netloc = parts.netloc
        user = password = None
        if "@" in netloc:
            cred, _, netloc = netloc.rpartition("@")
            user, _, password = cred.partition(":")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        user = unquote(user) if user else None
        return cls(
            hosts=netloc, chroot=normal_chroot(parts.path), timeout=float(query.get("timeout", 15)),
            acl=query.get("acl") or ("creator" if user else "open"), user=user,
            password=unquote(password or ""), origin=origin,
        )  # fmt: skip

    def _where(self) -> str:
        return f" ({self.origin})" if self.origin else ""


def normal_chroot(chroot: str | None) -> str:
    """``binlog-cdc/`` -> ``/binlog-cdc``; ``""`` or ``/`` -> ``""``."""
    chroot = (chroot or "").strip()
    if chroot and not chroot.startswith("/"):
        chroot = "/" + chroot
    return chroot.rstrip("/")


def connect_zookeeper(config: ZooKeeperConfig) -> Any:
    """A started :class:`kazoo.client.KazooClient` on ``config.chroot`` (created if missing), with
    digest credentials and ACLs as configured; its access checked once, so wrong credentials fail
    here, naming ``config.origin``, instead of at the first cursor read.

    :raises ConfigurationError: ZooKeeper cannot be reached within ``config.timeout``.
    :raises MetaAuthError: ZooKeeper refuses the credentials.
    """
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    from airflow_provider_binlog.canal.meta.zookeeper import CONNECTION_RETRY

    unreachable = f"cannot reach ZooKeeper at {config.hosts}{config._where()} within {config.timeout:.0f} s"
    auth = [("digest", f"{config.user}:{config.password}")] if config.user else None
    acl = None
    if config.acl == "creator" and config.user:
        from kazoo.security import make_digest_acl

        acl = [make_digest_acl(config.user, config.password, all=True)]
    if config.chroot:
        root = KazooClient(hosts=config.hosts, timeout=config.timeout, auth_data=auth, default_acl=acl)
        try:
            root.start(timeout=config.timeout)
            root.ensure_path(config.chroot)
        except KazooTimeoutError:
            raise ConfigurationError(unreachable) from None
        finally:
            root.stop()
            root.close()
    client = KazooClient(
        hosts=config.hosts + config.chroot, timeout=config.timeout, auth_data=auth, default_acl=acl,
        connection_retry=CONNECTION_RETRY,
    )  # fmt: skip
    try:
        client.start(timeout=config.timeout)
    except KazooTimeoutError:
        client.close()
        raise ConfigurationError(unreachable) from None
    _check_access(client, config)
    return client


def _check_access(client: Any, config: ZooKeeperConfig) -> None:
    from kazoo.exceptions import NoAuthError

    try:
        client.get_children("/")
    except NoAuthError:
        client.stop()
        client.close()
        who = f"the digest credentials of user {config.user!r}" if config.user else "no digest credentials"
        raise MetaAuthError(
            f"ZooKeeper at {config.hosts} refused access to {config.chroot or '/'} with {who}"
            f"{config._where()}: check its login and password"
        ) from None


def source_connection(config: ReplicationConfig) -> Any:
    """A plain autocommit ``utf8mb4`` pymysql connection to the source (for SELECTs)."""
    import pymysql

    return pymysql.connect(
        host=config.host, port=config.port, user=config.user, password=config.password, ssl=config.ssl,
        connect_timeout=config.connect_timeout, autocommit=True, charset="utf8mb4",
    )  # fmt: skip


def source_from_uri(uri: str, origin: str = "", server_id: int | None = None) -> ReplicationConfig:
    """``mysql://user:secret@host:3306`` (the form of an Airflow ``mysql`` connection URI, no extras)
    as a :class:`~..binlog.client.ReplicationConfig`."""
    from airflow_provider_binlog.binlog.client import ReplicationConfig

    parts = urlsplit(uri)
    if not parts.hostname:
        raise ConfigurationError(f"the source URI{f' ({origin})' if origin else ''} has no host")
    kwargs: dict[str, Any] = {} if server_id is None else {"server_id": server_id}
    return ReplicationConfig(
        host=parts.hostname, port=parts.port or 3306, user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""), origin=origin, **kwargs,
    )  # fmt: skip


class Wiring:
    """A destination's meta store side: the ZooKeeper client (started on first use), the meta
    manager, the ``running`` node and the instance.

    :param zookeeper: the ensemble; ``None`` for a file meta store in ``meta_dir`` (no cross-worker
        HA: fine for one machine, not for several workers).
    :param meta_dir: the file meta store's directory (only without ZooKeeper).
    """

    def __init__(self, zookeeper: ZooKeeperConfig | None = None, meta_dir: str | None = None) -> None:
        if zookeeper is None and not meta_dir:
            raise ConfigurationError("a meta store needs a ZooKeeper ensemble or a directory")
        self.zookeeper = zookeeper
        self.meta_dir = meta_dir
        self._client: Any = None

    def __repr__(self) -> str:
        return f"Wiring(zookeeper={self.zookeeper!r}, meta_dir={self.meta_dir!r})"

    @property
    def client(self) -> Any:
        """The started ZooKeeper client (``None`` without ZooKeeper)."""
        if self._client is None and self.zookeeper is not None:
            self._client = connect_zookeeper(self.zookeeper)
        return self._client

    def meta_manager(self) -> MetaManager:
        """ZooKeeper when configured, else the file store in :attr:`meta_dir`."""
        if self.zookeeper is not None:
            from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager

            return ZooKeeperMetaManager(self.client)
        from airflow_provider_binlog.canal.meta.file import FileMetaManager

        assert self.meta_dir is not None
        return FileMetaManager(self.meta_dir)

    def running_node(self, identity: ClientIdentity, label: str) -> RunningNode | None:
        """The HA node of a destination client (``None`` without ZooKeeper)."""
        if self.zookeeper is None:
            return None
        from airflow_provider_binlog.canal.ha import RunningNode

        return RunningNode(self.client, identity, label=label)

    def instance(self, config: InstanceConfig, label: str = "") -> CanalInstance:
        """The destination's instance (not yet subscribed), its running node attached as the fence
        of its cursor and mark writes.

        :param config: the destination.
        :param label: who consumes (shown in the ``running`` node), e.g. ``dag/task/run/try-1``.
        """
        from airflow_provider_binlog.canal.instance import CanalInstance

        meta = self.meta_manager()
        return CanalInstance(config, meta, running=self.running_node(config.identity, label))

    def close(self) -> None:
        """Stop the ZooKeeper client (idempotent)."""
        if self._client is not None:
            self._client.stop()
            self._client.close()
            self._client = None
