"""What the task log shows of Spark: a merge that fails inside Spark is our error (the lake table, the
changes' ``file:pos`` range; Spark's error only as its cause), and the JVM's warnings on stderr are
no ERROR lines in a task run by Airflow's supervisor (``airflow dags test --use-executor``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import AIRFLOW, DagRunResult, Shop, make_context

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.dev.services import free_port
from airflow_provider_binlog.lake.errors import LakeStatementError
from airflow_provider_binlog.lake.write.merge import ChangeMerger
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_merge_failing_in_spark_is_our_error(
    shop: Shop,
    conns: dict[str, str],
    spark: Any,
    spark_warehouse: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lake table of ``shop.orders`` made unmergeable by hand (a row-level operation mode Iceberg
    does not know): the next run fails with LakeStatementError naming the table and the chunk's
    range on its first line, Spark's error as the cause and no Java stack trace in the message; when
    closing after it fails too (a driver JVM that died refuses every call), that error is a warning
    and the run's own error is still the one raised."""
    dest = f"tasklog-{uuid.uuid4().hex[:8]}"
    ns = dest.replace("-", "_")

    def operator() -> BinlogToSparkOperator:
        return BinlogToSparkOperator(
            task_id="load", destination=dest, tables={"shop.orders": f"lake.{ns}.orders"},
            start_from=shop.start_from, warehouse=spark_warehouse, spark_master="local[2]",
            stop_spark=False,
        )  # fmt: skip

    shop.changes(20)
    operator().execute(make_context(run_id="first"))
    spark.sql(f"ALTER TABLE lake.{ns}.orders SET TBLPROPERTIES ('write.merge.mode' = 'no-such-mode')")
    start = shop.head()
    shop.changes(20)
    end = shop.head()
    with pytest.raises(LakeStatementError) as raised:
        operator().execute(make_context(run_id="second"))
    error = raised.value
    message = str(error)
    first = message.splitlines()[0]
    table = rf"`lake`\.`{ns}`\.`orders`"
    assert re.match(rf"commit to {table} \(changes \S+:\d+ to \S+:\d+\) failed in Spark: ", first), message
    lo, hi = (BinlogPosition.parse(p) for p in re.findall(r"\(changes (\S+:\d+) to (\S+:\d+)\)", first)[0])
    assert BinlogPosition.parse(start) <= lo <= hi < BinlogPosition.parse(end), (start, lo, hi, end)
    assert "no-such-mode" in first, message  # Spark's own first line, after ours
    assert "\tat " not in message and "at org.apache" not in message and len(message) < 800, message
    cause = error.__cause__
    assert cause is not None and "no-such-mode" in str(cause), cause

    def refused(self: Any) -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    reported: list[tuple[int, str]] = []
    monkeypatch.setattr(ChangeMerger, "close", refused)
    monkeypatch.setattr(
        BinlogToSparkOperator, "_report", lambda self, level, line: reported.append((level, line))
    )
    with pytest.raises(LakeStatementError) as again:
        operator().execute(make_context(run_id="third"))
    assert str(again.value).splitlines()[0] == first
    warned = [(level, line) for level, line in reported if "closing after the failure below" in line]
    assert warned == [(logging.WARNING, f"destination {dest}: closing after the failure below failed too: "
                       "ConnectionRefusedError: [Errno 111] Connection refused")], reported  # fmt: skip


_DAG = """
import pendulum
from airflow.sdk import DAG

from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

with DAG(dag_id="tasklog_jvm", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    BinlogToSparkOperator(
        task_id="load", destination={destination!r}, tables={{"shop.orders": {target!r}}},
        start_from={start!r}, spark_master="local[1]",
        # driver options of the user's: Spark's own log4j2 defaults, warnings on the JVM's stderr
        spark_conf={{"spark.driver.extraJavaOptions": "-Dbinlog.cdc.test=1"}},
    )
"""


