"""A canal server: serves destinations to canal clients over canal's TCP protocol (:mod:`.protocol`).

::

    server = CanalServer(
        [ServedDestination(InstanceConfig("shop", source, TableFilter("shop\\\\..*")))],
        meta=lambda: ZooKeeperMetaManager(zk), zookeeper=zk,          # or meta=FileMetaManager(dir)
        accounts=Account("canal", password_hash=scramble_gen_pass(b"...")), port=11111)
    server.start()      # accept thread; registers in ZooKeeper (.cluster) when given a client
    ...
    server.stop()

Each destination is one :class:`~..canal.instance.CanalInstance` (our store, cursor and marks in the
same meta store the operator uses), created when a client subscribes on the server that runs the
destination (a standby answers ``destination ... should start first`` as canal does):

* ``SUBSCRIPTION`` subscribes the client id with its filter (empty: the destination's configured
  one); a different filter than the running instance's restarts it from the cursor;
* ``GET`` hands out a batch (``get_without_ack``; ``auto_ack`` is ignored, as canal's server does):
  no ``timeout`` or ``-1`` answers at once; a timeout waits up to it, a zero or negative one up to
  ``max_get_wait`` (canal waits without end; every wait here is bounded), never longer;
* ``CLIENTACK`` acks in order (an error answers ``ACK`` with code 400), ``CLIENTROLLBACK`` gives
  every outstanding batch back (canal rolls back all of them for a batch id too);
* ``UNSUBSCRIPTION`` stops the instance and removes the client's node with its cursor (canal's
  ``unsubscribe``);
* ``HEARTBEAT`` is answered with an empty ``ACK`` (canal's server refuses the type; a client may
  use it to keep an idle connection open).

A connection idle longer than the client's ``net_read_timeout`` (canal: milliseconds; default
``idle_timeout``), closed, or broken gives back the batches it was handed (rollback), so the next
client gets them again. Accounts: one user and canal's stored password form (hex of
SHA1(SHA1(password)), canal's ``canal.passwd``); without a password any user is let in, as canal
does. Passwords never reach a log line or an answer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_binlog.canal.errors import CanalError
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.instance import CanalInstance, InstanceConfig
from airflow_provider_binlog.canal.meta.base import MetaManager
from airflow_provider_binlog.canalnet.entries import EntryEncoder
from airflow_provider_binlog.canalnet.errors import CanalProtocolError
from airflow_provider_binlog.canalnet.protocol import (
    ack_packet,
    frame,
    packet,
    pb,
    read_packet,
    scramble_check,
)
from airflow_provider_binlog.errors import BinlogCdcError, ConfigurationError

log = logging.getLogger(__name__)

_UNITS = {0: 1e-9, 1: 1e-6, 2: 1e-3, 3: 1.0, 4: 60.0, 5: 3600.0, 6: 86400.0}


@dataclass(frozen=True)
class Account:
    """The server's account (canal's ``canal.user`` / ``canal.passwd``).

    :param user: the user name; empty: any.
    :param password_hash: hex of SHA1(SHA1(password)) (:func:`.protocol.scramble_gen_pass`); empty:
        no password asked.
    """

    user: str = ""
    password_hash: str = field(default="", repr=False)

    def check(self, user: str, token_hex: str, seed: bytes) -> bool:
        if self.user and user != self.user:
            return False
        if not self.password_hash:
            return True
        try:
            token = bytes.fromhex(token_hex)
        except ValueError:
            return False
        return scramble_check(token, bytes.fromhex(self.password_hash), seed)


@dataclass(frozen=True)
class ServedDestination:
    """A destination this server may run: its instance settings (the filter is the default for
    clients that subscribe without one; the client id comes from the client)."""

    config: InstanceConfig


class _Destination:
    """One destination's instance and the connection whose batches are outstanding."""

    def __init__(self, server: CanalServer, served: ServedDestination) -> None:
        self.server = server
        self.served = served
        self.name = served.config.destination
        self.lock = threading.RLock()
        self.running = server.zookeeper is None  # without ZooKeeper every server runs it
        self.instance: CanalInstance | None = None
        self.encoder = EntryEncoder(server.column_types(served.config) if server.column_types else None)
        self.batch_states: dict[int, tuple[bool, int]] = {}
        self.owner: object | None = None
        self.ha: Any = None

    def set_running(self, running: bool) -> None:
        with self.lock:
            self.running = running
            if not running:
                self.close_instance()

    def close_instance(self) -> None:
        if self.instance is not None:
            with contextlib.suppress(Exception):
                self.instance.close()
        self.instance = None
        self.batch_states.clear()
        self.owner = None

    def subscribe(self, client_id: int, filter_text: str, owner: object) -> None:
        with self.lock:
            if not self.running:
                raise CanalError(f"destination:{self.name} should start first")
            flt = self.served.config.filter
            if filter_text and filter_text != flt.include:
                flt = replace(flt, include=filter_text)
            inst = self.instance
            if inst is not None and (inst.config.client_id != client_id or inst.config.filter != flt):
                log.info("destination %s: resubscribed with client id %s and filter %r: restarting "
                         "from the cursor",
                         self.name, client_id, flt.include)  # fmt: skip
                self.close_instance()
                inst = None
            if inst is None:
                config = replace(self.served.config, client_id=client_id, filter=flt)
                inst = self.server.build_instance(config)
                try:
                    inst.subscribe(None, running_timeout=self.server.running_timeout)
                except BaseException:
                    with contextlib.suppress(Exception):
                        inst.close()
                    raise
                self.instance = inst
                self.encoder.restore((False, 0))
            self.owner = owner

    def get(self, client_id: int, size: int, wait: float, owner: object) -> tuple[int, list[bytes]]:
        with self.lock:
            inst = self._instance(client_id)
            state = self.encoder.state()
        # the wait happens outside the lock: a rollback from another thread must not wait for it
        batch = inst.get_without_ack(max(1, size), wait)
        with self.lock:
            if batch.id is None:
                return -1, []
            self.batch_states[batch.id] = state
            self.owner = owner
            return batch.id, self.encoder.encode(batch.entries)

    def ack(self, client_id: int, batch_id: int) -> None:
        with self.lock:
            self._instance(client_id).ack(batch_id)
            self.batch_states.pop(batch_id, None)

    def rollback(self, client_id: int | None = None) -> None:
        with self.lock:
            inst = self.instance
            if inst is None or (client_id is not None and inst.config.client_id != client_id):
                return  # canal: a rollback before the subscription is ignored
            outstanding = inst.store.outstanding
            generation = inst.store.generation
            inst.rollback()
            if inst.store.generation != generation:
                self.encoder.restore((False, self.encoder.server_id))  # re-read from a transaction end
            elif outstanding:
                self.encoder.restore(self.batch_states[min(outstanding)])
            self.batch_states.clear()

    def release(self, owner: object) -> None:
        """A connection went away: give its outstanding batches back."""
        with self.lock:
            if self.owner is owner and self.instance is not None and self.instance.store.outstanding:
                log.info("destination %s: the client went away with batches %s outstanding: rolled back",
                         self.name, list(self.instance.store.outstanding))  # fmt: skip
                with contextlib.suppress(Exception):
                    self.rollback()
            if self.owner is owner:
                self.owner = None

    def unsubscribe(self, client_id: int) -> None:
        with self.lock:
            inst = self._instance(client_id)
            meta, identity = inst.meta, inst.identity
            self.close_instance()
            meta.unsubscribe(identity)

    def _instance(self, client_id: int) -> CanalInstance:
        inst = self.instance
        if not self.running:
            raise CanalError(f"destination:{self.name} should start first")
        if inst is None or inst.config.client_id != client_id:
            raise CanalError(f"ClientIdentity:{self.name}/{client_id} should subscribe first")
        return inst


