"""``lake.session.stop_session``: the stop does not wait on PySpark's accumulator server, the server
still ends, and the process can start a new session after it (run in a child process: the harness's
session lives for the whole test run)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHILD = textwrap.dedent(
    """
    import json, sys, threading
    from airflow_provider_binlog.lake.session import create_session, stop_session

    warehouse = sys.argv[1]
    out = {}
    spark = create_session(master="local[1]", warehouse=warehouse)
    server = spark.sparkContext._accumulatorServer
    stop_session(spark)
    out["detached"] = spark.sparkContext._jsc is None
    stopper = [t for t in threading.enumerate() if t.name == "binlog-cdc-accumulators"]
    for t in stopper:
        t.join(timeout=30)  # the server's poll loop ends within its 0.5-s interval
    out["stopper_done"] = bool(stopper) and not any(t.is_alive() for t in stopper)
    out["server_closed"] = server.socket.fileno() == -1
    again = create_session(master="local[1]", warehouse=warehouse)
    out["new_server"] = again.sparkContext._accumulatorServer is not server
    out["query"] = again.range(5).count()
    stop_session(again)
    print(json.dumps(out))
    """
)


@pytest.mark.spark
def test_stop_session_leaves_no_server_behind_and_a_new_session_starts(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "wh")], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {
        "detached": True, "stopper_done": True, "server_closed": True, "new_server": True, "query": 5,
    }  # fmt: skip
