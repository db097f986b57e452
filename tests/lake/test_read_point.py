"""The named read point across a destination's tables (``lake/read_point.py``, issue #45): real
MariaDB, ZooKeeper (the meta store), Spark and Iceberg.

Every source transaction writes its number into the tables it touches (``v`` of every row). Drain
runs commit table after table in several chunks; between any two commits of a run, and between any
two tables' tag moves at its end, a reader takes :func:`read_point` and reads every table at the
snapshots it names: every table holds, row for row, what the source held at that one position
(the transaction numbers recorded with their binlog positions), while a reader of the current
snapshots sees a table past it. Tables a run did not touch get the tags too; the per-run tags are
bounded (``keep``); an older position is found from the snapshot summaries once its tag is gone;
``binlog-cdc read-point`` prints the same.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from airflow_provider_binlog import cli
from airflow_provider_binlog.binlog.client import ReplicationConfig
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.instance import CanalInstance, InstanceConfig
from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager
from airflow_provider_binlog.canal.routing import Routes
from airflow_provider_binlog.drain.loop import Limits
from airflow_provider_binlog.drain.run import Drain, RunSettings
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake import read_point as rp
from airflow_provider_binlog.lake.read_point import ReadPointError, point_tag, read_point, read_tag

pytestmark = [pytest.mark.integration, pytest.mark.spark]

VERSIONED = ("a", "b", "c")
ROWS = 4


class Source:
    """The source tables and what each held at every position a transaction ended at."""

    def __init__(self, mariadb: Any, database: str) -> None:
        self.mariadb, self.database = mariadb, database
        self.history: dict[str, list[tuple[BinlogPosition, int]]] = {}
        conn = mariadb.connect(database)
        with conn.cursor() as cur:
            for table in (*VERSIONED, "d"):
                cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, v INT NOT NULL)")
                cur.execute(f"INSERT INTO `{table}` VALUES " + ", ".join(f"({i}, 0)" for i in range(ROWS)))
        conn.commit()
        conn.close()
        for table in (*VERSIONED, "d"):
            self.history[table] = [(BinlogPosition("", 0), 0)]

    def head(self) -> BinlogPosition:
        conn = self.mariadb.connect()
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
        conn.close()
        return BinlogPosition(file, int(pos))

    def write(self, version: int, tables: tuple[str, ...] = VERSIONED) -> None:
        """One transaction: ``v = version`` in every row of ``tables``; it starts at the head before it
        (a run's end is the position of the last event it took, its transaction's COMMIT)."""
        start = self.head()
        conn = self.mariadb.connect(self.database)
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            for table in tables:
                cur.execute(f"UPDATE `{table}` SET v = %s", (version,))
        conn.commit()
        conn.close()
        for table in tables:
            self.history[table].append((start, version))

    def at(self, table: str, position: BinlogPosition) -> int:
        """The version ``table`` held at ``position``, a run's end: the start of the last event it took
        (a COMMIT, taken) or the head a snapshot stood at (the next transaction's start, not taken)."""
        return max((p, v) for p, v in self.history[table] if p < position)[1]


@pytest.fixture
def setup(mariadb: Any, database: str, zk_client: Any, spark: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv(rp.KEEP_ENV, "2")
    source = Source(mariadb, database)
    destination = "rp_" + uuid.uuid4().hex[:6]
    src = ReplicationConfig(
        host=mariadb.host, port=mariadb.port, user=mariadb.repl_user, password=mariadb.repl_password,
        heartbeat_period=1.0,
    )  # fmt: skip
    only = TableFilter(include=f"{database}\\..*")
    config = InstanceConfig(destination=destination, source=src, filter=only)
    meta = ZooKeeperMetaManager(zk_client)
    tables = {f"{database}.{t}": f"lake.{database}.{t}" for t in (*VERSIONED, "d")}

    def run(snapshot: str = "never") -> dict[str, Any]:
        limits = Limits(batch_size=12, max_rows_per_commit=12)
        settings = RunSettings(limits=limits, snapshot=snapshot, stop_spark=False, running_timeout=30)
        return Drain(
            CanalInstance(config, meta), Routes(tables), settings, spark=lambda: spark,
            connect=lambda: mariadb.connect(database),
        ).run("head")  # fmt: skip

    return source, destination, tables, run


def _read(spark: Any, source: Source, destination: str, lake: dict[str, str]) -> tuple[BinlogPosition, bool]:
    """Read every table at the read point; assert each equals the source there; return the position
    and whether a current snapshot was past it (what a reader without the read point would see)."""
    point = read_point(spark, destination, lake.values())
    ahead = False
    for table, name in lake.items():
        short = table.rsplit(".", 1)[1]
        want = source.at(short, point.position)
        rows = spark.sql(f"SELECT id, v FROM {name} VERSION AS OF '{point.tag}'").collect()
        assert sorted((r.id, r.v) for r in rows) == [(i, want) for i in range(ROWS)], (name, point)
        current = {r.v for r in spark.sql(f"SELECT v FROM {name}").collect()}
        ahead = ahead or current != {want}
    first = lake[next(iter(lake))]
    by_id = spark.sql(f"SELECT DISTINCT v FROM {first} VERSION AS OF {point.snapshots[first]}").collect()
    assert [r.v for r in by_id] == [source.at("a", point.position)]
    return point.position, ahead


def test_readers_see_one_position_while_runs_commit(
    setup: Any, spark: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    spark_warehouse: str,
) -> None:  # fmt: skip
    source, destination, lake, run = setup
    first = run("initial")
    p1 = BinlogPosition.parse(first["read_point"]["position"])
    assert first["read_point"]["moved"] and first["end"] == str(p1)
    assert sorted(first["read_point"]["tables"]) == sorted(lake.values())
    assert _read(spark, source, destination, lake) == (p1, False)

    # run 2: six transactions over a, b, c, committed a chunk at a time; a reader between commits
    for version in range(1, 7):
        source.write(version)
    seen: list[tuple[BinlogPosition, bool]] = []
    observe, tag = commits._observe, rp._tag

    def reading_observe(properties: Any, target: str, started: float) -> None:
        observe(properties, target, started)
        seen.append(_read(spark, source, destination, lake))

    def reading_tag(*args: Any) -> None:
        tag(*args)
        seen.append(_read(spark, source, destination, lake))

    monkeypatch.setattr(commits, "_observe", reading_observe)
    monkeypatch.setattr(rp, "_tag", reading_tag)
    second = run()
    p2 = BinlogPosition.parse(second["read_point"]["position"])
    assert second["read_point"]["moved"] and p1 < p2
    during = [p for p, _ in seen[:-1]]  # after each commit, then after each tag move but the last
    assert len(seen) >= len(VERSIONED) + len(lake) and set(during) == {p1}, seen
    assert any(ahead for _, ahead in seen[: -len(lake)]), "no reader met a table past the read point"
    assert seen[-1] == (p2, False)
    monkeypatch.setattr(commits, "_observe", observe)
    monkeypatch.setattr(rp, "_tag", tag)
    at_p2 = read_point(spark, destination, lake.values())
    assert at_p2.position == p2 and at_p2.tag == point_tag(destination, p2)
    assert {source.at(t.rsplit(".", 1)[1], p2) for t in lake} == {6, 0}

    # run 3: only d changes; a, b, c keep their snapshots, tagged at the new position
    source.write(7, ("d",))
    third = run()
    p3 = BinlogPosition.parse(third["read_point"]["position"])
    lake_d = lake[f"{source.database}.d"]
    assert {t for t, counts in third["tables"].items() if counts.get("commits")} == {lake_d}
    at_p3 = read_point(spark, destination, lake.values())
    assert at_p3.position == p3
    for name in lake.values():
        if not name.endswith(".d"):
            assert at_p3.snapshots[name] == at_p2.snapshots[name]
    assert at_p3.snapshots[lake_d] != at_p2.snapshots[lake_d]
    assert _read(spark, source, destination, lake) == (p3, False)

    # run 4: keep=2 drops p2's tag; p2 is then found from the snapshot summaries, at the same snapshots
    source.write(8)
    p4 = BinlogPosition.parse(run()["read_point"]["position"])
    idle = run()["read_point"]  # nothing changed: the newest read point stays, nothing tagged
    assert idle["unchanged"] and not idle["moved"] and idle["position"] == str(p4)
    for name in lake.values():
        refs = {r.name for r in spark.sql(f"SELECT name FROM {name}.refs").collect()}
        points = {r for r in refs if r.startswith(read_tag(destination) + "@")}
        assert point_tag(destination, p3) in points and len(points) == 2 and read_tag(destination) in refs
    again = read_point(spark, destination, lake.values(), position=p2)
    assert again.snapshots == at_p2.snapshots and set(again.sources.values()) == {"summary"}
    assert again.tag is None

    # the CLI: the newest read point, one by position, and a position no run ended at
    base = ["read-point", "--destination", destination, "--tables", ",".join(lake.values()),
            "--warehouse", spark_warehouse]  # fmt: skip
    assert cli.main(base) == 0
    printed = json.loads(capsys.readouterr().out)
    newest = read_point(spark, destination, lake.values())
    assert printed["position"] == str(newest.position) and printed["tag"] == newest.tag
    assert printed["tables"] == {n: str(s) for n, s in newest.snapshots.items()}
    assert cli.main([*base, "--position", str(p3)]) == 0
    assert json.loads(capsys.readouterr().out)["tables"] == {n: str(s) for n, s in at_p3.snapshots.items()}
    unrecorded = BinlogPosition(p2.file, p2.pos - 1)
    with pytest.raises(ReadPointError, match="no recorded end of a run"):
        read_point(spark, destination, lake.values(), position=unrecorded)
    assert cli.main([*base, "--position", str(unrecorded)]) == 1
    assert "no recorded end of a run" in capsys.readouterr().err
