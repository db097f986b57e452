"""Synthetic change-model entries for store tests."""

from __future__ import annotations

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Op, OrderKey, RowChange, TransactionEnd

FILE = "mysql-bin.000001"


def row(i: int, value: str = "x", txn: int = 0) -> RowChange:
    pos = BinlogPosition(FILE, 1000 + i * 10)
    return RowChange(
        destination="d",
        schema="s",
        table="t",
        op=Op.INSERT,
        before=None,
        after={"id": i, "v": value},
        primary_key=("id",),
        position=pos,
        end_position=BinlogPosition(FILE, pos.pos + 10),
        gtid=f"0-1-{txn}",
        timestamp=1_700_000_000,
        order_key=OrderKey(1, pos.pos, -1, 0),
    )


def end(i: int, txn: int = 0) -> TransactionEnd:
    pos = BinlogPosition(FILE, 1000 + i * 10)
    return TransactionEnd(
        destination="d",
        position=pos,
        end_position=BinlogPosition(FILE, pos.pos + 10),
        gtid=f"0-1-{txn}",
        timestamp=1_700_000_000,
        order_key=OrderKey(1, pos.pos, -1, -1),
        server_id=1,
    )


def ddl(i: int) -> DdlEntry:
    pos = BinlogPosition(FILE, 1000 + i * 10)
    return DdlEntry(
        destination="d",
        schema="s",
        table="t",
        kind=DdlKind.DDL,
        sql="ALTER TABLE t ADD COLUMN c INT",
        position=pos,
        end_position=BinlogPosition(FILE, pos.pos + 10),
        gtid=None,
        timestamp=1_700_000_000,
        order_key=OrderKey(1, pos.pos, -1, -1),
    )


def transactions(n_txn: int, rows_per_txn: int) -> list[RowChange | TransactionEnd]:
    """``n_txn`` transactions of ``rows_per_txn`` rows each, every one closed by a TransactionEnd."""
    out: list[RowChange | TransactionEnd] = []
    i = 0
    for t in range(n_txn):
        for _ in range(rows_per_txn):
            out.append(row(i, txn=t))
            i += 1
        out.append(end(i, txn=t))
        i += 1
    return out
