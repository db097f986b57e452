"""BinlogHook, MySqlSourceHook and ZooKeeperHook against the real services: test_connection()
results, clear messages for wrong passwords, unreachable ZooKeeper, missing privileges and binlog
settings (each with its fix, all in one message), no secret anywhere."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from airflow.sdk import Connection
from airflow_harness import mysql_uri

from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer, free_port
from airflow_provider_binlog.hooks.binlog import BinlogHook
from airflow_provider_binlog.hooks.mysql import MySqlSourceHook, replication_config, source_problems
from airflow_provider_binlog.hooks.zookeeper import ZooKeeperHook

pytestmark = pytest.mark.integration


@pytest.fixture
def limited_user(mariadb: MariaDbServer) -> Iterator[tuple[str, str]]:
    """A user with SELECT and BINLOG MONITOR but without REPLICATION SLAVE."""
    user, password = "cdc_limited", "limited-" + uuid.uuid4().hex
    mariadb.execute(f"DROP USER IF EXISTS {user}@'%'")
    mariadb.execute(f"CREATE USER {user}@'%%' IDENTIFIED BY %s", (password,))
    mariadb.execute(f"GRANT SELECT, BINLOG MONITOR ON *.* TO {user}@'%'")
    yield user, password
    mariadb.execute(f"DROP USER IF EXISTS {user}@'%'")


def _no_secret(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text, text


def test_test_connection_ok(
    conns: dict[str, str], mariadb: MariaDbServer, zookeeper: ZooKeeperServer
) -> None:
    ok, message = BinlogHook().test_connection()
    assert ok, message
    where = f"source {mariadb.host}:{mariadb.port}"  # no connection id: the UI tests under a random one
    assert f"{where} ready for binlog CDC, head mysql-bin." in message, message
    assert f"connected to ZooKeeper {zookeeper.hosts}" in message
    _no_secret(message, mariadb.repl_password)
    ok, message = ZooKeeperHook().test_connection()
    assert ok and zookeeper.hosts in message, message
    ok, message = BinlogHook(zookeeper_conn_id=None).test_connection()
    assert ok and "ZooKeeper" not in message, message


def test_test_connection_wrong_password(
    conns: dict[str, str], monkeypatch: pytest.MonkeyPatch, mariadb: MariaDbServer
) -> None:
    wrong = "wrong-" + uuid.uuid4().hex
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_DEFAULT", mysql_uri(mariadb, password=wrong))
    hook = BinlogHook()
    ok, message = hook.test_connection()
    assert not ok
    assert "Access denied" in message and mariadb.repl_user in message, message
    _no_secret(message + repr(hook) + repr(hook.replication_config), wrong)


def test_test_connection_unreachable_zookeeper(
    conns: dict[str, str], monkeypatch: pytest.MonkeyPatch, mariadb: MariaDbServer
) -> None:
    port = free_port()
    monkeypatch.setenv(
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT", f"zookeeper://cdc:zk-pass-9@127.0.0.1:{port}/c?timeout=1"
    )
    ok, message = BinlogHook().test_connection()
    assert not ok
    assert f"cannot reach ZooKeeper at 127.0.0.1:{port}" in message, message
    zk = ZooKeeperHook()
    ok, message = zk.test_connection()
    assert not ok and "cannot reach ZooKeeper" in message
    settings = zk.settings()
    assert settings["digest_user"] == "cdc" and settings["acl"] == "creator"
    _no_secret(message + repr(zk) + repr(settings), "zk-pass-9")


def test_test_connection_missing_privilege(
    conns: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    mariadb: MariaDbServer,
    limited_user: tuple[str, str],
) -> None:
    user, password = limited_user
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_DEFAULT", mysql_uri(mariadb, user, password))
    hook = BinlogHook()
    problem = (
        f"user {user!r} lacks REPLICATION SLAVE (MariaDB 10.5+ shows REPLICATION CLIENT as BINLOG "
        f"MONITOR): GRANT REPLICATION SLAVE ON *.* TO '{user}'@'%'"
    )
    assert hook.check_source() == [problem]
    ok, message = hook.test_connection()
    where = f"source {mariadb.host}:{mariadb.port}"  # no connection id: the UI tests under a random one
    assert not ok and message == f"{where} is not ready for binlog CDC: {problem}", message
    _no_secret(message, password)


@pytest.fixture
def bare_user(mariadb: MariaDbServer) -> Iterator[tuple[str, str]]:
    """A user with USAGE only."""
    user, password = "cdc_bare", "bare-" + uuid.uuid4().hex
    mariadb.execute(f"DROP USER IF EXISTS {user}@'%'")
    mariadb.execute(f"CREATE USER {user}@'%%' IDENTIFIED BY %s", (password,))
    yield user, password
    mariadb.execute(f"DROP USER IF EXISTS {user}@'%'")


def test_test_connection_names_every_binlog_problem(
    monkeypatch: pytest.MonkeyPatch, mariadb: MariaDbServer, bare_user: tuple[str, str]
) -> None:
    """binlog_format, binlog_row_image, the replica id and the privileges, wrong at once: one
    message says each and its fix; put right, the same connection passes."""
    user, password = bare_user
    uri = mysql_uri(mariadb, user, password) + f"?server_id={mariadb.server_id}"
    monkeypatch.setenv("AIRFLOW_CONN_SRC_WRONG", uri)
    (fmt, image), *_ = mariadb.execute("SELECT @@GLOBAL.binlog_format, @@GLOBAL.binlog_row_image")
    mariadb.execute("SET GLOBAL binlog_format = 'MIXED'")
    mariadb.execute("SET GLOBAL binlog_row_image = 'MINIMAL'")
    try:
        ok, message = MySqlSourceHook("src_wrong").test_connection()
    finally:
        mariadb.execute(f"SET GLOBAL binlog_format = '{fmt}'")
        mariadb.execute(f"SET GLOBAL binlog_row_image = '{image}'")
    assert not ok
    expected = [
        f"source {mariadb.host}:{mariadb.port} is not ready for binlog CDC: ",
        "binlog_format is MIXED, needs ROW: SET GLOBAL binlog_format = 'ROW'",
        "binlog_row_image is MINIMAL, needs FULL: SET GLOBAL binlog_row_image = 'FULL'",
        f"the replica server_id {mariadb.server_id} is the source's own server_id",
        f"user {user!r} lacks REPLICATION SLAVE and REPLICATION CLIENT",
        f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'%'",
        f"user {user!r} lacks SELECT",
    ]
    for part in expected:
        assert part in message, (part, message)
    _no_secret(message, password)

    mariadb.execute(f"GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO {user}@'%'")
    monkeypatch.setenv("AIRFLOW_CONN_SRC_RIGHT", mysql_uri(mariadb, user, password) + "?server_id=4242")
    ok, message = MySqlSourceHook("src_right").test_connection()
    assert ok and "ready for binlog CDC" in message, message


def test_official_provider_connection_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection as the official MySQL provider's form writes it (``ssl`` as JSON text, its own
    extras, a schema) is read as well; empty form fields count as absent."""
    extra = {
        "ssl": json.dumps({"ca": "/etc/ca.pem"}), "charset": "utf8", "cursor": "SSCursor",
        "local_infile": False, "server_id": "", "heartbeat_period": None,
    }  # fmt: skip
    conn = Connection(
        conn_id="official", conn_type="mysql", host="db", port=3307, login="cdc", password="pw-77",
        schema="shop", extra=json.dumps(extra),
    )  # fmt: skip
    config = replication_config(conn)
    assert config.ssl == {"ca": "/etc/ca.pem"} and (config.host, config.port) == ("db", 3307)
    assert config.heartbeat_period == 5.0 and config.origin == "connection 'official'"
    assert config.server_id == replication_config(conn, server_id=config.server_id).server_id
    conn.extra = json.dumps({"ssl_ca": "/ca.pem", "ssl_key": "", "server_id": "77"})
    config = replication_config(conn)
    assert config.ssl == {"ca": "/ca.pem"} and config.server_id == 77
    _no_secret(repr(config), "pw-77")


