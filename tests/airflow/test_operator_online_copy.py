"""The cut-over of gh-ost and pt-online-schema-change without a re-snapshot: the shadow table's rows,
read from the binlog since its CREATE, are kept in a lake staging table and swapped into ``t`` at
the RENAME (issue #14; :mod:`airflow_provider_binlog.canal.online_copy`). Real MariaDB, ZooKeeper and
Spark + Iceberg, through BinlogToSparkOperator.

The tools are scripted statement by statement as they run them (ROW format): gh-ost's changelog
table, ``CREATE _t_gho LIKE t``, its ALTER, chunked ``INSERT IGNORE .. SELECT`` copies, the
application's writes to ``t`` applied to the shadow as gh-ost applies them from the binlog, the
cut-over ``RENAME TABLE t TO _t_del, _t_gho TO t`` and ``DROP _t_del``; pt-osc's ``CREATE _t_new``,
its ALTER, the AFTER INSERT/UPDATE/DELETE triggers writing REPLACE/DELETE into ``_t_new``, chunked
``INSERT LOW_PRIORITY IGNORE .. SELECT``, ``RENAME TABLE t TO _t_old, _t_new TO t``, the triggers
dropped and ``DROP _t_old``. Split across runs (the swap in a later run than the CREATE; a run that
fails between the copy and the swap, and around the swap), under exact and glob routes. After every
run the lake equals the source value by value, no shadow table has a lake table, and the swap run's
summary says the copy was swapped in (``copied``, no chunk read from the source); no staging table is
left. A CREATE before the destination's start, statement-format DML on the shadow and its TRUNCATE
still re-snapshot, exactly.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from test_operator_rename import Routed, _harness

from airflow_provider_binlog import faults
from airflow_provider_binlog.dev.services import MariaDbServer

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SHADOWS = ("_t_gho", "_t_ghc", "_t_del", "_t_new", "_t_old")
ADD = "ADD COLUMN c INT NOT NULL DEFAULT 7"
DROP_RENAME = "DROP COLUMN w, RENAME COLUMN v TO v2"


def _columns(alter: str) -> tuple[str, str]:
    """(columns written into the shadow, the columns of t they come from)."""
    if alter == DROP_RENAME:
        return "id, v2", "id, v"
    return "id, v, w", "id, v, w"


def gh_ost(db: str, alter: str) -> dict[str, list[str]]:
    """gh-ost's statements by phase: start (shadow made and altered, first chunk, DML applied),
    copy (the other chunks, more DML), swap (the cut-over), after (clean-up, writes to the new t)."""
    t, gho, ghc, dl = (f"`{db}`.`{n}`" for n in ("t", "_t_gho", "_t_ghc", "_t_del"))
    into, cols = _columns(alter)
    v = "v2" if alter == DROP_RENAME else "v"

    def chunk(lo: int, hi: int) -> str:
        return (
            f"INSERT /* gh-ost */ IGNORE INTO {gho} ({into}) (SELECT {cols} FROM {t} FORCE INDEX (PRIMARY) "
            f"WHERE id >= {lo} AND id <= {hi} LOCK IN SHARE MODE)"
        )

    def applied(sql_t: str, sql_gho: str) -> list[str]:
        return [sql_t, sql_gho]

    return {
        "start": [
            f"DROP /* gh-ost */ TABLE IF EXISTS {ghc}",
            f"CREATE /* gh-ost */ TABLE {ghc} (id bigint auto_increment, last_update timestamp NOT NULL "
            "DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, hint varchar(64) charset ascii not null, "
            "value varchar(4096) charset ascii not null, primary key(id), unique key hint_uidx(hint))",
            f"CREATE /* gh-ost */ TABLE {gho} LIKE {t}",
            f"ALTER /* gh-ost */ TABLE {gho} {alter}",
            f"INSERT /* gh-ost */ INTO {ghc} (id, hint, value) VALUES (NULLIF(2, 0), 'state', "
            "'GhostTableMigrated') ON DUPLICATE KEY UPDATE last_update=NOW(), value=VALUES(value)",
            chunk(1, 10),
            *applied(
                f"INSERT INTO {t} VALUES (40, 'forty', 4)",
                f"REPLACE /* gh-ost */ INTO {gho} ({into}) VALUES (40, 'forty'"
                + ("" if alter == DROP_RENAME else ", 4")
                + ")",
            ),
            *applied(
                f"UPDATE {t} SET v = 'TWO' WHERE id = 2",
                f"UPDATE /* gh-ost */ {gho} SET id = 2, {v} = 'TWO' WHERE id = 2",
            ),
            *applied(f"DELETE FROM {t} WHERE id = 3", f"DELETE /* gh-ost */ FROM {gho} WHERE id = 3"),
        ],
        "copy": [
            chunk(11, 20),
            *applied(
                f"UPDATE {t} SET v = 'FOUR' WHERE id = 4",
                f"UPDATE /* gh-ost */ {gho} SET id = 4, {v} = 'FOUR' WHERE id = 4",
            ),
            *applied(
                f"UPDATE {t} SET id = 41 WHERE id = 15",
                f"UPDATE /* gh-ost */ {gho} SET id = 41 WHERE id = 15",
            ),
            chunk(21, 40),
            *applied(f"DELETE FROM {t} WHERE id = 25", f"DELETE /* gh-ost */ FROM {gho} WHERE id = 25"),
        ],
        "swap": [
            f"INSERT /* gh-ost */ INTO {ghc} (id, hint, value) VALUES (NULLIF(2, 0), 'state', "
            "'AllEventsUpToLockProcessed') ON DUPLICATE KEY UPDATE last_update=NOW(), value=VALUES(value)",
            f"CREATE /* gh-ost */ TABLE {dl} (id int auto_increment primary key) "
            "comment='ghost-cut-over-sentry'",
            f"DROP /* gh-ost */ TABLE IF EXISTS {dl}",
            f"RENAME /* gh-ost */ TABLE {t} TO {dl}, {gho} TO {t}",
        ],
        "after": [
            f"DROP /* gh-ost */ TABLE IF EXISTS {dl}",
            f"DROP /* gh-ost */ TABLE IF EXISTS {ghc}",
            f"INSERT INTO {t} (id, {v}) VALUES (50, 'fifty')",
            f"UPDATE {t} SET {v} = 'ONE' WHERE id = 1",
        ],
    }


def pt_osc(db: str, alter: str) -> dict[str, list[str]]:
    """pt-online-schema-change's statements by phase (as :func:`gh_ost`); its triggers apply the
    application's writes."""
    t, new, old = (f"`{db}`.`{n}`" for n in ("t", "_t_new", "_t_old"))
    trig = f"`{db}`.`pt_osc_{db}_t"
    into, cols = _columns(alter)
    new_vals = ", ".join(f"NEW.`{c.strip()}`" for c in cols.split(","))

    def chunk(lo: int, hi: int) -> str:
        return (
            f"INSERT LOW_PRIORITY IGNORE INTO {new} ({into}) SELECT {cols} FROM {t} FORCE INDEX(`PRIMARY`) "
            f"WHERE ((`id` >= '{lo}')) AND ((`id` <= '{hi}')) LOCK IN SHARE MODE"
        )

    return {
        "start": [
            f"CREATE TABLE {new} (id INT NOT NULL, v VARCHAR(20) DEFAULT NULL, w INT DEFAULT NULL, "
            "PRIMARY KEY (id))",
            f"ALTER TABLE {new} {alter}",
            f"CREATE TRIGGER {trig}_del` AFTER DELETE ON {t} FOR EACH ROW BEGIN DECLARE CONTINUE HANDLER "
            f"FOR 1146 begin end; DELETE IGNORE FROM {new} WHERE {new}.`id` <=> OLD.`id`; END",
            f"CREATE TRIGGER {trig}_upd` AFTER UPDATE ON {t} FOR EACH ROW BEGIN DECLARE CONTINUE HANDLER "
            f"FOR 1146 begin end; DELETE IGNORE FROM {new} WHERE !(OLD.`id` <=> NEW.`id`) AND {new}.`id` "
            f"<=> OLD.`id`; REPLACE INTO {new} ({into}) VALUES ({new_vals}); END",
            f"CREATE TRIGGER {trig}_ins` AFTER INSERT ON {t} FOR EACH ROW BEGIN DECLARE CONTINUE HANDLER "
            f"FOR 1146 begin end; REPLACE INTO {new} ({into}) VALUES ({new_vals}); END",
            chunk(1, 10),
            f"INSERT INTO {t} VALUES (40, 'forty', 4)",
            f"UPDATE {t} SET v = 'TWO' WHERE id = 2",
            f"DELETE FROM {t} WHERE id = 3",
        ],
        "copy": [
            chunk(11, 20),
            f"UPDATE {t} SET v = 'FOUR' WHERE id = 4",
            f"UPDATE {t} SET id = 41 WHERE id = 15",
            chunk(21, 40),
            f"DELETE FROM {t} WHERE id = 25",
        ],
        "swap": [
            f"ANALYZE TABLE {new}",
            f"RENAME TABLE {t} TO {old}, {new} TO {t}",
        ],
        "after": [
            f"DROP TRIGGER IF EXISTS {trig}_del`",
            f"DROP TRIGGER IF EXISTS {trig}_upd`",
            f"DROP TRIGGER IF EXISTS {trig}_ins`",
            f"DROP TABLE IF EXISTS {old}",
            f"INSERT INTO {t} (id, {'v2' if alter == DROP_RENAME else 'v'}) VALUES (50, 'fifty')",
            f"UPDATE {t} SET {'v2' if alter == DROP_RENAME else 'v'} = 'ONE' WHERE id = 1",
        ],
    }


