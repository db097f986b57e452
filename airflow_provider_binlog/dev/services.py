"""Start real MariaDB, ZooKeeper and PostgreSQL servers as plain processes on free loopback ports.

Used by the test harness, the benchmarks and the demo. Each server lives in its own temporary
directory and is stopped (and its directory removed) by :meth:`stop`. A server that does not come
up fails fast with :class:`ServiceStartError` carrying the tail of its own log.

Binaries come from Debian's ``mariadb-server``, ``zookeeper`` and ``postgresql`` packages
(``dev.sh setup`` installs them). PostgreSQL refuses to run as root: as root, its processes run as
the ``postgres`` system user (``$BINLOG_CDC_POSTGRES_USER`` names another), which owns its directory.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pymysql

from airflow_provider_binlog.errors import BinlogCdcError

ZOOKEEPER_CLASSPATH = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
POSTGRES_BIN = "/usr/lib/postgresql/15/bin"
POSTGRES_USER_ENV = "BINLOG_CDC_POSTGRES_USER"
_LIVE: list[Any] = []


class ServiceStartError(BinlogCdcError):
    """A local service did not start; the message carries the tail of its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _find(*candidates: str) -> str:
    for c in candidates:
        found = shutil.which(c) or (c if os.path.exists(c) else None)
        if found:
            return found
    raise ServiceStartError(f"none of {', '.join(candidates)} found; run `bash dev.sh setup` first")


def _stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 15.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@atexit.register
def _stop_all() -> None:
    for service in list(_LIVE):
        with contextlib.suppress(Exception):
            service.stop()


class _LocalServer:
    """What both servers share: a process and a directory of their own."""

    basedir: Path | None
    proc: subprocess.Popen[bytes] | None

    def stop(self, keep_data: bool = False) -> None:
        """Stop the server; remove its directory unless ``keep_data`` (then :meth:`start` restarts it)."""
        _stop_process(self.proc)
        self.proc = None
        if not keep_data and self.basedir is not None:
            shutil.rmtree(self.basedir, ignore_errors=True)
            self.basedir = None
            with contextlib.suppress(ValueError):
                _LIVE.remove(self)


