"""BinlogWatchTrigger (the asset watcher's event trigger) against the real MariaDB and ZooKeeper.

Each phase runs a fresh trigger for two polls (counted, not timed), as a triggerer restart would:
a range is reported once and never again (also when the trigger is killed before Airflow stored its
event), nothing is reported while a run holds the destination,
the changes a load already read (the cursor is past them) are not reported, and the operator's routing and
``exclude`` decide which tables count.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from airflow.triggers.base import BaseEventTrigger, TriggerEvent
from airflow_harness import Shop, meta_manager
from watch_stream import STORED, PollCount, run_stream

from airflow_provider_binlog import faults
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.ha import RunningNode
from airflow_provider_binlog.canal.meta.model import ClientIdentity, LogPosition
from airflow_provider_binlog.canal.watch import Watcher
from airflow_provider_binlog.dev.services import ZooKeeperServer
from airflow_provider_binlog.faults import ENV, KILL_MARK, InjectedFault
from airflow_provider_binlog.triggers.watch import BinlogWatchTrigger

pytestmark = pytest.mark.integration

STREAM_CHILD = Path(__file__).with_name("watch_stream.py")
TABLES = {"shop.orders": "lake.shop.orders", "shop.customers": "lake.shop.customers"}


def _orders(shop: Shop, ids: range) -> None:
    """One committed transaction per order."""
    for oid in ids:
        shop.conn.begin()
        with shop.conn.cursor() as cur:
            cur.execute(
                "INSERT INTO shop.orders VALUES (%s, 1, 'SKU-00001', 1, 9.99, 'new', NULL, "
                "'2026-01-01 00:00:00', NULL)",
                (oid,),
            )
        shop.conn.commit()


def _customer(shop: Shop, cid: int) -> None:
    shop.conn.begin()
    with shop.conn.cursor() as cur:
        cur.execute("INSERT INTO shop.customers VALUES (%s,'a',NULL,'free',NULL,NULL,NULL,1)", (cid,))
    shop.conn.commit()


class _Polls:
    """Counts the watcher's finished polls (``Watcher.poll`` wrapped), so a test waits for polls,
    not for seconds."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.done = 0
        original = Watcher.poll

        def counted(watcher: Watcher) -> Any:
            try:
                return original(watcher)
            finally:
                self.done += 1

        monkeypatch.setattr(Watcher, "poll", counted)

    def run(self, trigger: BinlogWatchTrigger, polls: int = 2, timeout: float = 120) -> list[dict[str, Any]]:
        """The payloads one trigger run yields in its first ``polls`` polls (then it is cancelled,
        as at a triggerer stop). The loop is sequential: once poll ``n`` finished, what poll
        ``n - 1`` found was yielded."""
        got: list[TriggerEvent] = []
        target = self.done + polls

        async def consume() -> None:
            async for event in trigger.run():
                got.append(event)

        async def main() -> None:
            task = asyncio.create_task(consume())
            deadline = time.monotonic() + timeout
            while self.done < target and not task.done() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            assert self.done >= target, f"{self.done} poll(s) in {timeout:g} s, {target} awaited"

        asyncio.run(main())
        return [e.payload for e in got]


def test_watch_trigger_serialize_round_trips_and_is_an_event_trigger() -> None:
    kwargs: dict[str, Any] = {
        "destination": "shop",
        "tables": TABLES,
        "exclude": ["shop.tmp_*"],
        "shadow_tables": True,
        "name": "orders_changes",
        "start_from": "mysql-bin.000002:4",
        "mysql_conn_id": "src",
        "zookeeper_conn_id": "zk",
        "meta_dir": None,
        "client_id": 1002,
        "server_id": 4242,
        "poll_interval": 5.0,
    }
    assert set(kwargs) == set(inspect.signature(BinlogWatchTrigger.__init__).parameters) - {"self"}
    trigger = BinlogWatchTrigger(**kwargs)
    assert isinstance(trigger, BaseEventTrigger)
    classpath, serialized = trigger.serialize()
    assert classpath == "airflow_provider_binlog.triggers.watch.BinlogWatchTrigger"
    assert serialized == kwargs
    assert BinlogWatchTrigger(**serialized).serialize() == (classpath, kwargs)
    with pytest.raises(ValueError, match="poll_interval must be at least 1 s"):
        BinlogWatchTrigger(destination="shop", poll_interval=0.1)
    with pytest.raises(Exception, match="invalid meta key 'watch/a b'"):
        BinlogWatchTrigger(destination="shop", name="a b")


