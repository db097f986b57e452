"""Sharded sources end to end (real services): three MariaDB servers (server ids 41-43), the same
schema and overlapping keys, writers on all three, one destination per server, each run a process
of its own, all at once, SIGKILLed at random moments and run again, into one Iceberg table of a
JDBC catalog on PostgreSQL: the lake equals the union of the three sources (with the shard column),
value by value. Also ``orders_00..orders_15`` of one server into one table, and ADD COLUMN with a
default on one shard then later on another."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.dev.services import MariaDbServer, PostgresServer
from airflow_provider_binlog.dev.shard_runs import (
    CATALOG_PASSWORD_ENV,
    ORDERS_DDL,
    SOURCE_ENV,
    ShardRun,
    ShardSpec,
    ShardWriter,
    binlog_head,
    run_all,
)
from airflow_provider_binlog.lake.spark.session import jdbc_catalog_conf

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(1800)]

COLUMNS = ("id", "customer", "amount", "note", "updated")


@pytest.fixture(scope="module")
def servers() -> Iterator[list[MariaDbServer]]:
    started: list[MariaDbServer] = []
    try:
        for server_id in (41, 42, 43):
            started.append(MariaDbServer(server_id=server_id).start())
        yield started
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def catalog(spark: Any, postgres: PostgresServer, catalog_database: str, tmp_path: Path) -> dict[str, str]:
    """A JDBC catalog the runs write and this session reads (uncached)."""
    name = "sc_" + uuid.uuid4().hex[:8]
    cfg = {"catalog": name, "catalog_uri": postgres.jdbc_url(catalog_database), "catalog_user": postgres.user,
           "warehouse": str(tmp_path / "warehouse")}  # fmt: skip
    conf = jdbc_catalog_conf(cfg["catalog_uri"], postgres.user, postgres.password, cfg["warehouse"], name,
                             {"cache-enabled": "false"})  # fmt: skip
    for key, value in conf.items():
        spark.conf.set(key, value)
    # the catalog's own tables in PostgreSQL made here, once: three runs starting at once on a fresh
    # database race in Iceberg's JdbcCatalog initialization (a run's first try then fails)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}.shop")
    return cfg


def _database(server: MariaDbServer, tables: list[str]) -> tuple[str, str]:
    """A fresh ``shop`` database with ``tables``; return (its name, the head before it)."""
    db = "shop_" + uuid.uuid4().hex[:6]
    conn = server.connect()
    try:
        head = binlog_head(conn)
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{db}`")
            for table in tables:
                cur.execute(ORDERS_DDL.format(table=f"`{db}`.`{table}`"))
    finally:
        conn.close()
    return db, head


def _env(server: MariaDbServer, postgres: PostgresServer) -> dict[str, str]:
    env = dict(os.environ)
    env[SOURCE_ENV] = f"mysql://{server.root_user}:{server.root_password}@{server.host}:{server.port}"
    env[CATALOG_PASSWORD_ENV] = postgres.password
    return env


def _source_rows(
    server: MariaDbServer, db: str, tables: list[str], shard: Any
) -> dict[tuple[str, int], tuple]:
    out = {}
    for table in tables:
        for row in server.execute(f"SELECT {', '.join(COLUMNS)} FROM `{db}`.`{table}`"):
            out[(shard(table), row[0])] = tuple(row)
    return out


def _lake_rows(spark: Any, target: str, extra: tuple[str, ...] = ()) -> dict[tuple[str, int], tuple]:
    spark.catalog.refreshTable(target)
    rows = spark.sql(f"SELECT _shard, {', '.join(COLUMNS + extra)} FROM {target}").collect()
    out: dict[tuple[str, int], tuple] = {}
    for r in rows:
        key = (r[0], r[1])
        assert key not in out, f"duplicate lake key {key}"
        out[key] = tuple(r[1:])
    return out


def _assert_union(lake: dict[tuple[str, int], tuple], expected: dict[tuple[str, int], tuple]) -> None:
    missing, extra = expected.keys() - lake.keys(), lake.keys() - expected.keys()
    assert not missing and not extra, (sorted(missing)[:10], sorted(extra)[:10])
    wrong = [(k, lake[k], v) for k, v in expected.items() if lake[k] != v]
    assert not wrong, wrong[:5]


def _ok(runs: list[ShardRun]) -> None:
    for run in runs:
        assert run.returncode == 0 and run.summary is not None, (run.spec.destination, run.tail())


def test_three_servers_killed_and_rerun_equal_the_union(
    servers: list[MariaDbServer], catalog: dict[str, str], postgres: PostgresServer, spark: Any,
    tmp_path: Path,
) -> None:  # fmt: skip
    """Writers on three servers with overlapping keys; three runs at once killed at random moments
    (twice), then three unkilled runs after the writers stopped: lake == union of the sources."""
    rng = random.Random(19)
    target = f"{catalog['catalog']}.shop.orders"
    specs, envs, writers, dbs = [], [], [], []
    for i, server in enumerate(servers):
        db, head = _database(server, ["orders"])
        dbs.append(db)
        specs.append(ShardSpec(
            destination=f"shard{i}", connection=f"mysql_shard{i}", routes={f"{db}.orders": target},
            start_from=head, meta_dir=str(tmp_path / "meta"), batch_size=500, commit_rows=2000,
            **catalog,
        ))  # fmt: skip
        envs.append(_env(server, postgres))
        writer = ShardWriter(lambda s=server, d=db: s.connect(d), ["orders"], seed=100 + i, interval=0.01)
        for _ in range(40):
            writer.step()
        writers.append(writer)
    for w in writers:
        w.start()
    try:
        killed = 0
        for round_no in range(2):
            # the others at random moments mid-run (a fast machine may finish first); one run a round
            # within its first 2 s, before any machine has it done, so every round kills one
            kill = [rng.uniform(6, 45) for _ in specs]
            kill[round_no % len(specs)] = rng.uniform(0.5, 2.0)
            logs = [tmp_path / f"run-{round_no}-{i}.log" for i in range(len(specs))]
            runs = run_all(specs, envs, logs, kill)
            killed += sum(1 for r in runs if r.killed_after is not None)
            for run in runs:  # a run that finished before its kill must have succeeded
                assert run.killed_after is not None or run.returncode == 0, run.tail()
    finally:
        for w in writers:
            w.stop()
    assert killed >= 1, "no run was killed: the kill times are too long for this machine"
    logs = [tmp_path / f"final-{i}.log" for i in range(len(specs))]
    _ok(run_all(specs, envs, logs, [None] * len(specs)))
    expected: dict[tuple[str, int], tuple] = {}
    for i, (server, db) in enumerate(zip(servers, dbs, strict=True)):
        expected.update(_source_rows(server, db, ["orders"], lambda _t, i=i: f"shard{i}"))
    lake = _lake_rows(spark, target)
    _assert_union(lake, expected)
    overlapping = {k[1] for k in expected if k[0] == "shard0"} & {k[1] for k in expected if k[0] == "shard1"}
    assert overlapping, "the servers' keys must overlap"
    assert sum(w.changes for w in writers) > 300


def test_sixteen_tables_of_one_server_into_one_table(
    servers: list[MariaDbServer], catalog: dict[str, str], postgres: PostgresServer, spark: Any,
    tmp_path: Path,
) -> None:  # fmt: skip
    """``orders_00..orders_15`` (overlapping keys) through ``shop.orders_*`` into one table keyed by
    (id, _shard = {table}); a run killed mid-way, then a full one: exact; then ADD COLUMN c DEFAULT 5
    on orders_03 only: orders_03's rows get 5, the others' stay NULL; later the same on orders_07
    with DEFAULT 9: orders_07's rows get 9, orders_03's keep 5."""
    server = servers[0]
    tables = [f"orders_{n:02d}" for n in range(16)]
    db, head = _database(server, tables)
    target = f"{catalog['catalog']}.shop.orders_all"
    spec = ShardSpec(
        destination="sixteen", connection="mysql_shard0", routes={f"{db}.orders_*": target}, start_from=head,
        meta_dir=str(tmp_path / "meta"), shard_value="{table}", batch_size=500, commit_rows=2000, **catalog,
    )  # fmt: skip
    env = _env(server, postgres)
    writer = ShardWriter(lambda: server.connect(db), tables, seed=7)
    for _ in range(150):
        writer.step()
    runs = run_all([spec], [env], [tmp_path / "killed.log"], [random.Random(3).uniform(8, 30)])
    assert runs[0].killed_after is not None or runs[0].returncode == 0, runs[0].tail()
    for _ in range(50):
        writer.step()
    _ok(run_all([spec], [env], [tmp_path / "full.log"], [None]))
    expected = _source_rows(server, db, tables, lambda t: t)
    _assert_union(_lake_rows(spark, target), expected)
    assert len({k[0] for k in expected}) == 16

    server.execute(f"ALTER TABLE `{db}`.`orders_03` ADD COLUMN c INT NOT NULL DEFAULT 5")
    for _ in range(30):
        writer.step()
    _ok(run_all([spec], [env], [tmp_path / "add-1.log"], [None]))
    server.execute(f"ALTER TABLE `{db}`.`orders_07` ADD COLUMN c INT NOT NULL DEFAULT 9")
    for _ in range(30):
        writer.step()
    writer.stop()
    _ok(run_all([spec], [env], [tmp_path / "add-2.log"], [None]))
    expected = {}
    for table in tables:
        with_c = table in ("orders_03", "orders_07")
        select = ", ".join(COLUMNS) + (", c" if with_c else ", NULL")
        for row in server.execute(f"SELECT {select} FROM `{db}`.`{table}`"):
            expected[(table, row[0])] = tuple(row)
    lake = _lake_rows(spark, target, ("c",))
    _assert_union(lake, expected)
    assert {v[-1] for k, v in lake.items() if k[0] == "orders_03"} <= {5} | set(range(100))
    assert any(v[-1] == 9 for k, v in lake.items() if k[0] == "orders_07")
    assert all(v[-1] is None for k, v in lake.items() if k[0] not in ("orders_03", "orders_07"))