@dataclass
class MariaDbServer(_LocalServer):
    """A throwaway MariaDB with the binlog on, ROW format, FULL images and GTIDs.

    :param row_metadata: ``binlog_row_metadata``: ``FULL`` or ``MINIMAL``.
    :param checksum: ``binlog_checksum``: ``CRC32`` or ``NONE``.
    :param server_id: the server's ``server_id``.
    :param extra_args: more ``mariadbd`` options.
    """

    row_metadata: str = "FULL"
    checksum: str = "CRC32"
    server_id: int = 1
    extra_args: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 0
    root_user: str = "cdc_admin"
    root_password: str = field(default_factory=lambda: secrets.token_hex(12), repr=False)
    repl_user: str = "cdc_repl"
    repl_password: str = field(default_factory=lambda: secrets.token_hex(12), repr=False)
    basedir: Path | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def datadir(self) -> Path:
        assert self.basedir is not None, "server not started"
        return self.basedir / "data"

    @property
    def socket_path(self) -> Path:
        assert self.basedir is not None, "server not started"
        return self.basedir / "mysqld.sock"

    @property
    def log_path(self) -> Path:
        assert self.basedir is not None, "server not started"
        return self.basedir / "error.log"

    def start(self) -> MariaDbServer:
        """Create the data directory (first time only), start the server, create the users."""
        first = self.basedir is None
        if first:
            self.basedir = Path(tempfile.mkdtemp(prefix="binlog-cdc-mariadb-"))
            self.port = self.port or free_port()
            self._install_db()
            _LIVE.append(self)
        self._launch()
        if first:
            self._create_users()
        return self

    def _install_db(self) -> None:
        """Create the system tables; one retry on a fresh directory (the bootstrap has been seen to
        fail once on a machine under heavy load), then an error with the server's own words."""
        install = _find("mariadb-install-db", "mysql_install_db")
        errors = []
        for _attempt in range(2):
            shutil.rmtree(self.datadir, ignore_errors=True)
            out = subprocess.run(
                [install, "--no-defaults", f"--datadir={self.datadir}", "--user=root",
                 "--auth-root-authentication-method=normal", "--skip-test-db"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if out.returncode == 0:
                return
            errors.append(f"{out.stderr[-1500:]}\n{out.stdout[-1500:]}")
        raise ServiceStartError("mariadb-install-db failed twice:\n" + "\n---\n".join(errors))

    def _launch(self) -> None:
        mariadbd = _find("mariadbd", "/usr/sbin/mariadbd", "mysqld", "/usr/sbin/mysqld")
        args = [
            mariadbd,
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--port={self.port}",
            f"--socket={self.socket_path}",
            f"--bind-address={self.host}",
            "--user=root",
            f"--pid-file={self.basedir}/mysqld.pid",
            f"--log-error={self.log_path}",
            "--log-bin=mysql-bin",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            f"--binlog-row-metadata={self.row_metadata}",
            f"--binlog-checksum={self.checksum}",
            f"--server-id={self.server_id}",
            "--gtid-strict-mode=ON",
            "--log-slave-updates=ON",
            "--skip-name-resolve",
            "--default-time-zone=+00:00",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            "--max-allowed-packet=256M",
            "--innodb-buffer-pool-size=256M",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            "--innodb-log-file-size=256M",
            "--max-connections=500",
            "--expire-logs-days=0",
            *self.extra_args,
        ]
        with open(self.basedir / "stdout.log", "ab") as out:  # type: ignore[operator]
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceStartError(
                    f"mariadbd exited with {self.proc.returncode} on port {self.port}; log tail:\n"
                    f"{_tail(self.log_path)}\n{_tail(self.basedir / 'stdout.log')}"  # type: ignore[operator]
                )
            try:
                pymysql.connect(unix_socket=str(self.socket_path), user="root", connect_timeout=1).close()
                return
            except pymysql.err.MySQLError:
                time.sleep(0.1)
        _stop_process(self.proc)
        raise ServiceStartError(f"mariadbd did not answer within 60 s; log tail:\n{_tail(self.log_path)}")

    def _create_users(self) -> None:
        conn = pymysql.connect(unix_socket=str(self.socket_path), user="root", autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (self.root_user, self.root_password))
                cur.execute("GRANT ALL PRIVILEGES ON *.* TO %s@'%%' WITH GRANT OPTION", (self.root_user,))
                cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (self.repl_user, self.repl_password))
                cur.execute(
                    "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO %s@'%%'", (self.repl_user,)
                )
        finally:
            conn.close()

    def connect(
        self, database: str | None = None, user: str | None = None, **kwargs: Any
    ) -> pymysql.Connection:
        """An autocommit connection over TCP, as the admin user unless ``user`` is the replication user."""
        password = self.repl_password if user == self.repl_user else self.root_password
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=user or self.root_user,
            password=password,
            database=database,
            autocommit=True,
            charset="utf8mb4",
            **kwargs,
        )

    def execute(self, sql: str, args: Any = None, database: str | None = None) -> list[tuple[Any, ...]]:
        """Run one statement as the admin user and return its rows."""
        conn = self.connect(database)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        finally:
            conn.close()

    def log_tail(self, lines: int = 30) -> str:
        return _tail(self.log_path, lines)

    def airflow_uri(self, user: str | None = None, password: str | None = None) -> str:
        """An Airflow ``mysql`` connection URI (the replication user unless told otherwise)."""
        user = user or self.repl_user
        password = self.repl_password if password is None else password
        return f"mysql://{quote(user)}:{quote(password, safe='')}@{self.host}:{self.port}"

    def restart(self) -> None:
        """Stop and start again on the same port and data directory (binlogs and tables kept)."""
        self.stop(keep_data=True)
        self._launch()

    def purge_binlogs_to(self, file: str, attempts: int = 40) -> None:
        """``PURGE BINARY LOGS TO file``, until the oldest binlog left is ``file``.

        A dump thread still reading an older file makes the server skip the purge with only a
        warning, so binlog dump threads are killed first (their clients reconnect or were idle).
        """
        warnings: list[Any] = []
        for _ in range(attempts):
            for (pid,) in self.execute(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'"
            ):
                with contextlib.suppress(pymysql.err.MySQLError):
                    self.execute(f"KILL {int(pid)}")
            conn = self.connect()
            try:
                with conn.cursor() as cur:
                    cur.execute("PURGE BINARY LOGS TO %s", (file,))
                    cur.execute("SHOW WARNINGS")
                    warnings = list(cur.fetchall())
                    cur.execute("SHOW BINARY LOGS")
                    if cur.fetchall()[0][0] == file:
                        return
            finally:
                conn.close()
            time.sleep(0.25)
        raise BinlogCdcError(f"could not purge the binlogs before {file} on port {self.port}: {warnings}")


