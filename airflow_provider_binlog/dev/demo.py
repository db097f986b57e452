"""The main job: real changes from MariaDB into Iceberg through the example DAG.

Run with ``bash dev.sh demo``. It starts a throwaway MariaDB and ZooKeeper, creates the demo shop
schema, writes inserts, updates and deletes, runs ``example_binlog_incremental`` with
``airflow dags test`` (an Airflow home, a warehouse and the connections all in a temp directory),
writes more changes, runs the DAG again, then prints the lake tables and checks them against
MariaDB value by value. Exit status 0 only when every lake table equals its source table.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from airflow_provider_binlog.dev import demo_data
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "example_binlog_incremental"
TABLES = {f"shop.{t}": f"lake.shop.{t}" for t in ("customers", "products", "orders")}


def airflow_env(
    home: Path, mariadb: MariaDbServer, zookeeper: ZooKeeperServer, start_from: str
) -> dict[str, str]:
    """Environment for the ``airflow`` CLI: a private home, the repo's DAGs, the connections."""
    env = dict(os.environ)
    env.update(
        AIRFLOW_HOME=str(home / "airflow"),
        AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="false",
        AIRFLOW__LOGGING__LOGGING_LEVEL="INFO",
        AIRFLOW_CONN_MYSQL_DEFAULT=(
            f"mysql://{quote(mariadb.repl_user)}:{quote(mariadb.repl_password)}@{mariadb.host}:{mariadb.port}"
        ),
        AIRFLOW_CONN_ZOOKEEPER_DEFAULT=f"zookeeper://{zookeeper.hosts}/binlog-cdc-demo",
        BINLOG_CDC_WAREHOUSE=str(home / "warehouse"),
        BINLOG_CDC_SPARK_MASTER="local[2]",
        BINLOG_CDC_START_FROM=start_from,
    )
    return env


def run_dag(env: dict[str, str], log: Path) -> float:
    """``airflow dags test`` the example DAG; raise with the log tail unless the run succeeded."""
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.run(
            [str(Path(sys.executable).parent / "airflow"), "dags", "test", DAG_ID],
            env=env, stdout=out, stderr=subprocess.STDOUT, check=False,
        )  # fmt: skip
    text = log.read_text(errors="replace")
    if proc.returncode != 0 or "state=success" not in text.split("DagRun Finished")[-1]:
        tail = "\n".join(text.splitlines()[-40:])
        raise SystemExit(f"the DAG run failed (log: {log}); last lines:\n{tail}")
    for line in text.splitlines():
        if "destination shop: done" in line:
            print("   ", line.split("destination shop: ", 1)[1][:200])
    return time.monotonic() - started


def show_and_verify(mariadb: MariaDbServer, warehouse: Path) -> bool:
    from airflow_provider_binlog.lake.spark.session import create_session
    from airflow_provider_binlog.lake.verify.verify import verify_tables

    spark = create_session(app_name="binlog-cdc-demo-verify", master="local[2]", warehouse=str(warehouse))
    try:
        for target in TABLES.values():
            print(f"\n{target} (first rows):")
            spark.table(target).orderBy(spark.table(target).columns[0]).show(5, truncate=24)
        conn = mariadb.connect()
        try:
            diffs = verify_tables(conn, spark, TABLES)
        finally:
            conn.close()
        print("Lake vs. MariaDB, value by value:")
        for diff in diffs:
            print("  " + diff.describe())
        return all(d.equal for d in diffs)
    finally:
        spark.stop()


def main() -> int:
    home = Path(tempfile.mkdtemp(prefix="binlog-cdc-demo-"))
    mariadb = MariaDbServer().start()
    zookeeper = ZooKeeperServer().start()
    try:
        print(f"MariaDB {mariadb.host}:{mariadb.port}, ZooKeeper {zookeeper.hosts}, work dir {home}")
        (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
        start_from = f"{file}:{pos}"
        conn = mariadb.connect()
        demo_data.create_schema(conn)
        print(f"1. wrote {demo_data.generate_changes(conn, 400, seed=1)} (binlog from {start_from})")
        env = airflow_env(home, mariadb, zookeeper, start_from)
        subprocess.run(
            [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
        )  # fmt: skip
        print(f"2. airflow dags test {DAG_ID} ...")
        print(f"   done in {run_dag(env, home / 'run1.log'):.0f} s")
        print(f"3. wrote {demo_data.generate_changes(conn, 300, seed=2)}")
        conn.close()
        print(f"4. airflow dags test {DAG_ID} again ...")
        print(f"   done in {run_dag(env, home / 'run2.log'):.0f} s")
        ok = show_and_verify(mariadb, home / "warehouse")
        print(
            "\nDEMO OK: the lake equals the source."
            if ok
            else "\nDEMO FAILED: the lake differs from the source."
        )
        return 0 if ok else 1
    finally:
        zookeeper.stop()
        mariadb.stop()
        if os.environ.get("BINLOG_CDC_KEEP_DEMO") != "1":
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
