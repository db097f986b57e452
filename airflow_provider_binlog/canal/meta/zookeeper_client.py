"""Reaching ZooKeeper: the ensemble, chroot and digest credentials of a destination's meta store,
and a started client whose access was checked once (wrong credentials fail at connect, naming
where the settings came from). :mod:`.zookeeper` uses the client; ``drain.wiring`` builds it.
Passwords never show in a repr, a log line or an error message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from airflow_provider_binlog.canal.errors import MetaAuthError
from airflow_provider_binlog.canal.meta.zookeeper import CONNECTION_RETRY
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.quiet import install


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


_MADE_CHROOTS: set[tuple[str, str]] = set()
"""``(hosts, chroot)`` this process has made sure of: a later connection opens one session, not a
second one to create the chroot (a sensor's poke connects more than once)."""


def connect_zookeeper(config: ZooKeeperConfig) -> Any:
    """A started :class:`kazoo.client.KazooClient` on ``config.chroot`` (created if missing), with
    digest credentials and ACLs as configured; its access checked once, so wrong credentials fail
    here, naming ``config.origin``, instead of at the first cursor read.

    :raises ConfigurationError: ZooKeeper cannot be reached within ``config.timeout``.
    :raises MetaAuthError: ZooKeeper refuses the credentials.
    """
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    unreachable = f"cannot reach ZooKeeper at {config.hosts}{config._where()} within {config.timeout:.0f} s"
    auth = [("digest", f"{config.user}:{config.password}")] if config.user else None
    acl = None
    if config.acl == "creator" and config.user:
        from kazoo.security import make_digest_acl

        acl = [make_digest_acl(config.user, config.password, all=True)]
    install()  # kazoo's connect/close notes at DEBUG, an outage's repeated warnings folded (..quiet)
    if config.chroot and (config.hosts, config.chroot) not in _MADE_CHROOTS:
        root = KazooClient(hosts=config.hosts, timeout=config.timeout, auth_data=auth, default_acl=acl)
        try:
            root.start(timeout=config.timeout)
            root.ensure_path(config.chroot)
        except KazooTimeoutError:
            raise ConfigurationError(unreachable) from None
        finally:
            root.stop()
            root.close()
        _MADE_CHROOTS.add((config.hosts, config.chroot))
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