def _task_log(home: Path, dag_id: str) -> list[dict[str, Any]]:
    """The JSON lines of the (one) task log file the supervisor wrote under ``home/logs``."""
    (path,) = (home / "logs").glob(f"dag_id={dag_id}/**/task_id=load/attempt=1.log")
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


@pytest.fixture
def api_server(airflow_home: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    """``airflow api-server`` on a free loopback port (the task supervisor reports there); yields the
    settings a ``--use-executor`` run needs; stopped after (bounded)."""
    port = free_port()
    settings = {
        "AIRFLOW__API_AUTH__JWT_SECRET": uuid.uuid4().hex,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
    }
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
        **settings,
    }
    with open(tmp_path / "api-server.log", "wb") as out:
        proc = subprocess.Popen(
            [AIRFLOW, "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/execution/health", timeout=2):
                    break
            except OSError:
                assert proc.poll() is None, (tmp_path / "api-server.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the api-server did not answer within 120 s"
                time.sleep(0.5)
        yield settings
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_jvm_warnings_are_no_errors_in_the_task_log(
    shop: Shop, dag_env: Any, tmp_path: Path, airflow_home: Path, api_server: dict[str, str]
) -> None:
    """The task runs in a child of Airflow's supervisor, which logs the child's stderr as ERROR:
    Spark's startup warning about the native Hadoop library (Spark's own log4j2 defaults, since the
    DAG sets driver options) is in the task log at WARNING, no line of the JVM at ERROR, and the run
    succeeds."""
    dags = tmp_path / "dags"
    dags.mkdir()
    dest = f"tasklog-{uuid.uuid4().hex[:8]}"
    target = f"lake.{dest.replace('-', '_')}.orders"
    (dags / "tasklog_jvm.py").write_text(_DAG.format(destination=dest, target=target, start=shop.start_from))
    shop.changes(10)
    env = dag_env(
        shop.start_from,
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        **api_server,
    )
    result = run_dag_with_executor(env, "tasklog_jvm", tmp_path / "dag.log")
    # the run succeeded; the command exited 0 unless Airflow's executor hung in its shutdown after
    # it (killed: see run_dag_with_executor)
    assert result.finished == "success" and result.returncode in (0, -signal.SIGKILL), result.tail()
    lines = _task_log(airflow_home, "tasklog_jvm")
    native = [ln for ln in lines if "Unable to load native-hadoop library" in str(ln.get("event"))]
    assert native and {ln["level"] for ln in native} == {"warning"}, native
    jvm = [ln for ln in lines if ln.get("logger") in ("airflow_provider_binlog.spark", "task.stderr")]
    assert [ln for ln in jvm if ln["level"] in ("error", "critical")] == [], jvm
    assert any(f"destination {dest}: done" in str(ln.get("event")) for ln in lines)
    # each line says something to the user (airflow_provider_binlog/quiet.py): no ZooKeeper session
    # notes (the run opens several), no py4j traceback as the JVM goes away after "Pushing xcom", no
    # Spark plan-truncation note; the warning that needs action (above) is still there
    text = "\n".join(json.dumps(ln) for ln in lines)
    assert [ln for ln in lines if str(ln.get("logger")).startswith(("kazoo", "py4j"))] == [], text[-3000:]
    for noise in ("Zookeeper connection established", "Closing connection to", "Connection dropped",
                  "ConnectionResetError", "Error while receiving", "Truncated the string representation",
                  "version-hint.text"):  # fmt: skip
        assert noise not in text, noise


def test_a_missing_version_hint_after_a_killed_run_is_no_warning(
    spark: Any, spark_warehouse: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A run killed between writing a table's metadata and its version-hint.text leaves the hint
    behind (or none): the next load of the table makes Iceberg warn with a FileNotFoundException and a
    stack trace, then list the metadata files and go on. Through the driver's stderr
    (lake/spark/jvm_log.py) that record, trace included, is DEBUG: no warning, no error line."""
    ns = f"hint_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE TABLE lake.{ns}.t (id INT) USING iceberg")
    spark.sql(f"INSERT INTO lake.{ns}.t VALUES (1)")
    (Path(spark_warehouse) / ns / "t" / "metadata" / "version-hint.text").unlink()
    caplog.set_level(logging.DEBUG, logger="airflow_provider_binlog.spark")
    spark.catalog.refreshTable(f"lake.{ns}.t")
    assert spark.sql(f"SELECT id FROM lake.{ns}.t").collect()[0][0] == 1  # Iceberg recovered

    def hint_lines() -> list[logging.LogRecord]:
        return [
            r for r in caplog.records if r.name == "airflow_provider_binlog.spark" and ns in r.getMessage()
        ]

    deadline = time.monotonic() + 60  # the driver's stderr is read by a thread of its own: wait for it
    while not any("version-hint.text" in r.getMessage() for r in hint_lines()):
        assert time.monotonic() < deadline, "Iceberg never said the version hint was missing"
        time.sleep(0.2)
    assert {r.levelno for r in hint_lines()} == {logging.DEBUG}, [r.getMessage() for r in hint_lines()]


def run_dag_with_executor(
    env: dict[str, str], dag_id: str, log_path: Path, timeout: float = 480, shutdown_grace: float = 60
) -> DagRunResult:
    """``airflow dags test --use-executor``: each task runs in a child of Airflow's task supervisor
    (as on a worker), which writes the task log file.

    Airflow's LocalExecutor now and then never returns from its shutdown once the run has finished
    (its ``end()`` joins a worker that does not exit: apache/airflow#45329, quarantined in Airflow's
    own CI). Once the log says the run finished and the executor shuts down, the command gets
    ``shutdown_grace`` seconds to exit; then it is killed, and the result's return code is the
    kill's (-9), so :attr:`~airflow_harness.DagRunResult.succeeded` is false and
    :attr:`~airflow_harness.DagRunResult.finished` says how the run itself ended.
    """
    started = time.monotonic()
    shutting_down: float | None = None
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [AIRFLOW, "dags", "test", "--use-executor", dag_id], env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            while proc.poll() is None:
                now = time.monotonic()
                if now - started > timeout:
                    raise AssertionError(f"airflow dags test {dag_id} still running after {timeout:.0f} s")
                if shutting_down is None:
                    text = log_path.read_text(errors="replace")
                    if "DagRun Finished" in text and "Shutting down LocalExecutor" in text:
                        shutting_down = now
                elif now - shutting_down > shutdown_grace:
                    break
                time.sleep(0.5)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return DagRunResult(proc.returncode, log_path.read_text(errors="replace"), time.monotonic() - started)


def test_a_sensor_poke_opens_one_zookeeper_session_and_logs_none(
    shop: Shop, conns: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """A poke reads the cursor and peeks the binlog: one ZooKeeper session (the chroot is made once
    per process, not by a second session per connection), and none of kazoo's connect/close notes
    reach a task log at INFO (they are at DEBUG)."""
    from airflow_provider_binlog.sensors.binlog import BinlogEventSensor

    sensor = BinlogEventSensor(
        task_id="wait", destination=f"poke-{uuid.uuid4().hex[:8]}", tables={"shop.*": "lake.shop.{table}"},
        start_from=shop.start_from, min_changes=10**6,
    )  # fmt: skip
    caplog.set_level(logging.DEBUG, logger="kazoo.client")
    sessions = []
    for _ in range(3):
        caplog.clear()
        assert not sensor.poke(make_context(task_id="wait")).is_done
        closed = [r for r in caplog.records if r.getMessage().startswith("Zookeeper session closed")]
        sessions.append(len(closed))
        assert [r for r in caplog.records if r.name.startswith("kazoo") and r.levelno >= logging.INFO] == []
    assert sessions[1:] == [1, 1], sessions  # 2 each before (a session to make the chroot)
