"""Bad settings: a ``tables`` target that is no valid Iceberg name, wrong MySQL and ZooKeeper
credentials. Each fails before reading anything, naming the route or the connection and what to fix,
without any secret in the error; no cursor is created or moved; the run with the right setting loads.
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow_harness import lake_verify, make_context, mysql_uri
from bad_input_harness import cursor, names, operator, run_fails

from airflow_provider_binlog.binlog.client import AuthenticationError
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import MetaAuthError
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.errors import ConfigurationError

pytestmark = [pytest.mark.integration]


def _invalid_name(target: str, problem: str, source: str) -> str:
    return (
        f"tables: the target {target!r} of {source!r} is not a valid Iceberg table name ({problem}); "
        "write it as catalog.namespace.table, e.g. 'lake.shop.orders', with any part that holds dots or "
        "backticks in backticks"
    )


BAD_NAMES = [
    ("lake..orders", "invalid table name 'lake..orders': empty or stray backtick in a part"),
    ("lake.shop.`orders", "unbalanced backtick in table name 'lake.shop.`orders'"),
    ("orders", "a table needs a namespace"),
]


@pytest.mark.parametrize(("target", "problem"), BAD_NAMES)
def test_invalid_target_name(target: str, problem: str, spark_warehouse: str) -> None:
    """A literal target fails when the operator is built (the DAG does not parse)."""
    with pytest.raises(ConfigurationError) as failed:
        operator("badname", {"shop.orders": target}, spark_warehouse)
    assert str(failed.value) == _invalid_name(target, problem, "shop.orders")


def test_invalid_templated_target_name(
    mariadb: MariaDbServer, conns: dict[str, str], spark_warehouse: str, zookeeper: ZooKeeperServer,
    zk_chroot: str,
) -> None:  # fmt: skip
    """A target with placeholders is checked when the task starts, before any cursor exists."""
    _, ns = names("badname")
    dest = f"badname-{ns}"
    target = "lake..{table}"
    err = run_fails(operator(dest, {"shop.*": target}, spark_warehouse))
    assert isinstance(err, ConfigurationError), f"{type(err).__name__}: {err}"
    problem = "invalid table name 'lake..table': empty or stray backtick in a part"
    assert str(err) == _invalid_name(target, problem, "shop.*")
    assert cursor(zookeeper, zk_chroot, dest) is None, "a cursor was created"


def test_unknown_placeholder_in_target(conns: dict[str, str], spark_warehouse: str) -> None:
    err = run_fails(operator("badname-ph", {"shop.*": "lake.shop.{tabel}"}, spark_warehouse))
    assert isinstance(err, ConfigurationError)
    assert "target 'lake.shop.{tabel}' for 'shop.*' may only use {schema} and {table}" in str(err)


def _table(mariadb: MariaDbServer) -> tuple[str, dict[str, str], str]:
    db, ns = names("badcred")
    mariadb.execute(f"CREATE DATABASE {db}")
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    return db, {f"{db}.t": f"lake.{ns}.t"}, f"badcred-{ns}"


def test_wrong_mysql_password(
    mariadb: MariaDbServer, conns: dict[str, str], monkeypatch: pytest.MonkeyPatch, spark: Any,
    spark_warehouse: str, zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """A destination with a cursor; new rows; the password is wrong: the error names the user, the
    server and the connection to fix, shows no password, and the cursor stays; right again, it loads."""
    db, tables, dest = _table(mariadb)
    operator(dest, tables, spark_warehouse).execute(make_context())
    before = cursor(zookeeper, zk_chroot, dest)
    assert before is not None
    mariadb.execute(f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')")

    wrong = "wrong-" + names("pw")[0]
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_DEFAULT", mysql_uri(mariadb, password=wrong))
    err = run_fails(operator(dest, tables, spark_warehouse), wrong, mariadb.repl_password)
    assert isinstance(err, AuthenticationError), f"{type(err).__name__}: {err}"
    text = str(err)
    assert text.startswith(
        f"access denied for {mariadb.repl_user}@{mariadb.host}:{mariadb.port} (error 1045)"
    )
    assert text.endswith("; check the user and password of connection 'mysql_default'"), text
    assert cursor(zookeeper, zk_chroot, dest) == before

    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_DEFAULT", mysql_uri(mariadb))
    operator(dest, tables, spark_warehouse).execute(make_context(try_number=2))
    diffs = lake_verify(mariadb, spark, tables)
    assert all(d.equal for d in diffs) and diffs[0].source_rows == 2, [d.describe() for d in diffs]
    after = cursor(zookeeper, zk_chroot, dest)
    assert after is not None and after > before


def test_wrong_zookeeper_password(
    mariadb: MariaDbServer, conns: dict[str, str], monkeypatch: pytest.MonkeyPatch, spark_warehouse: str,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """The destination's nodes belong to digest user ``cdc`` (ACL ``creator``); the same user with a
    wrong password is refused at connect, naming the hosts, the chroot and the connection; the cursor
    (read with the right password) stays."""
    _, tables, dest = _table(mariadb)
    right, wrong = "right-" + names("pw")[0], "wrong-" + names("pw")[0]

    def zk(password: str) -> str:
        return f"zookeeper://cdc:{password}@{zookeeper.hosts}{zk_chroot}?timeout=4&acl=creator"

    monkeypatch.setenv("AIRFLOW_CONN_ZOOKEEPER_DEFAULT", zk(right))
    operator(dest, tables, spark_warehouse).execute(make_context())
    before = cursor(zookeeper, zk_chroot, dest, auth=("cdc", right))
    assert before is not None

    monkeypatch.setenv("AIRFLOW_CONN_ZOOKEEPER_DEFAULT", zk(wrong))
    err = run_fails(operator(dest, tables, spark_warehouse), wrong, right, mariadb.repl_password)
    assert isinstance(err, MetaAuthError), f"{type(err).__name__}: {err}"
    assert str(err) == (
        f"ZooKeeper at {zookeeper.hosts} refused access to {zk_chroot} with the digest credentials of user "
        "'cdc' (connection 'zookeeper_default'): check its login and password"
    )
    assert cursor(zookeeper, zk_chroot, dest, auth=("cdc", right)) == before
    assert isinstance(before, BinlogPosition)