TOOLS = {"gh-ost": gh_ost, "pt-osc": pt_osc}


def _source(h: Routed) -> None:
    db = h.db
    values = ", ".join(f"({i}, 'v{i}', {i * 10})" for i in range(1, 31))
    h.sql(
        f"CREATE TABLE `{db}`.t (id INT NOT NULL, v VARCHAR(20), w INT, PRIMARY KEY (id))",
        f"INSERT INTO `{db}`.t VALUES {values}",
        f"CREATE TABLE `{db}`.o (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.o VALUES (1, 1)",
    )


def _check(h: Routed, copying: bool = False) -> None:
    """The lake equals the source; no shadow table has a lake table; no staging table is left (while
    a copy is under way, at most one: its own)."""
    h.assert_lake(("t", "o"), SHADOWS)
    names = [r.tableName for r in h.spark.sql(f"SHOW TABLES IN lake.`{h.db}`").collect()]
    staging = [n for n in names if "__resnapshot_" in n]
    assert len(staging) <= (1 if copying else 0), names


def _swap_path(summary: dict[str, Any], db: str) -> str:
    """How the cut-over reached lake t: "copy" or "resnapshot" (exactly one of them in this run)."""
    found = [r for r in summary.get("resnapshots", []) if r["source"] == f"{db}.t"]
    assert len(found) == 1, summary.get("resnapshots")
    if found[0]["copied"]:
        assert found[0]["copied"] == f"{db}._t_gho" or found[0]["copied"] == f"{db}._t_new"
        assert found[0]["chunks"] == 0  # nothing read from the source table
        return "copy"
    return "resnapshot"


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


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_cut_over_swaps_the_copy_in_across_runs(routed: Routed, tool: str) -> None:
    """CREATE and the first chunk in one run, the rest of the copy in the next, the swap in a third."""
    h = routed
    _source(h)
    h.run()
    _check(h)
    steps = TOOLS[tool](h.db, ADD)
    h.sql(*steps["start"])
    h.run()
    _check(h, copying=True)
    h.sql(*steps["copy"], f"UPDATE `{h.db}`.o SET v = 2")
    h.run()
    _check(h, copying=True)
    h.sql(*steps["swap"], *steps["after"])
    summary = h.run()
    _check(h)
    assert _swap_path(summary, h.db) == "copy"
    names, rows = h.lake("t")
    assert "c" in names and rows[1]["c"] == 7 and rows[41]["c"] == 7 and rows[50]["c"] == 7
    h.sql(f"UPDATE `{h.db}`.t SET c = 8 WHERE id = 2")
    assert "resnapshots" not in h.run()
    _check(h)


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_dropped_and_renamed_columns_in_one_run(routed: Routed, tool: str) -> None:
    h = routed
    _source(h)
    h.run()
    steps = TOOLS[tool](h.db, DROP_RENAME)
    h.sql(*steps["start"], *steps["copy"], *steps["swap"], *steps["after"])
    summary = h.run()
    _check(h)
    assert _swap_path(summary, h.db) == "copy"
    names, _rows = h.lake("t")
    assert "v2" in names and "w" not in names and "v" not in names


