"""A small source table for the maintenance tests: random inserts, updates and deletes as change
entries, the rows the source holds after them, and runs merged through :class:`ChangeMerger` (the
load's own commits, marks included, without a binlog server)."""

from __future__ import annotations

import random
from typing import Any

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
from airflow_provider_binlog.lake.write.merge import ChangeMerger, TargetOptions

SCHEMA = TableSchema(
    "src",
    "t",
    (
        ColumnDef("id", T.LONGLONG),
        ColumnDef("n", T.LONG),
        ColumnDef("v", T.VARCHAR, collation=45, charset="utf-8"),
    ),
    ("id",),
)


class Source:
    """The source table ``src.t`` and its changes.

    :param seed: the random changes' seed.
    :param file_number: the binlog file number the changes' positions are in.
    """

    def __init__(self, seed: int = 1, file_number: int = 1) -> None:
        self.rng = random.Random(seed)
        self.rows: dict[int, dict[str, Any]] = {}
        self.next_id = 1
        self.pos = 4
        self.file = f"mysql-bin.{file_number:06d}"
        self.file_number = file_number

    def _row(self, key: int) -> dict[str, Any]:
        return {"id": key, "n": self.rng.randint(-(2**31), 2**31 - 1), "v": f"v{self.rng.random():.6f}é"}

    def changes(self, n: int, destination: str) -> list[RowChange]:
        """``n`` changes (inserts while the table is small, else 20% inserts, 70% updates, 10% deletes)."""
        out = []
        for _ in range(n):
            self.pos += 100
            pos = BinlogPosition(self.file, self.pos)
            x = self.rng.random()
            if len(self.rows) < 20 or x < 0.2:
                key = self.next_id
                self.next_id += 1
                op, before, after = Op.INSERT, None, self._row(key)
            elif x < 0.9:
                key = self.rng.choice(list(self.rows))
                op, before, after = Op.UPDATE, dict(self.rows[key]), self._row(key)
            else:
                key = self.rng.choice(list(self.rows))
                op, before, after = Op.DELETE, dict(self.rows[key]), None
            if after is None:
                del self.rows[key]
            else:
                self.rows[key] = after
            end = BinlogPosition(self.file, self.pos + 50)
            key_order = OrderKey(self.file_number, self.pos, -1, 0)
            change = RowChange(
                destination, "src", "t", op, before, after, ("id",), pos, end, None, 1_700_000_000,
                key_order, SCHEMA,
            )  # fmt: skip
            out.append(change)
        return out

    def run(self, merger: ChangeMerger, n: int) -> None:
        """One load run of ``n`` changes: merged and committed with the batch's end position."""
        batch = self.changes(n, merger.destination)
        merger.merge(batch, batch[-1].end_position)


def merger(spark: Any, destination: str, target: str, **options: Any) -> ChangeMerger:
    return ChangeMerger(spark, destination, {"src.t": target}, TargetOptions(count_changes=False, **options))


def lake_rows(spark: Any, target: str) -> dict[int, dict[str, Any]]:
    rows = spark.sql(f"SELECT id, n, v FROM {target}").collect()
    out = {int(r["id"]): r.asDict() for r in rows}
    assert len(out) == len(rows), "a key held twice"
    return out
