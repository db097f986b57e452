"""Every wait on a service is bounded (issue #17): the service is really stopped, and the time
until the failure (or the end of a cleanup) is measured against the configured bound.

The module runs its own MariaDB and ZooKeeper (:mod:`own_servers`): it stops and starts them.
Upper bounds are the configured bound plus a generous margin (a slow machine must not fail them);
lower bounds, where asserted, are the configured bound itself (nothing can beat it).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_harness import Shop, lake_verify, make_context, meta_manager
from figures import FIGURES
from kazoo.client import KazooClient
from own_servers import own_server

from airflow_provider_binlog.binlog.client import ReplicationConfig
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import MetaError, SessionLostError, SourceUnavailableError
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.ha import RunningNode
from airflow_provider_binlog.canal.instance import CanalInstance, InstanceConfig
from airflow_provider_binlog.canal.meta import MemoryMetaManager
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager
from airflow_provider_binlog.canal.positions.start import StartSpec
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration]

TABLES = ("customers", "products", "orders")

MARGIN = 60.0  # seconds on top of a configured bound: generous for a loaded machine


@pytest.fixture(scope="module")
def mariadb() -> Iterator[MariaDbServer]:
    yield from own_server(MariaDbServer(server_id=37))


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[ZooKeeperServer]:
    yield from own_server(ZooKeeperServer())


def _source(server: MariaDbServer) -> ReplicationConfig:
    return ReplicationConfig(
        host=server.host, port=server.port, user=server.repl_user, password=server.repl_password,
        connect_timeout=5.0, origin="connection 'bounded_src'",
    )  # fmt: skip


def _head(server: MariaDbServer) -> BinlogPosition:
    (file, pos, *_), *_ = server.execute("SHOW MASTER STATUS")
    return BinlogPosition(file, int(pos))


def _drain_until_idle(inst: CanalInstance, want: int, deadline: float = 60.0) -> int:
    """Get and ack batches until ``want`` row changes arrived; return how many did."""
    got = 0
    end = time.monotonic() + deadline
    while got < want:
        assert time.monotonic() < end, f"only {got} of {want} changes within {deadline:g} s"
        batch = inst.get_without_ack(100, timeout=0.5)
        if batch.id is None:
            continue
        got += sum(1 for e in batch.entries if type(e).__name__ == "RowChange")
        inst.ack(batch.id)
    return got


def test_reader_gives_up_when_the_source_stays_down(mariadb: MariaDbServer) -> None:
    """MariaDB stops while two instances follow its binlog: one bounded by time (5 s), one by
    attempts (2). Each consumer gets a SourceUnavailableError naming the connection, the address,
    the last error and the position; no cursor moves; the time one is not earlier than its bound
    and not later than bound + margin."""
    db = f"bw_{uuid.uuid4().hex[:8]}"
    mariadb.execute(f"CREATE DATABASE `{db}`")
    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)")
    start = _head(mariadb)
    for i in range(20):
        mariadb.execute(f"INSERT INTO `{db}`.t VALUES (%s, %s)", (i, i))
    bounds = {
        "timeout": {"reconnect_timeout": 5.0},
        "attempts": {"reconnect_timeout": None, "reconnect_attempts": 2},
    }
    metas, insts = {}, {}
    for name, bound in bounds.items():
        cfg = InstanceConfig(
            f"bounded-{name}", _source(mariadb), TableFilter(f"{db}\\..*"), start=StartSpec(str(start)),
            reconnect_initial=0.2, reconnect_max=1.0, **bound,  # type: ignore[arg-type]
        )  # fmt: skip
        metas[name] = MemoryMetaManager()
        insts[name] = CanalInstance(cfg, metas[name])
        insts[name].subscribe(stop_at=None)  # follow: the reader is connected when the server goes
        assert _drain_until_idle(insts[name], 20) == 20
    cursors = {name: metas[name].get_cursor(insts[name].identity) for name in bounds}
    stopped = time.monotonic()
    mariadb.stop(keep_data=True)
    try:
        failed: dict[str, tuple[float, SourceUnavailableError]] = {}
        while len(failed) < len(insts):
            assert time.monotonic() - stopped < 5.0 + MARGIN, f"no failure yet for {set(insts) - set(failed)}"
            for name, inst in insts.items():
                if name in failed:
                    continue
                try:
                    inst.get_without_ack(100, timeout=0.2)
                except SourceUnavailableError as exc:
                    failed[name] = (time.monotonic() - stopped, exc)
    finally:
        for inst in insts.values():
            inst.close()
        mariadb.start()
    for name, (elapsed, exc) in failed.items():
        message = str(exc)
        FIGURES.append(
            f"source stopped, reader bounded by {name}: failed after {elapsed:.1f} s: {message}"[:600]
        )
        assert f"{mariadb.host}:{mariadb.port}" in message and "connection 'bounded_src'" in message, message
        assert "last error:" in message and "cannot connect" in message, message
        cursor = cursors[name].value
        # where a reconnect would resume: the end of the last transaction read, the cursor's event
        assert cursor is not None and cursor.binlog_position is not None and exc.position is not None
        assert BinlogPosition.parse(exc.position) > cursor.binlog_position, (exc.position, cursor)
        assert f"Reading stopped at {exc.position}" in message, message
        assert metas[name].get_cursor(insts[name].identity) == cursors[name], "a cursor moved"
    assert failed["timeout"][0] >= 5.0, "gave up before its bound"
    assert "unreachable for 5 s" in str(failed["timeout"][1]), str(failed["timeout"][1])
    assert "2 reconnect attempts" in str(failed["attempts"][1])
    assert insts["attempts"].reconnects == 3


def _zk_client(zookeeper: ZooKeeperServer, chroot: str, timeout: float = 4.0) -> KazooClient:
    from airflow_provider_binlog.canal.meta.zookeeper import CONNECTION_RETRY

    root = KazooClient(hosts=zookeeper.hosts)
    root.start(timeout=15)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    client = KazooClient(hosts=zookeeper.hosts + chroot, timeout=timeout, connection_retry=CONNECTION_RETRY)
    client.start(timeout=15)
    return client


def test_release_is_bounded_while_zookeeper_is_down(
    mariadb: MariaDbServer, zookeeper: ZooKeeperServer
) -> None:
    """ZooKeeper stops while an instance holds the running node: ``close`` (reader stop, release)
    returns within the release bound plus a margin instead of waiting for ZooKeeper; stopping the
    client is bounded too; once ZooKeeper is back the node goes with the session."""
    chroot = f"/bw-{uuid.uuid4().hex[:8]}"
    client = _zk_client(zookeeper, chroot)
    cfg = InstanceConfig("bounded-zk", _source(mariadb), TableFilter("nothing\\..*"))
    running = RunningNode(client, cfg.identity, label="bounded", release_timeout=2.0)
    inst = CanalInstance(cfg, ZooKeeperMetaManager(client), running=running)
    inst.subscribe(stop_at=None)
    assert running.held
    zookeeper.stop(keep_data=True)
    try:
        time.sleep(1.0)  # the client notices (SUSPENDED)
        began = time.monotonic()
        inst.close()
        closed = time.monotonic() - began
        client.stop()
        client.close()
        stopped = time.monotonic() - began - closed
    finally:
        zookeeper.start()
    FIGURES.append(
        f"ZooKeeper stopped: instance close {closed:.1f} s (release bound 2 s), client stop {stopped:.1f} s"
    )
    assert closed < 2.0 + MARGIN, closed
    assert stopped < 15.0 + MARGIN, (
        stopped
    )  # kazoo waits for its connection thread up to max(10 s, session timeout)
    other = _zk_client(zookeeper, chroot)
    try:
        probe = RunningNode(other, ClientIdentity("bounded-zk", 1001), label="probe")
        deadline = time.monotonic() + 4.0 + MARGIN  # the session timeout, counted from ZooKeeper's start
        while probe.holder() is not None:
            assert time.monotonic() < deadline, "the running node outlived its session"
            time.sleep(0.2)
        probe.acquire(timeout=0)
        probe.close()
    finally:
        other.stop()
        other.close()


# --------------------------------------------------------------------------- the operator


def _operator(shop: Shop, warehouse: str, ns: str, **kwargs: Any) -> BinlogToSparkOperator:
    return BinlogToSparkOperator(
        task_id="load", destination=f"dest-{ns}", tables={"shop.*": f"lake.{ns}.{{table}}"},
        start_from=shop.start_from, warehouse=warehouse, spark_master="local[2]", stop_spark=False, **kwargs,
    )  # fmt: skip


def _run_with_fault(
    op: BinlogToSparkOperator, zookeeper: ZooKeeperServer, chroot: str, fault: Any
) -> tuple[Any, float]:
    """Run ``op`` here; once it moved its cursor, ``fault()`` on a thread (it returns when the
    service is down). Returns the run's summary or exception and the seconds from the fault to the
    run's end."""
    meta = meta_manager(zookeeper, chroot)
    identity = ClientIdentity(op.destination, 1001)
    start_from = op.start_from
    at: list[float] = []
    errors: list[BaseException] = []
    finished = threading.Event()

    def act() -> None:
        try:
            deadline = time.monotonic() + 180
            while True:
                cursor = meta.get_cursor(identity).value
                if cursor is not None and str(cursor.binlog_position) != start_from:
                    break
                assert not finished.is_set(), "the run ended before it moved the cursor"
                assert time.monotonic() < deadline, "the cursor did not move within 180 s"
                time.sleep(0.05)
            meta.client.stop()
            fault()
            at.append(time.monotonic())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    try:
        result: Any = op.execute(make_context(run_id="first"))
    except Exception as exc:
        result = exc
    ended = time.monotonic()
    finished.set()
    thread.join(120)
    meta.client.close()
    if errors:
        raise AssertionError(f"{errors[0]} (the run: {result!r})") from errors[0]
    assert at, "the fault never acted"
    return result, ended - at[0]