@pytest.mark.parametrize("point", ["after_commit", "resnapshot_before_swap", "resnapshot_after_swap"])
def test_a_run_failing_between_copy_and_swap(routed: Routed, point: str) -> None:
    """A run that fails (after a chunk's commit, before the swap, after it) and its retry."""
    h = routed
    _source(h)
    h.run()
    steps = gh_ost(h.db, ADD)
    h.sql(*steps["start"], *steps["copy"])
    if point == "after_commit":  # the copy's commit made, the run fails before the ack
        os.environ[faults.ENV] = f"{point}=raise@1"
    else:
        h.run()
        _check(h, copying=True)
        h.sql(*steps["swap"], *steps["after"])
        os.environ[faults.ENV] = f"{point}=raise@1"
    faults.reset()
    try:
        with pytest.raises(Exception, match=point):
            h.run()
    finally:
        os.environ.pop(faults.ENV, None)
        faults.reset()
    if point == "after_commit":
        h.run()
        _check(h, copying=True)
        h.sql(*steps["swap"], *steps["after"])
    summary = h.run()
    _check(h)
    if point != "resnapshot_after_swap":  # else the swap was made by the failed run
        assert _swap_path(summary, h.db) == "copy"
    assert "resnapshots" not in h.run()
    _check(h)


