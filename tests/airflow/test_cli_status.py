"""``binlog-cdc status`` (issue #17), the sensor's retention check and the headroom gauge, against a
MariaDB of this module's own (it changes the server's retention and purges its binlogs), the
harness's ZooKeeper, and a real StatsD listener on loopback fed by Airflow's own StatsD client.

Values are compared with the server (``SHOW MASTER STATUS``, ``SHOW BINARY LOGS``) and the meta store
(the cursor as the ZooKeeper meta manager reads it).
"""

from __future__ import annotations

import io
import json
import logging
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from airflow.sdk.exceptions import TaskDeferred
from airflow_harness import Shop, make_context, meta_manager

from airflow_provider_binlog import cli
from airflow_provider_binlog.canal.ha import RunningNode
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer, free_port
from airflow_provider_binlog.operators.metrics import headroom_name
from airflow_provider_binlog.sensors.binlog import BinlogEventSensor

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def mariadb() -> Iterator[MariaDbServer]:
    server = MariaDbServer(server_id=43).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def expire(mariadb: MariaDbServer) -> Iterator[Any]:
    """``expire(seconds)`` sets ``binlog_expire_logs_seconds``; 0 (no purge by age) again after."""

    def set_expire(seconds: int) -> None:
        mariadb.execute(f"SET GLOBAL binlog_expire_logs_seconds = {int(seconds)}")

    yield set_expire
    set_expire(0)


