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

__all__ = [
    "Wiring",
    "ZooKeeperConfig",
    "connect_zookeeper",
    "normal_chroot",
    "source_connection",
    "source_from_uri",
]

from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from airflow_provider_binlog.canal.meta.zookeeper_client import (
    ZooKeeperConfig,
    connect_zookeeper,
    normal_chroot,
)
from airflow_provider_binlog.errors import ConfigurationError

if TYPE_CHECKING:
    from airflow_provider_binlog.binlog.client import ReplicationConfig
    from airflow_provider_binlog.canal.ha import RunningNode
    from airflow_provider_binlog.canal.instance import CanalInstance, InstanceConfig
    from airflow_provider_binlog.canal.meta.base import MetaManager
    from airflow_provider_binlog.canal.meta.model import ClientIdentity


def source_connection(config: ReplicationConfig) -> Any:
    """A plain autocommit ``utf8mb4`` pymysql connection to the source (for SELECTs); a failure names
    the address and the connection (:meth:`~..binlog.client.ReplicationClient.connect`)."""
    from airflow_provider_binlog.binlog.client import ReplicationClient

    return ReplicationClient(config).connect()


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
