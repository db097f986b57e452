"""BinlogToSparkOperator(snapshot=...): initial load of existing rows, then the binlog; purged cursor."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from airflow_harness import Shop, lake_verify, make_context, meta_manager

from airflow_provider_binlog.canal.errors import RunningHeldError
from airflow_provider_binlog.canal.ha import RunningNode
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.snapshot.initial import RUN_KEY, table_key
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.lake.snapshot import chunk_commits
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator
from airflow_provider_binlog.sensors.binlog import BinlogEventSensor

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _op(destination: str, ns: str, warehouse: str, **kw: Any) -> BinlogToSparkOperator:
    return BinlogToSparkOperator(
        task_id="load", destination=destination, tables={"shop.*": f"lake.{ns}.{{table}}"},
        warehouse=warehouse, spark_master="local[2]", stop_spark=False, **{"snapshot_chunk_size": 100, **kw},
    )  # fmt: skip


def test_snapshot_mode_is_checked() -> None:
    with pytest.raises(ValueError, match="snapshot must be one of"):
        BinlogToSparkOperator(task_id="x", destination="d", tables={"a.b": "lake.a.b"}, snapshot="always")


def test_initial_snapshot_then_binlog_and_purged_cursor(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    shop.changes(300)
    ns = f"snap_{uuid.uuid4().hex[:8]}"
    dest = f"snap-{ns}"
    tables = {"shop.orders": f"lake.{ns}.orders", "shop.customers": f"lake.{ns}.customers"}
    # no cursor and no start_from: the existing rows come from the snapshot, the rest from the binlog
    summary = _op(dest, ns, spark_warehouse, snapshot="initial").execute(make_context(run_id="r1"))
    assert summary["changes"] == 0
    assert all(d.equal for d in lake_verify(mariadb, spark, tables))
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        ident = next(iter(meta.subscriptions(dest)))
        assert meta.get_json(ident, RUN_KEY).value["status"] == "done"
        shop.changes(80)
        summary = _op(dest, ns, spark_warehouse, snapshot="initial").execute(make_context(run_id="r2"))
        assert summary["changes"] > 0
        assert all(d.equal for d in lake_verify(mariadb, spark, tables))

        # the cursor's binlog goes away: when_needed takes a new snapshot and carries on
        shop.changes(50)
        mariadb.execute("FLUSH BINARY LOGS")
        (head, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
        mariadb.purge_binlogs_to(head)
        summary = _op(dest, ns, spark_warehouse, snapshot="when_needed").execute(make_context(run_id="r3"))
        assert all(d.equal for d in lake_verify(mariadb, spark, tables))
        cursor = meta.get_cursor(ident).value
        assert cursor is not None and cursor.journal_name >= head
    finally:
        meta.client.stop()


def test_sensor_first_then_initial_snapshot_loads_the_existing_rows(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """The README's pattern on a source that already has rows: the sensor runs first, pins the
    head as the cursor and lets the first load run at once; the load with snapshot="initial" still
    snapshots the rows before that point (a pinned cursor is not a snapshot), and later sensor +
    load rounds keep lake == source."""
    shop.changes(300)
    ns = f"snapsense_{uuid.uuid4().hex[:8]}"
    dest = f"snapsense-{ns}"
    routes = {"shop.*": f"lake.{ns}.{{table}}"}
    tables = {f"shop.{t}": f"lake.{ns}.{t}" for t in ("customers", "orders", "products")}
    ident = ClientIdentity(dest, 1001)
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        sensor = BinlogEventSensor(task_id="wait", destination=dest, tables=routes, min_changes=1)
        first = sensor.poke(make_context(task_id="wait"))  # nothing after the head yet, but
        assert first.is_done and first.xcom_value == {"count": 0, "first": True}  # the first load runs
        pinned = meta.get_cursor(ident).value
        assert pinned is not None and str(pinned.binlog_position) == shop.head()
        shop.changes(20)  # after the pin: the sensor sees them, the snapshot must not double them
        assert sensor.poke(make_context(task_id="wait")).is_done
        summary = _op(dest, ns, spark_warehouse, snapshot="initial").execute(make_context(run_id="r1"))
        diffs = lake_verify(mariadb, spark, tables)
        assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
        assert all(d.source_rows > 0 for d in diffs), [d.describe() for d in diffs]
        assert meta.get_json(ident, RUN_KEY).value["status"] == "done"
        assert str(pinned.binlog_position) in summary["start"], summary  # the binlog reads from the pin
        for n in (2, 3):
            shop.changes(40)
            assert sensor.poke(make_context(task_id="wait", run_id=f"r{n}")).is_done
            summary = _op(dest, ns, spark_warehouse, snapshot="initial").execute(make_context(run_id=f"r{n}"))
            assert summary["changes"] > 0
            diffs = lake_verify(mariadb, spark, tables)
            assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
        for source in tables:  # one snapshot per table, the later runs took none
            progress = meta.get_json(ident, table_key(source)).value
            assert progress["status"] == "done" and progress["loads"], source
            assert chunk_commits(spark, tables[source], dest) == progress["loads"], source
    finally:
        meta.client.stop()


def test_start_from_with_a_snapshot_is_refused_before_anything_moves(
    conns: dict[str, str], zookeeper: ZooKeeperServer, zk_chroot: str
) -> None:
    with pytest.raises(ValueError) as err:
        BinlogToSparkOperator(
            task_id="x", destination="d", tables={"a.b": "lake.a.b"}, snapshot="initial",
            start_from="mysql-bin.000001:4",
        )  # fmt: skip
    text = str(err.value)
    assert "start_from='mysql-bin.000001:4'" in text and "snapshot='initial'" in text
    assert "Remove start_from" in text and "snapshot='never'" in text
    BinlogToSparkOperator(
        task_id="x", destination="d", tables={"a.b": "lake.a.b"}, start_from="mysql-bin.000001:4"
    )
    # a template is checked once rendered, before the destination is touched
    dest = f"startfrom-{uuid.uuid4().hex[:8]}"
    op = _op(dest, "startfrom", "/nonexistent", snapshot="when_needed", start_from="{{ params.start }}")
    op.start_from = "2024-01-01T00:00:00"  # as rendered
    with pytest.raises(ValueError, match="snapshot='when_needed' both say where"):
        op.execute(make_context())
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        assert not list(meta.subscriptions(dest))
    finally:
        meta.client.stop()


def test_two_snapshot_runs_on_one_destination(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """Run A holds the destination's running node through its snapshot (stopped inside it by a
    table lock on the source): run B fails naming A, run C waits for A, then finds the snapshot done;
    every chunk is loaded once and the lake equals the source."""
    shop.changes(100)
    ns = f"snapha_{uuid.uuid4().hex[:8]}"
    dest = f"snapha-{ns}"
    ident = ClientIdentity(dest, 1001)
    results: dict[str, Any] = {}

    def run(name: str, op: BinlogToSparkOperator) -> None:
        try:
            results[name] = op.execute(make_context(run_id=f"run-{name}"))
        except BaseException as exc:
            results[name] = exc

    meta = meta_manager(zookeeper, zk_chroot)
    lock = mariadb.connect()
    threads = []
    try:
        with lock.cursor() as cur:
            cur.execute("LOCK TABLES shop.customers WRITE")  # A's snapshot stops at its first table
        first = _op(dest, ns, spark_warehouse, snapshot="initial", snapshot_chunk_size=5000)
        a = threading.Thread(target=run, args=("a", first))
        threads.append(a)
        a.start()
        deadline = time.monotonic() + 60
        while (meta.get_json(ident, RUN_KEY).value or {}).get("status") != "running":
            assert time.monotonic() < deadline and a.is_alive(), results
            time.sleep(0.05)
        assert RunningNode(meta.client, ident).holder() is not None  # held during the snapshot
        b = _op(dest, ns, spark_warehouse, snapshot="initial", running_timeout=0.5)
        with pytest.raises(RunningHeldError) as held:
            b.execute(make_context(run_id="run-b"))
        assert "tests/load/run-a/try-1" in str(held.value), str(held.value)
        c = threading.Thread(
            target=run, args=("c", _op(dest, ns, spark_warehouse, snapshot="initial", running_timeout=120))
        )
        threads.append(c)
        c.start()
        time.sleep(1.0)
        assert "c" not in results and "a" not in results, results
    finally:
        with lock.cursor() as cur:
            cur.execute("UNLOCK TABLES")
        lock.close()
        for t in threads:
            t.join(300)
    try:
        assert isinstance(results.get("a"), dict), str(results.get("a"))[:3000]
        assert isinstance(results.get("c"), dict), str(results.get("c"))[:3000]
        assert results["c"]["start"] == results["a"]["end"]
        tables = {f"shop.{t}": f"lake.{ns}.{t}" for t in ("customers", "orders", "products")}
        assert all(d.equal for d in lake_verify(mariadb, spark, tables))
        for source, target in tables.items():
            loads = meta.get_json(ident, table_key(source)).value["loads"]
            assert loads and chunk_commits(spark, target, dest) == loads, source  # no chunk loaded twice
    finally:
        meta.client.stop()
