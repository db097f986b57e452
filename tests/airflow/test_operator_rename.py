"""RENAME TABLE, table swaps and online schema-change tools through BinlogToSparkOperator, against
real MariaDB, ZooKeeper and Spark + Iceberg (issue #14).

gh-ost and pt-online-schema-change are scripted statement by statement as the tools run them (ROW
format): the shadow table created LIKE the original and altered, its rows copied in chunks by
``INSERT .. SELECT`` while the application writes to the original (gh-ost replays those writes onto
the shadow itself, pt-osc's triggers do), the changelog table, the cut-over ``RENAME TABLE t TO
_t_del, _t_gho TO t`` / ``t TO _t_old, _t_new TO t`` and the clean-up. Each runs under an exact
route and under a glob route, in one run and split across runs with the cut-over in the middle.
After every run each lake table equals its source value by value, and no lake table exists for a
shadow table. RENAME TABLE (one table, a swap of two, ``ALTER TABLE .. RENAME TO``, into and out of
the routes) the same way; a raise around the re-snapshot's swap, then a retry, converges.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_harness import make_context, mysql_uri
from test_operator_ddl import Harness

from airflow_provider_binlog import faults
from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.lake.sql import quote_parts
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]


class Routed(Harness):
    """The DDL harness with the routes a test chooses: ``glob`` (``db.*`` -> ``lake.db.{table}``) or
    exact routes (source table -> lake table of the same name)."""

    def __init__(self, *args: Any, glob: bool, exact: tuple[str, ...] = ()) -> None:
        super().__init__(*args)
        self.glob, self.exact = glob, exact

    def run(self, **kwargs: Any) -> dict[str, Any]:
        self.try_number += 1
        if self.glob:
            tables = {f"{self.db}.*": f"lake.{self.db}.{{table}}"}
        else:
            tables = {f"{self.db}.{t}": f"lake.{self.db}.{t}" for t in self.exact}
        op = BinlogToSparkOperator(
            task_id="load", destination=self.dest, tables=tables, start_from=self.start,
            warehouse=self.warehouse, spark_master="local[2]", stop_spark=False,
            mysql_conn_id=self.mysql_conn_id, **kwargs,
        )  # fmt: skip
        return op.execute(make_context(try_number=self.try_number))

    def exists(self, table: str) -> bool:
        return bool(self.spark.catalog.tableExists(quote_parts(("lake", self.db, table))))

    def assert_lake(self, equal: tuple[str, ...], missing: tuple[str, ...] = ()) -> None:
        """``equal`` tables equal their sources; ``missing`` have no lake table; no lake table of the
        database is a shadow table."""
        for table in equal:
            self.assert_equal(table)
        for table in missing:
            assert not self.exists(table), table
        names = [r.tableName for r in self.spark.sql(f"SHOW TABLES IN lake.`{self.db}`").collect()]
        shadows = [n for n in names if n.startswith("_")]
        assert not shadows, shadows


def _harness(server: MariaDbServer, spark: Any, warehouse: str, mp: pytest.MonkeyPatch, **kw: Any) -> Routed:
    mp.setenv("AIRFLOW_CONN_MYSQL_REN", mysql_uri(server))
    h = Routed(server, spark, warehouse, "mysql_ren", **kw)
    h.sql(f"CREATE DATABASE `{h.db}`")
    return h


@pytest.fixture(params=["glob", "exact"])
def routed(
    request: pytest.FixtureRequest, mariadb: MariaDbServer, spark: Any, spark_warehouse: str,
    conns: dict[str, str], monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Routed]:  # fmt: skip
    h = _harness(mariadb, spark, spark_warehouse, monkeypatch, glob=request.param == "glob", exact=("t", "o"))
    try:
        yield h
    finally:
        h.close()


@pytest.fixture
def globbed(
    mariadb: MariaDbServer, spark: Any, spark_warehouse: str, conns: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Routed]:  # fmt: skip
    h = _harness(mariadb, spark, spark_warehouse, monkeypatch, glob=True)
    try:
        yield h
    finally:
        h.close()


# ---- the tools' statements, as they run them --------------------------------------------------


def gh_ost(db: str) -> dict[str, list[str]]:
    """gh-ost adding ``c INT NOT NULL DEFAULT 5`` to ``t (id, v)``: the steps, by phase."""
    t, gho, ghc, dl = (f"`{db}`.`{n}`" for n in ("t", "_t_gho", "_t_ghc", "_t_del"))
    return {
        "start": [
            f"DROP /* gh-ost */ TABLE IF EXISTS {ghc}",
            f"CREATE /* gh-ost */ TABLE {ghc} (id bigint auto_increment, last_update timestamp NOT NULL "
            "DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, hint varchar(64) charset ascii not null, "
            "value varchar(4096) charset ascii not null, primary key(id), unique key hint_uidx(hint))",
            f"CREATE /* gh-ost */ TABLE {gho} LIKE {t}",
            f"ALTER /* gh-ost */ TABLE {gho} ADD COLUMN c INT NOT NULL DEFAULT 5",
            f"INSERT /* gh-ost */ INTO {ghc} (id, hint, value) VALUES (NULLIF(2, 0), 'state', "
            "'GhostTableMigrated') ON DUPLICATE KEY UPDATE last_update=NOW(), value=VALUES(value)",
            # the first chunk of the row copy
            f"INSERT /* gh-ost */ IGNORE INTO {gho} (id, v) (SELECT id, v FROM {t} FORCE INDEX (PRIMARY) "
            "WHERE id >= 1 AND id <= 3 LOCK IN SHARE MODE)",
            # the application writes to t; gh-ost applies them to the shadow from the binlog
            f"INSERT INTO {t} VALUES (10, 'ten')",
            f"REPLACE /* gh-ost */ INTO {gho} (id, v) VALUES (10, 'ten')",
            f"UPDATE {t} SET v = 'TWO' WHERE id = 2",
            f"UPDATE /* gh-ost */ {gho} SET id = 2, v = 'TWO' WHERE id = 2",
            f"DELETE FROM {t} WHERE id = 3",
            f"DELETE /* gh-ost */ FROM {gho} WHERE id = 3",
        ],
        "copy": [
            f"INSERT /* gh-ost */ IGNORE INTO {gho} (id, v) (SELECT id, v FROM {t} FORCE INDEX (PRIMARY) "
            "WHERE id >= 4 AND id <= 10 LOCK IN SHARE MODE)",
            f"UPDATE {t} SET v = 'FOUR' WHERE id = 4",
            f"UPDATE /* gh-ost */ {gho} SET id = 4, v = 'FOUR' WHERE id = 4",
            f"INSERT /* gh-ost */ INTO {ghc} (id, hint, value) VALUES (NULLIF(2, 0), 'state', "
            "'AllEventsUpToLockProcessed') ON DUPLICATE KEY UPDATE last_update=NOW(), value=VALUES(value)",
            # the atomic cut-over: the sentry table, dropped by the locking session, then the swap
            f"CREATE /* gh-ost */ TABLE {dl} (id int auto_increment primary key) "
            "comment='ghost-cut-over-sentry'",
            f"DROP /* gh-ost */ TABLE IF EXISTS {dl}",
            f"RENAME /* gh-ost */ TABLE {t} TO {dl}, {gho} TO {t}",
        ],
        "after": [
            f"DROP /* gh-ost */ TABLE IF EXISTS {ghc}",
            f"INSERT INTO {t} (id, v) VALUES (11, 'eleven')",
            f"UPDATE {t} SET c = 6 WHERE id = 1",
        ],
    }


def pt_osc(db: str) -> dict[str, list[str]]:
    """pt-online-schema-change adding ``c INT NOT NULL DEFAULT 5`` to ``t (id, v)``, by phase."""
    t, new, old = (f"`{db}`.`{n}`" for n in ("t", "_t_new", "_t_old"))
    trig = f"`{db}`.`pt_osc_{db}_t"
    return {
        "start": [
            f"CREATE TABLE {new} (id INT NOT NULL, v VARCHAR(20) DEFAULT NULL, PRIMARY KEY (id))",
            f"ALTER TABLE {new} ADD COLUMN c INT NOT NULL DEFAULT 5",
            f"CREATE TRIGGER {trig}_del` AFTER DELETE ON {t} FOR EACH ROW BEGIN DECLARE CONTINUE HANDLER "
            f"FOR 1146 begin end; DELETE IGNORE FROM {new} WHERE {new}.`id` <=> OLD.`id`; END",
            f"CREATE TRIGGER {trig}_upd` AFTER UPDATE ON {t} FOR EACH ROW BEGIN DECLARE CONTINUE HANDLER "
            f"FOR 1146 begin end; DELETE IGNORE FROM {new} WHERE !(OLD.`id` <=> NEW.`id`) AND {new}.`id` "
            f"<=> OLD.`id`; REPLACE INTO {new} (`id`, `v`) VALUES (NEW.`id`, NEW.`v`); END",
            f"CREATE TRIGGER {trig}_ins` AFTER INSERT ON {t} FOR EACH ROW BEGIN DECLARE CONTINUE HANDLER "
            f"FOR 1146 begin end; REPLACE INTO {new} (`id`, `v`) VALUES (NEW.`id`, NEW.`v`); END",
            f"INSERT LOW_PRIORITY IGNORE INTO {new} (`id`, `v`) SELECT `id`, `v` FROM {t} "
            "FORCE INDEX(`PRIMARY`) "
            "WHERE ((`id` >= '1')) AND ((`id` <= '3')) LOCK IN SHARE MODE",
            f"INSERT INTO {t} VALUES (10, 'ten')",
            f"UPDATE {t} SET v = 'TWO' WHERE id = 2",
            f"DELETE FROM {t} WHERE id = 3",
        ],
        "copy": [
            f"INSERT LOW_PRIORITY IGNORE INTO {new} (`id`, `v`) SELECT `id`, `v` FROM {t} "
            "FORCE INDEX(`PRIMARY`) "
            "WHERE ((`id` >= '4')) AND ((`id` <= '10')) LOCK IN SHARE MODE",
            f"UPDATE {t} SET v = 'FOUR' WHERE id = 4",
            f"ANALYZE TABLE {new}",
            f"RENAME TABLE {t} TO {old}, {new} TO {t}",
        ],
        "after": [
            f"DROP TABLE IF EXISTS {old}",
            f"DROP TRIGGER IF EXISTS {trig}_del`",
            f"DROP TRIGGER IF EXISTS {trig}_upd`",
            f"DROP TRIGGER IF EXISTS {trig}_ins`",
            f"INSERT INTO {t} (id, v) VALUES (11, 'eleven')",
            f"UPDATE {t} SET c = 6 WHERE id = 1",
        ],
    }


TOOLS = {"gh-ost": gh_ost, "pt-osc": pt_osc}


def _source(h: Routed) -> None:
    db = h.db
    h.sql(
        f"CREATE TABLE `{db}`.t (id INT NOT NULL, v VARCHAR(20) DEFAULT NULL, PRIMARY KEY (id))",
        f"INSERT INTO `{db}`.t VALUES (1, 'one'), (2, 'two'), (3, 'three'), (4, 'four'), (5, 'five')",
        f"CREATE TABLE `{db}`.o (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.o VALUES (1, 1)",
    )


SHADOWS = ("_t_gho", "_t_ghc", "_t_del", "_t_new", "_t_old")


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_tool_swap_in_one_run(routed: Routed, tool: str) -> None:
    h = routed
    _source(h)
    h.run()
    h.assert_lake(("t", "o"))
    steps = TOOLS[tool](h.db)
    h.sql(*steps["start"], *steps["copy"], f"UPDATE `{h.db}`.o SET v = 2", *steps["after"])
    h.run()
    h.assert_lake(("t", "o"), SHADOWS)
    _names, rows = h.lake("t")
    assert rows[1]["c"] == 6 and rows[5]["c"] == 5 and rows[11]["c"] == 5  # copied rows too
    h.sql(f"UPDATE `{h.db}`.t SET c = 7 WHERE id = 2")
    h.run()
    h.assert_lake(("t", "o"), SHADOWS)


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_tool_swap_across_runs(routed: Routed, tool: str) -> None:
    """A run while the copy is under way, one that ends at the cut-over, one after it."""
    h = routed
    _source(h)
    steps = TOOLS[tool](h.db)
    h.sql(*steps["start"])
    h.run()
    h.assert_lake(("t", "o"), SHADOWS)
    h.sql(*steps["copy"])
    h.run()
    h.assert_lake(("t", "o"), SHADOWS)
    assert "c" in h.lake("t")[0]
    h.sql(*steps["after"])
    h.run()
    h.assert_lake(("t", "o"), SHADOWS)


def test_rename_table_under_a_glob_route(globbed: Routed) -> None:
    h, db = globbed, globbed.db
    h.sql(
        f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v VARCHAR(10))",
        f"INSERT INTO `{db}`.a VALUES (1, 'a1'), (2, 'a2')",
        f"CREATE TABLE `{db}`.b (id INT PRIMARY KEY, v VARCHAR(10))",
        f"INSERT INTO `{db}`.b VALUES (1, 'b1')",
        f"CREATE TABLE `{db}`.c (id INT PRIMARY KEY, v VARCHAR(10))",
        f"INSERT INTO `{db}`.c VALUES (1, 'c1'), (2, 'c2')",
        f"CREATE TABLE `{db}`.r (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.r VALUES (1, 1), (2, 2)",
        f"CREATE TABLE `{db}`.e (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.e VALUES (1, 1)",
    )
    h.run()
    h.assert_lake(("a", "b", "c", "r", "e"))
    # one run: a plain rename with rows before and after, a swap of two tables, ALTER .. RENAME TO
    h.sql(
        f"UPDATE `{db}`.r SET v = 10 WHERE id = 1",
        f"RENAME TABLE `{db}`.r TO `{db}`.r2",
        f"INSERT INTO `{db}`.r2 VALUES (3, 3)",
        f"UPDATE `{db}`.a SET v = 'A2' WHERE id = 2",
        f"RENAME TABLE `{db}`.a TO `{db}`.x, `{db}`.b TO `{db}`.a",
        f"INSERT INTO `{db}`.a VALUES (5, 'new a')",
        f"DELETE FROM `{db}`.x WHERE id = 1",
        f"ALTER TABLE `{db}`.c ADD COLUMN w INT DEFAULT 4, RENAME TO `{db}`.c2",
        f"UPDATE `{db}`.c2 SET w = 9 WHERE id = 2",
        # renamed twice in one run: e2 is gone when its re-snapshot runs, e3 holds the rows
        f"RENAME TABLE `{db}`.e TO `{db}`.e2",
        f"INSERT INTO `{db}`.e2 VALUES (2, 2)",
        f"RENAME TABLE `{db}`.e2 TO `{db}`.e3",
        f"UPDATE `{db}`.e3 SET v = 10 WHERE id = 1",
    )
    h.run()
    h.assert_lake(("a", "x", "c2", "r2", "e3"), ("b", "c", "r", "e", "e2"))
    # across runs: the rename ends one run, its rows come in the next; renamed back
    h.sql(f"RENAME TABLE `{db}`.r2 TO `{db}`.r")
    h.run()
    h.assert_lake(("a", "x", "c2", "r"), ("b", "c", "r2"))
    h.sql(f"INSERT INTO `{db}`.r VALUES (4, 4)", f"UPDATE `{db}`.x SET v = 'x' WHERE id = 2")
    h.run()
    h.assert_lake(("a", "x", "c2", "r"), ("b", "c", "r2"))


def test_rename_into_and_out_of_exact_routes(
    mariadb: MariaDbServer, spark: Any, spark_warehouse: str, conns: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    h = _harness(mariadb, spark, spark_warehouse, monkeypatch, glob=False, exact=("t", "o"))
    try:
        db = h.db
        h.sql(
            f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)",
            f"INSERT INTO `{db}`.t VALUES (1, 1), (2, 2)",
            f"CREATE TABLE `{db}`.z (id INT PRIMARY KEY, v INT)",
            f"INSERT INTO `{db}`.z VALUES (7, 7)",
        )
        h.run()
        h.assert_lake(("t",))
        # t renamed out of the routes: its lake table is kept as it was, no longer updated
        h.sql(f"UPDATE `{db}`.t SET v = 20 WHERE id = 2", f"RENAME TABLE `{db}`.t TO `{db}`.gone",
              f"INSERT INTO `{db}`.gone VALUES (3, 3)")  # fmt: skip
        h.run()
        assert h.lake("t")[1] == {1: {"id": 1, "v": 1}, 2: {"id": 2, "v": 20}}
        # z, never routed, renamed into the route of o: the lake table o holds all its rows
        h.sql(
            f"UPDATE `{db}`.z SET v = 70",
            f"RENAME TABLE `{db}`.z TO `{db}`.o",
            f"INSERT INTO `{db}`.o VALUES (8, 8)",
        )
        h.run()
        h.assert_lake(("o",))
    finally:
        h.close()


@pytest.mark.parametrize("point", ["resnapshot_before_swap", "resnapshot_after_swap", "after_commit"])
def test_raise_around_the_rename_then_retry(globbed: Routed, point: str) -> None:
    h, db = globbed, globbed.db
    _source(h)
    h.sql(f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v INT)", f"INSERT INTO `{db}`.a VALUES (1, 1)")
    h.run()
    steps = gh_ost(db)
    h.sql(
        *steps["start"], *steps["copy"], f"RENAME TABLE `{db}`.a TO `{db}`.a2",
        f"INSERT INTO `{db}`.a2 VALUES (2, 2)", *steps["after"],
    )  # fmt: skip
    os.environ[faults.ENV] = f"{point}=raise@1"
    faults.reset()
    try:
        with pytest.raises(Exception, match=point):
            h.run()
    finally:
        os.environ.pop(faults.ENV, None)
        faults.reset()
    h.run()
    h.assert_lake(("t", "o", "a2"), (*SHADOWS, "a"))
    h.run()
    h.assert_lake(("t", "o", "a2"), (*SHADOWS, "a"))
