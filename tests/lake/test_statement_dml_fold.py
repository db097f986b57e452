"""A statement-format DML entry (``DdlKind.STATEMENT_DML``) in a target's fold (pure, no Spark):
``statement_dml`` of ``on_schema_change`` decides (default ``fail``, or ``resnapshot``), and a
statement the table's mark covers (a re-snapshot taken after it) is skipped like any change."""

from __future__ import annotations

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Entry, Op, OrderKey, RowChange
from airflow_provider_binlog.canal.sql.operations import Policy, ResnapshotNeeded, SourceOperationError
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.lake.commits import CommittedMark
from airflow_provider_binlog.lake.options import TargetOptions
from airflow_provider_binlog.lake.pending import Pending

FILE = "mysql-bin.000004"
SCHEMA = TableSchema("db", "t", (ColumnDef("id", T.LONG), ColumnDef("v", T.LONG)), ("id",))
TARGET = "lake.db.t"
SQL = "UPDATE t SET v = v + 1 WHERE id > 1"


def _row(pos: int, key: int, value: int) -> RowChange:
    at = BinlogPosition(FILE, pos)
    return RowChange("d", "db", "t", Op.INSERT, None, {"id": key, "v": value}, ("id",), at,
                     BinlogPosition(FILE, pos + 10), None, 0, OrderKey(4, pos, -1, 0), SCHEMA)  # fmt: skip


def _statement(pos: int) -> DdlEntry:
    at = BinlogPosition(FILE, pos)
    return DdlEntry("d", "db", "t", DdlKind.STATEMENT_DML, SQL, at, BinlogPosition(FILE, pos + 10), None, 0,
                    OrderKey(4, pos, -1, 0), ends_statement=False)  # fmt: skip


def _fold(entries: list[Entry], mark: CommittedMark | None = None, **options: object) -> Pending:
    pending = Pending.new(TargetOptions(**options), mark)  # type: ignore[arg-type]
    pending.target = TARGET
    pending.add(list(entries), TARGET)
    return pending


def test_default_stops_with_table_statement_position_and_remedies() -> None:
    with pytest.raises(SourceOperationError) as info:
        _fold([_row(100, 1, 1), _statement(200), _row(300, 2, 2)])
    err = info.value
    assert not isinstance(err, ResnapshotNeeded)
    assert (err.table, err.statement, err.target) == ("db.t", SQL, TARGET)
    assert err.position == BinlogPosition(FILE, 200)
    message = str(err)
    for part in (
        "db.t", SQL, f"{FILE}:200", "statement format", "binlog_format=ROW",
        f"binlog-cdc resnapshot --destination d --table db.t --target {TARGET}",
        'on_schema_change={"statement_dml": "resnapshot"}',
    ):  # fmt: skip
        assert part in message, (part, message)


@pytest.mark.parametrize("option", [{"statement_dml": "resnapshot"}, "resnapshot", "evolve"])
def test_resnapshot_option_asks_for_a_resnapshot_after_the_statement(option: object) -> None:
    with pytest.raises(ResnapshotNeeded) as info:
        _fold([_row(100, 1, 1), _statement(200)], on_schema_change=option)
    err = info.value  # "evolve" cannot apply it: it means "resnapshot", as for every inexact class
    assert err.target == TARGET and err.position == BinlogPosition(FILE, 200) and err.table == "db.t"
    assert 'on_schema_change={"statement_dml": "fail"}' in str(err)


def test_append_only_targets_stop_too() -> None:
    with pytest.raises(SourceOperationError):
        _fold([_row(100, 1, 1), _statement(200)], append_only=True)


@pytest.mark.parametrize("append_only", [False, True])
def test_a_statement_the_mark_covers_is_skipped(append_only: bool) -> None:
    mark = CommittedMark(OrderKey(4, 250, -1, 0), BinlogPosition(FILE, 250), None, None, 1)  # a swap at 250
    pending = _fold([_row(100, 1, 1), _statement(200), _row(300, 2, 2)], mark, append_only=append_only)
    assert pending.error is None and pending.skipped == 2 and pending.held == 1
    assert pending.first is not None and pending.first.position == BinlogPosition(FILE, 300)


def test_policy_reads_the_class() -> None:
    assert Policy.of(None).choices["statement_dml"] == "fail"
    assert Policy.of({"add_column": "fail"}).choices["statement_dml"] == "fail"
    with pytest.raises(ConfigurationError, match="statement_dml"):
        Policy.of({"statement_dml": "keep"})
