"""Classification of DDL on a routed table into lake actions, and the on_schema_change policy (pure)."""

from __future__ import annotations

import datetime
import decimal
import pickle

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef, InvalidDate, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.sql import operations as ops
from airflow_provider_binlog.canal.sql.ddl import parse_ddl
from airflow_provider_binlog.errors import ConfigurationError

ID = ColumnDef("id", T.LONG)
A = ColumnDef("a", T.LONG)
D = ColumnDef("d", T.NEWDECIMAL, precision=10, scale=2)
BEFORE = TableSchema("s", "t", (ID, A, D), ("id",))
VARCHAR_A = ColumnDef("a", T.VARCHAR, charset="utf-8", collation=45)


def _after(*cols: ColumnDef) -> TableSchema:
    return TableSchema("s", "t", cols, ("id",))


def _classify(sql: str, after: TableSchema | None, policy: object = None) -> tuple[str, list[ops.Operation]]:
    p = ops.Policy.of(policy)  # type: ignore[arg-type]
    found = ops.classify(parse_ddl(sql, "s"), ("s", "t"), BEFORE, after, p)
    return ops.decide(found, p)[0], found


@pytest.mark.parametrize(
    ("sql", "col", "fill"),
    [
        ("ALTER TABLE t ADD x INT DEFAULT 7", ColumnDef("x", T.LONG), 7),
        ("ALTER TABLE t ADD x INT NOT NULL", ColumnDef("x", T.LONG), 0),
        ("ALTER TABLE t ADD x INT NULL", ColumnDef("x", T.LONG), None),
        ("ALTER TABLE t ADD x INT DEFAULT -3 FIRST", ColumnDef("x", T.LONG), -3),
        ("ALTER TABLE t ADD x VARCHAR(5) NOT NULL", ColumnDef("x", T.VARCHAR), ""),
        ("ALTER TABLE t ADD x VARCHAR(5) DEFAULT 'hi'", ColumnDef("x", T.VARCHAR), "hi"),
        ("ALTER TABLE t ADD x DATE NOT NULL", ColumnDef("x", T.DATE), InvalidDate("0000-00-00")),
        (
            "ALTER TABLE t ADD x DATETIME(2) NOT NULL",
            ColumnDef("x", T.DATETIME2, fsp=2),
            InvalidDate("0000-00-00 00:00:00.00"),
        ),
        ("ALTER TABLE t ADD x DATE DEFAULT '0000-00-00'", ColumnDef("x", T.DATE), InvalidDate("0000-00-00")),
        ("ALTER TABLE t ADD x DATE DEFAULT '2020-02-29'", ColumnDef("x", T.DATE), datetime.date(2020, 2, 29)),
        (
            "ALTER TABLE t ADD x DECIMAL(6,2) DEFAULT 1.5",
            ColumnDef("x", T.NEWDECIMAL, precision=6, scale=2),
            decimal.Decimal("1.50"),
        ),
        ("ALTER TABLE t ADD x ENUM('a','b') NOT NULL", ColumnDef("x", T.ENUM, enum_values=("a", "b")), "a"),
        ("ALTER TABLE t ADD x BIT(4) DEFAULT b'101'", ColumnDef("x", T.BIT, meta=4), 5),
    ],
)
def test_add_column_fill(sql: str, col: ColumnDef, fill: object) -> None:
    verdict, found = _classify(sql, _after(ID, A, D, col))
    assert verdict == "evolve"
    (action,) = found[0].actions
    assert isinstance(action, ops.AddColumn) and action.fill == fill and type(action.fill) is type(fill)


@pytest.mark.parametrize(
    "sql",
    [
        "ALTER TABLE t ADD x DATETIME DEFAULT CURRENT_TIMESTAMP",
        "ALTER TABLE t ADD x INT DEFAULT (1 + 2)",
        "ALTER TABLE t ADD x INT DEFAULT 1.5",
        "ALTER TABLE t ADD x TINYINT DEFAULT 300",
        "ALTER TABLE t ADD x INT AS (a + 1)",
        "ALTER TABLE t ADD x TIMESTAMP NOT NULL",
    ],
)
def test_add_column_unknowable_value_resnapshots(sql: str) -> None:
    t = T.TIMESTAMP2 if "TIMESTAMP" in sql else T.DATETIME2 if "DATETIME" in sql else T.LONG
    t = T.TINY if "TINYINT" in sql else t
    verdict, found = _classify(sql, _after(ID, A, D, ColumnDef("x", t)))
    assert verdict == "resnapshot" and not found[0].exact and found[0].reason


