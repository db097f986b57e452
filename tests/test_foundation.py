"""The foundation: provider discovery, the service harness, positions."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.dev.services import MariaDbServer, ServiceStartError, ZooKeeperServer
from airflow_provider_binlog.errors import ConfigurationError


def test_provider_entry_point_describes_the_installed_distribution() -> None:
    (ep,) = [
        e
        for e in entry_points(group="apache_airflow_provider")
        if e.value.startswith("airflow_provider_binlog")
    ]
    info = ep.load()()
    assert info["package-name"] == "airflow-provider-binlog"
    assert info["versions"]


def test_airflow_provider_manager_discovers_us() -> None:
    from airflow.providers_manager import ProvidersManager

    assert "airflow-provider-binlog" in ProvidersManager().providers


def test_position_order_and_text_form() -> None:
    a = BinlogPosition.parse("mysql-bin.000999:4")
    b = BinlogPosition.parse("mysql-bin.001000:4")
    assert a < b and str(b) == "mysql-bin.001000:4"
    assert BinlogPosition("mysql-bin.000001", 120) < BinlogPosition("mysql-bin.000001", 121)
    with pytest.raises(ConfigurationError, match="FILE:POSITION"):
        BinlogPosition.parse("mysql-bin.000001")


@pytest.mark.integration
def test_mariadb_fixture_is_configured_as_the_issue_asks(mariadb: MariaDbServer) -> None:
    (row,) = mariadb.execute(
        "SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, "
        "@@binlog_checksum, @@server_id"
    )
    assert row == (1, "ROW", "FULL", "FULL", "CRC32", 11)
    grants = " ".join(g for (g,) in mariadb.execute(f"SHOW GRANTS FOR '{mariadb.repl_user}'@'%'"))
    assert "REPLICATION SLAVE" in grants and "SELECT" in grants and "ALL PRIVILEGES" not in grants
    assert mariadb.repl_password not in repr(mariadb) and mariadb.root_password not in repr(mariadb)


@pytest.mark.integration
def test_variants(mariadb_minimal: MariaDbServer, mariadb_nochecksum: MariaDbServer) -> None:
    assert mariadb_minimal.execute("SELECT @@binlog_row_metadata") == [("MINIMAL",)]
    assert mariadb_nochecksum.execute("SELECT @@binlog_checksum") == [("NONE",)]


@pytest.mark.integration
def test_changes_reach_the_binlog(mariadb: MariaDbServer, database: str) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", database=database)
    mariadb.execute("INSERT INTO t VALUES (1, 'a')", database=database)
    (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    types = [r[2] for r in mariadb.execute(f"SHOW BINLOG EVENTS IN '{file}'")]
    assert "Write_rows_v1" in types and "Gtid" in types and pos > 4


@pytest.mark.integration
def test_zookeeper_fixture_and_chroot(zookeeper: ZooKeeperServer, zk_client, zk_chroot: str) -> None:  # type: ignore[no-untyped-def]
    assert zookeeper.four_letter("ruok") == "imok"
    zk_client.create("/x", b"1")
    from kazoo.client import KazooClient

    root = KazooClient(hosts=zookeeper.hosts)
    root.start(timeout=10)
    try:
        assert root.get(f"{zk_chroot}/x")[0] == b"1"
    finally:
        root.stop()


def test_a_service_that_fails_to_start_reports_its_log() -> None:
    bad = MariaDbServer(extra_args=("--no-such-option-for-test",))
    with pytest.raises(ServiceStartError, match="no-such-option-for-test"):
        bad.start()
    bad.stop()
