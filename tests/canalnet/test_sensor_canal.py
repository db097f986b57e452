"""BinlogEventSensor and BinlogEventTrigger with ``canal_conn_id``, against our canal server over the
real MariaDB: a poke counts committed matching changes after the destination's acked cursor without
moving it (the operator's next run drains everything, the lake equals the source value by value);
the deferred wait fires through the trigger's real ``run()`` without blocking the event loop; a
peek beside a consumer that holds the destination client leaves that consumer's in-flight batch
alone; an unreachable or silent server fails within the connection's timeout, naming the connection
and the server and never the password."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, TaskDeferred

from airflow_provider_binlog.canal.meta import FileMetaManager
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canalnet.server import CanalServer
from airflow_provider_binlog.hooks.canal import CanalHook
from airflow_provider_binlog.sensors.binlog import BinlogEventSensor
from airflow_provider_binlog.triggers.binlog import BinlogEventTrigger

pytestmark = pytest.mark.integration

CONTEXT: Any = {"ti": SimpleNamespace(dag_id="tests", task_id="wait", try_number=1), "run_id": "r"}
SECRET = "pw-s3cret"  # the unreachable servers' connection (the server's account is canal/pw, as run_child's)


@pytest.fixture
def canal_conn(
    canal_server: CanalServer, monkeypatch: pytest.MonkeyPatch, database: str, mariadb: Any
) -> CanalServer:
    """``canal_default`` as an env-var connection; the table exists and the destination has a cursor
    (a first subscription starts at the head and pins it, as canal's does)."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_CANAL_DEFAULT", f"canal://canal:pw@127.0.0.1:{canal_server.port}?timeout=5"
    )
    mariadb.execute(
        f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(10,2))"
    )
    mariadb.execute(f"CREATE TABLE `{database}`.other (id INT PRIMARY KEY)")
    hook = CanalHook("canal_default")
    pin = hook.client("shop", 1001, watched(database))
    pin.connect()
    pin.close_and_wait()
    hook.close()
    return canal_server


def sensor(database: str, **kwargs: Any) -> BinlogEventSensor:
    kwargs.setdefault("tables", {f"{database}.t": f"lake.{database}.t"})
    return BinlogEventSensor(task_id="wait", destination="shop", canal_conn_id="canal_default", **kwargs)


def watched(database: str) -> str:
    """The subscription filter of the sensor and the operator over ``{database}.t``."""
    return sensor(database).table_filter().include


def cursor(server: CanalServer) -> Any:
    meta = server.meta
    assert isinstance(meta, FileMetaManager)
    return FileMetaManager(meta.directory).get_cursor(ClientIdentity("shop", 1001)).value


def test_poke_counts_after_the_cursor_and_moves_nothing_then_the_operator_drains_exactly(
    canal_conn: CanalServer, mariadb: Any, database: str, tmp_path: Path, airflow_home: Path
) -> None:
    from canalnet.test_canal_drain import lake_rows, result_of, run_child, source_rows

    before = cursor(canal_conn)
    started = time.monotonic()
    first = sensor(database, min_changes=1).poke(CONTEXT)
    assert not first.is_done and time.monotonic() - started < 15  # connect + one GET's wait, bounded

    mariadb.execute(f"INSERT INTO `{database}`.other VALUES (1), (2), (3)")  # not a watched table
    assert not sensor(database, min_changes=1).poke(CONTEXT).is_done
    for i in range(1, 9):
        mariadb.execute(f"INSERT INTO `{database}`.t VALUES ({i}, 'n{i}', {i}.25)")
    mariadb.execute(f"UPDATE `{database}`.t SET name = 'changed' WHERE id <= 3")  # 3 rows, one transaction
    mariadb.execute(f"DELETE FROM `{database}`.t WHERE id = 8")
    assert not sensor(database, min_changes=13).poke(CONTEXT).is_done  # 12 committed
    done = sensor(database, min_changes=10).poke(CONTEXT)
    assert done.is_done
    xcom = done.xcom_value
    assert xcom["count"] == 11  # 8 inserts, then the 3-row update's transaction reaches 10
    assert re.fullmatch(r"\S+\.\d+:\d+", xcom["position"]) and re.fullmatch(r"\S+\.\d+:\d+", xcom["end"])
    again = sensor(database, min_changes=10).poke(CONTEXT).xcom_value
    assert again == xcom, "a second peek saw something else: the first moved the cursor"
    assert cursor(canal_conn) == before, "the sensor moved the acked cursor"

    code, out, err = run_child(canal_conn, tmp_path / "warehouse", database, airflow_home=airflow_home)
    assert code == 0, err[-3000:]
    result = result_of(out)
    assert lake_rows(result) == source_rows(mariadb, database)
    assert result["summary"]["changes"] == 12
    assert cursor(canal_conn) != before
    assert not sensor(database, min_changes=1).poke(CONTEXT).is_done  # drained: nothing after the cursor


