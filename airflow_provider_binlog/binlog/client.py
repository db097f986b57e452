"""The replication client: read the binlog from a live MySQL/MariaDB server as a replica does.

Protocol (over a pymysql connection, so native, caching_sha2 and TLS authentication all work)::

    SELECT VERSION(), @@GLOBAL.binlog_checksum, @@GLOBAL.server_id, ...
    SET @master_binlog_checksum = @@GLOBAL.binlog_checksum      (and @source_binlog_checksum)
    SET @master_heartbeat_period = <ns>                          (and @source_heartbeat_period)
    MariaDB: SET @mariadb_slave_capability = 4
             GTID start: SET @slave_connect_state = '<d-s-n,...>', @slave_gtid_strict_mode,
                         @slave_gtid_ignore_duplicates
    COM_REGISTER_SLAVE   0x15  u32 server_id, u8+host, u8+user, u8+password (all empty), u16 port,
                               u32 rank, u32 master_id
    COM_BINLOG_DUMP      0x12  u32 pos, u16 flags, u32 server_id, file name
    COM_BINLOG_DUMP_GTID 0x1e  u16 flags, u32 server_id, u32 name_len, name, u64 pos,
                               u32 data_len, GTID set (Gtid_set::encode)

Every packet after the dump command is ``0x00`` + one event (pymysql joins the 16 MB pieces of a
large one), ``0xfe`` EOF (non-blocking dump at the end of the binlog; in a blocking dump the server
ending it, as MariaDB does at shutdown: a lost connection) or ``0xff`` an error.

Modes: blocking (wait for new events; heartbeats every ``heartbeat_period`` keep the connection
alive, and ``idle_timeout`` without any packet counts as a lost connection), non-blocking (stop at
the end of the binlog), and ``stop_at`` (blocking, stop once the given position is reached; the way
to "drain to head", since MariaDB drops non-blocking GTID dumps with error 2013 at the end).

A dropped connection raises :class:`~.errors.ConnectionLostError` with the position after the last
complete event (reconnecting is the caller's decision). Server refusals raise
:class:`~.errors.ServerError` subclasses. The password never appears in a message or a repr.
"""

from __future__ import annotations

import contextlib
import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql

from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.errors import ConnectionLostError, PurgedBinlogError, ServerError
from airflow_provider_binlog.binlog.event import DecodeContext, Event
from airflow_provider_binlog.binlog.gtid import MariadbGtidList, MysqlGtidSet
from airflow_provider_binlog.binlog.gtid_tracker import GtidTracker
from airflow_provider_binlog.binlog.parser import BinlogParser
from airflow_provider_binlog.binlog.position import BinlogPosition

COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E

BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02  # MariaDB
BINLOG_THROUGH_GTID = 0x04  # MySQL COM_BINLOG_DUMP_GTID

MARIA_SLAVE_CAPABILITY_GTID = 4
MAX_PACKET_LEN = 0xFFFFFF
_HEARTBEATS = frozenset({int(EventType.HEARTBEAT_LOG_EVENT), int(EventType.HEARTBEAT_LOG_EVENT_V2)})

REGISTER_SLAVE = struct.Struct("<IBBBHII")  # server_id, 3 empty strings, port, rank, master_id
DUMP = struct.Struct("<IHI")  # pos, flags, server_id
DUMP_GTID_HEAD = struct.Struct("<HII")  # flags, server_id, name_len
U64 = struct.Struct("<Q")
U32 = struct.Struct("<I")

# MySQL/MariaDB error codes
ER_ACCESS_DENIED = 1045
ER_DBACCESS_DENIED = 1044
ER_SPECIFIC_ACCESS_DENIED = 1227
ER_TABLEACCESS_DENIED = 1142
ER_MASTER_FATAL_READING_BINLOG = 1236
ER_ACCESS_DENIED_NO_PASSWORD = 1698
CR_CONNECTION_ERROR = 2002
CR_CONN_HOST_ERROR = 2003
CR_SERVER_GONE = 2006
CR_SERVER_LOST = 2013
_LOST = frozenset({CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR, CR_SERVER_GONE, CR_SERVER_LOST, 2055, 1053, 1927})


