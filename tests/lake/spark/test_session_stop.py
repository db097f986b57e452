"""``lake.spark.session.stop_session``: the stop does not wait on PySpark's accumulator server, the server
still ends, and the process can start a new session after it, whose merges use the JVM helpers
compiled for the first (run in a child process: the harness's session lives for the whole test
run)."""

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
    from airflow_provider_binlog.lake import commits
    from airflow_provider_binlog.lake.spark.session import create_session, stop_session
    from airflow_provider_binlog.lake.spark.table_facts import table_facts

    def helpers(spark):  # the JVM helpers of lake/spark/jvm_helpers.py, compiled once per JVM
        table = commits.load_iceberg_table(spark, "lake.stop.t")
        return table_facts(spark, table).format_version, commits.mark_of(spark, table, "d")

    warehouse = sys.argv[1]
    out = {}
    spark = create_session(master="local[1]", warehouse=warehouse)
    spark.sql("CREATE TABLE lake.stop.t (id bigint) USING iceberg TBLPROPERTIES ('format-version'='3')")
    out["helpers"] = [helpers(spark)]
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
    out["helpers"].append(helpers(again))
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
        "helpers": [[3, None], [3, None]],
    }  # fmt: skip
