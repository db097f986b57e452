"""The cluster path: a real Spark standalone master and worker from the PySpark installation, on
loopback, and a driver (a separate process: one JVM holds one SparkContext) that merges there."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

DRIVER = textwrap.dedent(
    """
    import json, sys
    from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
    from airflow_provider_binlog.binlog.constants import ColumnType as T
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
    from airflow_provider_binlog.lake.merge import merge_batch
    from airflow_provider_binlog.lake.session import create_session

    master, warehouse = sys.argv[1], sys.argv[2]
    spark = create_session(
        "binlog-cdc-cluster-test", master=master, warehouse=warehouse,
        conf={"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
              "spark.executor.memory": "512m", "spark.cores.max": "1", "spark.sql.shuffle.partitions": "2"},
    )
    cols = (ColumnDef("id", T.LONG), ColumnDef("v", T.VARCHAR, collation=45))
    schema = TableSchema("db", "t", cols, ("id",))

    def change(n, op, before, after):
        pos = BinlogPosition("mysql-bin.000001", 100 + n)
        end = BinlogPosition(pos.file, pos.pos + 1)
        return RowChange("dest", "db", "t", op, before, after, ("id",), pos, end,
                         None, 1_700_000_000, OrderKey(1, pos.pos, -1, 0), schema)

    batch = [change(i, Op.INSERT, None, {"id": i, "v": f"v{i}"}) for i in range(5)]
    batch += [change(10, Op.UPDATE, {"id": 1, "v": "v1"}, {"id": 8, "v": "moved"}),
              change(11, Op.DELETE, {"id": 2, "v": "v2"}, None)]
    counts = merge_batch(spark, "dest", {"db.t": "lake.db.t"}, batch, batch[-1].end_position)
    again = merge_batch(spark, "dest", {"db.t": "lake.db.t"}, batch, batch[-1].end_position)
    rows = sorted(tuple(r) for r in spark.table("lake.db.t").collect())
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    result = {"counts": counts["lake.db.t"].as_dict(), "again": again["lake.db.t"].as_dict(),
              "rows": rows, "executors": executors, "master": spark.sparkContext.master}
    print("RESULT " + json.dumps(result))
    spark.stop()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(_spark_home() / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and one worker (1 core, 1 GB) bound to 127.0.0.1; yields the master URL."""
    tmp = tmp_path_factory.mktemp("standalone")
    env = {
        **os.environ,
        "SPARK_HOME": str(_spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp),
        "SPARK_WORKER_DIR": str(tmp / "work"),
    }
    master_port, master_ui, worker_port, worker_ui = (_free_port() for _ in range(4))
    url = f"spark://127.0.0.1:{master_port}"
    master = _start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(master_port),
            "--webui-port",
            str(master_ui),
        ],
        tmp / "master.log",
        env,
    )
    worker = None
    try:
        worker = _start(
            [
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--port",
                str(worker_port),
                "--webui-port",
                str(worker_ui),
                "--cores",
                "1",
                "--memory",
                "1g",
                "--work-dir",
                str(tmp / "work"),
                url,
            ],
            tmp / "worker.log",
            env,
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{master_ui}/json/", timeout=2) as resp:
                    state = json.load(resp)
                if any(w.get("state") == "ALIVE" for w in state.get("workers", [])):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or master.poll() is not None or worker.poll() is not None:
                logs = "\n".join(p.read_text()[-2000:] for p in tmp.glob("*.log"))
                pytest.fail(f"standalone cluster did not come up:\n{logs}")
            time.sleep(0.5)
        yield url
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)


def test_merge_on_a_standalone_cluster(standalone: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, standalone, str(tmp_path / "warehouse")],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["master"] == standalone
    assert result["executors"] >= 1
    assert result["rows"] == [[0, "v0"], [3, "v3"], [4, "v4"], [8, "moved"]]
    counts = result["counts"]  # as the source reported them: 5 inserts, 1 update, 1 delete
    assert (counts["inserted"], counts["updated"], counts["deleted"]) == (5, 1, 1) and counts["commits"] == 1
    assert result["again"]["skipped"] == 7 and result["again"]["commits"] == 0