class AuthenticationError(ServerError):
    """The server rejected the user name or password."""


class PrivilegeError(ServerError):
    """The user lacks a privilege the replication client needs (REPLICATION SLAVE / CLIENT)."""


def _default_server_id() -> int:
    # a high random id so several destinations on one source do not kick each other off
    return 0x40000000 + random.randrange(1 << 24)


_preferred_tls: list[Any] = []  # pymysql's context for its TLS "preferred" mode, built once


class _Connection(pymysql.connections.Connection):
    """pymysql's connection, except that the TLS context of its "preferred" mode (no ``ssl``
    options: TLS when the server offers it, the certificate not verified) is built once per
    process, not per connection: building it loads the system's CA store (25-45 ms of CPU), and
    subscribing an instance opens a dozen connections. With ``ssl`` options each connection builds
    its own, as pymysql does. A context may serve many connections (``wrap_socket`` per socket)."""

    def _create_ssl_ctx(self, sslp: Any) -> Any:
        if sslp:
            return super()._create_ssl_ctx(sslp)
        if not _preferred_tls:
            _preferred_tls.append(super()._create_ssl_ctx({}))
        return _preferred_tls[0]


@dataclass(frozen=True)
class ReplicationConfig:
    """How to reach the source and present ourselves to it.

    :param host: server host.
    :param port: server port.
    :param user: a user with REPLICATION SLAVE and REPLICATION CLIENT (and SELECT for schema).
    :param password: its password (never shown in repr or messages).
    :param server_id: the replica server id to register with; must differ from every other replica
        of the source (two replicas with one id disconnect each other). Random by default.
    :param heartbeat_period: seconds between heartbeats the source sends while idle.
    :param idle_timeout: seconds without any packet (event or heartbeat) after which the connection
        counts as lost; default ``2 * heartbeat_period + 10``.
    :param connect_timeout: seconds to connect.
    :param ssl: pymysql ``ssl`` options (e.g. ``{"ca": "/path/ca.pem"}`` to require TLS and verify
        the server's certificate); ``None`` leaves pymysql's default (TLS when the server offers
        it, without verification).
    :param annotate_rows: ask MariaDB for ANNOTATE_ROWS events (the SQL behind row events).
    :param origin: where these settings come from, named by a rejected login (e.g. ``connection
        'mysql_default'``) so the message says what to fix.
    """

    host: str
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    server_id: int = field(default_factory=_default_server_id)
    heartbeat_period: float = 5.0
    idle_timeout: float | None = None
    connect_timeout: float = 10.0
    ssl: dict[str, Any] | None = field(default=None, repr=False)
    annotate_rows: bool = True
    origin: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def effective_idle_timeout(self) -> float:
        return self.idle_timeout if self.idle_timeout is not None else 2 * self.heartbeat_period + 10


@dataclass(frozen=True)
class ServerInfo:
    """What the client learned about the source when it connected."""

    version: str
    flavor: str
    server_id: int
    binlog_checksum: str
    server_uuid: str | None = None
    gtid_mode: str | None = None
    gtid_domain_id: int | None = None

    @property
    def is_mariadb(self) -> bool:
        return self.flavor == "mariadb"


