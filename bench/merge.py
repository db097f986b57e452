"""Benchmark: merge change batches into Iceberg tables (copy-on-write and merge-on-read).

For each table size (1M and 10M rows at ``--scale 1``) and write mode, a base table is filled with
Spark (``range``), then batches of 1k (cold and warm), 100k and 1M changes (70% updates, 20% inserts,
10% deletes) go through :class:`ChangeMerger`: collapse, Arrow/Parquet staging, counts and one
``MERGE INTO`` per chunk. Times are end to end from the RowChange objects (built by a generator
inside the timed region; ``gen s`` shows how long building them alone takes, ``net`` subtracts it).

    .venv/bin/python bench/merge.py                 # full scale (several minutes)
    .venv/bin/python bench/merge.py --scale 0.1     # tables of 100k/1M rows, 100..100k changes
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import random
import shutil
import tempfile
import time
from collections.abc import Iterator

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
from airflow_provider_binlog.lake.spark.session import create_session
from airflow_provider_binlog.lake.write.merge import ChangeMerger, TargetOptions


def schema_of(table: str) -> TableSchema:
    """The benchmark table's columns under the name ``bench.<table>`` (also ``bench/merge_wide.py``'s)."""
    return TableSchema(
        "bench",
        table,
        (
            ColumnDef("id", T.LONGLONG),
            ColumnDef("a", T.LONG),
            ColumnDef("b", T.VARCHAR, collation=45, charset="utf-8"),
            ColumnDef("c", T.DOUBLE),
            ColumnDef("d", T.DATETIME2, fsp=6),
            ColumnDef("e", T.NEWDECIMAL, precision=12, scale=4),
        ),
        ("id",),
    )


SCHEMA = schema_of("t")


class Changes:
    """Generates changes against a table holding ids ``0 .. rows-1`` (and what was inserted since)."""

    def __init__(self, rows: int, seed: int = 7) -> None:
        self.next_id = rows
        self.rng = random.Random(seed)
        self.pos = 4

    def _row(self, key: int) -> dict[str, object]:
        r = self.rng
        return {
            "id": key,
            "a": r.randint(0, 1_000_000),
            "b": f"name-{r.randint(0, 999_999)}",
            "c": r.random(),
            "d": datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=r.randint(0, 10**7)),
            "e": decimal.Decimal(r.randint(0, 10**8)).scaleb(-4),
        }

    def generate(self, n: int) -> Iterator[RowChange]:
        r = self.rng
        for _ in range(n):
            self.pos += 50
            pos = BinlogPosition("mysql-bin.000001", self.pos)
            x = r.random()
            if x < 0.2:
                key = self.next_id
                self.next_id += 1
                op, before, after = Op.INSERT, None, self._row(key)
            elif x < 0.9:
                key = r.randrange(self.next_id)
                op, before, after = Op.UPDATE, self._row(key), self._row(key)
            else:
                key = r.randrange(self.next_id)
                op, before, after = Op.DELETE, self._row(key), None
            end = BinlogPosition(pos.file, pos.pos + 50)
            key_order = OrderKey(1, pos.pos, -1, 0)
            yield RowChange(
                "bench",
                "bench",
                "t",
                op,
                before,
                after,
                ("id",),
                pos,
                end,
                None,
                1_700_000_000,
                key_order,
                SCHEMA,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply table sizes and change counts")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--modes", default="copy-on-write,merge-on-read")
    ap.add_argument("--tables", default="1000000,10000000", help="table sizes at scale 1")
    ap.add_argument("--changes", default="1000,1000,100000,1000000", help="batch sizes at scale 1")
    ap.add_argument("--no-count", action="store_true", help="skip the inserted/updated/deleted count join")
    ap.add_argument("--max-rows", type=int, default=500_000, help="row changes per chunk commit")
    args = ap.parse_args()

    warehouse = tempfile.mkdtemp(prefix="binlog-cdc-bench-")
    spark = create_session("binlog-cdc-bench", master=args.master, warehouse=warehouse)
    table_sizes = [max(1, int(int(s) * args.scale)) for s in args.tables.split(",")]
    batch_sizes = [max(1, int(int(s) * args.scale)) for s in args.changes.split(",")]
    print(f"# master={args.master} scale={args.scale} count_changes={not args.no_count}")
    header = (
        f"{'mode':<14} {'table rows':>11} {'changes':>9} {'merge s':>8} {'changes/s':>10} {'gen s':>6} "
        f"{'net s':>6} {'net/s':>8}"
    )
    print(header + "  counts")
    try:
        for rows in table_sizes:
            for mode in args.modes.split(","):
                target = f"lake.bench.t_{mode.replace('-', '_')}_{rows}"
                opts = TargetOptions(write_mode=mode, count_changes=not args.no_count)
                spark.sql(
                    f"CREATE TABLE {target} (id bigint, a int, b string, c double, d timestamp_ntz, "
                    "e decimal(12,4)) USING iceberg TBLPROPERTIES ('format-version'='2', "
                    f"'write.merge.mode'='{mode}', 'write.update.mode'='{mode}', "
                    f"'write.delete.mode'='{mode}')"
                )
                spark.sql(
                    f"INSERT INTO {target} SELECT id, CAST(id % 1000000 AS INT), concat('name-', id), "
                    "rand(), "
                    "TIMESTAMP_NTZ'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 100000), "
                    f"CAST(id / 7 AS DECIMAL(12,4)) FROM range({rows})"
                )
                changes = Changes(rows)
                for i, n in enumerate(batch_sizes):
                    gen_started = time.perf_counter()
                    for _ in Changes(rows, seed=99).generate(n):
                        pass
                    gen_s = time.perf_counter() - gen_started
                    with ChangeMerger(spark, "bench", {"bench.t": target}, opts, max_rows=args.max_rows) as m:
                        started = time.perf_counter()
                        counts = m.merge(changes.generate(n))[target]
                        secs = time.perf_counter() - started
                    net = max(secs - gen_s, 1e-6)
                    label = f"{n}" + (" (cold)" if i == 0 else "")
                    c = counts
                    print(
                        f"{mode:<14} {rows:>11} {label:>9} {secs:>8.2f} {n / secs:>10.0f} {gen_s:>6.2f} "
                        f"{net:>6.2f} {n / net:>8.0f}  "
                        f"ins={c.inserted} upd={c.updated} del={c.deleted} commits={c.commits}",
                        flush=True,
                    )
                spark.sql(f"DROP TABLE {target} PURGE")
    finally:
        spark.stop()
        shutil.rmtree(warehouse, ignore_errors=True)


if __name__ == "__main__":
    main()