@dataclass
class ZooKeeperServer(_LocalServer):
    """A throwaway standalone ZooKeeper (Debian's jars) on a free loopback port.

    :param tick_ms: ``tickTime``; session timeouts may go down to two ticks.
    """

    tick_ms: int = 500
    host: str = "127.0.0.1"
    port: int = 0
    basedir: Path | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        assert self.basedir is not None, "server not started"
        return self.basedir / "zookeeper.log"

    def start(self) -> ZooKeeperServer:
        if self.basedir is None:
            self.basedir = Path(tempfile.mkdtemp(prefix="binlog-cdc-zk-"))
            self.port = self.port or free_port()
            (self.basedir / "data").mkdir()
            (self.basedir / "zoo.cfg").write_text(
                f"tickTime={self.tick_ms}\ninitLimit=10\nsyncLimit=5\n"
                f"dataDir={self.basedir / 'data'}\nclientPort={self.port}\n"
                f"clientPortAddress={self.host}\nadmin.enableServer=false\n"
                "4lw.commands.whitelist=ruok,srvr,stat,mntr\nmaxClientCnxns=0\n"
                "autopurge.purgeInterval=0\n"
            )
            _LIVE.append(self)
        java = _find("java")
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [
                    java,
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    "-cp",
                    ZOOKEEPER_CLASSPATH,
                    "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                    str(self.basedir / "zoo.cfg"),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceStartError(
                    f"ZooKeeper exited with {self.proc.returncode} on port {self.port}; "
                    f"log tail:\n{_tail(self.log_path)}"
                )
            if self.four_letter("ruok") == "imok":
                return self
            time.sleep(0.1)
        _stop_process(self.proc)
        raise ServiceStartError(f"ZooKeeper did not answer within 60 s; log tail:\n{_tail(self.log_path)}")

    def airflow_uri(self, chroot: str, timeout: float = 4.0) -> str:
        """An Airflow ``zookeeper`` connection URI on ``chroot`` with session timeout ``timeout``."""
        return f"zookeeper://{self.hosts}{chroot}?timeout={timeout:g}"

    def four_letter(self, word: str) -> str:
        """Send a four-letter command; return the answer, or "" if the server does not answer."""
        try:
            with socket.create_connection((self.host, self.port), timeout=1) as s:
                s.sendall(word.encode())
                chunks = []
                while data := s.recv(4096):
                    chunks.append(data)
                return b"".join(chunks).decode(errors="replace")
        except OSError:
            return ""

    def restart(self) -> None:
        """Stop and start again on the same port and data directory (znodes and sessions kept)."""
        self.stop(keep_data=True)
        self.start()


