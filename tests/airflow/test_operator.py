"""BinlogToSparkOperator in this process against the real services: retries after a real Spark
failure, two runs on one destination, and clear failures for bad credentials and privileges.

The operator shares this process's SparkSession (``stop_spark=False``); each test writes its own
namespace of the session's warehouse.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.execution_time.context import OutletEventAccessors
from airflow_harness import Shop, lake_verify, make_context, meta_manager, mysql_uri

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import RunningHeldError
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer, free_port
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TABLE_NAMES = ("customers", "products", "orders")


def _operator(destination: str, namespace: str, warehouse: str, **kwargs: Any) -> BinlogToSparkOperator:
    op = BinlogToSparkOperator(
        task_id=kwargs.pop("task_id", "load"),
        destination=destination,
        tables={"shop.*": f"lake.{namespace}.{{table}}"},
        warehouse=warehouse,
        spark_master="local[2]",
        stop_spark=False,
        **kwargs,
    )
    return op


@pytest.fixture(autouse=True)
def task_log_to_caplog(monkeypatch: pytest.MonkeyPatch) -> None:
    """The task log goes to structlog's sink; a stdlib logger lets caplog read it."""
    logger = logging.getLogger("tests.airflow.operator")
    monkeypatch.setattr(BinlogToSparkOperator, "log", property(lambda self: logger))


def _targets(namespace: str) -> dict[str, str]:
    return {f"shop.{t}": f"lake.{namespace}.{t}" for t in TABLE_NAMES}


def _assert_equal(mariadb: MariaDbServer, spark: Any, namespace: str) -> None:
    diffs = lake_verify(mariadb, spark, _targets(namespace))
    assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)


def _snapshots(spark: Any, table: str) -> int:
    try:
        return int(spark.sql(f"SELECT count(*) FROM {table}.snapshots").first()[0])
    except Exception:
        return 0


# --------------------------------------------------------------------------- retry


