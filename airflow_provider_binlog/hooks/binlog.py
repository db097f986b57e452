"""BinlogHook: Airflow connections -> the core's configuration (replication source, meta store, HA),
handed to :class:`~..drain.wiring.Wiring`, the one place that builds meta manager, ZooKeeper
client, running node and instance.

Connections
-----------
``mysql`` (standard): host, port, login, password; TLS through the extras ``ssl`` (a dict of
pymysql ``ssl`` options) or ``ssl_ca`` / ``ssl_cert`` / ``ssl_key``; ``server_id`` (replica id to
register with) and ``heartbeat_period`` as optional extras.

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

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.instance import CanalInstance, InstanceConfig
from airflow_provider_binlog.canal.meta.base import MetaManager
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.start import StartSpec
from airflow_provider_binlog.drain.wiring import Wiring, source_connection
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.hooks.zookeeper import ZooKeeperHook


def _bool(value: Any) -> bool:
    return str(value).lower() in ("1", "true", "yes", "on")


def replication_config(conn: Any, server_id: int | None = None) -> ReplicationConfig:
    """A :class:`ReplicationConfig` from an Airflow ``mysql`` connection (see the module docstring).

    :param conn: the connection.
    :param server_id: replica server id; overrides the connection's ``server_id`` extra.
    """
    if not conn.host:
        raise ConfigurationError(f"MySQL connection {conn.conn_id!r} has no host")
    extra = conn.extra_dejson
    ssl = extra.get("ssl")
    if ssl is None and any(k in extra for k in ("ssl_ca", "ssl_cert", "ssl_key")):
        ssl = {k[4:]: extra[k] for k in ("ssl_ca", "ssl_cert", "ssl_key") if k in extra}
    kwargs: dict[str, Any] = {}
    if server_id is None:
        server_id = extra.get("server_id")
    if server_id is not None:
        kwargs["server_id"] = int(server_id)
    if "heartbeat_period" in extra:
        kwargs["heartbeat_period"] = float(extra["heartbeat_period"])
    return ReplicationConfig(
        host=conn.host, port=int(conn.port or 3306), user=conn.login or "root",
        password=conn.password or "", ssl=ssl or None, origin=f"connection {conn.conn_id!r}", **kwargs,
    )  # fmt: skip


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

    def __repr__(self) -> str:
        return (
            f"BinlogHook(mysql_conn_id={self.mysql_conn_id!r}, zookeeper_conn_id={self.zookeeper_conn_id!r})"
        )

    @cached_property
    def replication_config(self) -> ReplicationConfig:
        """The source as the core wants it (its repr hides the password)."""
        return replication_config(self.get_connection(self.mysql_conn_id), self.server_id)

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
            or os.environ.get("BINLOG_CDC_META_DIR")
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
        """What is wrong with the source for CDC (empty when all is well): binlog off, not ROW,
        not FULL images, missing privileges."""
        problems = []
        conn = self.source_connection()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@log_bin, @@binlog_format, @@binlog_row_image")
                log_bin, fmt, image = cur.fetchone()
                if not int(log_bin):
                    problems.append("the binary log is off (set log_bin)")
                if str(fmt).upper() != "ROW":
                    problems.append(f"binlog_format is {fmt}, needs ROW")
                if str(image).upper() != "FULL":
                    problems.append(f"binlog_row_image is {image}, needs FULL")
                cur.execute("SHOW GRANTS")
                grants = " ".join(str(r[0]).upper() for r in cur.fetchall())
                if "ALL PRIVILEGES" not in grants:
                    for need in ("REPLICATION SLAVE", "SELECT"):
                        if need not in grants:
                            problems.append(f"user {self.replication_config.user!r} lacks {need}")
                    if "REPLICATION CLIENT" not in grants and "BINLOG MONITOR" not in grants:
                        problems.append(f"user {self.replication_config.user!r} lacks REPLICATION CLIENT")
        finally:
            conn.close()
        return problems

    def test_connection(self) -> tuple[bool, str]:
        """Connect to the source (and ZooKeeper), check the binlog settings and privileges."""
        try:
            problems = self.check_source()
            if problems:
                return False, "; ".join(problems)
            head = self.get_conn().head_position()
            msg = f"source {self.replication_config.address} ready, head {head}"
            if self._zk_hook is not None:
                ok, zk_msg = self._zk_hook.test_connection()
                if not ok:
                    return False, zk_msg
                msg += f"; {zk_msg}"
            return True, msg
        except Exception as exc:
            return False, str(exc)
