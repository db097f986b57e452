"""HA: one live consumer per destination client through the ephemeral running node; the epoch
that fences a stale holder's cursor and mark writes; short ZooKeeper outages."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_binlog.canal.errors import FencedError, RunningHeldError, SessionLostError
from airflow_provider_binlog.canal.ha import RunningNode
from airflow_provider_binlog.canal.meta import ClientIdentity, LogPosition, PositionRange

pytestmark = pytest.mark.integration

CLIENT = ClientIdentity("shop", 1001)


@pytest.fixture
def clients(zookeeper: Any, zk_chroot: str) -> Iterator[Any]:
    from kazoo.client import KazooClient

    made: list[Any] = []

    def make(timeout: float = 4) -> Any:
        root = KazooClient(hosts=zookeeper.hosts)
        root.start(timeout=15)
        root.ensure_path(zk_chroot)
        root.stop()
        client = KazooClient(hosts=zookeeper.hosts + zk_chroot, timeout=timeout)
        client.start(timeout=15)
        made.append(client)
        return client

    yield make
    for c in made:
        c.stop()
        c.close()


def kill_session(zookeeper: Any, zk_chroot: str, victim: Any) -> None:
    """Expire ``victim``'s session from outside: connect with its session id and close it."""
    from kazoo.client import KazooClient

    session_id, password = victim.client_id
    killer = KazooClient(hosts=zookeeper.hosts + zk_chroot, client_id=(session_id, password))
    killer.start(timeout=15)
    killer.stop()
    killer.close()


def test_one_wins_the_other_times_out_naming_the_holder(clients: Any) -> None:
    a = RunningNode(clients(), CLIENT, label="dag_a/load/1")
    b = RunningNode(clients(), CLIENT, label="dag_b/load/1")
    a.acquire(timeout=0)
    a.check()
    data, _ = a.client.get(a.path)
    payload = json.loads(data)
    assert payload["active"] is True and payload["clientId"] == 1001 and payload["label"] == "dag_a/load/1"
    t0 = time.monotonic()
    with pytest.raises(RunningHeldError) as info:
        b.acquire(timeout=1.0)
    assert time.monotonic() - t0 >= 0.9
    assert "dag_a/load/1" in str(info.value) and f"pid {a.pid}" in str(info.value)
    assert info.value.holder["label"] == "dag_a/load/1"
    with pytest.raises(SessionLostError):
        b.check()
    a.acquire(timeout=0)  # re-acquiring one's own node is fine
    a.release()
    b.acquire(timeout=5)
    b.check()


def test_killing_the_winners_session_lets_the_other_proceed(
    clients: Any, zookeeper: Any, zk_chroot: str
) -> None:
    a = RunningNode(clients(), CLIENT, label="winner")
    b = RunningNode(clients(), CLIENT, label="waiter")
    a.acquire()
    result: list[BaseException | None] = []

    def wait_for_it() -> None:
        try:
            b.acquire(timeout=30)
            result.append(None)
        except BaseException as exc:
            result.append(exc)

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    time.sleep(0.3)
    assert not result  # still waiting
    kill_session(zookeeper, zk_chroot, a.client)
    waiter.join(30)
    assert result == [None]
    b.check()
    with pytest.raises(SessionLostError):
        a.check()  # the old winner may not ack any more: suspended at once...
    deadline = time.monotonic() + 20
    while not a._lost and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(SessionLostError, match="expired"):
        a.check()  # ...and lost once its reconnect learns the session expired


def test_suspended_connection_blocks_ack_until_reconnected(clients: Any, zookeeper: Any) -> None:
    from kazoo.protocol.states import KazooState

    a = RunningNode(clients(), CLIENT, label="x", reconnect_wait=0.5)
    a.acquire()
    a._listener(KazooState.SUSPENDED)  # what kazoo calls when the connection drops
    t0 = time.monotonic()
    with pytest.raises(SessionLostError, match="suspended"):
        a.check()  # waited for the connection, in vain
    assert time.monotonic() - t0 >= 0.45
    a._listener(KazooState.CONNECTED)
    a.check()


