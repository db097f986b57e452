"""Service faults while BinlogToSparkOperator runs: ZooKeeper restarted and a ZooKeeper session
expired mid-run, MariaDB restarted mid-drain, binlog rotations inside a stretch of transactions, and
the cursor's binlog purged.

Each ends in a correct result or in a clear failure that moved no cursor past what the lake holds;
the next run is then exact (lake and source compared value by value). The module runs its own
MariaDB and ZooKeeper (:mod:`own_servers`): it stops and restarts them.

"Mid-run" is reached by small commits (``max_rows_per_commit``): the test waits until the cursor
moved once, then acts while the operator still has several commits to go.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from airflow_harness import Shop, lake_verify, make_context, meta_manager
from figures import FIGURES
from kazoo.client import KazooClient
from own_servers import own_server

from airflow_provider_binlog.canal.errors import FencedError, PurgedPositionError, SessionLostError
from airflow_provider_binlog.canal.ha import RunningNode
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.dev.load import RateWriter
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TABLES = ("customers", "products", "orders")


@pytest.fixture(scope="module")
def mariadb() -> Iterator[MariaDbServer]:
    yield from own_server(MariaDbServer(server_id=31))


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[ZooKeeperServer]:
    yield from own_server(ZooKeeperServer())


class Run:
    """Operator runs of one destination in this process; the first with small commits, so that it
    is long enough to be hit mid-run by a fault acting on a thread of its own."""

    def __init__(self, shop: Shop, warehouse: str, ns: str, **kwargs: Any) -> None:
        self.ns = ns
        self.destination = f"dest-{ns}"
        self.identity = ClientIdentity(self.destination, 1001)
        self.start_from = shop.start_from
        self.warehouse = warehouse
        self.op = self.operator(**{"max_rows_per_commit": 250, "batch_size": 50, **kwargs})
        self.finished = threading.Event()

    def operator(self, **kwargs: Any) -> BinlogToSparkOperator:
        # a snapshot run starts at its own position: the operator refuses start_from with it
        if kwargs.get("snapshot", "never") == "never":
            kwargs["start_from"] = self.start_from
        return BinlogToSparkOperator(
            task_id="load", destination=self.destination, tables={"shop.*": f"lake.{self.ns}.{{table}}"},
            warehouse=self.warehouse, spark_master="local[2]", stop_spark=False, **kwargs,
        )  # fmt: skip

    def first(self, fault: Callable[[Run], None] | None = None) -> Any:
        """The first run, here, while ``fault(self)`` runs on a thread; its summary or its exception.

        (The operator runs on the test's thread: Spark resolves the ``lake`` catalog there.)
        """
        errors: list[BaseException] = []

        def act() -> None:
            try:
                fault(self)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=act if fault is not None else None, daemon=True)
        thread.start()
        try:
            result: Any = self.op.execute(make_context(run_id="first"))
        except Exception as exc:
            result = exc
        finally:
            self.finished.set()
        thread.join(120)
        if errors:
            raise AssertionError(f"{errors[0]} (the run: {result!r})") from errors[0]
        return result

    def again(self, **kwargs: Any) -> dict[str, Any]:
        """The next run of the destination (default settings); it must succeed."""
        return self.operator(**kwargs).execute(make_context(run_id="next", try_number=2))


def _namespace(name: str) -> str:
    return f"{name}_{uuid.uuid4().hex[:8]}"


def _wait_for_cursor_move(meta: Any, run: Run, timeout: float = 180) -> None:
    """Until the run moved the cursor once (it is mid-run then: it has several commits to go)."""
    deadline = time.monotonic() + timeout
    while True:
        cursor = meta.get_cursor(run.identity).value
        if cursor is not None and str(cursor.binlog_position) != run.start_from:
            return
        assert not run.finished.is_set(), "the run ended before it moved the cursor"
        assert time.monotonic() < deadline, f"the cursor did not move within {timeout:g} s"
        time.sleep(0.05)


def _first_with(run: Run, zookeeper: ZooKeeperServer, chroot: str, act: Callable[[], None]) -> Any:
    """The first run, with ``act()`` once it moved the cursor (see :meth:`Run.first`)."""
    meta = meta_manager(zookeeper, chroot)

    def fault(run: Run) -> None:
        _wait_for_cursor_move(meta, run)
        act()

    try:
        return run.first(fault)
    finally:
        meta.client.stop()
        meta.client.close()


def _assert_exact(mariadb: MariaDbServer, spark: Any, ns: str) -> None:
    diffs = lake_verify(mariadb, spark, {f"shop.{t}": f"lake.{ns}.{t}" for t in TABLES})
    assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)


# --------------------------------------------------------------------------- ZooKeeper


def test_zookeeper_restarted_mid_run(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """ZooKeeper goes away for two seconds (less than the session timeout) while the operator has
    commits to go, and comes back on the same port with its data: the session survives, the run
    goes on (or fails clearly naming ZooKeeper), and the result (or the next run's) is exact."""
    shop.changes(500)
    run = Run(shop, spark_warehouse, _namespace("zkrestart"))
    port = zookeeper.port

    def restart_zookeeper() -> None:
        zookeeper.stop(keep_data=True)
        time.sleep(2.0)
        zookeeper.start()

    result = _first_with(run, zookeeper, zk_chroot, restart_zookeeper)
    FIGURES.append(f"ZooKeeper restarted mid-run: {result!r}"[:600])
    assert zookeeper.port == port
    if isinstance(result, BaseException):
        assert "ZooKeeper" in str(result), f"unclear failure: {type(result).__name__}: {result}"
    summary = run.again()
    assert isinstance(result, dict) or summary["changes"] > 0
    _assert_exact(mariadb, spark, run.ns)


def test_zookeeper_session_expired_mid_run(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """The operator's ZooKeeper session expires mid-run (closed by a second client on the same
    session id, as a long partition would end); another consumer takes the running node at once.
    The first run then fails naming the expired session (or, for an ack that raced the expiry, the
    takeover), and it writes no cursor after the other consumer acquired: the acquire bumped the
    epoch that every cursor write of the first run is checked against. The next run is exact."""
    shop.changes(500)
    run = Run(shop, spark_warehouse, _namespace("zkexpire"))
    meta = meta_manager(zookeeper, zk_chroot)
    other = KazooClient(hosts=zookeeper.hosts + zk_chroot)
    other.start(timeout=15)
    probe = RunningNode(other, run.identity, "probe")
    seen: dict[str, Any] = {}

    def expire_session(run: Run) -> None:
        _wait_for_cursor_move(meta, run)
        instance = run.op._instance
        assert instance is not None and instance.running is not None
        expirer = KazooClient(hosts=zookeeper.hosts + zk_chroot, client_id=instance.running.client.client_id)
        expirer.start(timeout=15)
        expirer.stop()  # closes the session the operator holds the running node with
        expirer.close()
        probe.acquire(timeout=30)  # the running node went with the session
        seen["cursor"] = meta.get_cursor(run.identity)

    try:
        result = run.first(expire_session)
        FIGURES.append(f"session expired mid-run: {result!r}"[:600])
        assert isinstance(result, SessionLostError), f"{type(result).__name__}: {result}"
        message = str(result)
        if isinstance(result, FencedError):  # an ack that passed its session check just before the expiry
            assert "another consumer took over" in message and run.destination in message, message
        else:
            assert "session" in message and "expired" in message, message
        # Any write of the first run that reaches ZooKeeper after the probe's acquire fails its epoch
        # check, and the probe read the cursor after its acquire: so the cursor is exactly as it was.
        assert meta.get_cursor(run.identity) == seen["cursor"], "a stale consumer moved the cursor"
        probe.close()
    finally:
        other.stop()
        other.close()
        meta.client.stop()
        meta.client.close()
    assert run.again()["changes"] > 0
    _assert_exact(mariadb, spark, run.ns)


# --------------------------------------------------------------------------- MariaDB


def test_mariadb_restarted_mid_drain(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """MariaDB restarts (same port, same data) while the operator drains: the reader reconnects
    from the end of the last complete transaction and the run ends exact.

    The run drains up to the start of the binlog file the restart opens: so its reader is still
    connected when the server goes away, whatever the socket buffers already hold."""
    shop.changes(500)
    rows = {t: mariadb.execute(f"SELECT COUNT(*) FROM shop.{t}")[0][0] for t in TABLES}
    (head, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    prefix, number = head.rsplit(".", 1)
    stop = f"{prefix}.{int(number) + 1:0{len(number)}d}:4"
    run = Run(shop, spark_warehouse, _namespace("mdbrestart"), stop_at=stop)
    port = mariadb.port
    result = _first_with(run, zookeeper, zk_chroot, mariadb.restart)
    assert mariadb.port == port
    assert {t: mariadb.execute(f"SELECT COUNT(*) FROM shop.{t}")[0][0] for t in TABLES} == rows
    FIGURES.append(f"MariaDB restarted mid-drain: {result!r}"[:600])
    if isinstance(result, BaseException):
        raise AssertionError(f"the run did not survive the restart: {type(result).__name__}: {result}")
    assert "reconnecting" in caplog.text, "the reader never lost its connection"
    assert result["stop"] == stop and result["changes"] > 0
    _assert_exact(mariadb, spark, run.ns)
    shop.conn.ping(reconnect=True)  # the restart closed it
    shop.changes(100)  # the next run reads across the restart's new binlog file
    assert run.again()["changes"] > 0
    _assert_exact(mariadb, spark, run.ns)


# --------------------------------------------------------------------------- rotations


def test_binlog_rotations_inside_a_transaction_heavy_stretch(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
) -> None:  # fmt: skip
    """FLUSH BINARY LOGS every 50 ms while a writer commits multi-statement transactions (600
    statements/s) and the operator drains concurrently across the new files; the stretch goes on
    after that run until it made 20 rotations and 500 statements (however fast the run was); after
    the writer stops one more run is exact."""
    files_before = len(mariadb.execute("SHOW BINARY LOGS"))
    writer = RateWriter(mariadb, rate=600, seed=77).start()
    stop = threading.Event()
    rotated = [0]

    def rotate() -> None:
        while not stop.wait(0.05):
            mariadb.execute("FLUSH BINARY LOGS")
            rotated[0] += 1

    rotator = threading.Thread(target=rotate, daemon=True)
    rotator.start()
    try:
        time.sleep(1.0)
        run = Run(shop, spark_warehouse, _namespace("rotate"), max_rows_per_commit=1000, batch_size=200)
        result = run.first()
        assert isinstance(result, dict), f"{type(result).__name__}: {result}"
        deadline = time.monotonic() + 60
        while (rotated[0] < 20 or writer.written < 500) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        rotator.join(30)
        written = writer.stop()
    rotations = len(mariadb.execute("SHOW BINARY LOGS")) - files_before
    FIGURES.append(
        f"rotations: {rotations}, statements written: {written}, first run: {result['changes']} changes"
    )
    assert rotations >= 20 and written >= 500
    assert result["start"].split(":")[0] < result["end"].split(":")[0], "the first run read one file only"
    assert run.again()["changes"] > 0
    _assert_exact(mariadb, spark, run.ns)


# --------------------------------------------------------------------------- purge


def test_purged_cursor_binlog_fails_then_snapshot_recovers(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """The binlog holding the cursor is purged: a run fails naming the cursor and its file and
    telling the user to snapshot, moving nothing; with ``snapshot="when_needed"`` the next run takes
    a new snapshot and the lake is exact again."""
    shop.changes(200)
    ns = _namespace("purge")
    run = Run(shop, spark_warehouse, ns)
    assert run.again()["changes"] > 0
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        cursor = meta.get_cursor(run.identity)
        shop.changes(100)
        mariadb.execute("FLUSH BINARY LOGS")
        (head, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
        mariadb.purge_binlogs_to(head)
        snapshots = {t: spark.sql(f"SELECT count(*) FROM lake.{ns}.{t}.snapshots").first()[0] for t in TABLES}

        with pytest.raises(PurgedPositionError) as failed:
            run.again()
        message = str(failed.value)
        FIGURES.append(f"purged cursor: {message}")
        assert cursor.value is not None and cursor.value.journal_name is not None
        assert f"stored cursor {cursor.value.binlog_position}" in message, message
        assert f"{cursor.value.journal_name}, which was purged" in message, message
        assert f"oldest binlog there is {head}" in message, message
        assert message.startswith(f"destination {run.destination}: "), message
        assert "take a new snapshot" in message and 'snapshot="when_needed"' in message, message
        assert meta.get_cursor(run.identity) == cursor, "the failed run moved the cursor"
        after = {t: spark.sql(f"SELECT count(*) FROM lake.{ns}.{t}.snapshots").first()[0] for t in TABLES}
        assert after == snapshots, "the failed run wrote to the lake"

        run.again(snapshot="when_needed")
        _assert_exact(mariadb, spark, ns)
        new = meta.get_cursor(run.identity).value
        assert new is not None and new.journal_name is not None and new.journal_name >= head
    finally:
        meta.client.stop()
        meta.client.close()