@pytest.mark.parametrize(
    ("sql", "new", "cast"),
    [
        ("ALTER TABLE t MODIFY a BIGINT", ColumnDef("a", T.LONGLONG), "same"),
        ("ALTER TABLE t MODIFY a BIGINT UNSIGNED", ColumnDef("a", T.LONGLONG, unsigned=True), "unsigned"),
        (
            "ALTER TABLE t MODIFY a VARCHAR(20)",
            ColumnDef("a", T.VARCHAR, charset="utf-8", collation=45),
            "text",
        ),
        ("ALTER TABLE t MODIFY d DECIMAL(12,4)", ColumnDef("d", T.NEWDECIMAL, precision=12, scale=4), "cast"),
        ("ALTER TABLE t MODIFY d DECIMAL(14,2)", ColumnDef("d", T.NEWDECIMAL, precision=14, scale=2), "same"),
    ],
)
def test_type_changes_provably_equal(sql: str, new: ColumnDef, cast: str) -> None:
    cols = [new if c.name == new.name else c for c in BEFORE.columns]
    verdict, found = _classify(sql, _after(*cols))
    assert verdict == "evolve"
    if cast == "same" and new.type == T.NEWDECIMAL:
        assert found == []  # more precision: the next piece's table DDL widens it in place
        return
    (action,) = found[0].actions
    assert isinstance(action, ops.ChangeColumn) and action.cast == cast


@pytest.mark.parametrize(
    ("sql", "new"),
    [
        ("ALTER TABLE t MODIFY d DECIMAL(12,1)", ColumnDef("d", T.NEWDECIMAL, precision=12, scale=1)),
        ("ALTER TABLE t MODIFY a TINYINT", ColumnDef("a", T.TINY)),
        ("ALTER TABLE t MODIFY a VARCHAR(3)", ColumnDef("a", T.VARCHAR, charset="utf-8", collation=45)),
        ("ALTER TABLE t MODIFY a DOUBLE", ColumnDef("a", T.DOUBLE)),
    ],
)
def test_type_changes_not_provable_resnapshot(sql: str, new: ColumnDef) -> None:
    cols = [new if c.name == new.name else c for c in BEFORE.columns]
    verdict, found = _classify(sql, _after(*cols))
    assert verdict == "resnapshot" and found[0].kind == "modify_column"


def test_rename_drop_table_ops_partitions_and_unknown() -> None:
    renamed = _after(ID, ColumnDef("a2", T.LONG), D)
    assert _classify("ALTER TABLE t RENAME COLUMN a TO a2", renamed)[1][0].actions == (
        ops.RenameColumn("a", "a2"),
    )
    verdict, found = _classify("ALTER TABLE t CHANGE a a2 INT", renamed)
    assert verdict == "evolve" and found[0].actions == (ops.RenameColumn("a", "a2"),)
    assert _classify("ALTER TABLE t DROP COLUMN a", _after(ID, D))[1][0].actions == (ops.DropColumn("a"),)
    kept = _classify("ALTER TABLE t DROP COLUMN a", _after(ID, D), {"drop_column": "keep"})
    assert kept[0] == "evolve" and not kept[1][0].actions
    assert _classify("DROP TABLE t", None)[1][0].actions == (ops.EmptyTable(),)
    assert _classify("DROP TABLE t", None, {"drop_table": "drop"})[1][0].actions == (ops.DropTable(),)
    new = _after(ID, ColumnDef("z", T.VARCHAR))
    assert _classify("CREATE TABLE t (id INT PRIMARY KEY, z VARCHAR(3))", new)[1][0].actions == (
        ops.RestartTable(new),
    )
    # the table existed: CREATE TABLE IF NOT EXISTS did nothing, nothing to decide (not a stop)
    assert _classify("CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY, a INT)", BEFORE) == ("evolve", [])
    noops = ("ALTER TABLE t ADD INDEX (a)", "ALTER TABLE t COMMENT 'x'", "ALTER TABLE t ENGINE=InnoDB",
             "ALTER TABLE t ADD UNIQUE KEY u (a), RENAME INDEX u TO v", "ALTER TABLE t DROP INDEX v",
             "ALTER TABLE t ADD CONSTRAINT w UNIQUE (a), DROP KEY x",
             "ALTER TABLE t ALTER COLUMN a SET DEFAULT 3", "ALTER TABLE t COALESCE PARTITION 2")  # fmt: skip
    for noop in noops:
        assert _classify(noop, BEFORE) == ("evolve", []), noop
    for part in ("ALTER TABLE t TRUNCATE PARTITION p0", "ALTER TABLE t DROP PARTITION p0, p1",
                 "ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE t2"):  # fmt: skip
        verdict, found = _classify(part, BEFORE)
        assert verdict == "resnapshot" and found[0].kind == "partition", part
    assert _classify("ALTER TABLE t FROBNICATE x", BEFORE)[0] == "fail"
    assert _classify("ALTER TABLE t FROBNICATE x", BEFORE, "evolve")[0] == "resnapshot"
    assert _classify("RENAME TABLE t TO t2", None)[0] == "evolve"  # renamed away: kept (routes unknown)