class ReplicationClient:
    """Metadata queries and binlog dumps against one source.

    :param config: connection settings.
    """

    def __init__(self, config: ReplicationConfig) -> None:
        self.config = config
        self._info: ServerInfo | None = None

    def __repr__(self) -> str:
        return (
            f"ReplicationClient({self.config.user}@{self.config.address}, server_id={self.config.server_id})"
        )

    # ------------------------------------------------------------------ connections and errors

    def _connect(self, read_timeout: float | None = None) -> pymysql.Connection:
        c = self.config
        try:
            return _Connection(
                host=c.host,
                port=c.port,
                user=c.user,
                password=c.password,
                connect_timeout=c.connect_timeout,
                read_timeout=read_timeout,
                ssl=c.ssl,
                autocommit=True,
                charset="utf8mb4",
            )
        except (pymysql.err.MySQLError, OSError) as exc:  # OSError: TLS (ssl.SSLError), CA files
            raise self._translate(exc, None) from None

    def connect(self, read_timeout: float | None = None) -> pymysql.Connection:
        """A plain autocommit ``utf8mb4`` connection to the source (for SELECTs); failures raise
        this package's errors, naming the address and :attr:`ReplicationConfig.origin`."""
        return self._connect(read_timeout)

    @property
    def _source(self) -> str:
        """``host:port (connection 'id')`` for messages."""
        origin = self.config.origin
        return f"{self.config.address} ({origin})" if origin else self.config.address

    def _translate(
        self, exc: BaseException, position: BinlogPosition | None, requested: str = ""
    ) -> Exception:
        """Turn a pymysql/socket error into this package's error, without any secret in it."""
        where = f"{self.config.user}@{self.config.address}"
        code = exc.args[0] if isinstance(exc, pymysql.err.MySQLError) and exc.args else None
        text = str(exc.args[1]) if isinstance(exc, pymysql.err.MySQLError) and len(exc.args) > 1 else str(exc)
        if self.config.password:
            text = text.replace(self.config.password, "***")
        if not isinstance(code, int):
            if isinstance(exc, OSError) and position is None:
                return ConnectionLostError(f"cannot connect to {self._source}: {type(exc).__name__}: {text}")
            return ConnectionLostError(f"connection to {self._source} lost: {text}", position)
        if code in (ER_ACCESS_DENIED, ER_ACCESS_DENIED_NO_PASSWORD):
            fix = f"; check the user and password of {self.config.origin}" if self.config.origin else ""
            return AuthenticationError(f"access denied for {where} (error {code}): {text}{fix}", code)
        if code in (ER_DBACCESS_DENIED, ER_SPECIFIC_ACCESS_DENIED, ER_TABLEACCESS_DENIED):
            return PrivilegeError(
                f"{where} lacks a privilege (error {code}): {text}. The replication user needs "
                "REPLICATION SLAVE and REPLICATION CLIENT (BINLOG MONITOR on MariaDB).",
                code,
            )
        if code == ER_MASTER_FATAL_READING_BINLOG:
            low = text.lower()
            if "could not find" in low or "purged" in low or "not found" in low:
                oldest = self._oldest_binlog()
                what = requested or "the requested binlog position"
                return PurgedBinlogError(
                    f"{what} is no longer on {self.config.address}; the oldest binlog there is "
                    f"{oldest or 'unknown'} (server said: {text})",
                    code,
                )
            return ServerError(f"{self.config.address} cannot send the binlog (error {code}): {text}", code)
        if code in (CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR):
            return ConnectionLostError(f"cannot connect to {self._source} (error {code}): {text}", position)
        if code in _LOST or code >= 2000:
            return ConnectionLostError(f"connection to {self._source} lost (error {code}): {text}", position)
        return ServerError(f"{self._source} refused (error {code}): {text}", code)

    def _oldest_binlog(self) -> str | None:
        try:
            files = self.binlog_files()
        except Exception:
            return None
        return files[0][0] if files else None

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        conn = self._connect(read_timeout=max(30.0, self.config.connect_timeout))
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        except pymysql.err.MySQLError as exc:
            raise self._translate(exc, None) from None
        finally:
            conn.close()

    # ------------------------------------------------------------------ metadata

    def server_info(self, refresh: bool = False) -> ServerInfo:
        """Version, flavor, server id, checksum and GTID settings of the source."""
        if self._info is not None and not refresh:
            return self._info
        version, checksum, server_id = self._query(
            "SELECT VERSION(), @@GLOBAL.binlog_checksum, @@GLOBAL.server_id"
        )[0]
        flavor = "mariadb" if "mariadb" in str(version).lower() else "mysql"
        if flavor == "mariadb":
            (domain,) = self._query("SELECT @@GLOBAL.gtid_domain_id")[0]
            info = ServerInfo(
                str(version), flavor, int(server_id), str(checksum).upper(), gtid_domain_id=int(domain)
            )
        else:
            uuid, mode = self._query("SELECT @@GLOBAL.server_uuid, @@GLOBAL.gtid_mode")[0]
            info = ServerInfo(
                str(version), flavor, int(server_id), str(checksum).upper(), str(uuid), str(mode)
            )
        self._info = info
        return info

    @property
    def flavor(self) -> str:
        return self.server_info().flavor

    def head_position(self) -> BinlogPosition:
        """The end of the binlog now (``SHOW BINARY LOG STATUS``, or ``SHOW MASTER STATUS`` before 8.2)."""
        rows = self._status_rows()
        if not rows:
            raise ServerError(f"binary logging is off on {self.config.address} (no binlog status)")
        return BinlogPosition(str(rows[0][0]), int(rows[0][1]))

    def _status_rows(self) -> list[tuple[Any, ...]]:
        last: Exception | None = None
        for sql in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
            try:
                return self._query(sql)
            except ServerError as exc:
                if isinstance(exc, (AuthenticationError, PrivilegeError)):
                    raise
                last = exc
        assert last is not None
        raise last

    def head_gtid(self) -> MysqlGtidSet | MariadbGtidList:
        """The GTIDs in the binlog now: MySQL's executed set, or MariaDB's ``@@gtid_binlog_pos``."""
        if self.server_info().is_mariadb:
            (pos,) = self._query("SELECT @@GLOBAL.gtid_binlog_pos")[0]
            return MariadbGtidList.parse(str(pos or ""))
        rows = self._status_rows()
        text = str(rows[0][4]) if rows and len(rows[0]) > 4 and rows[0][4] else ""
        return MysqlGtidSet.parse(text)

    def binlog_files(self) -> list[tuple[str, int]]:
        """``(name, size)`` of every binlog file on the server, oldest first."""
        return [(str(r[0]), int(r[1])) for r in self._query("SHOW BINARY LOGS")]

    # ------------------------------------------------------------------ dumps

    def dump(
        self,
        start: BinlogPosition | None = None,
        *,
        gtid: MysqlGtidSet | MariadbGtidList | str | None = None,
        blocking: bool = True,
        stop_at: BinlogPosition | None = None,
        include_heartbeats: bool = False,
        ctx: DecodeContext | None = None,
        annotate_rows: bool | None = None,
    ) -> BinlogStream:
        """Start reading the binlog.

        :param start: ``file:pos`` to start at (a position at an event boundary).
        :param gtid: start after these GTIDs instead: a MySQL GTID set (COM_BINLOG_DUMP_GTID) or a
            MariaDB GTID position (``@slave_connect_state``); a string is parsed per flavor.
        :param blocking: wait for new events at the end of the binlog (else stop there).
        :param stop_at: stop once this position is reached (implies a blocking dump).
        :param include_heartbeats: also yield HEARTBEAT events (they let a consumer regain control
            while the source is idle).
        :param ctx: the decode context to use (e.g. one with a ``schema_resolver``, or the context
            of a previous stream so its table maps carry over); a new one by default.
        :param annotate_rows: ask MariaDB for ANNOTATE_ROWS events (the SQL text of each row-based
            statement) in this dump; ``None``: as the config says (:attr:`ReplicationConfig.annotate_rows`).
            A reader that never looks at them saves their bytes (the whole multi-row statement text)
            on the wire and in the parser; every other event, and its position, is the same.
        """
        if (start is None) == (gtid is None):
            raise ValueError("give exactly one of start (file:pos) or gtid")
        return BinlogStream(self, start, gtid, blocking, stop_at, include_heartbeats, ctx, annotate_rows)