def test_check_waits_for_a_reconnect_within_the_session(clients: Any) -> None:
    from kazoo.protocol.states import KazooState

    a = RunningNode(clients(), CLIENT, label="x", reconnect_wait=10)
    a.acquire()
    a._listener(KazooState.SUSPENDED)
    timer = threading.Timer(0.5, a._listener, (KazooState.CONNECTED,))  # the same session is back
    timer.start()
    t0 = time.monotonic()
    a.check()
    assert 0.4 <= time.monotonic() - t0 < 5
    a._listener(KazooState.SUSPENDED)
    threading.Timer(0.3, a._listener, (KazooState.LOST,)).start()
    with pytest.raises(SessionLostError, match="expired"):
        a.check()  # the reconnect learnt that the session expired: no waiting out the rest


# --------------------------------------------------------------------------- fencing


def pos(n: int) -> LogPosition:
    return LogPosition("mysql-bin.000003", n, 1_700_000_000_000, 1, None, False, -1, "127.0.0.1", 3306)


def fenced_meta(client: Any, node: RunningNode) -> Any:
    from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager

    meta = ZooKeeperMetaManager(client)
    meta.attach_fence(CLIENT, node)
    return meta


def test_every_acquire_bumps_the_epoch(clients: Any) -> None:
    a = RunningNode(clients(), CLIENT, label="a")
    b = RunningNode(clients(), CLIENT, label="b")
    assert a.fence() is None  # never acquired: nothing to fence with
    a.acquire()
    first = a.fence()
    assert first is not None and first.path == "/otter/canal/destinations/shop/1001/provider/epoch"
    data, stat = a.client.get(first.path)
    assert stat.version == first.version and first.session_id == a.client.client_id[0]
    assert json.loads(data)["label"] == "a" and json.loads(data)["session"] == f"0x{first.session_id:x}"
    a.acquire()  # held already: no new epoch
    assert a.fence() == first and a.client.get(first.path)[1].version == first.version
    a.release()
    b.acquire()
    second = b.fence()
    assert second is not None and second.version == first.version + 1
    assert b.client.get(second.path)[1].version == second.version
    assert a.fence() == first  # the old holder keeps its (now stale) token


def test_holders_write_the_cursor_and_marks_in_transactions(clients: Any) -> None:
    node = RunningNode(clients(), CLIENT, label="a")
    node.acquire()
    meta = fenced_meta(node.client, node)
    meta.subscribe(CLIENT)
    v1 = meta.set_cursor(CLIENT, pos(100), None)
    v2 = meta.set_cursor(CLIENT, pos(200), v1)
    assert meta.get_cursor(CLIENT) == (pos(200), v2) and v2 == v1 + 1
    meta.add_mark(CLIENT, 7, PositionRange(pos(100), pos(200)))
    assert list(meta.marks(CLIENT)) == [7]
    meta.remove_mark(CLIENT, 7)
    meta.remove_mark(CLIENT, 7)  # missing is fine
    assert meta.marks(CLIENT) == {}
    meta.delete_cursor(CLIENT, v2)
    assert meta.get_cursor(CLIENT) == (None, None)


def test_a_stale_holder_on_the_same_session_is_fenced(clients: Any) -> None:
    """The epoch check itself: the old holder's session is still alive, its token is stale."""
    client = clients()
    a = RunningNode(client, CLIENT, label="a")
    b = RunningNode(client, CLIENT, label="b")  # another holder on the same session
    a.acquire()
    meta = fenced_meta(client, a)
    meta.subscribe(CLIENT)
    v1 = meta.set_cursor(CLIENT, pos(100), None)
    meta.add_mark(CLIENT, 1, PositionRange(pos(100), pos(150)))
    a.release()
    b.acquire()
    with pytest.raises(FencedError, match="another consumer took over") as info:
        meta.set_cursor(CLIENT, pos(200), v1)
    assert info.value.destination == "shop" and "stored cursor" in str(info.value)
    with pytest.raises(FencedError):
        meta.add_mark(CLIENT, 2, PositionRange(pos(150), pos(200)))
    with pytest.raises(FencedError):
        meta.remove_mark(CLIENT, 1)
    assert meta.get_cursor(CLIENT) == (pos(100), v1)  # nothing moved
    assert list(meta.marks(CLIENT)) == [1]
    assert fenced_meta(client, b).set_cursor(CLIENT, pos(200), v1) == v1 + 1  # the new holder writes


