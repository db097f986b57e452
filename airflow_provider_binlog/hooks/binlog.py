"""BinlogHook: Airflow connections -> the core's configuration (replication source, meta store, HA),
handed to :class:`~..drain.wiring.Wiring`, the one place that builds meta manager, ZooKeeper
client, running node and instance.

Connections
-----------
``mysql``: host, port, login, password and the extras of :mod:`.mysql` (TLS, ``server_id``,
``heartbeat_period``); a connection made for the official MySQL provider works as it is.

``zookeeper`` (registered by this provider): see :mod:`.zookeeper`.

Without a ZooKeeper connection the meta store is a local directory (``meta_dir``, default
``$BINLOG_CDC_META_DIR`` or ``$AIRFLOW_HOME/binlog-cdc/meta``) and there is no cross-worker HA:
fine for one machine, not for several workers.

Secrets never leave the connection: reprs, logs and error messages name the connection id, host
and user only.
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_binlog import settings
from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.instance import CanalInstance, InstanceConfig
from airflow_provider_binlog.canal.meta.base import MetaManager
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.positions.start import StartSpec
from airflow_provider_binlog.drain.wiring import Wiring, source_connection
from airflow_provider_binlog.hooks.mysql import MySqlSourceHook, replication_config
from airflow_provider_binlog.hooks.zookeeper import ZooKeeperHook

__all__ = ["BinlogHook", "replication_config"]


class BinlogHook(BaseHook):
    """A MySQL/MariaDB source read as a replica, plus the meta store that keeps its cursors.

    :param mysql_conn_id: the ``mysql`` connection of the source (a user with REPLICATION SLAVE,
        REPLICATION CLIENT and SELECT).
    :param zookeeper_conn_id: the ``zookeeper`` connection for cursors and HA; ``None`` for a local
        file meta store.
    :param meta_dir: directory of the file meta store (only without ZooKeeper).
    :param server_id: replica server id to register with (overrides the connection's extra).
    """

    conn_name_attr = "mysql_conn_id"
    default_conn_name = "mysql_default"
    conn_type = "mysql"
    hook_name = "MySQL binlog source"

    def __init__(
        self,
        mysql_conn_id: str = default_conn_name,
        zookeeper_conn_id: str | None = ZooKeeperHook.default_conn_name,
        meta_dir: str | None = None,
        server_id: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.mysql_conn_id = mysql_conn_id
        self.zookeeper_conn_id = zookeeper_conn_id
        self.meta_dir = meta_dir
        self.server_id = server_id
        self._zk_hook = ZooKeeperHook(zookeeper_conn_id) if zookeeper_conn_id else None
        self._source = MySqlSourceHook(mysql_conn_id, server_id)

    def __repr__(self) -> str:
        return (
            f"BinlogHook(mysql_conn_id={self.mysql_conn_id!r}, zookeeper_conn_id={self.zookeeper_conn_id!r})"
        )

    @cached_property
    def replication_config(self) -> ReplicationConfig:
        """The source as the core wants it (its repr hides the password)."""
        return self._source.replication_config

    def get_conn(self) -> ReplicationClient:
        """A replication client for the source (not yet connected)."""
        return ReplicationClient(self.replication_config)

    def source_connection(self) -> Any:
        """A plain autocommit pymysql connection to the source (for SELECTs)."""
        return source_connection(self.replication_config)

    @cached_property
    def wiring(self) -> Wiring:
        """ZooKeeper when a connection is configured, else the file store in :attr:`meta_dir`
        (default ``$BINLOG_CDC_META_DIR`` or ``$AIRFLOW_HOME/binlog-cdc/meta``)."""
        if self._zk_hook is not None:
            return Wiring(self._zk_hook.config())
        directory = (
            self.meta_dir
            or settings.current().meta_dir
            or os.path.join(
                os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "binlog-cdc", "meta"
            )
        )
        return Wiring(meta_dir=directory)

    def meta_manager(self) -> MetaManager:
        """The destination's meta store (see :attr:`wiring`)."""
        return self.wiring.meta_manager()

    def running_node(self, identity: ClientIdentity, label: str) -> Any:
        """The HA node for a destination client (``None`` without ZooKeeper)."""
        return self.wiring.running_node(identity, label)

    def instance(
        self,
        destination: str,
        table_filter: TableFilter,
        client_id: int = 1001,
        start: StartSpec | None = None,
        label: str = "",
        **config: Any,
    ) -> CanalInstance:
        """Build the canal instance of a destination (not yet subscribed).

        :param destination: the destination name.
        :param table_filter: which tables (and columns) to read.
        :param client_id: canal client id.
        :param start: where to start when the destination has no cursor yet.
        :param label: who consumes (shown in the ``running`` node), e.g. ``dag/task/try``.
        :param config: more :class:`InstanceConfig` fields (store capacity, reconnect policy...).
        """
        cfg = InstanceConfig(
            destination=destination, source=self.replication_config, filter=table_filter,
            client_id=client_id, start=start or StartSpec(), **config,
        )  # fmt: skip
        return self.wiring.instance(cfg, label)

    def close(self) -> None:
        if "wiring" in self.__dict__:
            self.wiring.close()
        if self._zk_hook is not None:
            self._zk_hook.close()

    def check_source(self) -> list[str]:
        """What is wrong with the source for CDC, each with its fix (empty when all is well): binlog
        off, not ROW, not FULL images, server ids, missing privileges (see :mod:`.mysql`)."""
        return self._source.check_source()

    def test_connection(self) -> tuple[bool, str]:
        """The source's check (:meth:`.mysql.MySqlSourceHook.test_connection`), then ZooKeeper's."""
        ok, msg = self._source.test_connection()
        if not ok or self._zk_hook is None:
            return ok, msg
        ok, zk_msg = self._zk_hook.test_connection()
        return (True, f"{msg}; {zk_msg}") if ok else (False, zk_msg)
