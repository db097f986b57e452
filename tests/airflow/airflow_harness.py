"""Helpers of the Airflow-layer tests (the fixtures built on them are in ``conftest.py``).

* :func:`run_dag`: ``airflow dags test DAG [--conf JSON]`` in a subprocess -> :class:`DagRunResult`
  (exit status and the whole log);
* :func:`fresh_shop`: the demo ``shop`` schema (:mod:`airflow_provider_binlog.dev.demo_data`),
  dropped and recreated, with the binlog point it starts at;
* :func:`make_context`: a minimal task context for calling ``execute`` in this process;
* :func:`meta_manager`: the ZooKeeper meta manager on a test's chroot (cursor, marks, runs);
* :func:`warehouse_catalog` / :func:`lake_verify`: read and verify lake tables written elsewhere.

Not named ``conftest`` helpers on purpose: test modules import them directly.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from airflow_provider_binlog.dev import demo_data
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer

REPO = Path(__file__).resolve().parents[2]
AIRFLOW = str(Path(sys.executable).parent / "airflow")
SHOP_TABLES = {f"shop.{t}": f"lake.shop.{t}" for t in ("customers", "products", "orders")}
ZK_TIMEOUT = 4  # seconds: a killed task's running node goes away this fast


def mysql_uri(mariadb: MariaDbServer, user: str | None = None, password: str | None = None) -> str:
    """An Airflow ``mysql`` connection URI (the replication user unless told otherwise)."""
    return mariadb.airflow_uri(user, password)


def zookeeper_uri(zookeeper: ZooKeeperServer, chroot: str, timeout: float = ZK_TIMEOUT) -> str:
    """A ``zookeeper`` connection URI on ``chroot`` with a short session timeout."""
    return zookeeper.airflow_uri(chroot, timeout)


@dataclass
class DagRunResult:
    """What ``airflow dags test`` did: exit status and the whole log."""

    returncode: int
    log: str
    seconds: float

    @property
    def finished(self) -> str | None:
        """The state the log's last ``DagRun Finished`` line gives (``None``: no such line)."""
        found = re.findall(r"DagRun Finished: .*?\bstate=(\w+)", self.log)
        return found[-1] if found else None

    @property
    def succeeded(self) -> bool:
        """The process exited 0 and the run finished in state success."""
        return self.returncode == 0 and self.finished == "success"

    def tail(self, lines: int = 60) -> str:
        return "\n".join(line[:400] for line in self.log.splitlines()[-lines:])

    def summary(self, destination: str) -> str:
        """The operator's ``destination X: done ...`` line ("" when absent)."""
        for line in self.log.splitlines():
            if f"destination {destination}: done" in line:
                return line
        return ""


def run_dag(
    env: dict[str, str], dag_id: str, log_path: Path, conf: dict[str, Any] | None = None, timeout: float = 600
) -> DagRunResult:
    """``airflow dags test dag_id [--conf JSON]`` in a subprocess, its output into ``log_path``
    (readable while it runs); returns the exit status and the log."""
    args = [AIRFLOW, "dags", "test", dag_id]
    if conf is not None:
        args += ["--conf", json.dumps(conf)]
    started = time.monotonic()
    with open(log_path, "wb") as out:
        proc = subprocess.run(
            args, env=env, stdout=out, stderr=subprocess.STDOUT, check=False, timeout=timeout
        )
    return DagRunResult(proc.returncode, log_path.read_text(errors="replace"), time.monotonic() - started)


@dataclass
class Shop:
    """The demo ``shop`` schema on the harness's MariaDB, freshly created."""

    mariadb: MariaDbServer
    start_from: str
    conn: pymysql.Connection = field(repr=False)
    seed: int = 1

    def changes(self, n: int) -> dict[str, int]:
        """Write about ``n`` more row changes (inserts, updates, deletes)."""
        self.seed += 1
        return demo_data.generate_changes(self.conn, n, seed=self.seed)

    def head(self) -> str:
        (file, pos, *_), *_ = self.mariadb.execute("SHOW MASTER STATUS")
        return f"{file}:{pos}"


def fresh_shop(mariadb: MariaDbServer) -> Shop:
    """Drop and recreate the ``shop`` schema; the binlog point before its creation is the start."""
    conn = mariadb.connect()
    return Shop(mariadb, demo_data.recreate_schema(conn), conn)


@dataclass
class FakeTaskInstance:
    """The task-instance fields the operator reads from its context."""

    dag_id: str = "tests"
    task_id: str = "load"
    try_number: int = 1
    run_id: str = "test_run"


def make_context(try_number: int = 1, run_id: str = "test_run", task_id: str = "load") -> Any:
    """A minimal task context for calling ``execute`` in this process."""
    return {"ti": FakeTaskInstance(task_id=task_id, try_number=try_number, run_id=run_id), "run_id": run_id}


def meta_manager(zookeeper: ZooKeeperServer, chroot: str) -> Any:
    """A :class:`ZooKeeperMetaManager` on the test's chroot (the caller stops ``.client``)."""
    from kazoo.client import KazooClient

    from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager

    client = KazooClient(hosts=zookeeper.hosts + chroot)
    client.start(timeout=15)
    return ZooKeeperMetaManager(client)


def lake_verify(mariadb: MariaDbServer, spark: Any, tables: dict[str, str]) -> list[Any]:
    """:func:`verify_tables` of ``tables`` against the source; returns the diffs."""
    from airflow_provider_binlog.lake.verify.verify import verify_tables

    conn = mariadb.connect()
    try:
        return verify_tables(conn, spark, tables)
    finally:
        conn.close()


def warehouse_catalog(spark: Any, warehouse: Path | str) -> str:
    """Register (at runtime) an uncached Iceberg Hadoop catalog on ``warehouse`` in ``spark``; return
    its name. Lake tables written by ``airflow dags test`` subprocesses are read through it."""
    name = "wh_" + uuid.uuid4().hex[:10]
    prefix = f"spark.sql.catalog.{name}"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(prefix + ".type", "hadoop")
    spark.conf.set(prefix + ".warehouse", str(warehouse))
    spark.conf.set(prefix + ".cache-enabled", "false")
    return name


def in_catalog(tables: dict[str, str], catalog: str) -> dict[str, str]:
    """``{"shop.orders": "lake.shop.orders"}`` -> the same targets in ``catalog``."""
    return {s: catalog + "." + t.split(".", 1)[1] for s, t in tables.items()}