def test_a_holder_whose_session_expired_is_fenced_after_a_takeover(
    clients: Any, zookeeper: Any, zk_chroot: str
) -> None:
    a = RunningNode(clients(), CLIENT, label="a")
    b = RunningNode(clients(), CLIENT, label="b")
    a.acquire()
    meta_a = fenced_meta(a.client, a)
    meta_a.subscribe(CLIENT)
    v1 = meta_a.set_cursor(CLIENT, pos(100), None)
    old_session = a.client.client_id[0]
    kill_session(zookeeper, zk_chroot, a.client)
    b.acquire(timeout=30)
    assert b.fence() is not None and b.fence().version == a.fence().version + 1  # type: ignore[union-attr]
    deadline = time.monotonic() + 20
    while (not a.client.connected or a.client.client_id[0] == old_session) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert a.client.client_id[0] != old_session  # kazoo went on with a session of its own
    with pytest.raises(FencedError, match="another consumer took over"):
        meta_a.set_cursor(CLIENT, pos(200), v1)  # an ack that passed its check before the expiry
    with pytest.raises(FencedError):
        meta_a.add_mark(CLIENT, 3, PositionRange(pos(100), pos(200)))
    meta_b = fenced_meta(b.client, b)
    assert meta_b.get_cursor(CLIENT) == (pos(100), v1)  # unchanged
    assert meta_b.set_cursor(CLIENT, pos(300), v1) == v1 + 1


def test_a_lost_reply_inside_a_transaction_is_recognised(
    clients: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write lands, its reply is lost (ConnectionLoss), the retry finds its own write."""
    from kazoo.exceptions import ConnectionLoss

    node = RunningNode(clients(), CLIENT, label="a")
    node.acquire()
    meta = fenced_meta(node.client, node)
    meta.subscribe(CLIENT)
    v1 = meta.set_cursor(CLIENT, pos(100), None)
    real_transaction = node.client.transaction
    lost: list[str] = []

    class LostReply:
        def __init__(self, result: Any) -> None:
            self.result = result

        def get(self, timeout: float | None = None) -> Any:
            self.result.get(timeout=timeout)  # applied...
            raise ConnectionLoss()  # ...but the answer never came

    def lossy_transaction() -> Any:
        txn = real_transaction()
        commit = txn.commit_async

        def commit_async() -> Any:
            result = commit()
            if lost and lost[-1] == "armed":
                lost[-1] = "lost"
                return LostReply(result)
            return result

        txn.commit_async = commit_async
        return txn

    monkeypatch.setattr(node.client, "transaction", lossy_transaction)
    lost.append("armed")
    v2 = meta.set_cursor(CLIENT, pos(200), v1)
    assert lost == ["lost"] and v2 == v1 + 1 and meta.get_cursor(CLIENT) == (pos(200), v2)
    lost.append("armed")
    meta.add_mark(CLIENT, 5, PositionRange(pos(100), pos(200)))
    assert lost == ["lost", "lost"] and list(meta.marks(CLIENT)) == [5]
    lost.append("armed")
    meta.remove_mark(CLIENT, 5)
    assert lost == ["lost", "lost", "lost"] and meta.marks(CLIENT) == {}


# --------------------------------------------------------------------------- ZooKeeper outage


def test_an_ack_during_a_short_zookeeper_outage_completes_once(clients: Any, zookeeper: Any) -> None:
    """ZooKeeper is down for about two seconds (less than the session timeout) while a holder
    checks its node and writes the cursor: both wait for the reconnect, and the write lands once."""
    node = RunningNode(clients(timeout=10), CLIENT, label="a")
    node.acquire()
    meta = fenced_meta(node.client, node)
    meta.subscribe(CLIENT)
    v1 = meta.set_cursor(CLIENT, pos(100), None)
    port = zookeeper.port
    zookeeper.stop(keep_data=True)
    try:
        deadline = time.monotonic() + 10
        while node.held and time.monotonic() < deadline:
            time.sleep(0.02)  # until kazoo noticed
        assert not node.held
        result: list[Any] = []

        def ack() -> None:
            try:
                node.check()
                result.append(meta.set_cursor(CLIENT, pos(200), v1))
            except BaseException as exc:
                result.append(exc)

        acker = threading.Thread(target=ack)
        acker.start()
        time.sleep(2.0)
        assert not result  # still waiting for ZooKeeper
    finally:
        zookeeper.start()
    acker.join(30)
    assert zookeeper.port == port
    assert result == [v1 + 1]
    assert meta.get_cursor(CLIENT) == (pos(200), v1 + 1)  # exactly once: one version on
    node.check()
