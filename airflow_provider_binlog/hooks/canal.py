"""CanalHook: an Airflow ``canal`` connection -> a :class:`~..canalnet.client.CanalClient`.

Connection: host and port of the canal server (canal's default port 11111), login/password =
canal's account (``canal.user``/``canal.passwd``'s password), extra ``timeout`` (seconds, default
30) and ``zookeeper_hosts`` (``zk1:2181,zk2:2181/chroot``: connect to whichever server canal's
``running`` node names, as canal's cluster clients do; host and port are then not used). URI form:
``canal://canal:secret@canal-server:11111``.

One reader at a time per destination client (:mod:`..canalnet.hold`): the operator's run holds
:meth:`CanalHook.hold` while it drains; :meth:`CanalHook.peek` (the sensor) takes it without waiting
and counts nothing while a run holds it. The hold is a ZooKeeper lock in cluster mode, else a lock
file on this machine (extra ``hold_dir``, default under the temporary directory).

The password never leaves the connection: reprs, logs and errors name the connection id and host.
"""

from __future__ import annotations

import threading
from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_binlog.canal.errors import CanalError
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canalnet.client import CanalClient
from airflow_provider_binlog.canalnet.hold import ClientHold
from airflow_provider_binlog.canalnet.peek import CanalPeekError, PeekResult, peek
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

    def __init__(self, canal_conn_id: str = default_conn_name, connection: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.canal_conn_id = canal_conn_id
        self._conn = connection
        self._zk: Any = None

    def __repr__(self) -> str:
        return f"CanalHook(canal_conn_id={self.canal_conn_id!r})"

    def client(self, destination: str, client_id: int = 1001, filter: str = "") -> CanalClient:
        """A client for ``destination`` (not connected yet)."""
        conn = self._connection()
        zk = self._zookeeper()
        if zk is None and not conn.host:
            raise ConfigurationError(f"canal connection {self.canal_conn_id!r} has no host")
        return CanalClient(
            conn.host, int(conn.port or 11111), destination, client_id=client_id, filter=filter,
            user=conn.login or "", password=conn.password or None, timeout=self._timeout(), zookeeper=zk,
        )  # fmt: skip

    def _connection(self) -> Any:
        if self._conn is None:
            self._conn = self.get_connection(self.canal_conn_id)
        return self._conn

    def _timeout(self) -> float:
        return float(given(self._connection().extra_dejson, "timeout") or 30)

    def _zookeeper(self) -> Any:
        """The started ZooKeeper client of cluster mode (``None`` without ``zookeeper_hosts``)."""
        zk_hosts = given(self._connection().extra_dejson, "zookeeper_hosts")
        if zk_hosts and self._zk is None:
            from airflow_provider_binlog.canal.meta.zookeeper_client import (
                ZooKeeperConfig,
                connect_zookeeper,
                normal_chroot,
            )

            hosts, slash, chroot = str(zk_hosts).partition("/")
            self._zk = connect_zookeeper(ZooKeeperConfig(
                hosts, chroot=normal_chroot(slash + chroot), timeout=self._timeout(),
                origin=f"connection {self.canal_conn_id!r}",
            ))  # fmt: skip
        return self._zk

    def _server(self) -> str:
        conn = self._connection()
        if given(conn.extra_dejson, "zookeeper_hosts"):
            return f"ZooKeeper {given(conn.extra_dejson, 'zookeeper_hosts')}"
        return f"{conn.host}:{int(conn.port or 11111)}"

    def hold(self, destination: str, client_id: int = 1001, label: str = "") -> ClientHold:
        """The destination client's hold (:mod:`..canalnet.hold`), not taken yet."""
        conn = self._connection()
        return ClientHold(
            destination, client_id, self._server(), zookeeper=self._zookeeper(),
            directory=given(conn.extra_dejson, "hold_dir") or None, label=label,
        )  # fmt: skip

    def peek(
        self,
        destination: str,
        flt: TableFilter,
        limit: int,
        client_id: int = 1001,
        label: str = "",
        wait: float = 1.0,
        budget: float = 30.0,
        stop: threading.Event | None = None,
    ) -> PeekResult:
        """Count committed matching changes after the destination's acked cursor on the canal server
        (:func:`..canalnet.peek.peek`, subscribing with ``flt.include``), under its hold taken
        without waiting: while another reader (a run draining it) holds it, nothing is read and the
        result says who (``held_by``). Every wait bounded; a server that does not answer raises
        :class:`~..canalnet.peek.CanalPeekError` naming the connection and the server."""
        hold = self.hold(destination, client_id, label)
        if not hold.acquire(0):
            return PeekResult(0, held_by=hold.holder() or "another reader")
        client: CanalClient | None = None
        try:
            client = self.client(destination, client_id, flt.include)
            return peek(client, flt, limit, wait=wait, budget=budget, stop=stop)
        except (OSError, EOFError, CanalError) as exc:
            where = f"{client.host}:{client.port}" if client is not None and client.host else self._server()
            raise CanalPeekError(
                f"canal connection {self.canal_conn_id!r}: canal server {where} (destination "
                f"{destination}): {exc or type(exc).__name__} (timeout {self._timeout():g} s)"
            ) from None
        finally:
            hold.release()

    def close(self) -> None:
        """Stop the ZooKeeper client of cluster mode (idempotent)."""
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None