def test_watch_trigger_reports_each_range_once_holds_during_a_run_and_filters(
    shop: Shop,
    conns: dict[str, str],
    zookeeper: ZooKeeperServer,
    zk_chroot: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    polls = _Polls(monkeypatch)
    destination = f"watch_{uuid.uuid4().hex[:8]}"
    start = shop.head()
    kwargs: dict[str, Any] = {
        "destination": destination, "tables": TABLES, "exclude": "shop.customers",
        "name": "lake", "start_from": start, "poll_interval": 1.0,
    }  # fmt: skip
    _orders(shop, range(1, 4))
    _customer(shop, 1)  # excluded: never counts
    first = polls.run(BinlogWatchTrigger(**kwargs))
    assert len(first) == 1, first  # three commits before the first poll: one range
    event = first[0]
    assert event["counts"] == {"shop.orders": 3} and event["tables"] == ["shop.orders"], event
    assert event["transactions"] == 3 and event["changes"] == 3
    assert event["after"] == start and event["destination"] == destination and event["watcher"] == "lake"
    assert (
        BinlogPosition.parse(start) < BinlogPosition.parse(event["from"]) < BinlogPosition.parse(event["to"])
    )

    # a restart (a new run of the same trigger): the watermark says it was reported
    assert polls.run(BinlogWatchTrigger(**kwargs)) == []
    _customer(shop, 2)
    assert polls.run(BinlogWatchTrigger(**kwargs)) == []  # only excluded changes

    meta = meta_manager(zookeeper, zk_chroot)
    identity = ClientIdentity(destination, 1001)
    try:
        # a load runs: it holds the destination; a burst meanwhile is not reported ...
        running = RunningNode(meta.client, identity, label="load")
        running.acquire()
        _orders(shop, range(10, 20))
        assert polls.run(BinlogWatchTrigger(**kwargs)) == []
        running.release()
        # ... and once it is done, the burst is one range starting where the last one ended
        burst = polls.run(BinlogWatchTrigger(**kwargs))
        assert len(burst) == 1, burst
        assert burst[0]["after"] == event["to"] and burst[0]["counts"] == {"shop.orders": 10}, burst
        assert burst[0]["transactions"] == 10 and burst[0]["first"] is False

        # changes a load already read (the cursor is past them) are not reported
        _orders(shop, range(30, 32))
        head = BinlogPosition.parse(shop.head())
        _, version = meta.get_cursor(identity)
        meta.set_cursor(identity, LogPosition(head.file, head.pos, included=True), version)
        assert polls.run(BinlogWatchTrigger(**kwargs)) == []
        _orders(shop, range(40, 41))
        after_load = polls.run(BinlogWatchTrigger(**kwargs))
        assert [e["counts"] for e in after_load] == [{"shop.orders": 1}], after_load
        assert after_load[0]["after"] == burst[0]["to"]
        assert BinlogPosition.parse(after_load[0]["from"]) > head
    finally:
        meta.client.stop()
        meta.client.close()


def test_watch_trigger_killed_before_airflow_stored_the_event_announces_it_once_after_restart(
    shop: Shop,
    conns: dict[str, str],
    zookeeper: ZooKeeperServer,
    zk_chroot: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the triggerer's shared stream in acknowledgement mode (``watch_stream.py``): a
    trigger SIGKILLed after announcing a range and before Airflow stored its event (failpoint
    ``watch_announce``) leaves it pending, the restarted trigger announces that range once and then
    never again. The window the design leaves (Airflow stored the event, the acknowledgement never
    reached the watermark: failpoint ``watch_confirm``) announces it a second time, never zero times,
    and not at all when a load read the range meanwhile."""
    destination = f"watchack_{uuid.uuid4().hex[:8]}"
    start = shop.head()
    kwargs: dict[str, Any] = {
        "destination": destination, "tables": TABLES, "name": "lake", "start_from": start,
        "poll_interval": 1.0,
    }  # fmt: skip
    _orders(shop, range(1, 4))
    child = subprocess.run(
        [sys.executable, str(STREAM_CHILD), json.dumps(kwargs), "3"],
        env={**os.environ, ENV: "watch_announce=kill"}, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert child.returncode == -signal.SIGKILL, (child.returncode, child.stderr[-3000:])
    assert f"{KILL_MARK}watch_announce" in child.stderr, child.stderr[-3000:]
    assert STORED not in child.stdout, child.stdout[-3000:]  # killed before Airflow stored anything

    meta = meta_manager(zookeeper, zk_chroot)
    identity = ClientIdentity(destination, 1001)
    key = Watcher.check_name("lake")
    try:
        mark = meta.get_json(identity, key).value
        assert mark is not None and "to" not in mark and mark["pending"]["counts"] == {"shop.orders": 3}, mark

        count = PollCount()
        with count.counting():
            stored, error = asyncio.run(run_stream(BinlogWatchTrigger(**kwargs), count))
            assert error is None and len(stored) == 1, (stored, error)  # announced after the restart, once
            event = stored[0]
            assert (
                event["counts"] == {"shop.orders": 3} and event["first"] is True and event["after"] == start
            )
            assert event["to"] == mark["pending"]["to"] and event["from"] == mark["pending"]["from"]
            mark = meta.get_json(identity, key).value
            assert "pending" not in mark and mark["to"] == event["to"], mark
            assert asyncio.run(run_stream(BinlogWatchTrigger(**kwargs), count)) == ([], None)  # never again

            # stored by Airflow, the acknowledgement lost (the trigger fails in advance()): again, once
            _orders(shop, range(10, 12))
            faults.reset()
            monkeypatch.setenv(ENV, "watch_confirm=raise")
            stored, error = asyncio.run(run_stream(BinlogWatchTrigger(**kwargs), count))
            assert isinstance(error, InjectedFault) and [e["counts"] for e in stored] == [{"shop.orders": 2}]
            monkeypatch.delenv(ENV)
            again, error = asyncio.run(run_stream(BinlogWatchTrigger(**kwargs), count))
            assert error is None and again == stored, (again, stored, error)
            assert again[0]["after"] == event["to"]
            assert asyncio.run(run_stream(BinlogWatchTrigger(**kwargs), count)) == ([], None)

            # the same, but the event's run loaded the range while the triggerer was down: no second event
            _orders(shop, range(20, 21))
            faults.reset()
            monkeypatch.setenv(ENV, "watch_confirm=raise")
            stored, error = asyncio.run(run_stream(BinlogWatchTrigger(**kwargs), count))
            assert isinstance(error, InjectedFault) and len(stored) == 1, (stored, error)
            monkeypatch.delenv(ENV)
            head = BinlogPosition.parse(shop.head())
            _, version = meta.get_cursor(identity)
            meta.set_cursor(identity, LogPosition(head.file, head.pos, included=True), version)
            assert asyncio.run(run_stream(BinlogWatchTrigger(**kwargs), count)) == ([], None)
            mark = meta.get_json(identity, key).value
            assert "pending" not in mark and mark["to"] == stored[0]["to"], mark
    finally:
        meta.client.stop()
        meta.client.close()