def test_creation_before_the_start_re_snapshots(
    mariadb: MariaDbServer, spark: Any, spark_warehouse: str, conns: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A destination that starts after the shadow's CREATE (its first run snapshots the tables) does
    not have the whole copy: the cut-over re-snapshots t."""
    h = _harness(mariadb, spark, spark_warehouse, monkeypatch, glob=True)
    try:
        _source(h)
        steps = gh_ost(h.db, ADD)
        h.sql(*steps["start"])
        h.start = None  # type: ignore[assignment]
        h.run(snapshot="initial")
        _check(h)
        h.sql(*steps["copy"], *steps["swap"], *steps["after"])
        summary = h.run()
        _check(h)
        assert _swap_path(summary, h.db) == "resnapshot"
    finally:
        h.close()


@pytest.mark.parametrize("breaker", ["statement", "truncate"])
def test_what_the_copy_cannot_follow_re_snapshots(routed: Routed, breaker: str) -> None:
    h = routed
    _source(h)
    h.run()
    steps = gh_ost(h.db, ADD)
    gho = f"`{h.db}`.`_t_gho`"
    if breaker == "statement":
        extra = ["SET SESSION binlog_format = 'STATEMENT'", f"UPDATE {gho} SET c = 9 WHERE id = 1",
                 "SET SESSION binlog_format = 'ROW'"]  # fmt: skip
    else:
        extra = [f"TRUNCATE TABLE {gho}"]
    h.sql(*steps["start"], *extra)
    h.run()
    _check(h, copying=True)  # rows copied before the break may be there until the next run's start
    h.sql(*steps["copy"], *steps["swap"], *steps["after"])
    summary = h.run()
    _check(h)
    assert _swap_path(summary, h.db) == "resnapshot"
