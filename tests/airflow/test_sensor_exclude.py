"""exclude= on BinlogEventSensor and BinlogEventTrigger against the real MariaDB and ZooKeeper:
changes of an excluded table never count, in a poke, in the trigger, and across the deferral."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from airflow.sdk.exceptions import TaskDeferred
from airflow.triggers.base import TriggerEvent
from airflow_harness import Shop, make_context

from airflow_provider_binlog.sensors.binlog import BinlogEventSensor
from airflow_provider_binlog.triggers.binlog import BinlogEventTrigger

pytestmark = pytest.mark.integration

CUSTOMER = "INSERT INTO shop.customers VALUES ({}, 'a', NULL, 'free', NULL, NULL, NULL, 1)"
ORDER = (
    "INSERT INTO shop.orders VALUES ({}, 1, 'SKU-00001', 1, 9.99, 'new', NULL, '2026-01-01 00:00:00', NULL)"
)


def _write(shop: Shop, *statements: str) -> None:
    with shop.conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


@pytest.mark.parametrize(
    "exclude", ["shop.customers", ["shop.cust*"], "shop\\.customers"], ids=["glob", "glob-list", "regex"]
)
def test_poke_does_not_count_excluded_tables(shop: Shop, conns: dict[str, str], exclude: object) -> None:
    sensor = BinlogEventSensor(
        task_id="wait", destination=f"ex-{abs(hash(str(exclude)))}", tables={"shop.*": "lake.shop.{table}"},
        exclude=exclude, min_changes=2, start_from=shop.start_from,
    )  # fmt: skip
    _write(shop, *(CUSTOMER.format(i) for i in range(1, 6)), ORDER.format(1))
    first = sensor.poke(make_context())
    assert first.xcom_value == {"count": 1} and not first.is_done  # 5 customers do not count
    _write(shop, ORDER.format(2))
    assert sensor.poke(make_context()).xcom_value == {"count": 2}
    everything = BinlogEventSensor(
        task_id="all", destination="ex-all", tables={"shop.*": "lake.shop.{table}"}, min_changes=100,
        start_from=shop.start_from,
    )  # fmt: skip
    assert everything.poke(make_context()).xcom_value == {"count": 7}  # without exclude they count


def test_deferral_hands_exclude_to_the_trigger_which_ignores_it(shop: Shop, conns: dict[str, str]) -> None:
    sensor = BinlogEventSensor(
        task_id="wait", destination="ex-defer", tables=["shop.*"], exclude="shop.customers", min_changes=2,
        start_from=shop.start_from, deferrable=True, timeout=120,
    )  # fmt: skip
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(make_context())
    trigger = deferred.value.trigger
    assert isinstance(trigger, BinlogEventTrigger)
    _, kwargs = trigger.serialize()
    assert kwargs["exclude"] == "shop.customers"
    assert kwargs["include"] == sensor.table_filter().include

    def write() -> None:
        time.sleep(1.5)  # the trigger is following by now
        for i in range(1, 4):  # committed, but excluded
            _write(shop, CUSTOMER.format(i))
            shop.conn.commit()
        for i in (1, 2):
            _write(shop, ORDER.format(i))
            shop.conn.commit()

    async def consume() -> list[TriggerEvent]:
        return [event async for event in BinlogEventTrigger(**kwargs).run()]

    writer = threading.Thread(target=write)
    writer.start()
    try:
        events = asyncio.run(asyncio.wait_for(consume(), 60))
    finally:
        writer.join()
    assert len(events) == 1 and events[0].payload["status"] == "success", events
    assert events[0].payload["count"] == 2


@pytest.mark.parametrize("tables", [{"d.*": "lake.d.{table}"}, ["d.*"]], ids=["mapping", "globs"])
def test_shadow_tables_reach_the_sensors_filter(tables: Any) -> None:
    """A table named like a shadow table (``_audit_old``) counts under a glob only with shadow_tables."""
    default = BinlogEventSensor(task_id="wait", destination="d", tables=tables)
    assert not default.table_filter().matches("d", "_audit_old")
    asked = BinlogEventSensor(task_id="wait", destination="d", tables=tables, shadow_tables=True)
    assert asked.table_filter().matches("d", "_audit_old") and asked.table_filter().matches("d", "t")
