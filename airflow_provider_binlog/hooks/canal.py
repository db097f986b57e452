"""CanalHook: an Airflow ``canal`` connection -> a :class:`~..canalnet.client.CanalClient`.

Connection: host and port of the canal server (canal's default port 11111), login/password =
canal's account (``canal.user``/``canal.passwd``'s password), extra ``timeout`` (seconds, default
30) and ``zookeeper_hosts`` (``zk1:2181,zk2:2181/chroot``: connect to whichever server canal's
``running`` node names, as canal's cluster clients do; host and port are then not used). URI form:
``canal://canal:secret@canal-server:11111``.

The password never leaves the connection: reprs, logs and errors name the connection id and host.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_binlog.canalnet.client import CanalClient
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.hooks import forms
from airflow_provider_binlog.hooks.forms import given


class CanalHook(BaseHook):
    """A canal server to read a destination from.

    :param canal_conn_id: the ``canal`` connection.
    """

    conn_name_attr = "canal_conn_id"
    default_conn_name = "canal_default"
    conn_type = "canal"
    hook_name = "canal server (binlog CDC source)"

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """The extra fields for Airflow 3 versions before 3.2 (later ones read the provider info)."""
        return forms.legacy_widgets(forms.CANAL)

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Labels, placeholders and hidden fields for Airflow 3 versions before 3.2."""
        return forms.legacy_behaviour(forms.CANAL)

    def __init__(self, canal_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.canal_conn_id = canal_conn_id
        self._zk: Any = None

    def __repr__(self) -> str:
        return f"CanalHook(canal_conn_id={self.canal_conn_id!r})"

    def client(self, destination: str, client_id: int = 1001, filter: str = "") -> CanalClient:
        """A client for ``destination`` (not connected yet)."""
        conn = self.get_connection(self.canal_conn_id)
        extra = conn.extra_dejson
        timeout = float(given(extra, "timeout") or 30)
        zk_hosts = given(extra, "zookeeper_hosts")
        if zk_hosts:
            from airflow_provider_binlog.canal.meta.zookeeper_client import (
                ZooKeeperConfig,
                connect_zookeeper,
                normal_chroot,
            )

            hosts, slash, chroot = str(zk_hosts).partition("/")
            self._zk = connect_zookeeper(ZooKeeperConfig(
                hosts, chroot=normal_chroot(slash + chroot), timeout=timeout,
                origin=f"connection {self.canal_conn_id!r}",
            ))  # fmt: skip
        elif not conn.host:
            raise ConfigurationError(f"canal connection {self.canal_conn_id!r} has no host")
        return CanalClient(
            conn.host, int(conn.port or 11111), destination, client_id=client_id, filter=filter,
            user=conn.login or "", password=conn.password or None, timeout=timeout, zookeeper=self._zk,
        )  # fmt: skip

    def close(self) -> None:
        """Stop the ZooKeeper client of cluster mode (idempotent)."""
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None
