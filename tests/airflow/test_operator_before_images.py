"""A drain decodes only the key columns of before images (``drain/before_images.py``): end to end
against the real services, with a randomized workload of inserts, updates that change the key or
not, and deletes, in multi-row transactions, on three tables of one destination:

* ``keyed``: merged by its primary key;
* ``unkeyed``: no primary key, merged by ``key_columns=("code",)`` (a unique column);
* ``history``: append-only, where a delete's row in the lake is its whole before image.

The lake equals the source value by value for the two merged tables, and ``history`` holds one row
per change with the values the source row had (after an insert or update, before a delete).
"""

from __future__ import annotations

import datetime
import random
import uuid
from decimal import Decimal
from typing import Any

import pytest
from airflow_harness import make_context

from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.lake.options import OP_COLUMN
from airflow_provider_binlog.lake.verify.verify import verify_tables
from airflow_provider_binlog.lake.write.merge import TargetOptions
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DDL = {
    "keyed": "(id INT PRIMARY KEY, code VARCHAR(20) NOT NULL, n BIGINT, d DECIMAL(10, 2), "
    "t DATETIME(6), note TEXT)",
    "unkeyed": "(code VARCHAR(20) NOT NULL, id INT, n BIGINT, note TEXT)",
    "history": "(id INT PRIMARY KEY, v VARCHAR(30), n INT, note TEXT)",
}
COLUMNS = {"keyed": ("id", "code", "n", "d", "t", "note"), "unkeyed": ("code", "id", "n", "note"),
           "history": ("id", "v", "n", "note")}  # fmt: skip


class Workload:
    """Random statements on the three tables; ``history`` records, per change of ``history``, the
    op and the row's values the lake must hold for it."""

    def __init__(self, conn: Any, db: str, seed: int) -> None:
        self.conn, self.db, self.rng = conn, db, random.Random(seed)
        self.keys: dict[str, set[Any]] = {name: set() for name in DDL}
        self.next = 1
        self.history: list[tuple[str, tuple[Any, ...]]] = []

    def _row(self, table: str, key: Any) -> tuple[Any, ...]:
        r, n = self.rng, self.next
        self.next += 1
        if table == "keyed":
            return (key, f"c{n}", r.randint(-(10**12), 10**12), Decimal(r.randint(-99999, 99999)) / 100,
                    datetime.datetime(2024, 1, 1) + datetime.timedelta(microseconds=r.randint(0, 10**13)),
                    r.choice([None, "", "x" * r.randint(1, 300)]))  # fmt: skip
        if table == "unkeyed":
            return (key, r.choice([None, n]), r.randint(0, 10**9), r.choice([None, f"note {n}"]))
        return (key, r.choice([None, f"v{n}"]), r.randint(0, 1000), r.choice([None, "y" * r.randint(0, 200)]))

    def _new_key(self, table: str) -> Any:
        n = self.next
        self.next += 1
        return f"k{n}" if table == "unkeyed" else n

    def _select(self, cur: Any, table: str, key: Any) -> tuple[Any, ...]:
        key_col = COLUMNS[table][0]
        cur.execute(
            f"SELECT {', '.join(COLUMNS[table])} FROM `{self.db}`.`{table}` WHERE {key_col} = %s", (key,)
        )
        return tuple(cur.fetchone())

    def step(self, cur: Any) -> None:
        r = self.rng
        table = r.choice(list(DDL))
        keys, cols = self.keys[table], COLUMNS[table]
        key_col = cols[0]
        what = r.choice(["insert", "insert", "update", "update", "rekey", "delete"]) if keys else "insert"
        name = f"`{self.db}`.`{table}`"
        if what == "insert":
            rows = [self._row(table, self._new_key(table)) for _ in range(r.randint(1, 4))]
            marks = ", ".join(["(" + ", ".join(["%s"] * len(cols)) + ")"] * len(rows))
            cur.execute(
                f"INSERT INTO {name} ({', '.join(cols)}) VALUES {marks}", [v for row in rows for v in row]
            )
            keys.update(row[0] for row in rows)
            if table == "history":
                self.history += [("insert", self._select(cur, table, row[0])) for row in rows]
            return
        key = r.choice(sorted(keys, key=str))
        if what == "delete":
            before = self._select(cur, table, key) if table == "history" else None
            cur.execute(f"DELETE FROM {name} WHERE {key_col} = %s", (key,))
            keys.discard(key)
            if before is not None:
                self.history.append(("delete", before))
            return
        row = self._row(table, self._new_key(table) if what == "rekey" else key)
        sets = ", ".join(f"{c} = %s" for c in cols)
        cur.execute(f"UPDATE {name} SET {sets} WHERE {key_col} = %s", (*row, key))
        keys.discard(key)
        keys.add(row[0])
        if table == "history":
            self.history.append(("update", self._select(cur, table, row[0])))

    def run(self, transactions: int) -> None:
        with self.conn.cursor() as cur:
            for _ in range(transactions):
                cur.execute("BEGIN")
                for _ in range(self.rng.randint(1, 6)):
                    self.step(cur)
                cur.execute("COMMIT")


def test_key_only_before_images_keep_the_lake_exact(
    mariadb: MariaDbServer, conns: dict[str, str], spark: Any, spark_warehouse: str
) -> None:
    tag = uuid.uuid4().hex[:8]
    db, ns = f"bi_{tag}", f"bi_{tag}"
    mariadb.execute(f"CREATE DATABASE {db}")
    for table, ddl in DDL.items():
        mariadb.execute(f"CREATE TABLE {db}.{table} {ddl}")
    (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    start = f"{file}:{pos}"
    tables = {f"{db}.{t}": f"lake.{ns}.{t}" for t in DDL}
    options = {
        f"lake.{ns}.unkeyed": TargetOptions(key_columns=("code",)),
        f"lake.{ns}.history": TargetOptions(append_only=True),
    }
    conn = mariadb.connect()
    try:
        work = Workload(conn, db, seed=int(tag, 16))
        for run in range(2):  # the second run starts from the first one's cursor
            work.run(120)
            op = BinlogToSparkOperator(
                task_id="load", destination=f"bi-{tag}", tables=tables, warehouse=spark_warehouse,
                spark_master="local[2]", stop_spark=False, start_from=start, target_options=options,
                batch_size=50,
            )  # fmt: skip
            summary = op.execute(make_context(try_number=1, run_id=f"run{run}"))
            assert summary["changes"] > 0
        merged = {s: t for s, t in tables.items() if not s.endswith(".history")}
        diffs = verify_tables(conn, spark, merged, {f"{db}.unkeyed": ("code",)})
    finally:
        conn.close()
    assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
    assert all(d.source_rows > 0 for d in diffs)

    lake = spark.sql(f"SELECT {OP_COLUMN}, {', '.join(COLUMNS['history'])} FROM lake.{ns}.history").collect()
    assert any(op == "delete" for op, _ in work.history), "the workload deleted no history row"
    assert sorted(((row[0], tuple(row[1:])) for row in lake), key=repr) == sorted(work.history, key=repr)