def test_retry_after_a_real_spark_failure(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """Try 1 fails in Spark for real (a file sits where the orders table must be created) after the
    other tables were committed; the cursor stays; try 2 (obstacle gone) skips what the lake holds,
    applies the rest, then moves the cursor: nothing lost, nothing applied twice."""
    shop.changes(200)
    ns = f"retry_{uuid.uuid4().hex[:8]}"
    dest = f"retry-{ns}"
    identity = ClientIdentity(dest, 1001)
    blocker = Path(spark_warehouse) / ns / "orders"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a table directory")
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        op = _operator(dest, ns, spark_warehouse, start_from=shop.start_from)
        with pytest.raises(Exception) as failed:
            op.execute(make_context(try_number=1))
        assert "orders" in str(failed.value), failed.value
        cursor = meta.get_cursor(identity).value
        assert cursor is not None and cursor.binlog_position == BinlogPosition.parse(shop.start_from), (
            "the cursor moved although Spark failed"
        )
        marks = meta.marks(identity)
        assert marks, "the failed attempt's batches should still be marked"
        assert meta.runs(identity)["test_run"]["state"] == "running"
        committed = {t: _snapshots(spark, f"lake.{ns}.{t}") for t in TABLE_NAMES}
        assert committed["orders"] == 0
        assert committed["customers"] > 0, "expected customers to be committed before orders failed"

        blocker.unlink()
        caplog.set_level(logging.INFO)
        summary = _operator(dest, ns, spark_warehouse, start_from=shop.start_from).execute(
            make_context(try_number=2)
        )
        text = caplog.text
        for batch_id in marks:
            assert f"batch {batch_id} (" in text, text[-3000:]
        _assert_equal(mariadb, spark, ns)
        tables = summary["tables"]
        for t in TABLE_NAMES:
            counts = tables[f"lake.{ns}.{t}"]
            if committed[t]:  # held by the lake: skipped, no second commit
                assert counts["commits"] == 0 and counts["skipped"] > 0, (t, counts)
                assert _snapshots(spark, f"lake.{ns}.{t}") == committed[t]
            else:
                assert counts["commits"] >= 1 and counts["skipped"] == 0, (t, counts)
        after = meta.get_cursor(identity).value
        assert after is not None and str(after.binlog_position) == summary["end"]
        assert after.binlog_position > BinlogPosition.parse(shop.start_from)
        assert not meta.marks(identity)
        assert meta.runs(identity)["test_run"]["state"] == "success"
    finally:
        if blocker.is_file():
            blocker.unlink()
        meta.client.stop()
        meta.client.close()


# --------------------------------------------------------------------------- two runs


def test_two_runs_on_one_destination(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """While run A holds the destination, run B with a short running_timeout fails naming A
    (host, pid, dag/task/try); run C with a long one waits for A and then succeeds."""
    shop.changes(150)
    ns = f"conc_{uuid.uuid4().hex[:8]}"
    dest = f"conc-{ns}"
    gate = threading.Event()
    first = _operator(dest, ns, spark_warehouse, start_from=shop.start_from, task_id="first")
    real_spark = first._spark

    def held_spark() -> Any:  # A holds the running node until B has been turned away
        gate.wait(120)
        return real_spark()

    first._spark = held_spark  # type: ignore[method-assign]
    results: dict[str, Any] = {}

    def run(name: str, op: BinlogToSparkOperator) -> None:
        try:
            results[name] = op.execute(make_context(task_id=op.task_id))
        except BaseException as exc:
            results[name] = exc

    meta = meta_manager(zookeeper, zk_chroot)
    running = f"/otter/canal/destinations/{dest}/1001/running"
    a = threading.Thread(target=run, args=("a", first))
    a.start()
    try:
        deadline = time.monotonic() + 60
        while meta.client.exists(running) is None:
            assert time.monotonic() < deadline and a.is_alive(), results
            time.sleep(0.05)
        second = _operator(dest, ns, spark_warehouse, start_from=shop.start_from, task_id="second",
                           running_timeout=0.5)  # fmt: skip
        with pytest.raises(RunningHeldError) as held:
            second.execute(make_context(task_id="second"))
        message = str(held.value)
        assert "tests/first/test_run/try-1" in message, message
        assert f"pid {held.value.holder['pid']}" in message
        assert "being consumed by" in message

        third = _operator(dest, ns, spark_warehouse, start_from=shop.start_from, task_id="third",
                          running_timeout=120)  # fmt: skip
        c = threading.Thread(target=run, args=("c", third))
        c.start()
        time.sleep(1.0)
        assert "c" not in results, "run C did not wait for run A"
        gate.set()
        a.join(180)
        c.join(180)
    finally:
        gate.set()
        meta.client.stop()
        meta.client.close()
    assert isinstance(results.get("a"), dict), results.get("a")
    assert isinstance(results.get("c"), dict), results.get("c")
    assert results["a"]["changes"] > 0
    assert results["c"]["changes"] == 0 and results["c"]["start"] == results["a"]["end"]
    _assert_equal(mariadb, spark, ns)


# --------------------------------------------------------------------------- clear failures


def _fails_clearly(op: BinlogToSparkOperator, *secrets: str) -> str:
    with pytest.raises(Exception) as failed:
        op.execute(make_context())
    text = f"{type(failed.value).__name__}: {failed.value}"
    for secret in secrets:
        assert secret not in text, text
        assert secret not in repr(failed.value), repr(failed.value)
    return text


def test_wrong_mysql_password(
    shop: Shop, conns: dict[str, str], monkeypatch: pytest.MonkeyPatch, mariadb: MariaDbServer,
    spark_warehouse: str,
) -> None:  # fmt: skip
    wrong = "wrong-" + uuid.uuid4().hex
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_DEFAULT", mysql_uri(mariadb, password=wrong))
    text = _fails_clearly(_operator("badpw", "badpw", spark_warehouse), wrong, mariadb.repl_password)
    assert "Access denied" in text or "authentication" in text.lower(), text
    assert mariadb.repl_user in text, text


def test_unreachable_zookeeper(
    shop: Shop, conns: dict[str, str], monkeypatch: pytest.MonkeyPatch, mariadb: MariaDbServer,
    spark_warehouse: str,
) -> None:  # fmt: skip
    port = free_port()
    monkeypatch.setenv(
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT", f"zookeeper://cdc:zk-secret-42@127.0.0.1:{port}/x?timeout=1"
    )
    started = time.monotonic()
    text = _fails_clearly(_operator("nozk", "nozk", spark_warehouse), "zk-secret-42", mariadb.repl_password)
    assert f"cannot reach ZooKeeper at 127.0.0.1:{port}" in text, text
    assert "zookeeper_default" in text
    assert time.monotonic() - started < 30


@pytest.fixture
def user_without_replication_slave(mariadb: MariaDbServer) -> Any:
    user, password = "cdc_noslave", "noslave-" + uuid.uuid4().hex
    mariadb.execute(f"DROP USER IF EXISTS {user}@'%'")
    mariadb.execute(f"CREATE USER {user}@'%%' IDENTIFIED BY %s", (password,))
    mariadb.execute(f"GRANT SELECT, BINLOG MONITOR ON *.* TO {user}@'%'")
    yield user, password
    mariadb.execute(f"DROP USER IF EXISTS {user}@'%'")


def test_missing_replication_privilege(
    shop: Shop, conns: dict[str, str], monkeypatch: pytest.MonkeyPatch, mariadb: MariaDbServer,
    spark_warehouse: str, user_without_replication_slave: tuple[str, str],
) -> None:  # fmt: skip
    user, password = user_without_replication_slave
    shop.changes(5)
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_DEFAULT", mysql_uri(mariadb, user, password))
    op = _operator("nopriv", "nopriv", spark_warehouse, start_from=shop.start_from)
    text = _fails_clearly(op, password)
    assert "REPLICATION SLAVE" in text, text


# --------------------------------------------------------------------------- crash


CRASH_SCRIPT = """
import json, logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
sys.path.insert(0, {harness!r})
from airflow_harness import make_context
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator
op = BinlogToSparkOperator(task_id="load", destination={dest!r}, tables={tables!r}, start_from={start!r},
                           warehouse={warehouse!r}, spark_master="local[2]")
print(json.dumps(op.execute(make_context())))
"""


def test_crash_between_commit_and_ack_then_rerun(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str, caplog: pytest.LogCaptureFixture, tmp_path: Path,
) -> None:  # fmt: skip
    """The operator runs in a subprocess killed (SIGKILL) right after its Iceberg commit, before any
    ack; the rerun reconciles the dead attempt's batches with the lake and the result is exact."""
    shop.changes(250)
    ns = f"crash_{uuid.uuid4().hex[:8]}"
    dest = f"crash-{ns}"
    identity = ClientIdentity(dest, 1001)
    script = CRASH_SCRIPT.format(
        harness=str(Path(__file__).parent), dest=dest, tables={"shop.*": f"lake.{ns}.{{table}}"},
        start=shop.start_from, warehouse=spark_warehouse,
    )  # fmt: skip
    env = {**os.environ, "BINLOG_CDC_FAILPOINTS": "after_commit=kill"}
    log = tmp_path / "crashed.log"
    with open(log, "wb") as out:
        proc = subprocess.run([sys.executable, "-c", script], env=env, stdout=out, stderr=subprocess.STDOUT,
                              timeout=600, check=False)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, log.read_text()[-3000:]
    # the killed attempt said what it committed before it died (its ack never came)
    assert re.search(
        r"chunk 1 \(\d+ batches, \d+ changes, \d+ row images\): committed to lake\.", log.read_text()
    )

    meta = meta_manager(zookeeper, zk_chroot)
    try:
        cursor = meta.get_cursor(identity).value
        assert cursor is not None and cursor.binlog_position == BinlogPosition.parse(shop.start_from)
        marks = meta.marks(identity)
        assert marks, "the killed attempt left no marks"
        _assert_equal(mariadb, spark, ns)  # committed before the kill
        snapshots = {t: _snapshots(spark, f"lake.{ns}.{t}") for t in TABLE_NAMES}

        caplog.set_level(logging.INFO)
        retry = _operator(dest, ns, spark_warehouse, start_from=shop.start_from)
        context = make_context(try_number=2)
        context["outlet_events"] = events = OutletEventAccessors()
        summary = retry.execute(context)
        for batch_id in marks:
            assert f"batch {batch_id} (" in caplog.text, caplog.text[-3000:]
        # the retry's log is coherent: what it re-read was already in the lake, nothing written
        assert f"an earlier attempt left {len(marks)} batches unacked" in caplog.text
        assert "as 0 row images" not in caplog.text and "): committed to lake." not in caplog.text
        assert "already in the lake (" in caplog.text
        assert summary["commits"] == 0, summary  # as every table's
        assert re.search(
            r"done, \d+ changes in \d+ batches, 0 chunks committed, \d+ already in the lake", caplog.text
        )
        assert (
            "already committed to " + ", ".join(f"lake.{ns}.{t}" for t in sorted(TABLE_NAMES)) in caplog.text
        )
        _assert_equal(mariadb, spark, ns)
        for t in TABLE_NAMES:
            assert _snapshots(spark, f"lake.{ns}.{t}") == snapshots[t], f"{t} was written again"
            assert summary["tables"][f"lake.{ns}.{t}"]["commits"] == 0
        # the killed attempt announced nothing: the retry emits one event per table it found committed
        assert summary["committed_earlier"] == sorted(f"lake.{ns}.{t}" for t in TABLE_NAMES), summary
        (alias,) = retry.outlets
        announced = {e.dest_asset_key.uri: e.extra for e in events[alias].asset_alias_events}
        assert set(announced) == {f"iceberg://lake/{ns}/{t}" for t in TABLE_NAMES}, announced
        for t in TABLE_NAMES:
            extra = announced[f"iceberg://lake/{ns}/{t}"]
            assert extra["skipped"] > 0 and extra["commits"] == 0, extra
            newest = spark.sql(f"SELECT snapshot_id FROM lake.{ns}.{t}.snapshots ORDER BY committed_at DESC")
            assert extra["snapshot_id"] == str(newest.first()[0]), extra  # a string: JSON readers round
            # docs/operating.md's read: VERSION AS OF the id's digits
            spark.sql(f"SELECT * FROM lake.{ns}.{t} VERSION AS OF {extra['snapshot_id']}").count()
        assert not meta.marks(identity)
        after = meta.get_cursor(identity).value
        assert after is not None and str(after.binlog_position) == summary["end"]
        assert after.binlog_position > BinlogPosition.parse(shop.start_from)
    finally:
        meta.client.stop()
        meta.client.close()


def test_progress_lines_count_what_is_read_merging_and_in_the_lake(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The progress line counts a chunk that Spark is merging as read (not as zero), and what the
    lake holds never runs ahead of what was read."""
    shop.changes(300)
    ns = f"progress_{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(BinlogToSparkOperator, "progress_interval", 0.0)
    caplog.set_level(logging.INFO)
    op = _operator(f"progress-{ns}", ns, spark_warehouse, start_from=shop.start_from, batch_size=20)
    op.max_rows_per_commit = 100
    summary = op.execute(make_context())
    pattern = re.compile(r"(\d+) changes read \(\d+/s\), (\d+) in the lake, (\d+) merging; read up to \S+")
    lines = [tuple(int(g) for g in m.groups()) for m in pattern.finditer(caplog.text)]
    assert lines, caplog.text[-3000:]
    assert all(lake + merging <= read <= summary["changes"] for read, lake, merging in lines), lines
    assert [lake for _, lake, _ in lines] == sorted(lake for _, lake, _ in lines)
    assert any(merging > 0 for _, _, merging in lines), "no line was logged while a chunk merged"
    assert summary["commits"] >= 2
    _assert_equal(mariadb, spark, ns)
