"""A canal client: talks canal's protocol (:mod:`.protocol`) to a canal server, ours or canal's.

::

    client = CanalClient("canal-host", 11111, "shop", client_id=1001, user="canal", password="...")
    client.connect()                      # handshake, scrambled password, subscribe (after rollback)
    batch_id, entries = client.get_without_ack(1000, timeout=1.0)   # entries: canal Entry messages
    client.ack(batch_id)
    client.rollback()                     # every unacked batch comes again
    client.close()

With a ZooKeeper client instead of an address, the server is the one canal's ``running`` node
names (``/otter/canal/destinations/{d}/running``, :mod:`.cluster`), as canal's cluster connector
finds it. Every socket operation is bounded by ``timeout`` (plus a GET's own wait).
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from typing import Any

from airflow_provider_binlog.canal.meta.base import destination_path
from airflow_provider_binlog.canalnet.errors import CanalAuthError, CanalProtocolError, CanalServerError
from airflow_provider_binlog.canalnet.protocol import entry_pb, frame, pb, read_packet, scramble411


def running_server(zk: Any, destination: str) -> str | None:
    """``ip:port`` of the server running ``destination``, from canal's ``running`` node."""
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = zk.get(f"{destination_path(destination)}/running")
    except NoNodeError:
        return None
    return str(json.loads(data)["address"])


class CanalClient:
    """One connection to a canal server for one destination and client id.

    :param host: the server (ignored with ``zookeeper``).
    :param port: its port.
    :param destination: the destination.
    :param client_id: canal's client id (a short).
    :param filter: the subscription filter ("" keeps the server's).
    :param user: the account.
    :param password: its password (never in a repr or an error).
    :param timeout: seconds each connect, send and receive may take.
    :param zookeeper: a started kazoo client: connect to the running server it names.
    """

    def __init__(
        self,
        host: str | None,
        port: int,
        destination: str,
        client_id: int = 1001,
        filter: str = "",
        user: str = "",
        password: str | None = None,
        timeout: float = 30.0,
        zookeeper: Any = None,
    ) -> None:
        self.host = host
        self.port = port
        self.destination = destination
        self.client_id = client_id
        self.filter = filter
        self.user = user
        self._password = password
        self.timeout = timeout
        self.zookeeper = zookeeper
        self._sock: socket.socket | None = None

    def __repr__(self) -> str:
        return f"CanalClient({self.host}:{self.port}, {self.destination!r}, client_id={self.client_id})"

    def address(self) -> tuple[str, int]:
        if self.zookeeper is not None:
            running = running_server(self.zookeeper, self.destination)
            if running is None:
                raise CanalServerError(0, f"no canal server runs destination {self.destination} now")
            host, _, port = running.rpartition(":")
            return host, int(port)
        if not self.host:
            raise CanalProtocolError("a canal client needs a host or a ZooKeeper client")
        return self.host, self.port

    def connect(self) -> None:
        """Handshake, authenticate, roll back what an earlier connection left, subscribe."""
        self.close()
        host, port = self.address()
        self.host, self.port = host, port
        sock = socket.create_connection((host, port), timeout=self.timeout)
        sock.settimeout(self.timeout)
        self._sock = sock
        try:
            shake = read_packet(sock)
            if shake.type != pb.HANDSHAKE:
                raise CanalProtocolError(
                    f"expected HANDSHAKE from {host}:{port}, got packet type {shake.type}"
                )
            seed = pb.Handshake.FromString(shake.body).seeds
            token = scramble411(self._password.encode(), seed).hex() if self._password else ""
            auth = pb.ClientAuth(
                username=self.user, password=token.encode(), net_read_timeout=int(self.timeout * 1000 * 10),
                net_write_timeout=int(self.timeout * 1000 * 10),
            )  # fmt: skip
            answer = self._call(pb.CLIENTAUTHENTICATION, auth)
            self._check(answer, auth_step=True)
            self._send(pb.CLIENTROLLBACK, self._ids(pb.ClientRollback, batch_id=0))
            sub = pb.Sub(destination=self.destination, client_id=str(self.client_id), filter=self.filter)
            self._check(self._call(pb.SUBSCRIPTION, sub))
        except BaseException:
            self.close()
            raise

    def get_without_ack(self, size: int, timeout: float) -> tuple[int, list[Any]]:
        """``(batch id, canal Entry messages)``; id -1 and no entries when nothing came within ``timeout``."""
        get = self._ids(pb.Get, fetch_size=size, timeout=max(1, int(timeout * 1000)), unit=2, auto_ack=False)
        assert self._sock is not None
        self._sock.settimeout(self.timeout + timeout)
        try:
            answer = self._call(pb.GET, get)
        finally:
            self._sock.settimeout(self.timeout)
        if answer.type != pb.MESSAGES:
            self._check(answer)
            raise CanalProtocolError(f"expected MESSAGES, got packet type {answer.type}")
        messages = pb.Messages.FromString(answer.body)
        return messages.batch_id, [entry_pb.Entry.FromString(m) for m in messages.messages]

    def ack(self, batch_id: int) -> None:
        """Acknowledge a batch (canal answers nothing; an error shows on the next request)."""
        self._send(pb.CLIENTACK, self._ids(pb.ClientAck, batch_id=batch_id))

    def rollback(self) -> None:
        """Every unacked batch is handed out again."""
        self._send(pb.CLIENTROLLBACK, self._ids(pb.ClientRollback, batch_id=0))

    def close_and_wait(self) -> None:
        """Close once the server is done with this connection: send nothing more, read until the
        server closes its side (bounded by ``timeout``), then close. A server handles one
        connection's requests in order, so what was sent before (a rollback) is handled by then, and
        so is the server's release of the connection."""
        sock = self._sock
        if sock is None:
            return
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline and sock.recv(4096):
                pass
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None

    # ------------------------------------------------------------------ wire

    def _ids(self, cls: Any, **fields: Any) -> Any:
        return cls(destination=self.destination, client_id=str(self.client_id), **fields)

    def _send(self, kind: int, body: Any) -> None:
        if self._sock is None:
            raise CanalProtocolError("the canal client is not connected")
        self._sock.sendall(frame(pb.Packet(type=kind, body=body.SerializeToString())))

    def _call(self, kind: int, body: Any) -> Any:
        self._send(kind, body)
        assert self._sock is not None
        return read_packet(self._sock)

    def _check(self, answer: Any, auth_step: bool = False) -> None:
        if answer.type != pb.ACK:
            raise CanalProtocolError(f"expected ACK, got packet type {answer.type}")
        ack = pb.Ack.FromString(answer.body)
        if ack.error_code:
            cls = CanalAuthError if auth_step else CanalServerError
            raise cls(ack.error_code, ack.error_message)
