"""BinlogToSparkOperator on Iceberg's JDBC catalog (issue #16), against real MariaDB, ZooKeeper,
PostgreSQL and Spark: the catalog comes from an Airflow connection (``catalog_conn_id``) whose
password shows nowhere; runs with DDL and a re-snapshot leave the lake equal to the source; and two
operators, each in a process of its own, commit disjoint keys of one lake table at the same time,
one of their conflicts made certain (``lake_commit=pause``) and retried.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from airflow_harness import lake_verify, make_context

from airflow_provider_binlog import faults
from airflow_provider_binlog.dev.services import MariaDbServer, PostgresServer
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.resnapshot import RESNAPSHOT
from airflow_provider_binlog.lake.spark.session import jdbc_catalog_conf
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]

CHILD = Path(__file__).with_name("jdbc_operator_child.py")
WAIT = 300.0  # seconds one operator run in a child may take (Spark start on a loaded machine)


@dataclass
class Catalog:
    name: str
    conn_id: str
    password: str
    postgres: PostgresServer
    database: str


@pytest.fixture
def jdbc(
    postgres: PostgresServer, catalog_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Catalog:
    """A JDBC catalog on a fresh database as the Airflow connection ``iceberg_<tag>`` (type postgres,
    the warehouse in its extras)."""
    tag = uuid.uuid4().hex[:8]
    warehouse = quote(str(tmp_path / "warehouse"), safe="")
    monkeypatch.setenv(f"AIRFLOW_CONN_ICEBERG_{tag.upper()}",
                       f"{postgres.airflow_uri(catalog_database)}?warehouse={warehouse}")  # fmt: skip
    return Catalog(f"jop_{tag}", f"iceberg_{tag}", postgres.password, postgres, catalog_database)


@pytest.fixture
def source_db(mariadb: MariaDbServer) -> Iterator[str]:
    name = f"jo_{uuid.uuid4().hex[:8]}"
    mariadb.execute(f"CREATE DATABASE `{name}`")
    yield name
    mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")


def _head(mariadb: MariaDbServer) -> str:
    (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    return f"{file}:{pos}"


def _assert_equal(mariadb: MariaDbServer, spark: Any, tables: dict[str, str]) -> None:
    for target in tables.values():
        spark.catalog.refreshTable(target)
    diffs = lake_verify(mariadb, spark, tables)
    assert all(d.equal and d.source_rows > 0 for d in diffs), "\n".join(d.describe() for d in diffs)


def test_the_operator_on_a_jdbc_catalog_from_a_connection(
    mariadb: MariaDbServer, spark: Any, conns: dict[str, str], jdbc: Catalog, source_db: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """Three runs: rows, then ADD COLUMN evolved in place, then an ADD COLUMN re-snapshotted
    (``on_schema_change={"add_column": "resnapshot"}``); after each the lake equals the source value
    by value. The tables live in PostgreSQL; the password is in no summary, log line or repr."""
    db, start = source_db, _head(mariadb)
    tables = {f"{db}.t": f"{jdbc.name}.{db}.t", f"{db}.u": f"{jdbc.name}.{db}.u"}
    summaries = []

    def run(n: int, **kwargs: Any) -> None:
        op = BinlogToSparkOperator(
            task_id="load", destination=f"jdbc-{db}", tables={f"{db}.*": f"{jdbc.name}.{db}.{{table}}"},
            catalog=jdbc.name, catalog_conn_id=jdbc.conn_id, start_from=start, spark_master="local[2]",
            stop_spark=False, **kwargs,
        )  # fmt: skip
        assert jdbc.password not in repr(op) + repr(vars(op))
        summaries.append(op.execute(make_context(try_number=n, run_id=f"run{n}")))

    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, a INT, b VARCHAR(20))")
    mariadb.execute(f"CREATE TABLE `{db}`.u (id INT PRIMARY KEY, v DECIMAL(10,2))")
    mariadb.execute(f"INSERT INTO `{db}`.t VALUES (1, 10, 'one'), (2, 20, 'two'), (3, NULL, 'three')")
    mariadb.execute(f"INSERT INTO `{db}`.u VALUES (1, 1.25), (2, NULL)")
    run(1)
    _assert_equal(mariadb, spark, tables)

    mariadb.execute(f"UPDATE `{db}`.t SET b = 'ONE' WHERE id = 1")
    mariadb.execute(f"ALTER TABLE `{db}`.t ADD COLUMN c INT NOT NULL DEFAULT 5")
    mariadb.execute(f"INSERT INTO `{db}`.t VALUES (4, 40, 'four', 44)")
    mariadb.execute(f"DELETE FROM `{db}`.u WHERE id = 2")
    run(2)
    _assert_equal(mariadb, spark, tables)

    mariadb.execute(f"ALTER TABLE `{db}`.t ADD COLUMN d VARCHAR(5) DEFAULT 'dd'")
    mariadb.execute(f"UPDATE `{db}`.t SET d = 'x' WHERE id = 2")
    mariadb.execute(f"INSERT INTO `{db}`.u VALUES (3, 3.5)")
    run(3, on_schema_change={"add_column": "resnapshot"})
    _assert_equal(mariadb, spark, tables)
    swaps = spark.sql(f"SELECT summary['{RESNAPSHOT}'] FROM {tables[f'{db}.t']}.snapshots").collect()
    assert any(r[0] for r in swaps), "the ADD COLUMN was not re-snapshotted"

    listed = jdbc.postgres.execute("SELECT table_name FROM iceberg_tables ORDER BY 1", jdbc.database)
    assert listed == [("t",), ("u",)]
    assert jdbc.password not in json.dumps(summaries, default=str)
    assert jdbc.password not in caplog.text


def test_a_catalog_connection_of_another_type_is_refused_without_its_password(
    jdbc: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_NOT_A_CATALOG", f"mysql://u:{jdbc.password}@127.0.0.1:3306/x")
    op = BinlogToSparkOperator(task_id="load", destination="d", tables={"a.b": "lake.a.b"},
                               catalog_conn_id="not_a_catalog")  # fmt: skip
    with pytest.raises(ValueError, match="catalog connection 'not_a_catalog': its type is 'mysql'") as caught:
        op._catalog_conf(None)
    assert jdbc.password not in str(caught.value)
    good = BinlogToSparkOperator(task_id="load", destination="d", tables={"a.b": "lake.a.b"}, catalog="c1",
                                 catalog_conn_id=jdbc.conn_id)  # fmt: skip
    conf = good._catalog_conf(None)
    assert conf["spark.sql.catalog.c1.uri"] == jdbc.postgres.jdbc_url(jdbc.database)
    assert conf["spark.sql.catalog.c1.jdbc.password"] == jdbc.password
    assert conf["spark.sql.catalog.c1.warehouse"].endswith("warehouse")


class Run:
    """One operator run in a child process (every wait bounded)."""

    def __init__(self, cfg: dict[str, Any], log: Path, failpoints: str = "") -> None:
        self.log, self.result = log, log.with_suffix(".json")
        env = dict(os.environ, AIRFLOW_HOME=str(log.parent / "airflow-home"))
        env.pop(faults.ENV, None)
        if failpoints:
            env[faults.ENV] = failpoints
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(CHILD), json.dumps(cfg), str(self.result)], stdout=out,
                stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self) -> dict[str, Any]:
        try:
            code = self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the run took over {WAIT:g} s:\n{self.text()[-4000:]}") from None
        assert code == 0 and self.result.exists(), self.text()[-6000:]
        summary: dict[str, Any] = json.loads(self.result.read_text())
        return summary

    def wait_paused(self) -> None:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and self.proc.poll() is None:
            if faults.PAUSE_MARK in self.text():
                return
            time.sleep(0.2)
        self.kill()
        raise AssertionError(f"the run did not pause at its failpoint:\n{self.text()[-4000:]}")

    def resume(self) -> None:
        faults.continue_file(self.proc.pid).touch()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def test_two_operators_commit_disjoint_keys_of_one_table_at_the_same_time(
    mariadb: MariaDbServer, spark: Any, conns: dict[str, str], jdbc: Catalog, source_db: str, tmp_path: Path,
) -> None:  # fmt: skip
    """Sources ``t_a`` and ``t_b`` (disjoint keys) feed one lake table through two destinations, each
    operator a process of its own. Round 1: A pauses between reading the table and its MERGE, B runs,
    A continues and retries its conflict. Rounds 2 and 3 run both at once. The lake table holds
    exactly the rows of both sources, value by value, none twice. The keys are disjoint, so the
    target is declared ``unique_keys=True`` (without it the second destination is refused)."""
    db = source_db
    target = f"{jdbc.name}.{db}.t"
    for t in ("t_a", "t_b"):
        mariadb.execute(f"CREATE TABLE `{db}`.{t} (id INT PRIMARY KEY, a INT, b VARCHAR(20))")
    # after the CREATEs: a CREATE TABLE read by one destination would restart the shared lake table,
    # which a target without a shard column refuses (it cannot tell that source's rows apart)
    start = _head(mariadb)
    base = {"a": 0, "b": 100_000}
    written = {"a": 0, "b": 0}

    def write(name: str, r: int) -> None:
        table, key0 = f"`{db}`.t_{name}", base[name]
        rows = ", ".join(f"({key0 + written[name] + i}, {r}, 'r{r}')" for i in range(1, 7))
        mariadb.execute(f"INSERT INTO {table} VALUES {rows}")
        written[name] += 6
        mariadb.execute(f"UPDATE {table} SET b = 'upd{r}' WHERE id <= {key0 + 3}")
        if r:
            mariadb.execute(f"DELETE FROM {table} WHERE id = {key0 + r + 3}")

    def start_run(name: str, r: int, failpoints: str = "") -> Run:
        cfg = {"destination": f"jdbc-{db}-{name}", "tables": {f"{db}.t_{name}": target}, "catalog": jdbc.name,
               "catalog_conn_id": jdbc.conn_id, "start_from": start, "run_id": f"r{r}",
               "unique_keys": True}  # fmt: skip
        return Run(cfg, tmp_path / f"run-{name}-{r}.log", failpoints)

    runs: list[Run] = []
    try:
        for name in ("a", "b"):  # round 0, one after the other: A creates the table
            write(name, 0)
            runs.append(start_run(name, 0))
            runs[-1].wait()
        write("a", 1)
        write("b", 1)
        a = start_run("a", 1, "lake_commit=pause@1")
        runs.append(a)
        a.wait_paused()
        runs.append(b := start_run("b", 1))
        b.wait()
        a.resume()
        a.wait()
        assert "commit conflict on" in a.text(), a.text()[-4000:]
        for r in (2, 3):
            write("a", r)
            write("b", r)
            pair = [start_run("a", r), start_run("b", r)]
            runs.extend(pair)
            for run in pair:
                run.wait()
    finally:
        for run in runs:
            run.kill()
    # this session reads the catalog uncached
    for key, value in jdbc_catalog_conf(jdbc.postgres.jdbc_url(jdbc.database), jdbc.postgres.user,
                                        jdbc.password, str(tmp_path / "warehouse"), jdbc.name,
                                        {"cache-enabled": "false"}).items():  # fmt: skip
        spark.conf.set(key, value)
    lake = sorted(tuple(r) for r in spark.sql(f"SELECT id, a, b FROM {target}").collect())
    source = sorted(
        tuple(r) for t in ("t_a", "t_b") for r in mariadb.execute(f"SELECT id, a, b FROM `{db}`.{t}")
    )
    assert len(lake) == len({r[0] for r in lake})
    assert lake == source
    for name in ("a", "b"):
        assert commits.read_mark(spark, target, f"jdbc-{db}-{name}") is not None
