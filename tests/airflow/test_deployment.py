"""The README's patterns in a real Airflow deployment (:mod:`deployment`: api-server, scheduler with
the LocalExecutor, dag-processor, triggerer), on a source that already has rows.

One deployment per way a destination starts on existing rows: ``stream`` (``start_from`` the binlog
point before the schema's creation) and ``initial`` (``snapshot="initial"``, the README's sensor +
load). The event-driven DAG (an asset watcher's :class:`BinlogWatchTrigger` starts the load) shares the
``stream`` deployment. The incremental DAG (deferrable sensor + load) is unpaused: the scheduler starts its
scheduled run, then runs are triggered with DML between them and one without (an idle
interval: the sensor times out in the triggerer and is skipped, the run succeeds). After every run
the lake is compared with the source value by value; the consumer DAG scheduled on the orders
table's asset must have run for the loads that committed to it; in ``stream`` mode the backfill DAG
then rebuilds the tables as of a past position under its own destination.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import (
    SHOP_TABLES,
    Shop,
    fresh_shop,
    in_catalog,
    lake_verify,
    mysql_uri,
    warehouse_catalog,
)
from deployment import AirflowDeployment

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.dev.shard_runs import ORDERS_DDL, ShardWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark]

INCREMENTAL = "example_binlog_incremental"
CONSUMER = "example_binlog_lake_consumer"
BACKFILL = "example_binlog_backfill"
SHARDS = "example_binlog_shards_mapped"
ON_CHANGE = "example_binlog_on_change"
WATCHED = "binlog-cdc://shop_on_change"  # its asset
ON_CHANGE_TABLES = {f"shop.{t}": f"lake.shop_on_change.{t}" for t in ("customers", "products", "orders")}
WATCH_POLL = 2  # seconds between the asset watcher's polls
SHARD_CONNS = ("mysql_shard_0", "mysql_shard_1", "mysql_shard_2")
SHARD_DB = "deployment_shards"
SHARD_COLUMNS = ("id", "customer", "amount", "note", "updated")
WAIT_TIMEOUT = 30  # seconds the sensor waits in an idle interval before it is skipped


@dataclass
class Deployed:
    dep: AirflowDeployment
    shop: Shop
    mode: str


MODES = [
    "stream",  # start_from: the binlog point before the schema's creation (the demo's way)
    "initial",  # snapshot="initial": the README's sensor + load
]


@pytest.fixture(scope="module")
def shard_servers(mariadb: MariaDbServer) -> Iterator[list[MariaDbServer]]:
    """The three shards of the shards example: the session's MariaDB and two of this module's."""
    started: list[MariaDbServer] = []
    try:
        for server_id in (62, 63):
            started.append(MariaDbServer(server_id=server_id).start())
        yield [mariadb, *started]
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="module", params=MODES)
def deployed(
    request: pytest.FixtureRequest,
    airflow_migrated_db: Path,
    mariadb: MariaDbServer,
    shard_servers: list[MariaDbServer],
    zookeeper: ZooKeeperServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployed]:
    """A deployment for one snapshot mode, on a fresh ``shop`` that already has rows."""
    mode = request.param
    shop = fresh_shop(mariadb)
    shop.changes(300)  # the rows the source has before the first run
    home = tmp_path_factory.mktemp(f"airflow-deployment-{mode}")
    chroot = f"/deployment-{uuid.uuid4().hex[:12]}"
    env = {
        "AIRFLOW_CONN_MYSQL_DEFAULT": mysql_uri(mariadb),
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zookeeper.airflow_uri(chroot, 10.0),
        "BINLOG_CDC_WAREHOUSE": str(home / "warehouse"),
        "BINLOG_CDC_SPARK_MASTER": "local[2]",
        "BINLOG_CDC_DEFERRABLE": "1",
        "BINLOG_CDC_WAIT_TIMEOUT": str(WAIT_TIMEOUT),
        "BINLOG_CDC_WATCH_POLL": str(WATCH_POLL),
        "BINLOG_CDC_SHARD_CONNS": ",".join(SHARD_CONNS),
        "BINLOG_CDC_SHARD_SOURCE": f"{SHARD_DB}.orders",
        **{
            f"AIRFLOW_CONN_{c.upper()}": mysql_uri(s) for c, s in zip(SHARD_CONNS, shard_servers, strict=True)
        },
    }
    if mode == "stream":
        env["BINLOG_CDC_START_FROM"] = shop.start_from
    else:
        env["BINLOG_CDC_SNAPSHOT"] = mode
    dep = AirflowDeployment.create(home, airflow_migrated_db, env)  # no earlier test's runs
    try:
        dep.start()
        dep.wait_parsed([INCREMENTAL, CONSUMER, BACKFILL, SHARDS, ON_CHANGE])
        yield Deployed(dep, shop, mode)
    except BaseException:
        print(dep.describe())
        raise
    finally:
        dep.stop()
        shop.conn.close()


def _assert_lake_equal(
    mariadb: MariaDbServer,
    spark: Any,
    dep: AirflowDeployment,
    after: str,
    tables: dict[str, str] = SHOP_TABLES,
) -> None:
    catalog = warehouse_catalog(spark, dep.home / "warehouse")
    diffs = lake_verify(mariadb, spark, in_catalog(tables, catalog))
    detail = "\n".join(d.describe() for d in diffs)
    assert all(d.equal for d in diffs), f"after {after}:\n{detail}\n{dep.describe()}"
    assert all(d.source_rows > 0 for d in diffs), detail


def _wait_all_green(dep: AirflowDeployment, dag_id: str, at_least: int) -> dict[str, tuple[str, str]]:
    runs = dep.wait_idle(dag_id, at_least=at_least)
    failed = {r: s for r, s in runs.items() if s[1] != "success"}
    assert not failed, f"runs of {dag_id} not green: {failed}\n{dep.describe()}"
    return runs


def _copy_schema(mariadb: MariaDbServer, source: str, target: str) -> None:
    """``target`` := a copy of every table of ``source`` now (the source as of this moment)."""
    mariadb.execute(f"DROP DATABASE IF EXISTS `{target}`")
    mariadb.execute(f"CREATE DATABASE `{target}`")
    for (table,) in mariadb.execute(
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (source,)
    ):
        mariadb.execute(f"CREATE TABLE `{target}`.`{table}` LIKE `{source}`.`{table}`")
        mariadb.execute(f"INSERT INTO `{target}`.`{table}` SELECT * FROM `{source}`.`{table}`")


@pytest.mark.timeout(2400)
def test_deployment_incremental_intervals_consumer_and_backfill(
    deployed: Deployed, mariadb: MariaDbServer, spark: Any
) -> None:
    """Scheduled run, then triggered runs with DML between them and an idle one; the lake equals
    the source after each; the asset consumer ran; the backfill DAG (params: start_from, stop_at,
    targets) rebuilds the tables as they were at a past position."""
    dep, shop = deployed.dep, deployed.shop
    dep.unpause(CONSUMER)
    dep.unpause(INCREMENTAL)  # catchup=False: the scheduler starts the latest interval's run
    runs = _wait_all_green(dep, INCREMENTAL, at_least=1)
    scheduled = [r for r, (kind, _) in runs.items() if kind == "scheduled"]
    assert scheduled, runs
    states = dep.task_states(INCREMENTAL, scheduled[0])
    # the first run loads whatever came first: the rows already there (initial) or the binlog (stream)
    assert states == {"wait_for_changes": "success", "merge_into_lake": "success"}, states
    _assert_lake_equal(mariadb, spark, dep, "the first (scheduled) run")

    middle = ""
    for n, changes in enumerate((150, 0, 80)):
        if changes:
            shop.changes(changes)
        if n == 0:
            middle = shop.head()
            _copy_schema(mariadb, "shop", "shop_at_middle")
        run_id = dep.trigger(INCREMENTAL, f"deployment_{n}_{uuid.uuid4().hex[:6]}")
        runs = _wait_all_green(dep, INCREMENTAL, at_least=len(runs) + 1)
        states = dep.task_states(INCREMENTAL, run_id)
        if changes:
            assert states == {"wait_for_changes": "success", "merge_into_lake": "success"}, states
        else:  # an idle interval: the sensor times out in the triggerer, both are skipped, green run
            assert states == {"wait_for_changes": "skipped", "merge_into_lake": "skipped"}, states
        _assert_lake_equal(mariadb, spark, dep, f"run {run_id} ({changes} changes before it)")

    consumer = dep.wait_idle(CONSUMER, at_least=1, timeout=600)
    assert all(state == "success" for _, state in consumer.values()), (consumer, dep.describe())
    assert all(kind == "asset_triggered" for kind, _ in consumer.values()), consumer

    if deployed.mode != "stream":
        return  # the backfill reads the binlog from the schema's creation: once is enough
    try:
        conf = {
            "start_from": shop.start_from,
            "stop_at": middle,
            "targets": {"shop.*": "lake.shop_backfill.{table}"},
        }
        dep.unpause(BACKFILL)
        run_id = dep.trigger(BACKFILL, f"deployment_backfill_{uuid.uuid4().hex[:6]}", conf)
        _wait_all_green(dep, BACKFILL, at_least=1)
        states = dep.task_states(BACKFILL, run_id)
        assert states == {"plan": "success", "backfill[0]": "success"}, states
        middle_tables = {
            f"shop_at_middle.{t}": f"lake.shop_backfill.{t}" for t in ("customers", "products", "orders")
        }
        _assert_lake_equal(mariadb, spark, dep, "the backfill", middle_tables)
        _assert_lake_equal(mariadb, spark, dep, "the backfill (live tables untouched)")
    finally:
        mariadb.execute("DROP DATABASE IF EXISTS shop_at_middle")


def _shard_lake(spark: Any, table: str) -> dict[tuple[str, int], tuple[Any, ...]]:
    spark.catalog.refreshTable(table)
    out: dict[tuple[str, int], tuple[Any, ...]] = {}
    for r in spark.sql(f"SELECT _shard, {', '.join(SHARD_COLUMNS)} FROM {table}").collect():
        assert (r[0], r[1]) not in out, f"duplicate key {(r[0], r[1])}"
        out[(r[0], r[1])] = tuple(r[1:])
    return out


def _shard_union(servers: list[MariaDbServer]) -> dict[tuple[str, int], tuple[Any, ...]]:
    out = {}
    for conn_id, server in zip(SHARD_CONNS, servers, strict=True):
        for row in server.execute(f"SELECT {', '.join(SHARD_COLUMNS)} FROM `{SHARD_DB}`.orders"):
            out[(conn_id, row[0])] = tuple(row)
    return out


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("deployed", ["stream"], indirect=True)  # its snapshot mode is its own
def test_deployment_shards_mapped_dag(
    deployed: Deployed, shard_servers: list[MariaDbServer], spark: Any
) -> None:
    """The mapped shards DAG (one task per connection, each ``snapshot="initial"``) on shards that
    already have rows: its scheduled run snapshots them, a triggered run after DML reads each
    binlog; the one lake table equals the union of the shards (connection id as ``_shard``)."""
    dep = deployed.dep
    writers = []
    try:
        for i, server in enumerate(shard_servers):
            server.execute(f"DROP DATABASE IF EXISTS `{SHARD_DB}`")
            server.execute(f"CREATE DATABASE `{SHARD_DB}`")
            server.execute(ORDERS_DDL.format(table=f"`{SHARD_DB}`.orders"))
            writer = ShardWriter(lambda s=server: s.connect(SHARD_DB), ["orders"], seed=70 + i)
            for _ in range(30):
                writer.step()
            writers.append(writer)
        dep.unpause(SHARDS)  # the scheduled run: every shard's initial snapshot
        _wait_all_green(dep, SHARDS, at_least=1)
        catalog = warehouse_catalog(spark, dep.home / "warehouse")
        assert _shard_lake(spark, f"{catalog}.shop.orders_sharded") == _shard_union(shard_servers)
        for w in writers:
            for _ in range(20):
                w.step()
        run_id = dep.trigger(SHARDS, f"deployment_shards_{uuid.uuid4().hex[:6]}")
        _wait_all_green(dep, SHARDS, at_least=2)
        states = dep.task_states(SHARDS, run_id)
        assert states == {f"merge_shard[{i}]": "success" for i in range(3)}, states
        expected = _shard_union(shard_servers)
        assert _shard_lake(spark, f"{catalog}.shop.orders_sharded") == expected
        ids = [{k[1] for k in expected if k[0] == c} for c in SHARD_CONNS]
        assert ids[0] & ids[1] & ids[2], "the shards' keys must overlap"
    finally:
        for w in writers:
            w.stop()
        for server in shard_servers:
            server.execute(f"DROP DATABASE IF EXISTS `{SHARD_DB}`")


def _queued_at(dep: AirflowDeployment, dag_id: str) -> dict[str, dt.datetime]:
    """``{run_id: queued_at}`` of every run of ``dag_id`` (UTC)."""
    out = {}
    for run_id, queued in dep.query("SELECT run_id, queued_at FROM dag_run WHERE dag_id = ?", (dag_id,)):
        at = dt.datetime.fromisoformat(str(queued))
        out[run_id] = at if at.tzinfo else at.replace(tzinfo=dt.timezone.utc)
    return out


def _new_runs(dep: AirflowDeployment, known: set[str], seconds: float) -> set[str]:
    """The runs of the event-driven DAG started within ``seconds`` (waited in full) besides ``known``."""
    time.sleep(seconds)
    return set(dep.runs(ON_CHANGE)) - known


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("deployed", ["stream"], indirect=True)  # one deployment is enough
def test_deployment_asset_watcher_starts_the_load_on_commits(
    deployed: Deployed, mariadb: MariaDbServer, spark: Any
) -> None:
    """The asset watcher's trigger starts the load: its first run (the destination had no cursor),
    a commit (the commit-to-run latency is printed) and a burst of ten commits while its load runs
    (at most one more run), a commit while the triggerer is down (one run after its restart) and then
    no change (no run: the restart repeated nothing); the lake equals the source after each. The
    asset events chain up: each range starts where the one before it ended."""
    dep = deployed.dep
    dep.unpause(ON_CHANGE)
    try:
        _watched_loads(dep, mariadb, spark, deployed.shop)
    finally:
        dep.cli("dags", "pause", ON_CHANGE)  # the other tests' changes start no more loads
    # the events chain up: each range starts where the one before ended, none twice, none skipped
    payloads = [
        json.loads(extra)["payload"]
        for (extra,) in dep.query(
            "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.name = ? "
            "ORDER BY e.id",
            (WATCHED,),
        )
    ]
    assert payloads and payloads[0]["first"], payloads
    for before, after in itertools.pairwise(payloads):
        assert after["after"] == before["to"] and not after["first"], payloads
        assert BinlogPosition.parse(after["from"]) >= BinlogPosition.parse(before["to"]), payloads


def _watched_loads(dep: AirflowDeployment, mariadb: MariaDbServer, spark: Any, shop: Shop) -> None:
    runs = _wait_all_green(dep, ON_CHANGE, at_least=1)  # the first poll: no cursor yet, one run
    assert all(kind == "asset_triggered" for kind, _ in runs.values()), runs
    _assert_lake_equal(mariadb, spark, dep, "the watcher's first run", ON_CHANGE_TABLES)

    known = set(runs)
    shop.changes(20)  # a commit starts a load; ten commits while it runs
    committed = dt.datetime.now(dt.timezone.utc)
    dep._wait(lambda: set(dep.runs(ON_CHANGE)) - known, 300, "a run for the commit", every=0.5)
    (loading,) = set(dep.runs(ON_CHANGE)) - known
    latency = (_queued_at(dep, ON_CHANGE)[loading] - committed).total_seconds()
    print(f"asset watcher: commit to queued run {latency:.1f} s (poll interval {WATCH_POLL} s)")
    dep._wait(
        lambda: dep.task_states(ON_CHANGE, loading).get("merge_into_lake") == "running", 300,
        "the load to run", every=1,
    )  # fmt: skip
    for _ in range(10):
        shop.changes(1)
    _wait_all_green(dep, ON_CHANGE, at_least=len(known) + 1)
    time.sleep(5 * WATCH_POLL)  # a follow-up run, if any, is queued by then
    runs = _wait_all_green(dep, ON_CHANGE, at_least=len(known) + 1)
    burst = set(runs) - known
    assert 1 <= len(burst) <= 2, f"a commit and a burst of ten during its load started {sorted(burst)}"
    _assert_lake_equal(mariadb, spark, dep, "the burst", ON_CHANGE_TABLES)

    dep.stop_component("triggerer")
    shop.changes(5)  # committed while no triggerer runs
    dep.start_component("triggerer")
    runs = _wait_all_green(dep, ON_CHANGE, at_least=len(runs) + 1)
    assert not _new_runs(dep, set(runs), 30), "a run without a change after the triggerer's restart"
    _assert_lake_equal(mariadb, spark, dep, "the triggerer's restart", ON_CHANGE_TABLES)
