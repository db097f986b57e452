"""BinlogToSparkOperator on the isolated Spark standalone worker with a workload only Spark's
``MERGE INTO`` can write: a composite key (one part a string), a DOUBLE column, a key change and
soft deletes on a copy-on-write table (the driver's own writers take one key column and hard deletes
only, see ``lake/write/statements.py``).

The operator runs in a driver process of its own (one JVM holds one SparkContext) against MariaDB
and ZooKeeper; after its second run the driver reads Spark's REST API of its own UI. Asserted: the
second run's commit is Spark's write (its summary's ``spark.app.id``), the MERGE's plan scans the
staged file under the shared warehouse and read its rows, the driver ran no task (the isolated
worker's executors did every read), and the lake equals the source value by value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.dev.topology import SparkStandalone

pytestmark = [pytest.mark.integration, pytest.mark.spark]
REPO = Path(__file__).resolve().parents[2]

DRIVER = textwrap.dedent(
    """
    import json, os, sys, urllib.request
    sys.path.insert(0, os.path.join(os.getcwd(), "tests", "airflow"))
    from airflow_harness import make_context
    from pyspark.sql import SparkSession
    from airflow_provider_binlog.lake.options import TargetOptions
    from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

    master, warehouse, db, start = sys.argv[1:5]
    conf = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": "512m", "spark.cores.max": "1", "spark.sql.shuffle.partitions": "2",
            "spark.task.maxFailures": "1"}

    def run(n):
        op = BinlogToSparkOperator(
            task_id="load", destination="cm-" + db, tables={f"{db}.m": f"lake.{db}.m"}, start_from=start,
            warehouse=warehouse, spark_master=master, spark_conf=conf, stop_spark=False,
            target_options=TargetOptions(soft_delete=True, write_mode="copy-on-write"),
        )
        return op.execute(make_context(try_number=n, run_id=f"r{n}"))

    first = run(1)
    print("FIRST " + json.dumps(first, default=str), flush=True)
    sys.stdin.readline()  # the test changes the source meanwhile
    second = run(2)
    spark = SparkSession.getActiveSession()
    app = spark.sparkContext.applicationId
    rows = [list(r) for r in spark.sql(f"SELECT id, region, v, _cdc_deleted FROM lake.{db}.m").collect()]
    snapshots = [dict(operation=r[0], summary=dict(r[1])) for r in spark.sql(
        f"SELECT operation, summary FROM lake.{db}.m.snapshots ORDER BY committed_at").collect()]
    base = spark.sparkContext.uiWebUrl + "/api/v1/applications/" + app

    def rest(path):
        with urllib.request.urlopen(base + path, timeout=30) as resp:
            return json.load(resp)

    result = {"app": app, "second": second, "rows": rows, "snapshots": snapshots,
              "sql": rest("/sql?details=true&planDescription=true&offset=0&length=1000"),
              "executors": rest("/allexecutors")}
    print("RESULT " + json.dumps(result, default=str), flush=True)
    spark.stop()
    """
)


@pytest.mark.timeout(900)
def test_spark_merge_on_the_isolated_worker_reads_the_staging_and_the_lake_equals_the_source(
    mariadb: MariaDbServer, conns: dict[str, str], tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    warehouse = shared / "warehouse"
    warehouse.mkdir(parents=True)
    db = f"cm_{uuid.uuid4().hex[:8]}"
    conn = mariadb.connect()
    conn.autocommit(True)
    cur = conn.cursor()
    (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    cur.execute(f"CREATE DATABASE `{db}`")
    cur.execute(f"CREATE TABLE `{db}`.m (id INT, region VARCHAR(4), v DOUBLE, PRIMARY KEY (id, region))")
    cur.execute(
        f"INSERT INTO `{db}`.m VALUES "
        + ", ".join(f"({i}, '{r}', {i}.25)" for i in range(8) for r in ("eu", "us"))
    )
    cluster = SparkStandalone(tmp_path / "spark", isolate_worker=True, shared=(str(shared),)).start()
    err = tmp_path / "driver.err"
    try:
        with open(err, "w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-c", DRIVER, cluster.url, str(warehouse), db, f"{file}:{pos}"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=str(REPO),
                env=dict(os.environ),
            )  # fmt: skip
            assert proc.stdin is not None and proc.stdout is not None
            seen = []
            while not (line := proc.stdout.readline()).startswith("FIRST ") and line:
                seen.append(line)
            assert line, "".join(seen)[-2000:] + err.read_text()[-4000:]
            for statement in (
                f"UPDATE `{db}`.m SET v = -7.5 WHERE id = 1 AND region = 'eu'",
                f"UPDATE `{db}`.m SET region = 'ap', v = 2.5 WHERE id = 2 AND region = 'us'",  # key change
                f"DELETE FROM `{db}`.m WHERE (id, region) IN ((3, 'eu'), (4, 'us'))",
                f"INSERT INTO `{db}`.m VALUES (9, 'eu', 9.75)",
                f"UPDATE `{db}`.m SET v = 1e300 WHERE id = 5 AND region = 'eu'",
            ):
                cur.execute(statement)
            out, _ = proc.communicate("go\n", timeout=600)
    finally:
        cluster.stop()
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, out[-2000:] + err.read_text()[-4000:]
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    cur.execute(f"SELECT id, region, v FROM `{db}`.m")
    source = sorted(list(r) for r in cur.fetchall())
    cur.execute(f"DROP DATABASE `{db}`")
    conn.close()

    # the lake equals the source value by value; the deleted keys stay, flagged
    live = sorted(r[:3] for r in result["rows"] if not r[3])
    assert live == source, (live, source)
    assert sorted(r[:2] for r in result["rows"] if r[3]) == [[2, "us"], [3, "eu"], [4, "us"]], result["rows"]

    # the second run's commit is Spark's own write, not a file the driver committed itself
    merge = result["snapshots"][-1]
    assert merge["operation"] == "overwrite" and merge["summary"].get("spark.app.id") == result["app"], merge
    assert merge["summary"]["deleted-data-files"] == "1", merge  # copy-on-write: the file rewritten

    # its plan: a row-level ReplaceData over a scan of the staged file in the shared warehouse,
    # which read the staged rows (7: the key change is a delete of the old key and an upsert)
    staged = f"Location: InMemoryFileIndex [file:{warehouse}/_binlog_cdc_staging/"
    merges = [q for q in result["sql"] if q["planDescription"].startswith("== Physical Plan ==\nReplaceData")]
    assert len(merges) == 1 and merges[0]["status"] == "COMPLETED", [
        q["planDescription"][:120] for q in result["sql"]
    ]
    assert staged in merges[0]["planDescription"], merges[0]["planDescription"]
    scans = [
        {m["name"]: m["value"] for m in n["metrics"]}
        for n in merges[0]["nodes"]
        if n["nodeName"] == "Scan parquet"
    ]
    assert scans and all(m["number of files read"] == "1" for m in scans), scans
    assert {m["number of output rows"] for m in scans} == {"7"}, scans

    # every task ran on the isolated worker's executors: the driver ran none
    executors = {e["id"]: e for e in result["executors"]}
    assert executors["driver"]["totalTasks"] == 0, executors["driver"]
    workers = [e for i, e in executors.items() if i != "driver"]
    assert workers and sum(e["totalInputBytes"] for e in workers) > 0, workers
    assert not any(e["failedTasks"] for e in workers), workers