class BinlogStream:
    """An open dump: iterate for :class:`~.event.Event`; :attr:`position` is after the last complete one.

    Also tracks the GTID position at transaction ends (:attr:`gtid_position`, see
    :class:`~.gtid_tracker.GtidTracker`): MySQL's executed set grows by each committed GTID;
    MariaDB's position advances per domain.
    """

    def __init__(
        self,
        client: ReplicationClient,
        start: BinlogPosition | None,
        gtid: MysqlGtidSet | MariadbGtidList | str | None,
        blocking: bool,
        stop_at: BinlogPosition | None,
        include_heartbeats: bool,
        ctx: DecodeContext | None = None,
        annotate_rows: bool | None = None,
    ) -> None:
        self.client = client
        self.info = client.server_info()
        self.start = start
        self.stop_at = stop_at
        self.include_heartbeats = include_heartbeats
        # MariaDB: ask for ANNOTATE_ROWS events (see ReplicationClient.dump)
        self.annotate_rows = client.config.annotate_rows if annotate_rows is None else annotate_rows
        if isinstance(gtid, str):
            gtid = MariadbGtidList.parse(gtid) if self.info.is_mariadb else MysqlGtidSet.parse(gtid)
        if gtid is not None and self.info.is_mariadb != isinstance(gtid, MariadbGtidList):
            raise ValueError(f"a {type(gtid).__name__} does not fit a {self.info.flavor} server")
        self.start_gtid = gtid
        self.tracker = GtidTracker(gtid)
        self.blocking = blocking
        if not blocking and self.stop_at is None and isinstance(gtid, MariadbGtidList):
            # MariaDB drops non-blocking GTID dumps at the end (error 2013): drain to head instead
            self.stop_at = client.head_position()
            self.blocking = True
        if self.stop_at is not None:
            self.blocking = True
        self.parser = BinlogParser(
            start.file if start else "",
            start.pos if start else 4,
            checksum=self.info.binlog_checksum == "CRC32",
            ctx=ctx,
        )
        self.parser.ctx.from_server = True
        self._received = start is not None
        self._conn: pymysql.Connection | None = None
        self._iter: Iterator[Event] | None = None
        self.closed = False

    def __repr__(self) -> str:
        return f"BinlogStream({self.client!r}, position={self.position})"

    @property
    def gtid_position(self) -> MysqlGtidSet | MariadbGtidList | None:
        """GTID position after the last committed transaction (the start GTIDs before any)."""
        return self.tracker.position

    @property
    def position(self) -> BinlogPosition | None:
        """``file:pos`` after the last complete event (the start position before any event)."""
        return self.parser.position if self._received and self.parser.file else None

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        if self._iter is None:
            self._iter = self._events()
        return next(self._iter)

    def __enter__(self) -> BinlogStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the dump connection (safe to call twice)."""
        self.closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already broken: nothing to tell the server
                with contextlib.suppress(Exception):
                    conn._force_close()

    # ------------------------------------------------------------------ protocol

    def _open(self) -> pymysql.Connection:
        cfg = self.client.config
        conn = self.client._connect(read_timeout=max(30.0, cfg.connect_timeout))
        self._conn = conn
        try:
            with conn.cursor() as cur:
                cur.execute("SET @master_binlog_checksum = @@GLOBAL.binlog_checksum")
                cur.execute("SET @source_binlog_checksum = @@GLOBAL.binlog_checksum")
                period_ns = int(cfg.heartbeat_period * 1_000_000_000)
                cur.execute(f"SET @master_heartbeat_period = {period_ns}")
                cur.execute(f"SET @source_heartbeat_period = {period_ns}")
                if not self.info.is_mariadb:
                    # names this replica in SHOW REPLICAS and lets the source drop its zombie dumps
                    cur.execute("SET @slave_uuid = UUID(), @replica_uuid = UUID()")
                if self.info.is_mariadb:
                    cur.execute(f"SET @mariadb_slave_capability = {MARIA_SLAVE_CAPABILITY_GTID}")
                    if isinstance(self.start_gtid, MariadbGtidList):
                        cur.execute("SET @slave_connect_state = %s", (str(self.start_gtid),))
                        cur.execute("SET @slave_gtid_strict_mode = 1")
                        cur.execute("SET @slave_gtid_ignore_duplicates = 0")
            self._register(conn)
            self._send_dump(conn)
        except pymysql.err.MySQLError as exc:
            self.close()
            err = self.client._translate(exc, self.position, self._requested())
            if isinstance(err, AuthenticationError):
                # logged in already: MariaDB answers COM_REGISTER_SLAVE without the privilege so
                err = PrivilegeError(
                    f"{cfg.user}@{cfg.address} may not register as a replica (error {err.code}): "
                    f"{err}. The replication user needs REPLICATION SLAVE.",
                    err.code,
                )
            raise err from None
        conn._read_timeout = cfg.effective_idle_timeout
        if conn._sock is not None:
            conn._sock.settimeout(cfg.effective_idle_timeout)
            conn._current_timeout = cfg.effective_idle_timeout
        return conn

    def _register(self, conn: pymysql.Connection) -> None:
        cfg = self.client.config
        payload = REGISTER_SLAVE.pack(cfg.server_id, 0, 0, 0, 0, 0, 0)
        conn._execute_command(COM_REGISTER_SLAVE, payload)
        conn._read_packet()  # OK; an error packet raises

    def _send_dump(self, conn: pymysql.Connection) -> None:
        cfg = self.client.config
        flags = 0 if self.blocking else BINLOG_DUMP_NON_BLOCK
        if self.info.is_mariadb and self.annotate_rows:
            flags |= BINLOG_SEND_ANNOTATE_ROWS_EVENT
        if isinstance(self.start_gtid, MysqlGtidSet):
            data = self.start_gtid.encode()
            payload = DUMP_GTID_HEAD.pack(flags | BINLOG_THROUGH_GTID, cfg.server_id, 0)
            payload += U64.pack(4) + U32.pack(len(data)) + data
            conn._execute_command(COM_BINLOG_DUMP_GTID, payload)
        else:
            # file:pos, or MariaDB GTID (empty file name after @slave_connect_state)
            file = self.start.file if self.start else ""
            pos = self.start.pos if self.start else 4
            conn._execute_command(COM_BINLOG_DUMP, DUMP.pack(pos, flags, cfg.server_id) + file.encode())

    def _requested(self) -> str:
        """What this dump asked for, for error messages."""
        if self.start is not None:
            return f"binlog {self.start.file}"
        return f"the binlogs after GTID position {self.start_gtid}"

    def _reached(self) -> bool:
        stop = self.stop_at
        if stop is None:
            return False
        pos = self.position
        return pos is not None and pos >= stop

    @staticmethod
    def _read_payload(conn: pymysql.Connection) -> bytes:
        """One protocol payload straight off pymysql's buffered socket file (joining 16 MB pieces).

        Same framing as ``Connection._read_packet`` without its per-packet object; an error packet
        raises pymysql's exception for it, a short read is a lost connection.
        """
        rfile = conn._rfile
        if rfile is None:
            raise pymysql.err.OperationalError(CR_SERVER_LOST, "connection closed")
        parts: list[bytes] = []
        while True:
            head = rfile.read(4)
            if len(head) < 4:
                raise pymysql.err.OperationalError(CR_SERVER_LOST, "Lost connection to server during dump")
            length = head[0] | head[1] << 8 | head[2] << 16
            conn._next_seq_id = (head[3] + 1) % 256
            data = rfile.read(length) if length else b""
            if len(data) < length:
                raise pymysql.err.OperationalError(CR_SERVER_LOST, "Lost connection to server during dump")
            parts.append(data)
            if length < MAX_PACKET_LEN:
                break
        payload = parts[0] if len(parts) == 1 else b"".join(parts)
        if payload[:1] == b"\xff":
            pymysql.err.raise_mysql_exception(payload)
        return payload

    def _events(self) -> Iterator[Event]:
        conn = self._open()
        parse = self.parser.parse
        update = self.tracker.update
        skip = frozenset() if self.include_heartbeats else _HEARTBEATS
        try:
            while not self.closed:
                if self.stop_at is not None and self._reached():
                    return
                try:
                    data = self._read_payload(conn)
                except (TimeoutError, pymysql.err.MySQLError, OSError) as exc:
                    if self.closed:
                        return
                    raise self.client._translate(exc, self.position, self._requested()) from None
                if not data:
                    continue
                head = data[0]
                if head == 0xFE and len(data) < 9:
                    if self.blocking:  # the server ended the dump (MariaDB does so at shutdown)
                        raise ConnectionLostError(
                            f"{self.client.config.address} ended the binlog dump at {self.position}",
                            self.position,
                        )
                    return  # EOF: end of the binlog in non-blocking mode
                if head != 0x00:
                    raise ServerError(f"unexpected packet 0x{head:02x} in the binlog stream")
                for event in parse(memoryview(data)[1:]):
                    self._received = True
                    update(event)
                    if event.header.type_code in skip:
                        continue
                    yield event
        finally:
            self.close()