ALL = "GRANT ALL PRIVILEGES ON *.* TO `cdc`@`%`"


class _Cursor:
    """Answers the check's two queries (a unit test of the message logic)."""

    def __init__(self, variables: tuple[Any, ...], grants: list[str]) -> None:
        self.variables, self.grants, self.sql = variables, grants, ""

    def execute(self, sql: str) -> None:
        self.sql = sql

    def fetchone(self) -> tuple[Any, ...]:
        return self.variables

    def fetchall(self) -> list[tuple[str]]:
        return [(g,) for g in self.grants]


@pytest.mark.parametrize(
    ("variables", "grants", "expected"),
    [
        ((0, "ROW", "FULL", 1, "cdc@%"), [ALL], ["binary logging is off: start the server with log_bin"]),
        ((1, "ROW", "FULL", 0, "cdc@%"), [ALL], ["server_id is 0"]),
        # ALL PRIVILEGES on one schema is not global; REPLICATION SLAVE ADMIN is not REPLICATION SLAVE
        (
            (1, "ROW", "FULL", 1, "cdc@10.0.0.%"),
            ["GRANT REPLICATION SLAVE ADMIN, BINLOG MONITOR ON *.* TO `cdc`@`10.0.0.%`",
             "GRANT ALL PRIVILEGES ON `shop`.* TO `cdc`@`10.0.0.%`"],
            ["lacks REPLICATION SLAVE (MariaDB 10.5+ shows REPLICATION CLIENT as BINLOG MONITOR): "
             "GRANT REPLICATION SLAVE ON *.* TO 'cdc'@'10.0.0.%'"],
        ),
        (  # privileges may come through a role: said, not judged
            (1, "ROW", "FULL", 1, "cdc@%"),
            ["GRANT USAGE ON *.* TO `cdc`@`%`", "GRANT `cdc_role` TO `cdc`@`%`"],
            ["lacks REPLICATION SLAVE and REPLICATION CLIENT", "lacks SELECT"],
        ),
        (
            (1, "ROW", "FULL", 1, "cdc@%"),
            ["GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`",
             "GRANT SELECT (`id`, `name`) ON `shop`.`orders` TO `cdc`@`%`"],
            [],
        ),
    ],
)  # fmt: skip
def test_source_problems_messages(variables: tuple[Any, ...], grants: list[str], expected: list[str]) -> None:
    problems = source_problems(_Cursor(variables, grants), None)
    assert len(problems) == len(expected), problems
    for problem, part in zip(problems, expected, strict=True):
        assert part in problem, (part, problem)
        roles = any(" TO " in g and " ON " not in g for g in grants)
        assert ("privileges of roles are not checked" in problem) == roles, problem


def test_reprs_hold_no_secret(
    conns: dict[str, str], mariadb: MariaDbServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_ZOOKEEPER_DIGEST", "zookeeper://cdc:zk-digest-secret@127.0.0.1:1/x")
    hook = BinlogHook(zookeeper_conn_id="zookeeper_digest")
    texts: list[Any] = [hook, hook.replication_config, ZooKeeperHook("zookeeper_digest"), hook.get_conn()]
    texts.append(ZooKeeperHook("zookeeper_digest").settings())
    for obj in texts:
        _no_secret(repr(obj) + str(obj), mariadb.repl_password, "zk-digest-secret")
    assert "mysql_default" in repr(hook) and "zookeeper_digest" in repr(hook)