class CanalServer:
    """canal's network server over our instances (see the module docstring).

    :param destinations: what it may serve.
    :param meta: a meta manager, or a factory of one per instance.
    :param account: who may connect.
    :param host: address to listen on.
    :param port: port (0: any free one, see :attr:`port` after :meth:`start`).
    :param zookeeper: a started kazoo client to register in (:mod:`.cluster`) and hold the client
        ``running`` node with; ``None``: no HA, this server runs every destination.
    :param register_ip: the address written to ZooKeeper (default: ``host``, or this host's name
        resolved when ``host`` is ``0.0.0.0``).
    :param idle_timeout: seconds a connection may stay silent (a client's ``net_read_timeout`` wins).
    :param max_get_wait: the longest a GET waits.
    :param running_timeout: seconds to wait for a dead server's client node to go when taking over.
    :param column_types: ``config -> (schema, table) -> {column: COLUMN_TYPE}`` for ``mysqlType``.
    :param max_connections: connections served at once.
    """

    def __init__(
        self,
        destinations: list[ServedDestination],
        meta: MetaManager | Callable[[], MetaManager],
        account: Account | None = None,
        host: str = "127.0.0.1",
        port: int = 11111,
        zookeeper: Any = None,
        register_ip: str | None = None,
        idle_timeout: float = 600.0,
        max_get_wait: float = 30.0,
        running_timeout: float = 60.0,
        column_types: Callable[[InstanceConfig], Any] | None = None,
        max_connections: int = 64,
    ) -> None:
        if not destinations:
            raise ConfigurationError("a canal server needs at least one destination")
        self.meta = meta
        self.account = account or Account()
        self.host = host
        self.port = port
        self.zookeeper = zookeeper
        self.register_ip = register_ip
        self.idle_timeout = idle_timeout
        self.max_get_wait = max_get_wait
        self.running_timeout = running_timeout
        self.column_types = column_types
        self.max_connections = max_connections
        self.destinations = {d.config.destination: _Destination(self, d) for d in destinations}
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CanalServer({self.host}:{self.port}, destinations={list(self.destinations)})"

    @property
    def address(self) -> str:
        """``ip:port`` as registered."""
        ip = self.register_ip or (
            socket.gethostbyname(socket.gethostname()) if self.host in ("", "0.0.0.0") else self.host
        )
        return f"{ip}:{self.port}"

    def build_instance(self, config: InstanceConfig) -> CanalInstance:
        meta = self.meta() if callable(self.meta) else self.meta
        running = None
        if self.zookeeper is not None:
            from airflow_provider_binlog.canal.ha import RunningNode

            running = RunningNode(self.zookeeper, config.identity, label=f"canal-server {self.address}")
        return CanalInstance(config, meta, running=running)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Listen, register in ZooKeeper, and accept connections in a thread."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(16)
        sock.settimeout(0.5)
        self.port = sock.getsockname()[1]
        self._sock = sock
        if self.zookeeper is not None:
            from airflow_provider_binlog.canalnet.cluster import ServerRunning

            for dest in self.destinations.values():
                dest.ha = ServerRunning(self.zookeeper, dest.name, self.address, dest.set_running)
                dest.ha.start()
        self._thread = threading.Thread(
            target=self._accept_loop, name=f"canal-server-{self.port}", daemon=True
        )
        self._thread.start()
        log.info("canal server listening on %s:%s for %s", self.host, self.port, ", ".join(self.destinations))

    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting, close connections (their batches are rolled back), stop the instances and
        give the destinations to a standby."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._conn_lock:
            for conn in list(self._connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        for dest in self.destinations.values():
            with dest.lock:
                dest.close_instance()
            if dest.ha is not None:
                dest.ha.close()
        if self._sock is not None:
            self._sock.close()

    def __enter__(self) -> CanalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                conn, peer = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._conn_lock:
                if len(self._connections) >= self.max_connections:
                    log.warning(
                        "canal server: %d connections already, refusing %s", len(self._connections), peer
                    )
                    conn.close()
                    continue
                self._connections.add(conn)
            threading.Thread(
                target=self._serve, args=(conn, peer), name=f"canal-session-{peer[0]}:{peer[1]}", daemon=True
            ).start()

    # ------------------------------------------------------------------ one connection

    def _serve(self, conn: socket.socket, peer: Any) -> None:
        session = object()
        used: set[str] = set()
        try:
            conn.settimeout(self.idle_timeout)
            seed = os.urandom(8)
            conn.sendall(frame(packet(pb.HANDSHAKE, pb.Handshake(seeds=seed))))
            first = read_packet(conn)
            if first.type != pb.CLIENTAUTHENTICATION:
                conn.sendall(
                    frame(ack_packet(400, f"expected CLIENTAUTHENTICATION, got packet type {first.type}"))
                )
                return
            auth = pb.ClientAuth.FromString(first.body)
            if not self.account.check(auth.username, auth.password.decode("utf-8", "replace"), seed):
                log.warning("canal server: authentication failed for user %r from %s", auth.username, peer[0])
                conn.sendall(frame(ack_packet(400, f"auth failed for user:{auth.username}")))
                return
            if auth.HasField("net_read_timeout") and auth.net_read_timeout > 0:
                conn.settimeout(auth.net_read_timeout / 1000.0)  # canal: milliseconds
            if auth.destination and auth.client_id:
                self._dest(auth.destination).subscribe(int(auth.client_id), auth.filter, session)
                used.add(auth.destination)
            conn.sendall(frame(ack_packet()))
            while not self._stopping.is_set():
                try:
                    request = read_packet(conn)
                except TimeoutError:
                    log.info("canal server: connection from %s idle too long, closed", peer[0])
                    return
                answer = self._handle(request, session, used)
                if answer is not None:
                    conn.sendall(frame(answer))
        except (EOFError, ConnectionError, TimeoutError, CanalProtocolError, OSError) as exc:
            log.debug("canal server: connection from %s ended: %s", peer[0], exc)
        finally:
            for name in used:
                self.destinations[name].release(session)
            with self._conn_lock:
                self._connections.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

    def _dest(self, name: str) -> _Destination:
        dest = self.destinations.get(name)
        if dest is None:
            raise CanalError(f"destination:{name} is not served here")
        return dest

    def _handle(self, request: Any, session: object, used: set[str]) -> Any:
        kind = request.type
        try:
            if kind == pb.SUBSCRIPTION:
                sub = pb.Sub.FromString(request.body)
                if not sub.destination or not sub.client_id:
                    return ack_packet(401, "destination or clientId is null")
                self._dest(sub.destination).subscribe(int(sub.client_id), sub.filter, session)
                used.add(sub.destination)
                return ack_packet()
            if kind == pb.GET:
                get = pb.Get.FromString(request.body)
                if not get.destination or not get.client_id:
                    return ack_packet(401, "destination or clientId is null")
                wait = self._wait(get)
                batch_id, entries = self._dest(get.destination).get(
                    int(get.client_id), get.fetch_size, wait, session
                )
                used.add(get.destination)
                return packet(pb.MESSAGES, pb.Messages(batch_id=batch_id, messages=entries))
            if kind == pb.CLIENTACK:
                ack = pb.ClientAck.FromString(request.body)
                if not ack.destination or not ack.client_id:
                    return ack_packet(401, "destination or clientId is null")
                if ack.batch_id == 0:
                    return ack_packet(402, "batchId should assign value")
                if ack.batch_id != -1:  # -1: the last get had nothing
                    self._dest(ack.destination).ack(int(ack.client_id), ack.batch_id)
                return None
            if kind == pb.CLIENTROLLBACK:
                rb = pb.ClientRollback.FromString(request.body)
                if not rb.destination or not rb.client_id:
                    return ack_packet(401, "destination or clientId is null")
                self._dest(rb.destination).rollback(int(rb.client_id))
                return None
            if kind == pb.UNSUBSCRIPTION:
                unsub = pb.Unsub.FromString(request.body)
                if not unsub.destination or not unsub.client_id:
                    return ack_packet(401, "destination or clientId is null")
                self._dest(unsub.destination).unsubscribe(int(unsub.client_id))
                used.discard(unsub.destination)
                return ack_packet()
            if kind == pb.HEARTBEAT:
                return ack_packet()
            name = pb.PacketType.Name(kind) if kind in pb.PacketType.values() else kind
            return ack_packet(400, f"packet type: {name} is NOT supported!")
        except (BinlogCdcError, ValueError) as exc:
            log.warning("canal server: %s failed: %s", pb.PacketType.Name(kind), exc)
            return ack_packet(400, str(exc))

    def _wait(self, get: Any) -> float:
        if not get.HasField("timeout") or get.timeout == -1:
            return 0.0
        if get.timeout <= 0:
            return self.max_get_wait
        unit = _UNITS.get(get.unit, 1e-3) if get.HasField("unit") else 1e-3
        return min(get.timeout * unit, self.max_get_wait)


def default_filter(config: InstanceConfig) -> TableFilter:
    return config.filter
