"""Meta managers: canal-format round trips, compare-and-set, marks, records, chroot, digest auth."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.canal.errors import MetaAuthError, MetaConflictError, MetaError
from airflow_provider_binlog.canal.meta import (
    ClientIdentity,
    FileMetaManager,
    LogPosition,
    MemoryMetaManager,
    MetaManager,
    PositionRange,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "canal"
CURSOR_JSON = (FIXTURES / "cursor.json").read_text().strip()
META_DAT = (FIXTURES / "meta.dat").read_text().strip()

CLIENT = ClientIdentity("shop", 1001, "shop\\..*")


def pos(n: int, gtid: str | None = "0-1-5") -> LogPosition:
    return LogPosition("mysql-bin.000003", n, 1_700_000_000_000, 1, gtid, False, -1, "127.0.0.1", 3306)


@pytest.fixture(params=["memory", "file", pytest.param("zookeeper", marks=pytest.mark.integration)])
def manager(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetaManager]:
    if request.param == "memory":
        yield MemoryMetaManager()
    elif request.param == "file":
        yield FileMetaManager(tmp_path)
    else:
        from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager

        yield ZooKeeperMetaManager(request.getfixturevalue("zk_client"))


def second(manager: MetaManager, request: pytest.FixtureRequest) -> MetaManager:
    """Another manager on the same store (another process, in effect)."""
    if isinstance(manager, MemoryMetaManager):
        return manager
    if isinstance(manager, FileMetaManager):
        return FileMetaManager(manager.directory)
    from kazoo.client import KazooClient

    from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager

    zk = request.getfixturevalue("zookeeper")
    client = KazooClient(hosts=zk.hosts + request.getfixturevalue("zk_chroot"))
    client.start(timeout=15)
    request.addfinalizer(client.stop)
    return ZooKeeperMetaManager(client)


def test_log_position_json_is_canal_byte_for_byte() -> None:
    parsed = LogPosition.from_json(CURSOR_JSON)
    assert parsed == LogPosition(
        "mysql-bin.000023", 43893, 1536312619000, 1, "", False, -1, "10.35.165.15", 3306
    )
    assert parsed.to_json() == CURSOR_JSON
    assert str(parsed.binlog_position) == "mysql-bin.000023:43893"


def test_position_range_json() -> None:
    rng = PositionRange(pos(100), pos(900), pos(800), 42)
    text = rng.to_json()
    assert text.startswith(
        '{"@type":"com.alibaba.otter.canal.protocol.position.PositionRange","ack":{"@type"'
    )
    assert PositionRange.from_json(text) == rng
    assert PositionRange.from_json(PositionRange(pos(1), pos(2)).to_json()).ack is None


def test_cursor_compare_and_set(manager: MetaManager, request: pytest.FixtureRequest) -> None:
    manager.subscribe(CLIENT)
    assert manager.get_cursor(CLIENT) == (None, None)
    v1 = manager.set_cursor(CLIENT, pos(100), None)
    with pytest.raises(MetaConflictError):
        manager.set_cursor(CLIENT, pos(150), None)  # "must not exist" but it does
    other = second(manager, request)
    seen, v_other = other.get_cursor(CLIENT)
    assert seen == pos(100) and v_other == v1
    v2 = manager.set_cursor(CLIENT, pos(200), v1)
    with pytest.raises(MetaConflictError):
        other.set_cursor(CLIENT, pos(300), v_other)  # stale version: lost the race
    assert manager.get_cursor(CLIENT) == (pos(200), v2)
    assert other.get_cursor(CLIENT).value == pos(200)


def test_subscriptions_and_min_cursor(manager: MetaManager) -> None:
    a, b = ClientIdentity("shop", 1001, "a\\..*"), ClientIdentity("shop", 1002, "b\\..*")
    manager.subscribe(a)
    manager.subscribe(b)
    manager.subscribe(a)  # idempotent
    assert manager.subscriptions("shop") == [a, b]
    manager.set_cursor(a, pos(500), None)
    manager.set_cursor(b, pos(300), None)
    assert manager.min_cursor("shop") == pos(300)
    manager.unsubscribe(b)
    assert manager.subscriptions("shop") == [a]
    assert manager.get_cursor(b).value is None


def test_marks(manager: MetaManager) -> None:
    manager.subscribe(CLIENT)
    manager.add_mark(CLIENT, 2, PositionRange(pos(10), pos(20), None, 5))
    manager.add_mark(CLIENT, 1, PositionRange(pos(1), pos(9), pos(8), 2))
    with pytest.raises(MetaConflictError):
        manager.add_mark(CLIENT, 1, PositionRange(pos(1), pos(9)))
    marks = manager.marks(CLIENT)
    assert list(marks) == [1, 2] and marks[1].ack == pos(8)
    manager.remove_mark(CLIENT, 1)
    assert list(manager.marks(CLIENT)) == [2]
    manager.clear_marks(CLIENT)
    assert manager.marks(CLIENT) == {}


def test_marks_removed_together(manager: MetaManager, request: pytest.FixtureRequest) -> None:
    """``remove_marks``: several marks at once; fenced in ZooKeeper, one transaction with the fence's
    check, and one by one when one of them is gone already; a moved fence removes none."""
    from airflow_provider_binlog.canal.errors import FencedError
    from airflow_provider_binlog.canal.meta.base import Fence

    manager.subscribe(CLIENT)
    for n in range(1, 6):
        manager.add_mark(CLIENT, n, PositionRange(pos(10 * n), pos(10 * n + 9)))
    manager.remove_marks(CLIENT, [1, 2])
    assert list(manager.marks(CLIENT)) == [3, 4, 5]
    if not isinstance(manager, MemoryMetaManager | FileMetaManager):
        zk_client = request.getfixturevalue("zk_client")
        epoch = "/otter/canal/destinations/shop/1001/provider/epoch"
        zk_client.ensure_path(epoch)
        version = zk_client.exists(epoch).version
        fence = type("Held", (), {"fence": lambda self: Fence(epoch, version)})()
        manager.attach_fence(CLIENT, fence)  # type: ignore[attr-defined]
        for n in (7, 8, 9):
            manager.add_mark(CLIENT, n, PositionRange(pos(10 * n), pos(10 * n + 9)))
        commit, transactions = manager._commit, []  # type: ignore[attr-defined]
        manager._commit = lambda *args: transactions.append(args[1]) or commit(*args)  # type: ignore[attr-defined]
        manager.remove_marks(CLIENT, [7, 8, 9])
        assert len(transactions) == 1 and list(manager.marks(CLIENT)) == [3, 4, 5]
        manager.remove_mark(CLIENT, 4)  # gone already: the transaction fails, one by one removes the rest
        manager.remove_marks(CLIENT, [3, 4])
        assert list(manager.marks(CLIENT)) == [5]
        manager.add_mark(CLIENT, 6, PositionRange(pos(60), pos(69)))
        zk_client.set(epoch, b"taken over")  # another holder's acquire
        with pytest.raises(FencedError):
            manager.remove_marks(CLIENT, [5, 6])
        assert list(manager.marks(CLIENT)) == [5, 6]


def test_records_and_runs(manager: MetaManager) -> None:
    manager.subscribe(CLIENT)
    manager.record_run(CLIENT, "manual__2026-01-01T00:00:00", start=pos(4), state="running")
    record = manager.record_run(CLIENT, "manual__2026-01-01T00:00:00", end=pos(99), state="done")
    assert record["state"] == "done" and LogPosition.from_canal_dict(record["start"]) == pos(4)
    assert list(manager.runs(CLIENT)) == ["manual__2026-01-01T00:00:00"]
    v = manager.set_json(CLIENT, "snapshot/shop.orders", {"last_pk": [5]}, None)
    with pytest.raises(MetaConflictError):
        manager.set_json(CLIENT, "snapshot/shop.orders", {"last_pk": [6]}, None)
    manager.set_json(CLIENT, "snapshot/shop.orders", {"last_pk": [7]}, v)
    assert manager.get_json(CLIENT, "snapshot/shop.orders").value == {"last_pk": [7]}
    assert manager.list_keys(CLIENT, "snapshot") == ["shop.orders"]
    manager.set_value(CLIENT, "blob", b"\xff\x00", None)
    assert manager.get_value(CLIENT, "blob").value == b"\xff\x00"


def test_file_store_reads_and_writes_canal_meta_dat(tmp_path: Path) -> None:
    (tmp_path / "canal").mkdir()
    shutil.copy(FIXTURES / "meta.dat", tmp_path / "canal" / "meta.dat")
    manager = FileMetaManager(tmp_path)
    client = ClientIdentity("canal", 1001, "canal\\..*")
    assert manager.subscriptions("canal") == [client]
    cursor, version = manager.get_cursor(client)
    assert cursor == LogPosition(
        "mysql-bin.000047", 15143, 1479809428000, 1, None, False, -1, "127.0.0.1", 3306
    )
    manager.set_cursor(client, cursor, version)
    assert (tmp_path / "canal" / "meta.dat").read_text() == META_DAT  # byte for byte as canal writes it
    manager.add_mark(client, 1, PositionRange(cursor, cursor))
    assert (tmp_path / "canal" / "meta.dat").read_text() == META_DAT  # marks live beside it
    assert list(FileMetaManager(tmp_path).marks(client)) == [1]  # and survive a restart
    assert not [p for p in (tmp_path / "canal").iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.integration
def test_zookeeper_reads_and_writes_canal_cursor(zk_client: Any) -> None:
    from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager

    path = "/otter/canal/destinations/example/1001"
    zk_client.create(path + "/cursor", CURSOR_JSON.encode(), makepath=True)  # as canal writes it
    zk_client.create(path + "/filter", b"example\\..*")
    manager = ZooKeeperMetaManager(zk_client)
    client = ClientIdentity("example", 1001, "example\\..*")
    assert manager.subscriptions("example") == [client]
    cursor, version = manager.get_cursor(client)
    assert cursor is not None and str(cursor.binlog_position) == "mysql-bin.000023:43893"
    manager.set_cursor(client, cursor, version)
    data, stat = zk_client.get(path + "/cursor")
    assert data.decode() == CURSOR_JSON and stat.version == 1
    manager.add_mark(client, 7, PositionRange(cursor, cursor, cursor, 3))
    assert zk_client.get_children(path + "/mark") == ["0000000007"]


@pytest.mark.integration
def test_zookeeper_chroot_isolates(zookeeper: Any, zk_client: Any, zk_chroot: str) -> None:
    from kazoo.client import KazooClient

    from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager

    manager = ZooKeeperMetaManager(zk_client)
    manager.subscribe(CLIENT)
    manager.set_cursor(CLIENT, pos(100), None)
    root = KazooClient(hosts=zookeeper.hosts)
    root.start(timeout=15)
    try:
        data, _ = root.get(f"{zk_chroot}/otter/canal/destinations/shop/1001/cursor")
        assert LogPosition.from_json(data) == pos(100)
        assert ZooKeeperMetaManager(root).get_cursor(CLIENT).value is None  # not outside the chroot
    finally:
        root.stop()


@pytest.mark.integration
def test_zookeeper_digest_auth_rejects_the_wrong_password(zookeeper: Any, zk_chroot: str) -> None:
    from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager
    from airflow_provider_binlog.canal.meta.zookeeper_client import ZooKeeperConfig
    from airflow_provider_binlog.canal.meta.zookeeper_client import connect_zookeeper as connect

    good = ZooKeeperConfig(zookeeper.hosts, chroot=zk_chroot, acl="creator", user="cdc", password="s3cret-pw")
    assert "s3cret-pw" not in repr(good)
    client = connect(good)
    try:
        manager = ZooKeeperMetaManager(client)
        manager.subscribe(CLIENT)
        manager.set_cursor(CLIENT, pos(100), None)
        assert manager.get_cursor(CLIENT).value == pos(100)
    finally:
        client.stop()
        client.close()
    for bad in (
        ZooKeeperConfig(zookeeper.hosts, chroot=zk_chroot, acl="creator", user="cdc", password="wrong-pw"),
        ZooKeeperConfig(zookeeper.hosts, chroot=zk_chroot, origin="connection 'zk'"),
    ):
        with pytest.raises(MetaAuthError) as info:  # refused at connect, before any cursor is read
            connect(bad)
        assert "s3cret-pw" not in str(info.value) and "wrong-pw" not in str(info.value)
        assert zk_chroot in str(info.value)
    # a manager whose client got past the connect check (e.g. the node's ACL changed since) still
    # gets MetaAuthError on reads and writes
    from kazoo.client import KazooClient

    intruder = KazooClient(hosts=zookeeper.hosts + zk_chroot, auth_data=[("digest", "cdc:wrong-pw")])
    intruder.start(timeout=15)
    try:
        with pytest.raises(MetaAuthError):
            ZooKeeperMetaManager(intruder).get_cursor(CLIENT)
        with pytest.raises(MetaAuthError):
            ZooKeeperMetaManager(intruder).set_cursor(CLIENT, pos(1), 0)
    finally:
        intruder.stop()
        intruder.close()


@pytest.mark.integration
def test_zookeeper_writes_survive_a_server_restart(zookeeper: Any, zk_chroot: str) -> None:
    """Writes run under client.retry: a restart of ZooKeeper delays them, the CAS still holds."""
    from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager
    from airflow_provider_binlog.canal.meta.zookeeper_client import ZooKeeperConfig
    from airflow_provider_binlog.canal.meta.zookeeper_client import connect_zookeeper as connect

    client = connect(ZooKeeperConfig(zookeeper.hosts, chroot=zk_chroot, timeout=30))
    try:
        manager = ZooKeeperMetaManager(client)
        manager.subscribe(CLIENT)
        v1 = manager.set_cursor(CLIENT, pos(100), None)
        zookeeper.restart()
        v2 = manager.set_cursor(CLIENT, pos(200), v1)
        assert manager.get_cursor(CLIENT) == (pos(200), v2)
        with pytest.raises(MetaConflictError):
            manager.set_cursor(CLIENT, pos(300), v1)
    finally:
        client.stop()
        client.close()


@pytest.mark.integration
def test_zookeeper_write_issued_during_an_outage_lands_once(zookeeper: Any, zk_chroot: str) -> None:
    """ZooKeeper stops for two seconds while a cursor write is issued: the write waits for the
    restart (same port, same data, same session) and lands exactly once."""
    import threading
    import time

    from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager
    from airflow_provider_binlog.canal.meta.zookeeper_client import ZooKeeperConfig
    from airflow_provider_binlog.canal.meta.zookeeper_client import connect_zookeeper as connect

    client = connect(ZooKeeperConfig(zookeeper.hosts, chroot=zk_chroot, timeout=10))
    try:
        manager = ZooKeeperMetaManager(client)
        assert manager.retry_for == 20
        manager.subscribe(CLIENT)
        v1 = manager.set_cursor(CLIENT, pos(100), None)
        session = client.client_id
        result: list[Any] = []
        zookeeper.stop(keep_data=True)
        try:
            writer = threading.Thread(target=lambda: result.append(manager.set_cursor(CLIENT, pos(200), v1)))
            writer.start()
            time.sleep(2.0)
            assert not result
        finally:
            zookeeper.start()
        writer.join(30)
        assert result == [v1 + 1] and client.client_id == session
        assert manager.get_cursor(CLIENT) == (pos(200), v1 + 1)
    finally:
        client.stop()
        client.close()


@pytest.mark.integration
def test_zookeeper_calls_give_up_after_retry_for(zookeeper: Any, zk_chroot: str) -> None:
    import time

    from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager
    from airflow_provider_binlog.canal.meta.zookeeper_client import ZooKeeperConfig
    from airflow_provider_binlog.canal.meta.zookeeper_client import connect_zookeeper as connect

    client = connect(ZooKeeperConfig(zookeeper.hosts, chroot=zk_chroot, timeout=10))
    try:
        manager = ZooKeeperMetaManager(client, retry_for=1.0)
        manager.subscribe(CLIENT)
        zookeeper.stop(keep_data=True)
        try:
            t0 = time.monotonic()
            with pytest.raises(MetaError, match="ZooKeeper"):
                manager.get_cursor(CLIENT)
            assert time.monotonic() - t0 < 5
        finally:
            zookeeper.start()
        assert ZooKeeperMetaManager(client).get_cursor(CLIENT) == (None, None)  # waits for the reconnect
    finally:
        client.stop()
        client.close()