def _postgres_bin(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return _find(str(Path(POSTGRES_BIN) / name), *(str(p) for p in found[-1:]), name)


def _postgres_os_user() -> str | None:
    """The OS user PostgreSQL's processes run as: ``None`` (this one) unless we are root."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get(POSTGRES_USER_ENV) or "postgres"
    try:
        pwd.getpwnam(name)
    except KeyError:
        raise ServiceStartError(
            f"PostgreSQL does not run as root and there is no OS user {name!r} to run it as: install "
            f"Debian's postgresql package (it creates 'postgres') or set {POSTGRES_USER_ENV}"
        ) from None
    return name


@dataclass
class PostgresServer(_LocalServer):
    """A throwaway PostgreSQL (Debian's ``postgresql`` binaries) on a free loopback port.

    The local superuser (``admin_user``) connects over the Unix socket in the server's directory
    without a password; :attr:`user` (password :attr:`password`) is an ordinary role that owns
    :attr:`database` and the databases :meth:`create_database` makes, and is what JDBC clients use
    over TCP (``scram-sha-256``).

    :param database: the database created at the first start.
    """

    database: str = "iceberg"
    host: str = "127.0.0.1"
    port: int = 0
    admin_user: str = "cdc_admin"
    user: str = "cdc_catalog"
    password: str = field(default_factory=lambda: secrets.token_hex(12), repr=False)
    basedir: Path | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    os_user: str | None = field(default=None, repr=False)

    @property
    def datadir(self) -> Path:
        assert self.basedir is not None, "server not started"
        return self.basedir / "data"

    @property
    def log_path(self) -> Path:
        assert self.basedir is not None, "server not started"
        return self.basedir / "postgres.log"

    def jdbc_url(self, database: str | None = None) -> str:
        """``jdbc:postgresql://127.0.0.1:PORT/DATABASE`` (no credentials in it)."""
        return f"jdbc:postgresql://{self.host}:{self.port}/{database or self.database}"

    def airflow_uri(self, database: str | None = None) -> str:
        """An Airflow ``postgres`` connection URI for :attr:`user` (holds the password: never log it)."""
        return (
            f"postgres://{quote(self.user)}:{quote(self.password, safe='')}@{self.host}:{self.port}/"
            f"{quote(database or self.database)}"
        )

    def start(self) -> PostgresServer:
        """Create the cluster (first time only), start the server, create the role and database."""
        first = self.basedir is None
        if first:
            self.os_user = _postgres_os_user()
            self.basedir = Path(tempfile.mkdtemp(prefix="binlog-cdc-postgres-"))
            if self.os_user is not None:
                os.chown(self.basedir, pwd.getpwnam(self.os_user).pw_uid, -1)
            self.port = self.port or free_port()
            _LIVE.append(self)
            self._initdb()
        self._launch()
        if first:
            self.execute(f"CREATE ROLE {self.user} LOGIN PASSWORD '{self.password}'", echo=False)
            self.create_database(self.database)
        return self

    def _run_as(self) -> dict[str, Any]:
        if self.os_user is None:
            return {}
        return {"user": self.os_user, "group": pwd.getpwnam(self.os_user).pw_gid}

    def _initdb(self) -> None:
        out = subprocess.run(
            [_postgres_bin("initdb"), "-D", str(self.datadir), "-U", self.admin_user, "--encoding=UTF8",
             "--no-locale", "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync"],
            capture_output=True, text=True, check=False, timeout=120, cwd=self.basedir, **self._run_as(),
        )  # fmt: skip
        if out.returncode != 0:
            raise ServiceStartError(
                f"initdb failed ({out.returncode}):\n{out.stderr[-2000:]}\n{out.stdout[-1000:]}"
            )

    def _launch(self) -> None:
        assert self.basedir is not None
        args = [
            _postgres_bin("postgres"),
            "-D", str(self.datadir),
            "-p", str(self.port),
            "-k", str(self.basedir),
            "-c", f"listen_addresses={self.host}",
            "-c", "fsync=off",
            "-c", "synchronous_commit=off",
            "-c", "full_page_writes=off",
            "-c", "max_connections=200",
            "-c", "shared_buffers=32MB",
        ]  # fmt: skip
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if self.os_user is not None:
                os.fchown(log, pwd.getpwnam(self.os_user).pw_uid, -1)
            self.proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.basedir,
                **self._run_as(),
            )  # fmt: skip
        finally:
            os.close(log)
        ready = _postgres_bin("pg_isready")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceStartError(
                    f"postgres exited with {self.proc.returncode} on port {self.port}; log tail:\n"
                    f"{_tail(self.log_path)}"
                )
            probe = subprocess.run(
                [ready, "-q", "-h", str(self.basedir), "-p", str(self.port), "-U", self.admin_user,
                 "-t", "1"],
                capture_output=True, check=False, timeout=10,
            )  # fmt: skip
            if probe.returncode == 0:
                return
            time.sleep(0.1)
        self._stop_postgres()
        raise ServiceStartError(f"postgres did not answer within 60 s; log tail:\n{_tail(self.log_path)}")

    def _stop_postgres(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)  # "fast" shutdown: SIGTERM would wait for every client
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def stop(self, keep_data: bool = False) -> None:
        """Stop the server; remove its directory unless ``keep_data`` (then :meth:`start` restarts it)."""
        self._stop_postgres()
        super().stop(keep_data)

    def execute(self, sql: str, database: str = "postgres", echo: bool = True) -> list[tuple[str, ...]]:
        """Run SQL as the local superuser (``psql``); return the rows as text tuples.

        :param echo: put the statement in an error message (``False`` for one holding a password).
        """
        assert self.basedir is not None, "server not started"
        out = subprocess.run(
            [_postgres_bin("psql"), "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1",
             "-h", str(self.basedir), "-p", str(self.port), "-U", self.admin_user, "-d", database, "-c", sql],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        if out.returncode != 0:
            shown = sql if echo else "(statement not shown)"
            raise BinlogCdcError(f"psql on port {self.port} failed: {shown}: {out.stderr.strip()[-1500:]}")
        return [tuple(line.split("\t")) for line in out.stdout.splitlines() if line]

    def create_database(self, name: str) -> str:
        """Create database ``name`` (letters, digits, underscores) owned by :attr:`user`; return it."""
        if not name.replace("_", "").isalnum():
            raise ValueError(f"database name {name!r}: letters, digits and underscores only")
        self.execute(f'CREATE DATABASE "{name}" OWNER {self.user}')
        return name

    def drop_database(self, name: str) -> None:
        """Drop database ``name`` and end its sessions."""
        if not name.replace("_", "").isalnum():
            raise ValueError(f"database name {name!r}: letters, digits and underscores only")
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def log_tail(self, lines: int = 30) -> str:
        return _tail(self.log_path, lines)

    def restart(self) -> None:
        """Stop and start again on the same port and data directory."""
        self.stop(keep_data=True)
        self._launch()