def test_policy_and_errors() -> None:
    assert ops.Policy.of("fail").choices["add_column"] == "fail"
    with pytest.raises(ConfigurationError, match="unknown operation class 'bogus'"):
        ops.Policy.of({"bogus": "evolve"})
    with pytest.raises(ConfigurationError, match="expected one of evolve, resnapshot, fail"):
        ops.Policy.of({"add_column": "keep"})
    pos = BinlogPosition("mysql-bin.000007", 1234)
    op = ops.Operation("partition", exact=False, reason="no bounds")
    err = ops.stop_error(
        "resnapshot", op, "s.t", "ALTER TABLE t DROP PARTITION p0" + " x" * 300, pos, "d", "lake.s.t"
    )
    assert isinstance(err, ops.ResnapshotNeeded) and err.target == "lake.s.t"
    text = str(err)
    assert (
        "s.t" in text
        and "mysql-bin.000007:1234" in text
        and "binlog-cdc resnapshot --destination d --table s.t --target lake.s.t" in text
    )
    assert "ALTER TABLE t DROP PARTITION p0" in text and len(text) < 900
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is ops.ResnapshotNeeded and str(again) == text
    fail = ops.stop_error("fail", ops.Operation("add_column", ()), "s.t", "ALTER", pos, "d", None)
    assert type(fail) is ops.SourceOperationError and 'on_schema_change={"add_column": "evolve"}' in str(fail)


def test_system_versioning_always_stops_and_says_why() -> None:
    """``WITH``/``ADD SYSTEM VERSIONING``: the table's row events then carry history rows; whatever
    the policy, the run stops, naming exclude= and dropping the versioning."""
    for sql in ("CREATE TABLE t (id INT PRIMARY KEY, a INT) WITH SYSTEM VERSIONING",
                "ALTER TABLE t ADD SYSTEM VERSIONING",
                "CREATE TABLE t (id INT PRIMARY KEY, a INT WITH SYSTEM VERSIONING)"):  # fmt: skip
        for policy in (None, "evolve", {"unknown": "resnapshot"}):
            verdict, found = _classify(sql, BEFORE, policy)
            assert verdict == "fail" and found == [ops.SYSTEM_VERSIONING], (sql, policy)
    assert (
        _classify("CREATE TABLE t (id INT PRIMARY KEY, a INT WITHOUT SYSTEM VERSIONING)", BEFORE)[0] != "fail"
    )
    err = ops.stop_error("fail", ops.SYSTEM_VERSIONING, "s.t", "ALTER TABLE t ADD SYSTEM VERSIONING",
                         BinlogPosition("mysql-bin.000002", 99), "d", "lake.s.t")  # fmt: skip
    assert "history row" in str(err) and "exclude the table from the routes (exclude=)" in str(err)
    assert "mysql-bin.000002:99" in str(err) and "s.t" in str(err)