class StatsdListener:
    """A UDP socket on loopback that Airflow's StatsD client sends to."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.lines: list[str] = []

    def gauge(self, name: str, timeout: float = 5.0) -> float:
        """The value the gauge ``name`` (after Airflow's prefix) holds once its packets arrived.

        A negative gauge arrives as ``0|g`` then the delta ``-v|g`` (StatsD sets no negative value),
        in one datagram or two."""
        deadline = time.monotonic() + timeout
        values: list[str] = []
        while time.monotonic() < deadline:
            try:
                data = self.sock.recv(65535)
            except TimeoutError:
                if values:  # quiet for a moment after the gauge's packets: all of them are in
                    break
                continue
            self.lines += data.decode().splitlines()
            values = [ln.split(":", 1)[1] for ln in self.lines if ln.split(":", 1)[0].endswith("." + name)]
        if values:
            value = 0.0
            for v in values:
                number = v.split("|", 1)[0]
                value = value + float(number) if number[0] in "+-" else float(number)
            return value
        raise AssertionError(f"no gauge {name} within {timeout} s; received {self.lines}")


@pytest.fixture
def statsd(monkeypatch: pytest.MonkeyPatch) -> Iterator[StatsdListener]:
    """Airflow's metrics on (``[metrics] statsd_on``) towards a listener on loopback, the Stats
    client built as the task runner builds it; metrics off again after."""
    from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(sock.getsockname()[1]))
    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)
    try:
        yield StatsdListener(sock)
    finally:
        stats.initialize(factory=NoStatsLogger, export_legacy_names=False)
        sock.close()


def _status(
    mariadb: MariaDbServer, zookeeper: ZooKeeperServer, chroot: str, destination: str,
    capsys: pytest.CaptureFixture[str], *more: str,
) -> tuple[int, str]:  # fmt: skip
    argv = [
        "status", "--host", mariadb.host, "--port", str(mariadb.port), "--user", mariadb.repl_user,
        "--password-env", "STATUS_PASSWORD", "--destination", destination,
        "--zookeeper", zookeeper.hosts + chroot, "--timeout", "10", *more,
    ]  # fmt: skip
    args = cli.build_parser().parse_args(argv)
    out = io.StringIO()  # the report alone (this process's log lines go to stdout too)
    code = int(args.func(args, out=out))
    captured = capsys.readouterr()
    assert mariadb.repl_password not in out.getvalue() + captured.out + captured.err
    return code, out.getvalue()


def _head(mariadb: MariaDbServer) -> str:
    (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    return f"{file}:{pos}"


@pytest.fixture
def password(mariadb: MariaDbServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATUS_PASSWORD", mariadb.repl_password)


@pytest.mark.spark
def test_status_after_a_run(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str, expire: Any, statsd: StatsdListener, password: None,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """After a run: the cursor is the meta store's, the head is the server's, the operator sent the
    headroom gauge (the cursor is in the file the server writes: the whole retention); more writes
    show as lag; a held ``running`` node shows who holds it."""
    from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

    expire(86400)
    shop.changes(60)
    dest = f"status-{uuid.uuid4().hex[:8]}"
    ns = dest.replace("-", "_")
    BinlogToSparkOperator(
        task_id="load", destination=dest, tables={"shop.*": f"lake.{ns}.{{table}}"},
        start_from=shop.start_from, warehouse=spark_warehouse, spark_master="local[2]", stop_spark=False,
    ).execute(make_context(run_id="status"))  # fmt: skip
    assert statsd.gauge(headroom_name(dest)) == 86400

    meta = meta_manager(zookeeper, zk_chroot)
    try:
        ident = ClientIdentity(dest)
        cursor = meta.get_cursor(ident).value
        code, out = _status(mariadb, zookeeper, zk_chroot, dest, capsys, "--json")
        status = json.loads(out)
        assert code == 0 and status["warnings"] == [], status
        assert status["cursor"]["position"] == str(cursor.binlog_position), (status, cursor)
        assert status["cursor"]["gtid"] == (cursor.gtid or None) and status["cursor"]["file"] == "present"
        assert status["head"]["position"] == _head(mariadb), status
        (gtid,), *_ = mariadb.execute("SELECT @@gtid_binlog_pos")
        assert status["head"]["gtid"] == gtid
        assert status["lag"]["seconds"] == 0 and status["lag"]["files"] == 0, status  # caught up
        head_pos = int(_head(mariadb).split(":")[1])
        assert status["lag"]["bytes"] == head_pos - cursor.position, status
        assert status["retention"]["retention_seconds"] == 86400 and status["retention"]["warning"] is False
        assert status["running"] is None and status["running_known"] is True
        assert "shop" in status["filter"] and status["never_ran"] is False

        time.sleep(1.1)
        before = time.time()
        shop.changes(10)
        node = RunningNode(meta.client, ident, label="tests/status/held")
        node.acquire()
        try:
            code, out = _status(mariadb, zookeeper, zk_chroot, dest, capsys)
        finally:
            node.close()
    finally:
        meta.client.stop()
        meta.client.close()
    assert code == 0, out
    lines = dict(line.split(":", 1) for line in out.splitlines()[1:])
    assert lines["cursor"].strip().startswith(str(cursor.binlog_position)), out
    assert lines["head"].strip().startswith(_head(mariadb)), out
    assert "oldest unread transaction" in lines["lag"] and "0 file(s)" in lines["lag"], out
    lag_s = float(lines["lag"].rsplit("transaction ", 1)[1].split(" s old")[0])
    assert 0 <= lag_s <= time.time() - before + 1, out
    assert "tests/status/held" in lines["running"] and f"pid {node.pid}" in lines["running"], out
    assert "WARNING" not in out


def test_status_of_a_destination_that_never_ran(
    mariadb: MariaDbServer, zookeeper: ZooKeeperServer, zk_chroot: str, password: None,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    code, out = _status(mariadb, zookeeper, zk_chroot, "never-ran", capsys)
    assert code == 0 and "the destination never ran" in out and "WARNING" not in out, out
    assert f"head:      {_head(mariadb)}" in out, out
    code, out = _status(mariadb, zookeeper, zk_chroot, "never-ran", capsys, "--json")
    status = json.loads(out)
    assert code == 0 and status["never_ran"] is True and status["cursor"] is None, status
    assert status["lag"] == {"bytes": None, "files": None, "seconds": None, "unread_since": None}


def test_status_fails_bounded_and_names_what(
    mariadb: MariaDbServer, zookeeper: ZooKeeperServer, zk_chroot: str, password: None,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A source nobody listens on, a ZooKeeper nobody listens on, a headroom out of range: exit 1,
    a message naming it, within the bound."""
    common = ["status", "--user", mariadb.repl_user, "--password-env", "STATUS_PASSWORD",
              "--destination", "d", "--timeout", "3"]  # fmt: skip
    zk = ["--zookeeper", zookeeper.hosts + zk_chroot]
    started = time.monotonic()
    assert cli.main([*common, "--host", "127.0.0.1", "--port", str(free_port()), *zk]) == 1
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert "binlog-cdc status: error:" in err and "127.0.0.1" in err and mariadb.repl_password not in err
    started = time.monotonic()
    dead_zk = ["--zookeeper", f"127.0.0.1:{free_port()}"]
    assert cli.main([*common, "--host", mariadb.host, "--port", str(mariadb.port), *dead_zk]) == 1
    assert time.monotonic() - started < 30
    assert "cannot reach ZooKeeper" in capsys.readouterr().err
    bad = [*common, "--host", mariadb.host, "--port", str(mariadb.port), *zk, "--headroom", "2"]
    assert cli.main(bad) == 1 and "--headroom is a fraction" in capsys.readouterr().err


def test_sensor_warns_once_and_status_warns_then_reports_the_purge(
    shop: Shop, conns: dict[str, str], mariadb: MariaDbServer, zookeeper: ZooKeeperServer,
    zk_chroot: str, expire: Any, statsd: StatsdListener, password: None,
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A cursor whose file was closed longer ago than the retention (2 s here): the sensor warns at
    its first poke only and sends the (negative) gauge; status warns with exit 3; once the file is
    purged, status names the purge and the remedy."""
    dest = f"sensor-{uuid.uuid4().hex[:8]}"
    file = shop.start_from.split(":")[0]
    shop.changes(20)
    mariadb.execute("FLUSH BINARY LOGS")  # the cursor's file is closed now; its age starts
    expire(2)
    time.sleep(3.0)
    task_log = logging.getLogger("tests.airflow.status")  # the task log goes to structlog's sink
    monkeypatch.setattr(BinlogEventSensor, "log", property(lambda self: task_log))
    sensor = BinlogEventSensor(
        task_id="wait", destination=dest, tables=["shop.*"], start_from=shop.start_from, min_changes=10**6
    )
    with caplog.at_level(logging.INFO):
        assert not sensor.poke(make_context()).is_done
        assert not sensor.poke(make_context()).is_done
    warned = [
        r.getMessage() for r in caplog.records
        if r.levelno == logging.WARNING and f"the cursor's binlog {file}" in r.getMessage()
    ]  # fmt: skip
    assert len(warned) == 1 and "past the retention" in warned[0], warned
    assert statsd.gauge(headroom_name(dest)) < 0, statsd.lines

    def warnings_of(destination: str) -> list[str]:
        return [
            r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.getMessage().startswith(f"destination {destination}: ")
        ]  # fmt: skip

    deferred = f"defer-{uuid.uuid4().hex[:8]}"  # deferrable: checked at the poke before it defers
    with caplog.at_level(logging.INFO), pytest.raises(TaskDeferred):
        BinlogEventSensor(
            task_id="wait", destination=deferred, tables=["shop.*"], start_from=shop.start_from,
            min_changes=10**6, deferrable=True,
        ).execute(make_context())  # fmt: skip
    assert len(warnings_of(deferred)) == 1 and "past the retention" in warnings_of(deferred)[0]
    rescheduled = f"resched-{uuid.uuid4().hex[:8]}"  # a reschedule's poke is not the sensor's first
    with caplog.at_level(logging.INFO):
        BinlogEventSensor(
            task_id="wait", destination=rescheduled, tables=["shop.*"], start_from=shop.start_from,
            min_changes=10**6, mode="reschedule",
        ).poke({**make_context(), "task_reschedule_count": 1})  # fmt: skip
    assert warnings_of(rescheduled) == []

    code, out = _status(mariadb, zookeeper, zk_chroot, dest, capsys)
    assert code == 3, out
    assert any(
        line.startswith("WARNING: ")
        and f"the cursor's binlog {file}" in line
        and "past the retention" in line
        for line in out.splitlines()
    ), out
    code, out = _status(mariadb, zookeeper, zk_chroot, dest, capsys, "--json", "--headroom", "0")
    status = json.loads(out)
    assert code == 3 and status["retention"]["warning"] is True and status["retention"]["file"] == file
    assert status["cursor"]["position"] == shop.start_from and status["cursor"]["time"] is None  # pinned

    (head_file, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    mariadb.execute(f"PURGE BINARY LOGS TO '{head_file}'")
    code, out = _status(mariadb, zookeeper, zk_chroot, dest, capsys)
    assert code == 3 and "[file purged]" in out, out
    purged = [line for line in out.splitlines() if line.startswith("WARNING: ")]
    assert len(purged) == 1 and f"{file} was purged" in purged[0], out
    assert f"the oldest binlog there is {head_file}" in purged[0] and 'snapshot="when_needed"' in purged[0]
    code, out = _status(mariadb, zookeeper, zk_chroot, dest, capsys, "--json")
    status = json.loads(out)
    assert code == 3 and status["cursor"]["file"] == "purged" and status["lag"]["bytes"] is None, status
    assert status["head"]["oldest"] == head_file and len(status["warnings"]) == 1, status


def test_lag_counts_only_the_destinations_own_tables(
    shop: Shop, conns: dict[str, str], mariadb: MariaDbServer, zookeeper: ZooKeeperServer, zk_chroot: str,
    password: None, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A destination of ``shop.orders`` whose cursor is followed by other schemas' and other shop
    tables' transactions (rows and DDL, written "7 minutes ago" by the session's timestamp) is
    caught up; its lag starts at its own table's first unread transaction (a row change, then a
    DDL), in ``binlog-cdc status`` and in the run's lag (``Observing.lag``). Without a filter every
    transaction counts, as before."""
    from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.filter import TableFilter
    from airflow_provider_binlog.drain.observe import Observing
    from airflow_provider_binlog.drain.source import _iso
    from airflow_provider_binlog.drain.status import first_unread

    dest = f"lag-{uuid.uuid4().hex[:8]}"
    start = _head(mariadb)
    sensor = BinlogEventSensor(
        task_id="wait", destination=dest, tables=["shop.orders"], start_from=start, min_changes=1
    )
    assert not sensor.poke(make_context()).is_done  # pins the cursor at the head, stores the filter
    now = int(time.time())
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET timestamp = {now - 420}")  # others' changes, 7 minutes old
            cur.execute("CREATE DATABASE IF NOT EXISTS other_lag")
            cur.execute("CREATE TABLE IF NOT EXISTS other_lag.t (id INT PRIMARY KEY, v INT)")
            cur.execute("INSERT INTO other_lag.t VALUES (1, 1), (2, 2)")
            cur.execute("ALTER TABLE other_lag.t ADD COLUMN w INT")
            cur.execute("INSERT INTO shop.customers (id, name) VALUES (900001, 'lag')")
            cur.execute("BEGIN")
            cur.execute("UPDATE other_lag.t SET v = v + 1")
            cur.execute("COMMIT")
    finally:
        conn.close()

    code, out = _status(mariadb, zookeeper, zk_chroot, dest, capsys, "--json")
    status = json.loads(out)
    assert code == 0 and status["filter"] == "shop\\.orders", status
    assert status["lag"]["seconds"] == 0 and status["lag"]["unread_since"] is None, status  # caught up
    assert status["lag"]["bytes"] > 0, status  # the binlog's distance counts every byte
    client = ReplicationClient(
        ReplicationConfig(host=mariadb.host, port=mariadb.port, user=mariadb.repl_user,
                          password=mariadb.repl_password)
    )  # fmt: skip
    cursor = BinlogPosition.parse(start)
    assert first_unread(client, cursor, included=True) == (True, float(now - 420))  # unfiltered

    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET timestamp = {now - 60}")
            cur.execute(
                "INSERT INTO shop.orders VALUES (900001, 1, 'SKU-00001', 1, 9.99, 'new', NULL, "
                "'2026-01-01 00:00:00', NULL)"
            )
            cur.execute(f"SET timestamp = {now - 30}")
            cur.execute("INSERT INTO other_lag.t VALUES (3, 3, 3)")
    finally:
        conn.close()
    code, out = _status(mariadb, zookeeper, zk_chroot, dest, capsys, "--json")
    status = json.loads(out)
    assert code == 0 and status["lag"]["unread_since"] == _iso(now - 60), status
    assert status["lag"]["seconds"] >= 60, status
    orders = TableFilter(include="shop\\.orders").matches
    assert first_unread(client, cursor, included=True, matches=orders) == (True, float(now - 60))

    told: list[tuple[str, float]] = []

    class Told:
        def lag(self, when: str, seconds: float) -> None:
            told.append((when, seconds))

    observing = Observing(Told(), dest, lambda level, line: None)  # type: ignore[arg-type]
    assert observing.lag("start", client, cursor, True, orders) is not None
    assert told and told[0][0] == "start" and told[0][1] >= 60 and told[0][1] < 420, told

    # a DDL of the destination's table is its own transaction too: the lag after the insert above
    after = BinlogPosition.parse(_head(mariadb))
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET timestamp = {now - 20}")
            cur.execute("INSERT INTO other_lag.t VALUES (4, 4, 4)")
            cur.execute(f"SET timestamp = {now - 10}")
            cur.execute("ALTER TABLE shop.orders COMMENT 'lag test'")
    finally:
        conn.close()
    assert first_unread(client, after, included=True, matches=orders) == (True, float(now - 10))
    assert first_unread(client, after, included=True) == (True, float(now - 20))
    mariadb.execute("DROP DATABASE other_lag")
