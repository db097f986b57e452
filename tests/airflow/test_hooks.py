"""BinlogHook and ZooKeeperHook against the real services: test_connection() results, clear
messages for wrong passwords, unreachable ZooKeeper and missing privileges, no secret anywhere."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_harness import mysql_uri

from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer, free_port
from airflow_provider_binlog.hooks.binlog import BinlogHook
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
    assert f"source {mariadb.host}:{mariadb.port} ready, head mysql-bin." in message
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
    assert hook.check_source() == [f"user {user!r} lacks REPLICATION SLAVE"]
    ok, message = hook.test_connection()
    assert not ok and message == f"user {user!r} lacks REPLICATION SLAVE", message
    _no_secret(message, password)


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
