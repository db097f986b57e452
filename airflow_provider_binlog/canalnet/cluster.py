"""A canal server's registration in ZooKeeper, as canal's ``ServerRunningMonitor`` and
``CanalController`` write it, so canal's cluster clients (``ClusterCanalConnector``) find the
server that runs a destination and move to a standby when it dies.

Znodes (canal's ``ZookeeperPathUtils``; the kazoo client, with its chroot, is injected)::

    /otter/canal/destinations/{destination}/cluster/{ip:port}   EPHEMERAL, empty: servers hosting it
    /otter/canal/destinations/{destination}/running             EPHEMERAL: the one running it
        {"active":true,"address":"ip:port"}                     (canal's ServerRunningData, fastjson)

Every server creates its ``cluster`` node; the first to create ``running`` runs the destination,
the others watch the node and try again when it goes (the running server stopped or its session
expired, e.g. after a SIGKILL: then after the session timeout). A server whose own session expired
stops running the destination and registers again with its new session.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState

from airflow_provider_binlog.canal.meta.base import destination_path

log = logging.getLogger(__name__)


def running_data(address: str) -> bytes:
    """canal's ``ServerRunningData`` as fastjson writes it (fields sorted, ``cid`` unset)."""
    return json.dumps({"active": True, "address": address}, separators=(",", ":")).encode()


class ServerRunning:
    """One destination's server HA node.

    :param client: a started kazoo client.
    :param destination: the destination.
    :param address: ``ip:port`` clients connect to.
    :param on_change: called with ``True`` when this server starts running the destination and
        ``False`` when it stops (the session was lost); called from kazoo's threads.
    """

    def __init__(
        self, client: Any, destination: str, address: str, on_change: Callable[[bool], None]
    ) -> None:
        self.client = client
        self.destination = destination
        self.address = address
        self.on_change = on_change
        base = destination_path(destination)
        self.running_path = f"{base}/running"
        self.cluster_path = f"{base}/cluster/{address}"
        self.active = False
        self._closed = False
        self._lost = False
        self._lock = threading.Lock()
        client.add_listener(self._listener)

    def __repr__(self) -> str:
        return f"ServerRunning({self.destination!r}, {self.address!r}, active={self.active})"

    def start(self) -> None:
        """Register in ``cluster`` and try to take ``running`` (else watch it)."""
        try:
            self.client.create(self.cluster_path, b"", ephemeral=True, makepath=True)
        except NodeExistsError:
            self.client.delete(self.cluster_path)  # our own node of an earlier session of this address
            self.client.create(self.cluster_path, b"", ephemeral=True, makepath=True)
        self._try_take()

    def _try_take(self) -> None:
        with self._lock:
            if self._closed or self.active:
                return
            try:
                self.client.create(
                    self.running_path, running_data(self.address), ephemeral=True, makepath=True
                )
            except NodeExistsError:
                if self.client.exists(self.running_path, watch=self._watch) is None:
                    self.client.handler.spawn(self._try_take)  # gone in between: try again
                return
            self.active = True
        log.info("canal server %s runs destination %s", self.address, self.destination)
        self.on_change(True)

    def _watch(self, event: Any) -> None:
        if event.type == "DELETED" and not self._closed:
            self.client.handler.spawn(self._try_take)
        elif not self._closed:
            try:
                if self.client.exists(self.running_path, watch=self._watch) is None:
                    self.client.handler.spawn(self._try_take)
            except Exception:
                log.debug("watch of %s not renewed", self.running_path, exc_info=True)

    def _listener(self, state: str) -> None:
        if state == KazooState.LOST:
            self._lost = True
            if self.active:
                self.active = False
                log.warning("canal server %s lost its ZooKeeper session: stops running %s",
                            self.address, self.destination)  # fmt: skip
                self.client.handler.spawn(self.on_change, False)
        elif state == KazooState.CONNECTED and self._lost and not self._closed:
            self._lost = False  # a new session: its ephemeral nodes are gone, register again
            self.client.handler.spawn(self._register_again)

    def _register_again(self) -> None:
        try:
            self.start()
        except Exception:
            log.warning("canal server %s could not register %s again", self.address, self.destination,
                        exc_info=True)  # fmt: skip

    def holder(self) -> str | None:
        """The address of the server running the destination now, if any."""
        try:
            data, _ = self.client.get(self.running_path)
        except NoNodeError:
            return None
        return str(json.loads(data).get("address"))

    def close(self) -> None:
        """Give the destination up (a standby takes over) and leave the cluster."""
        with self._lock:
            self._closed = True
            was = self.active
            self.active = False
        for path in (self.running_path, self.cluster_path) if was else (self.cluster_path,):
            try:
                self.client.delete(path)
            except Exception:
                log.debug("could not delete %s", path, exc_info=True)
        self.client.remove_listener(self._listener)
