"""ZooKeeperHook: an Airflow ``zookeeper`` connection -> the core's :class:`~..drain.wiring.ZooKeeperConfig`.

Connection: host (``zk1:2181`` or ``zk1:2181,zk2:2181``, or extra ``hosts``), port (only for a single
host without one; hidden in the form), schema = chroot (or
extra ``chroot``), login/password = digest credentials, extra ``acl`` (``creator``: nodes readable and
writable only by those credentials; ``open``: world-readable and writable; default ``creator`` when
credentials are given), extra ``timeout`` (seconds). URI form:
``zookeeper://user:secret@zk1:2181/binlog-cdc?acl=creator``.

The password never leaves the connection: reprs, logs and error messages name the connection id,
hosts and user only.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_binlog.drain.wiring import ZooKeeperConfig, connect_zookeeper, normal_chroot
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.hooks import forms
from airflow_provider_binlog.hooks.forms import given


class ZooKeeperHook(BaseHook):
    """A ZooKeeper ensemble for cursors, marks and the ``running`` node.

    :param zookeeper_conn_id: the ``zookeeper`` connection.
    """

    conn_name_attr = "zookeeper_conn_id"
    default_conn_name = "zookeeper_default"
    conn_type = "zookeeper"
    hook_name = "ZooKeeper (binlog CDC meta store)"

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """The extra fields for Airflow 3 versions before 3.2 (later ones read the provider info)."""
        return forms.legacy_widgets(forms.ZOOKEEPER)

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Labels, placeholders and hidden fields for Airflow 3 versions before 3.2."""
        return forms.legacy_behaviour(forms.ZOOKEEPER)

    def __init__(self, zookeeper_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.zookeeper_conn_id = zookeeper_conn_id
        self._client: Any = None

    def __repr__(self) -> str:
        return f"ZooKeeperHook(zookeeper_conn_id={self.zookeeper_conn_id!r})"

    def config(self) -> ZooKeeperConfig:
        """The connection as the core wants it (its repr hides the password)."""
        conn = self.get_connection(self.zookeeper_conn_id)
        extra = conn.extra_dejson
        hosts = given(extra, "hosts") or conn.host or ""
        if not hosts:
            raise ConfigurationError(f"ZooKeeper connection {self.zookeeper_conn_id!r} has no host")
        if conn.port and "," not in hosts and ":" not in hosts:
            hosts = f"{hosts}:{conn.port}"
        return ZooKeeperConfig(
            hosts=hosts,
            chroot=normal_chroot(given(extra, "chroot") or conn.schema),
            timeout=float(given(extra, "timeout") or 15),
            acl=given(extra, "acl") or ("creator" if conn.login else "open"),
            user=conn.login or None,
            password=conn.password or "",
            origin=f"connection {self.zookeeper_conn_id!r}",
        )

    def settings(self) -> dict[str, Any]:
        """Hosts, chroot, timeout, ACL mode and whether digest credentials are set (not the secret)."""
        c = self.config()
        return {
            "hosts": c.hosts,
            "chroot": c.chroot,
            "timeout": c.timeout,
            "acl": c.acl,
            "digest_user": c.user,
        }

    def get_conn(self) -> Any:
        """A started :class:`kazoo.client.KazooClient` on the chroot (created if missing)."""
        if self._client is None:
            self._client = connect_zookeeper(self.config())
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.stop()
            self._client.close()
            self._client = None

    def test_connection(self) -> tuple[bool, str]:
        """Connect and list the chroot; the message names the hosts, not the connection id (the
        UI's Test button runs under a random one: :func:`.forms.tested`)."""
        try:
            client = self.get_conn()
            client.get_children("/")
            return forms.tested(
                True, f"connected to ZooKeeper {self.settings()['hosts']}", self.zookeeper_conn_id
            )
        except Exception as exc:
            return forms.tested(False, str(exc), self.zookeeper_conn_id)
        finally:
            self.close()