def _assert_exact(mariadb: MariaDbServer, spark: Any, ns: str) -> None:
    diffs = lake_verify(mariadb, spark, {f"shop.{t}": f"lake.{ns}.{t}" for t in TABLES})
    assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)


@pytest.mark.spark
def test_operator_fails_within_reconnect_timeout_when_mariadb_stays_down(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """MariaDB stops mid-run and stays down: the task fails with SourceUnavailableError within
    reconnect_timeout (10 s) plus a margin, naming the connection id and the position; the cursor
    stays where the lake is, so the run after MariaDB is back makes the lake exact."""
    shop.changes(500)
    (head, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    prefix, number = head.rsplit(".", 1)
    stop = f"{prefix}.{int(number) + 1:0{len(number)}d}:4"  # the reader still waits for it when MariaDB goes
    ns = f"mdbdown_{uuid.uuid4().hex[:8]}"
    op = _operator(
        shop,
        spark_warehouse,
        ns,
        stop_at=stop,
        reconnect_timeout=10.0,
        max_rows_per_commit=250,
        batch_size=50,
    )
    try:
        result, elapsed = _run_with_fault(op, zookeeper, zk_chroot, lambda: mariadb.stop(keep_data=True))
    finally:
        mariadb.start()
    FIGURES.append(
        f"MariaDB stopped mid-run (reconnect_timeout=10): failed {elapsed:.1f} s later: {result!r}"[:600]
    )
    assert isinstance(result, SourceUnavailableError), f"{type(result).__name__}: {result}"
    message = str(result)
    assert "connection 'mysql_default'" in message and f"{mariadb.host}:{mariadb.port}" in message, message
    assert result.position is not None and f"Reading stopped at {result.position}" in message, message
    assert elapsed < 10.0 + MARGIN, elapsed
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        cursor = meta.get_cursor(ClientIdentity(op.destination, 1001)).value
    finally:
        meta.client.stop()
        meta.client.close()
    assert cursor is not None and cursor.binlog_position is not None
    assert cursor.binlog_position < BinlogPosition.parse(result.position), "the cursor moved past the failure"
    shop.conn.ping(reconnect=True)  # the stop closed it
    shop.changes(100)
    again = _operator(shop, spark_warehouse, ns).execute(make_context(run_id="next", try_number=2))
    assert again["changes"] > 0 and again["start"] == str(cursor.binlog_position), again
    _assert_exact(mariadb, spark, ns)


@pytest.mark.spark
def test_operator_fails_bounded_when_zookeeper_stays_down(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """ZooKeeper stops mid-run and stays down: the task fails naming ZooKeeper within the ack's
    wait (twice the 4 s session timeout), the release bound (5 s) and kazoo's stop (up to 15 s),
    plus a margin: the cleanup does not wait for ZooKeeper. The next run, ZooKeeper back, is exact."""
    shop.changes(500)
    ns = f"zkdown_{uuid.uuid4().hex[:8]}"
    op = _operator(shop, spark_warehouse, ns, max_rows_per_commit=250, batch_size=50)
    try:
        result, elapsed = _run_with_fault(op, zookeeper, zk_chroot, lambda: zookeeper.stop(keep_data=True))
    finally:
        zookeeper.start()
    FIGURES.append(f"ZooKeeper stopped mid-run: failed {elapsed:.1f} s later: {result!r}"[:600])
    assert isinstance(result, (SessionLostError, MetaError)), f"{type(result).__name__}: {result}"
    assert "ZooKeeper" in str(result), str(result)
    assert elapsed < 8.0 + 5.0 + 15.0 + MARGIN, elapsed
    again = _operator(shop, spark_warehouse, ns, running_timeout=120).execute(
        make_context(run_id="next", try_number=2)
    )
    assert again["changes"] > 0
    _assert_exact(mariadb, spark, ns)