def test_the_deferred_wait_fires_through_the_trigger_without_blocking_the_event_loop(
    canal_conn: CanalServer, mariadb: Any, database: str
) -> None:
    waiting = sensor(database, min_changes=2, deferrable=True, poke_interval=0.5)
    with pytest.raises(TaskDeferred) as deferred:
        waiting.execute(CONTEXT)
    trigger = deferred.value.trigger
    assert isinstance(trigger, BinlogEventTrigger)
    classpath, kwargs = trigger.serialize()
    assert kwargs["canal_conn_id"] == "canal_default" and kwargs["poll_interval"] == 0.5
    assert kwargs["include"] == watched(database) and kwargs["min_changes"] == 2
    module, _, name = classpath.rpartition(".")
    revived = getattr(__import__(module, fromlist=[name]), name)(**kwargs)

    def write() -> None:
        time.sleep(2)
        mariadb.execute(f"INSERT INTO `{database}`.other VALUES (9)")
        mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1, 'a', 1.00), (2, 'b', 2.00)")

    async def consume() -> tuple[list[Any], int]:
        ticks = 0
        done = asyncio.Event()

        async def tick() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.05)

        ticker = asyncio.create_task(tick())
        events = [e async for e in revived.run()]
        done.set()
        await ticker
        return events, ticks

    writer = threading.Thread(target=write)
    writer.start()
    started = time.monotonic()
    events, ticks = asyncio.run(asyncio.wait_for(consume(), 60))
    elapsed = time.monotonic() - started
    writer.join()
    assert len(events) == 1
    payload = events[0].payload
    assert payload["status"] == "success" and payload["count"] == 2 and payload["destination"] == "shop"
    assert elapsed >= 2
    assert ticks >= elapsed / 0.05 * 0.5, f"the event loop was blocked: {ticks} ticks in {elapsed:.1f} s"
    assert waiting.execute_complete(CONTEXT, payload)["count"] == 2


def test_a_peek_beside_a_consumer_holding_the_destination_leaves_its_batches_alone(
    canal_conn: CanalServer, mariadb: Any, database: str
) -> None:
    for i in range(1, 6):
        mariadb.execute(f"INSERT INTO `{database}`.t VALUES ({i}, 'n{i}', 1.00)")
    hook = CanalHook("canal_default")
    hold = hook.hold("shop", 1001, "a run of the operator").hold(5)
    consumer = hook.client("shop", 1001, watched(database))  # what the operator's run subscribes with
    try:
        consumer.connect()
        batch_id, entries = consumer.get_without_ack(1000, 3.0)
        assert batch_id > 0 and entries  # in flight: handed out, not acked yet

        poke = sensor(database, min_changes=1).poke(CONTEXT)
        assert not poke.is_done  # a run holds the destination: nothing counted now
        trigger = BinlogEventTrigger(
            "unused", "shop", watched(database), canal_conn_id="canal_default", poll_interval=0.2
        )

        async def briefly() -> list[Any]:
            return [e async for e in trigger.run()]

        with pytest.raises(TimeoutError):  # it keeps polling while the run holds it, firing nothing
            asyncio.run(asyncio.wait_for(briefly(), 2.0))

        again_id, again = consumer.get_without_ack(1000, 1.0)
        assert again_id == -1 and not again, "the peek rolled the consumer's batch back"
        consumer.ack(batch_id)
        assert consumer.get_without_ack(1000, 0.5) == (-1, [])  # the ack was taken (an error shows here)
    finally:
        consumer.close_and_wait()
        hold.release()
        hook.close()
    assert not sensor(database, min_changes=1).poke(CONTEXT).is_done  # all acked by the consumer
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (6, 'n6', 1.00)")
    assert sensor(database, min_changes=1).poke(CONTEXT).xcom_value["count"] == 1  # released: counts again


def test_an_unreachable_or_silent_server_fails_within_the_timeout_naming_it_without_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        closed_port = closed.getsockname()[1]  # nobody listens there once closed
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)  # accepts connections (the kernel does), never says a word
    try:
        for port in (closed_port, silent.getsockname()[1]):
            monkeypatch.setenv(
                "AIRFLOW_CONN_CANAL_DOWN", f"canal://canal:{SECRET}@127.0.0.1:{port}?timeout=1"
            )
            started = time.monotonic()
            with pytest.raises(AirflowException) as err:
                BinlogEventSensor(task_id="wait", destination="shop", canal_conn_id="canal_down").poke(
                    CONTEXT
                )
            assert time.monotonic() - started < 5
            text = str(err.value)
            assert "'canal_down'" in text and f"127.0.0.1:{port}" in text and "shop" in text, text
            assert SECRET not in text and SECRET not in repr(err.value)
    finally:
        silent.close()


@pytest.mark.parametrize("where", ["zookeeper", "file"])
def test_the_hold_admits_one_reader_names_the_holder_and_waits_bounded(
    where: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    from airflow_provider_binlog.canalnet.hold import ClientHeldError, ClientHold

    zk = request.getfixturevalue("zk_client") if where == "zookeeper" else None
    make = lambda label: ClientHold("shop", 1001, "127.0.0.1:1", zk, tmp_path / "holds", label)  # noqa: E731
    run, peek = make("dags/load/r/try-1"), make("sensor")
    assert run.acquire(0)
    assert not peek.acquire(0)
    started = time.monotonic()
    assert not peek.acquire(0.5)
    assert 0.4 <= time.monotonic() - started < 3
    assert "dags/load/r/try-1" in (peek.holder() or "")
    with pytest.raises(ClientHeldError, match="dags/load/r/try-1"):
        peek.hold(0.1)
    other = ClientHold("shop", 1002, "127.0.0.1:1", zk, tmp_path / "holds")  # another client id: its own
    assert other.acquire(0)
    other.release()
    run.release()
    with peek.hold(1):
        assert peek.held and not run.acquire(0)
    assert run.acquire(0)
    run.release()
