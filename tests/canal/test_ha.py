"""HA: one live consumer per destination client through the ephemeral running node."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_binlog.canal.errors import RunningHeldError, SessionLostError
from airflow_provider_binlog.canal.ha import RunningNode
from airflow_provider_binlog.canal.meta import ClientIdentity

pytestmark = pytest.mark.integration

CLIENT = ClientIdentity("shop", 1001)


@pytest.fixture
def clients(zookeeper: Any, zk_chroot: str) -> Iterator[Any]:
    from kazoo.client import KazooClient

    made: list[Any] = []

    def make() -> Any:
        root = KazooClient(hosts=zookeeper.hosts)
        root.start(timeout=15)
        root.ensure_path(zk_chroot)
        root.stop()
        client = KazooClient(hosts=zookeeper.hosts + zk_chroot, timeout=4)
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

    a = RunningNode(clients(), CLIENT, label="x")
    a.acquire()
    a._listener(KazooState.SUSPENDED)  # what kazoo calls when the connection drops
    with pytest.raises(SessionLostError, match="suspended"):
        a.check()
    a._listener(KazooState.CONNECTED)
    a.check()
