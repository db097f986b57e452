"""BinlogEventTrigger and BinlogEventSensor against the real MariaDB and ZooKeeper.

The trigger contract (as in the official providers): ``serialize()`` lists exactly the constructor
arguments, and ``run()`` yields exactly one event. The sensor counts without moving the cursor and
hands off to the trigger when deferrable.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import uuid
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, TaskDeferred
from airflow.triggers.base import TriggerEvent
from airflow_harness import Shop, make_context, meta_manager, mysql_uri

from airflow_provider_binlog.binlog.client import ReplicationClient
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.binlog.rows import RowsEvent
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer, free_port
from airflow_provider_binlog.hooks.binlog import replication_config
from airflow_provider_binlog.sensors.binlog import BinlogEventSensor
from airflow_provider_binlog.triggers.binlog import BinlogEventTrigger

pytestmark = pytest.mark.integration

ORDERS = "shop\\.orders"


def _order_sql(oid: int) -> str:
    return (
        f"INSERT INTO shop.orders VALUES ({oid}, 1, 'SKU-00001', 1, 9.99, 'new', NULL, "
        "'2026-01-01 00:00:00', NULL)"
    )


def _collect(trigger: BinlogEventTrigger, timeout: float = 60) -> list[TriggerEvent]:
    """Every event ``run()`` yields until it returns (bounded by ``timeout``)."""

    async def consume() -> list[TriggerEvent]:
        return [event async for event in trigger.run()]

    return asyncio.run(asyncio.wait_for(consume(), timeout))


def _first_row_event(mariadb: MariaDbServer, start: str, schema: str, table: str) -> str:
    """``file:pos`` of the first row event of ``schema.table`` after ``start`` (read as a replica)."""
    client = ReplicationClient(replication_config(_Conn(mariadb)))
    with client.dump(BinlogPosition.parse(start), stop_at=client.head_position()) as stream:
        for event in stream:
            body = event.body
            if isinstance(body, RowsEvent) and (body.schema, body.table) == (schema, table):
                return str(event.position)
    raise AssertionError(f"no row event of {schema}.{table} after {start}")


class _Conn:
    """The fields of an Airflow connection :func:`replication_config` reads."""

    def __init__(self, mariadb: MariaDbServer, password: str | None = None) -> None:
        self.conn_id = "test"
        self.host, self.port = mariadb.host, mariadb.port
        self.login = mariadb.repl_user
        self.password = mariadb.repl_password if password is None else password
        self.extra_dejson: dict[str, Any] = {}


# --------------------------------------------------------------------------- trigger


def test_trigger_serialize_round_trips_its_constructor_arguments() -> None:
    kwargs: dict[str, Any] = {
        "mysql_conn_id": "src",
        "destination": "shop",
        "include": "shop\\..*",
        "min_changes": 3,
        "start_position": "mysql-bin.000002:1234",
        "start_gtid": None,
        "skip_through": [2, 1234, -1, 0],
        "server_id": 4242,
        "exclude": "shop\\.tmp_.*,shop.`z.w`",
        "canal_conn_id": "canal_src",
        "client_id": 1002,
        "poll_interval": 5.0,
    }
    assert set(kwargs) == set(inspect.signature(BinlogEventTrigger.__init__).parameters) - {"self"}
    classpath, serialized = BinlogEventTrigger(**kwargs).serialize()
    assert classpath == "airflow_provider_binlog.triggers.binlog.BinlogEventTrigger"
    assert serialized == kwargs
    module, _, name = classpath.rpartition(".")
    again = getattr(__import__(module, fromlist=[name]), name)(**serialized)
    assert again.serialize() == (classpath, kwargs)
    gtid = BinlogEventTrigger("src", "d", "x\\.y", start_gtid="0-11-5").serialize()[1]
    assert gtid["start_gtid"] == "0-11-5" and gtid["start_position"] is None


def test_trigger_fires_once_on_the_first_committed_matching_change(
    shop: Shop, conns: dict[str, str], mariadb: MariaDbServer
) -> None:
    start = shop.head()
    trigger = BinlogEventTrigger("mysql_default", "shop", ORDERS, min_changes=2, start_position=start)

    def write() -> None:
        time.sleep(1.5)  # the trigger is following by now
        shop.conn.begin()
        with shop.conn.cursor() as cur:
            cur.execute("INSERT INTO shop.customers VALUES (1,'a',NULL,'free',NULL,NULL,NULL,1)")
        shop.conn.commit()  # not a matching table
        shop.conn.begin()
        with shop.conn.cursor() as cur:
            cur.execute(_order_sql(1))
        shop.conn.rollback()  # never committed: does not count
        for oid in (2, 3, 4):
            shop.conn.begin()
            with shop.conn.cursor() as cur:
                cur.execute(_order_sql(oid))
            shop.conn.commit()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        events = _collect(trigger)
    finally:
        writer.join()
    assert len(events) == 1, events
    payload = events[0].payload
    assert payload["status"] == "success", payload
    assert payload["destination"] == "shop"
    assert payload["count"] == 2
    assert payload["position"] == _first_row_event(mariadb, start, "shop", "orders")
    assert BinlogPosition.parse(payload["end"]) > BinlogPosition.parse(payload["position"])


def test_trigger_yields_one_error_event_for_a_bad_connection(
    conns: dict[str, str], monkeypatch: pytest.MonkeyPatch, mariadb: MariaDbServer
) -> None:
    wrong = "wrong-" + uuid.uuid4().hex
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_WRONG", mysql_uri(mariadb, password=wrong))
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_NOWHERE", f"mysql://u:{wrong}@127.0.0.1:{free_port()}")
    messages = {}
    for conn_id in ("mysql_wrong", "mysql_nowhere"):
        events = _collect(BinlogEventTrigger(conn_id, "shop", ORDERS, start_position="mysql-bin.000001:4"))
        assert len(events) == 1, events
        payload = events[0].payload
        assert payload["status"] == "error" and payload["destination"] == "shop", payload
        assert payload["message"] and wrong not in payload["message"], payload
        messages[conn_id] = payload["message"]
    assert "Access denied" in messages["mysql_wrong"] and mariadb.repl_user in messages["mysql_wrong"], (
        messages
    )
    assert "127.0.0.1" in messages["mysql_nowhere"], messages


# --------------------------------------------------------------------------- sensor


def test_sensor_pokes_without_moving_the_cursor(
    shop: Shop, conns: dict[str, str], zookeeper: ZooKeeperServer, zk_chroot: str
) -> None:
    sensor = BinlogEventSensor(
        task_id="wait", destination="sense", tables={"shop.orders": "lake.shop.orders"}, min_changes=2,
        start_from=shop.start_from,
    )  # fmt: skip
    identity = ClientIdentity("sense", 1001)
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        assert meta.get_cursor(identity).value is None
        first = sensor.poke(make_context())
        assert not first.is_done and first.xcom_value == {"count": 0}
        pinned = meta.get_cursor(identity)
        assert pinned.value is not None
        assert pinned.value.binlog_position == BinlogPosition.parse(shop.start_from)

        with shop.conn.cursor() as cur:
            cur.execute(_order_sql(10))  # one matching change: not enough
            cur.execute("INSERT INTO shop.customers VALUES (1,'a',NULL,'free',NULL,NULL,NULL,1)")
        assert not sensor.poke(make_context()).is_done
        with shop.conn.cursor() as cur:
            cur.execute(_order_sql(11))
        done = sensor.poke(make_context())
        assert done.is_done and done.xcom_value == {"count": 2}
        assert meta.get_cursor(identity) == pinned, "poke moved the cursor"
        assert not meta.marks(identity)
    finally:
        meta.client.stop()
        meta.client.close()


def test_deferrable_sensor_hands_off_to_the_trigger(
    shop: Shop, conns: dict[str, str], zookeeper: ZooKeeperServer, zk_chroot: str
) -> None:
    sensor = BinlogEventSensor(
        task_id="wait", destination="defer", tables=["shop.orders"], min_changes=3,
        start_from=shop.start_from, deferrable=True, timeout=120, server_id=777,
    )  # fmt: skip
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(make_context())
    assert deferred.value.method_name == "execute_complete"
    trigger = deferred.value.trigger
    assert isinstance(trigger, BinlogEventTrigger)
    _, kwargs = trigger.serialize()
    assert kwargs["mysql_conn_id"] == "mysql_default"
    assert kwargs["destination"] == "defer"
    assert kwargs["include"] == sensor.table_filter().include
    assert kwargs["min_changes"] == 3 and kwargs["server_id"] == 777
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        cursor = meta.get_cursor(ClientIdentity("defer", 1001)).value
    finally:
        meta.client.stop()
        meta.client.close()
    assert cursor is not None and kwargs["start_position"] == str(cursor.binlog_position)
    assert kwargs["start_position"] == shop.start_from

    event = {"status": "success", "destination": "defer", "count": 3, "position": "mysql-bin.000001:99"}
    assert sensor.execute_complete(make_context(), event) == event
    with pytest.raises(AirflowException, match="the binlog stream ended"):
        sensor.execute_complete(make_context(), {"status": "error", "message": "the binlog stream ended"})

    # with the changes already there, execute returns at once (no deferral)
    with shop.conn.cursor() as cur:
        for oid in (1, 2, 3):
            cur.execute(_order_sql(oid))
    assert sensor.execute(make_context()) == {"count": 3}


def test_deferred_wait_timeout_skips_with_on_timeout_skip_and_errors_still_fail() -> None:
    """Airflow resumes a deferred sensor whose trigger timed out with ``__fail__`` and
    ``TRIGGER_TIMEOUT`` (the base class makes it ``AirflowSensorTimeout``): ``on_timeout="skip"``
    skips it, the default fails it; a trigger's own error fails either way."""
    from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason
    from airflow.sdk.exceptions import AirflowSensorTimeout, AirflowSkipException, TaskDeferralError

    timeout = {"error": TriggerFailureReason.TRIGGER_TIMEOUT}
    skip = BinlogEventSensor(task_id="w", destination="shop", deferrable=True, timeout=60, on_timeout="skip")
    with pytest.raises(AirflowSkipException, match=r"destination shop: fewer than 1 matching change\(s\)"):
        skip.resume_execution(TRIGGER_FAIL_REPR, timeout, make_context())
    with pytest.raises(TaskDeferralError):
        skip.resume_execution(
            TRIGGER_FAIL_REPR, {"error": TriggerFailureReason.TRIGGER_FAILURE}, make_context()
        )
    with pytest.raises(AirflowException, match="waiting for binlog changes of destination shop failed: boom"):
        skip.resume_execution(
            "execute_complete", {"event": {"status": "error", "message": "boom"}}, make_context()
        )
    fail = BinlogEventSensor(task_id="f", destination="shop", deferrable=True, timeout=60)
    with pytest.raises(AirflowSensorTimeout):
        fail.resume_execution(TRIGGER_FAIL_REPR, timeout, make_context())
    with pytest.raises(ValueError, match="on_timeout must be one of fail, skip, not 'ignore'"):
        BinlogEventSensor(task_id="x", destination="shop", on_timeout="ignore")
