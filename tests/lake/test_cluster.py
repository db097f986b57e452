"""The cluster path: a real Spark standalone master and worker from the PySpark installation, on
loopback, the worker in its own mount namespace with a private ``/tmp`` (it sees the shared
warehouse directory and nothing else of the driver's temporary files), and a driver (a separate
process: one JVM holds one SparkContext) that merges there.

The operator on the same kind of cluster: ``tests/airflow/test_operator_cluster.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_binlog.dev.topology import SparkStandalone

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
DRIVER = textwrap.dedent(
    """
    import json, sys
    from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
    from airflow_provider_binlog.binlog.constants import ColumnType as T
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
    from airflow_provider_binlog.lake.write.merge import merge_batch
    from airflow_provider_binlog.lake.spark.session import create_session

    master, warehouse, staging = sys.argv[1], sys.argv[2], sys.argv[3] or None
    spark = create_session(
        "binlog-cdc-cluster-test", master=master, warehouse=warehouse,
        conf={"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
              "spark.executor.memory": "512m", "spark.cores.max": "1", "spark.sql.shuffle.partitions": "2",
              "spark.task.maxFailures": "1"},
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
    try:
        counts = merge_batch(spark, "dest", {"db.t": "lake.db.t"}, batch, batch[-1].end_position,
                             staging_root=staging)
    except Exception as exc:
        print("FAILED " + json.dumps(f"{type(exc).__name__}: {exc}"[:3000]))
        raise SystemExit(3)
    again = merge_batch(spark, "dest", {"db.t": "lake.db.t"}, batch, batch[-1].end_position,
                        staging_root=staging)
    rows = sorted(tuple(r) for r in spark.table("lake.db.t").collect())
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    result = {"counts": counts["lake.db.t"].as_dict(), "again": again["lake.db.t"].as_dict(),
              "rows": rows, "executors": executors, "master": spark.sparkContext.master}
    print("RESULT " + json.dumps(result))
    spark.stop()
    """
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one directory the isolated worker shares with the driver (warehouses live in it)."""
    return tmp_path_factory.mktemp("cluster-shared")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory, shared: Path) -> Iterator[SparkStandalone]:
    """A standalone master and one worker (1 core, 1 GB) on 127.0.0.1, the worker isolated."""
    cluster = SparkStandalone(
        tmp_path_factory.mktemp("standalone"), isolate_worker=True, shared=(str(shared),)
    ).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _drive(
    cluster: SparkStandalone, warehouse: Path, staging: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", DRIVER, cluster.url, str(warehouse), staging],
        capture_output=True, text=True, timeout=400, cwd=str(REPO), env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_the_worker_does_not_see_the_drivers_tmp(standalone: SparkStandalone, shared: Path) -> None:
    assert standalone.worker is not None
    assert standalone.worker_mount_namespace() != os.readlink("/proc/self/ns/mnt")
    pid = standalone.worker.pid
    secret = Path(f"/tmp/binlog-cdc-driver-only-{os.getpid()}")
    secret.write_text("driver")
    try:
        # the worker's view of the filesystem, through its own root
        assert not Path(f"/proc/{pid}/root{secret}").exists()
        assert Path(f"/proc/{pid}/root{shared}").is_dir()
        (shared / "seen").write_text("shared")
        assert Path(f"/proc/{pid}/root{shared}/seen").read_text() == "shared"
    finally:
        secret.unlink()


def test_merge_on_a_standalone_cluster(standalone: SparkStandalone, shared: Path) -> None:
    """Staged under the warehouse (the default). The batch goes into a new table: an insert the
    driver writes as a data file in the shared warehouse, which the isolated executors then read."""
    warehouse = shared / "merge"
    proc = _drive(standalone, warehouse)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["master"] == standalone.url
    assert result["executors"] >= 1
    assert result["rows"] == [[0, "v0"], [3, "v3"], [4, "v4"], [8, "moved"]]
    counts = result["counts"]  # as the source reported them: 5 inserts, 1 update, 1 delete
    assert (counts["inserted"], counts["updated"], counts["deleted"]) == (5, 1, 1) and counts["commits"] == 1
    assert result["again"]["skipped"] == 7 and result["again"]["commits"] == 0
    staging = warehouse / "_binlog_cdc_staging" / "dest"
    assert staging.is_dir() and not any(staging.iterdir()), "staged files left behind"


def test_staging_in_the_drivers_tmp_is_not_readable_by_the_executors(
    standalone: SparkStandalone, shared: Path
) -> None:
    """The isolation is real: the same merge with staging forced to the driver's local /tmp fails
    because the executors do not find the staged file. (The batch goes into a new table, so it
    would be an insert the driver writes into the shared warehouse, which works wherever staging
    is; with new keys off it is a MERGE, which the executors run on the staged file.)"""
    proc = _drive(standalone, shared / "local-staging", staging="local", env={"BINLOG_CDC_NEW_KEYS": "off"})
    failed = [line for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
    assert proc.returncode == 3 and failed, proc.stdout[-2000:] + proc.stderr[-4000:]
    message = json.loads(failed[-1][len("FAILED ") :])
    assert "binlog-cdc-staging" in message and (
        "FileNotFoundException" in message or "does not exist" in message
    ), message


MERGE_DRIVER = textwrap.dedent(
    """
    import json, sys, urllib.request
    from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
    from airflow_provider_binlog.binlog.constants import ColumnType as T
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
    from airflow_provider_binlog.lake.write.merge import merge_batch
    from airflow_provider_binlog.lake.options import TargetOptions
    from airflow_provider_binlog.lake.spark.session import create_session

    master, warehouse = sys.argv[1], sys.argv[2]
    spark = create_session(
        "binlog-cdc-cluster-merge", master=master, warehouse=warehouse,
        conf={"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
              "spark.executor.memory": "512m", "spark.cores.max": "1", "spark.sql.shuffle.partitions": "2",
              "spark.task.maxFailures": "1"},
    )
    # a composite key (one of its parts a string) and soft deletes on a copy-on-write table: none of
    # it is the driver's own MERGE (.position_delta takes one key column and hard deletes)
    cols = (ColumnDef("id", T.LONGLONG), ColumnDef("region", T.VARCHAR, collation=45),
            ColumnDef("v", T.DOUBLE))
    keys = ("id", "region")
    schema = TableSchema("db", "k", cols, keys)
    opts = TargetOptions(soft_delete=True, write_mode="copy-on-write")
    source = {}  # what the source holds after every change: key -> row
    n = 0

    def change(op, before, after):
        global n
        n += 1
        pos = BinlogPosition("mysql-bin.000001", 1000 + 10 * n)
        end = BinlogPosition(pos.file, pos.pos + 5)
        if before is not None:
            del source[(before["id"], before["region"])]
        if after is not None:
            source[(after["id"], after["region"])] = after
        return RowChange("dest", "db", "k", op, before, after, keys, pos, end,
                         None, 1_700_000_000, OrderKey(1, pos.pos, -1, 0), schema)

    def row(i, region, v):
        return {"id": i, "region": region, "v": v}

    first = [change(Op.INSERT, None, row(i, r, i + 0.25)) for i in range(6) for r in ("eu", "us")]
    merge_batch(spark, "dest", {"db.k": "lake.db.k"}, first, first[-1].end_position, options=opts)
    second = [
        change(Op.UPDATE, row(1, "eu", 1.25), row(1, "eu", -7.5)),
        change(Op.UPDATE, row(2, "us", 2.25), row(2, "ap", 2.5)),  # a key change
        change(Op.DELETE, row(3, "eu", 3.25), None),
        change(Op.DELETE, row(4, "us", 4.25), None),
        change(Op.INSERT, None, row(9, "eu", 9.75)),
        change(Op.UPDATE, row(5, "eu", 5.25), row(5, "eu", 1e300)),
    ]
    counts = merge_batch(spark, "dest", {"db.k": "lake.db.k"}, second, second[-1].end_position, options=opts)
    app = spark.sparkContext.applicationId
    live = sorted(tuple(r) for r in spark.sql(
        "SELECT id, region, v FROM lake.db.k WHERE NOT _cdc_deleted").collect())
    deleted = sorted(tuple(r) for r in spark.sql(
        "SELECT id, region FROM lake.db.k WHERE _cdc_deleted").collect())
    snapshots = [dict(operation=r[0], summary=dict(r[1])) for r in spark.sql(
        "SELECT operation, summary FROM lake.db.k.snapshots ORDER BY committed_at").collect()]
    props = {r[0]: r[1] for r in spark.sql("SHOW TBLPROPERTIES lake.db.k").collect()}
    base = spark.sparkContext.uiWebUrl + "/api/v1/applications/" + app

    def rest(path):
        with urllib.request.urlopen(base + path, timeout=30) as resp:
            return json.load(resp)

    result = {
        "app": app, "counts": counts["lake.db.k"].as_dict(), "live": live, "deleted": deleted,
        "source": sorted((k[0], k[1], r["v"]) for k, r in source.items()),
        "snapshots": snapshots, "props": props,
        "sql": rest("/sql?details=true&planDescription=true&offset=0&length=1000"),
        "executors": rest("/allexecutors"),
        "stages": rest("/stages?details=false"),
    }
    print("RESULT " + json.dumps(result))
    spark.stop()
    """
)


def test_a_merge_the_driver_cannot_write_runs_on_the_isolated_executors(
    standalone: SparkStandalone, shared: Path
) -> None:
    """A composite key, a float column, a key change and soft deletes on a copy-on-write table: the
    second batch goes through Spark's ``MERGE INTO`` (not the driver's own writers), the executors
    of the isolated worker read the staged file for it, and the lake equals what the source holds."""
    warehouse = shared / "spark-merge"
    proc = subprocess.run(
        [sys.executable, "-c", MERGE_DRIVER, standalone.url, str(warehouse)],
        capture_output=True, text=True, timeout=400, cwd=str(REPO), env=dict(os.environ),
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["live"] == result["source"], (result["live"], result["source"])
    assert result["deleted"] == [[2, "us"], [3, "eu"], [4, "us"]]  # soft: flagged, kept
    assert result["props"]["write.merge.mode"] == "copy-on-write", result["props"]
    assert result["counts"]["commits"] == 1, result["counts"]

    # the second batch's commit is Spark's own write (its summary names the application), not a
    # file the driver committed itself
    merge = result["snapshots"][-1]
    assert len(result["snapshots"]) == 2 and merge["operation"] == "overwrite", result["snapshots"]
    assert merge["summary"].get("spark.app.id") == result["app"], merge
    assert merge["summary"]["deleted-data-files"] == "1", merge  # copy-on-write: the file rewritten

    # the MERGE's plan (Spark's REST API of the driver UI): a row-level ReplaceData over a scan of
    # the staged file under the shared warehouse, which read that file's rows (7: the key change is
    # a delete of the old key and an upsert of the new)
    staged = f"Location: InMemoryFileIndex [file:{warehouse}/_binlog_cdc_staging/dest/"
    merges = [q for q in result["sql"] if q["planDescription"].startswith("== Physical Plan ==\nReplaceData")]
    assert len(merges) == 1 and merges[0]["status"] == "COMPLETED", [
        q["planDescription"][:200] for q in result["sql"]
    ]
    assert staged in merges[0]["planDescription"], merges[0]["planDescription"]
    scans = [
        {m["name"]: m["value"] for m in n["metrics"]}
        for n in merges[0]["nodes"]
        if n["nodeName"] == "Scan parquet"
    ]
    assert scans and all(m["number of files read"] == "1" for m in scans), scans
    assert {m["number of output rows"] for m in scans} == {"7"}, scans

    # and the tasks that read it ran on the isolated worker's executors: the driver ran none
    executors = {e["id"]: e for e in result["executors"]}
    assert executors["driver"]["totalTasks"] == 0, executors["driver"]
    workers = [e for i, e in executors.items() if i != "driver"]
    assert workers and sum(e["totalInputBytes"] for e in workers) > 0, workers
    assert sum(e["completedTasks"] for e in workers) >= 1 and not any(e["failedTasks"] for e in workers), (
        workers
    )
