"""Benchmark: a destination's table over months of small scheduled runs, with the default maintenance
policy and with maintenance off (issue #43's figures).

One warm Spark (``local[2]``), two tables side by side, each first loaded with ``--rows`` rows, then
``--runs`` runs of ``--changes`` changes each (20% inserts, 70% updates, 10% deletes of live keys),
the two tables' runs interleaved so both see the same JVM. A run is what a load run does to its
table: a new :class:`ChangeMerger` (the table loaded, its mark read), one MERGE with its mark, and
with the policy the end-of-run maintenance (:meth:`MaintenancePolicy.light`, ``maintain_table``).
No binlog server: the changes are built in Python (``bench/merge.py``'s way), so the figures are
the lake's alone.

The ``off`` table is today's behaviour before #43: ``write.metadata.delete-after-commit.enabled=false``
and no maintenance.

**Scheduled time.** Runs follow each other at once, so a day of ``*/5`` runs passes in minutes and
with the policy's real ``snapshot_age`` (a day) nothing would ever age out. The benchmark counts the
policy's age in runs instead: ``--schedule`` is the scheduled seconds between two runs (default 300,
``*/5``: 288 runs a day), so the age is ``snapshot_age / --schedule`` runs (``A``). The maintenance
after run ``r >= A`` gets ``snapshot_age`` = the real seconds since the start of run ``r - A`` (both
tables' runs of a round count, as a scheduler's clock would), so exactly the snapshots committed
before that run are past the age, whatever the machine's speed; before run ``A`` it gets the policy
unchanged (less than ``snapshot_age`` of scheduled time has passed: nothing is old enough). Only the
benchmark's copy of the policy changes; ``keep_snapshots`` and every other field stay the default's.
``--schedule 3600`` (hourly, 24 runs a day) reaches the steady state of a day's history in 200 runs.

Printed per table: mean wall time of a run over the first and last 100 (maintenance included),
``count(*)`` and a point lookup (best of 3) at the end and again after a full compaction of a copy
(the baseline measured in the same run), the metadata folder's files and bytes, data and delete
files, snapshots, and whether the lake equals the source model row for row.

Also printed: each run's CPU seconds (user + system of this process and the Spark JVM, from
``/proc``) beside its wall time: on a shared machine the wall time follows the others' load, and the
question "does a run's cost grow with the history" is better answered in CPU.

    .venv/bin/python bench/soak.py --tables policy   # 10,000 runs of 60 changes (hours)
    .venv/bin/python bench/soak.py --runs 600        # both tables, two days at */5
    .venv/bin/python bench/soak.py --short           # 200 runs

The ``off`` table's metadata grows with the square of its runs (every ``metadata.json`` kept, each
listing every snapshot: 507 MB at 600 runs), so 10,000 runs of it would need ~140 GB: run it to a
few hundred runs only.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
from airflow_provider_binlog.lake.commits import load_iceberg_table
from airflow_provider_binlog.lake.maintenance import MaintenancePolicy, maintain_table
from airflow_provider_binlog.lake.maintenance.health import read_health
from airflow_provider_binlog.lake.maintenance.policy import DELETE_AFTER_COMMIT
from airflow_provider_binlog.lake.spark.session import create_session
from airflow_provider_binlog.lake.write.merge import ChangeMerger, TargetOptions

SCHEMA = TableSchema(
    "bench",
    "soak",
    (
        ColumnDef("id", T.LONGLONG),
        ColumnDef("a", T.LONG),
        ColumnDef("b", T.VARCHAR, collation=45, charset="utf-8"),
        ColumnDef("c", T.DOUBLE),
    ),
    ("id",),
)
DESTINATION = "soak"
TICK = os.sysconf("SC_CLK_TCK")


class Cpu:
    """CPU seconds (user + system) of this process and of the Spark JVM, from ``/proc/<pid>/stat``:
    on a shared machine a run's wall time follows the others' load, its CPU time much less."""

    def __init__(self, spark: Any) -> None:
        self.pids = (os.getpid(), int(spark._jvm.java.lang.ProcessHandle.current().pid()))

    def __call__(self) -> float:
        total = 0
        for pid in self.pids:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        return total / TICK


class Source:
    """The source table as a model, and the changes that move it on."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.rows: dict[int, tuple[Any, ...]] = {}
        self.keys: list[int] = []
        self.next_id = 1
        self.pos = 4

    def _row(self, key: int) -> dict[str, Any]:
        r = self.rng
        return {"id": key, "a": r.randint(0, 10**6), "b": f"name-{r.randint(0, 10**6)}", "c": r.random()}

    def changes(self, n: int, inserts_only: bool = False) -> list[RowChange]:
        out = []
        for _ in range(n):
            self.pos += 100
            x = self.rng.random()
            if inserts_only or not self.keys or x < 0.2:
                key = self.next_id
                self.next_id += 1
                op, before, after = Op.INSERT, None, self._row(key)
                self.keys.append(key)
            else:
                i = self.rng.randrange(len(self.keys))
                key = self.keys[i]
                before = dict(zip(("id", "a", "b", "c"), self.rows[key], strict=True))
                if x < 0.9:
                    op, after = Op.UPDATE, self._row(key)
                else:
                    op, after = Op.DELETE, None
                    self.keys[i] = self.keys[-1]
                    self.keys.pop()
            if after is None:
                del self.rows[key]
            else:
                self.rows[key] = (after["id"], after["a"], after["b"], after["c"])
            pos = BinlogPosition("mysql-bin.000001", self.pos)
            end = BinlogPosition("mysql-bin.000001", self.pos + 50)
            change = RowChange(
                DESTINATION, "bench", "soak", op, before, after, ("id",), pos, end, None, 1_700_000_000,
                OrderKey(1, self.pos, -1, 0), SCHEMA,
            )  # fmt: skip
            out.append(change)
        return out


class Table:
    """One soaked table: its source, its policy (``None``: maintenance off) and what it measured."""

    def __init__(self, spark: Any, name: str, policy: MaintenancePolicy | None, seed: int) -> None:
        self.spark, self.name, self.policy = spark, name, policy
        self.source = Source(seed)
        # the policy's bounded metadata from the table's creation on (a --policy metadata_versions too)
        props = policy.bounded_properties() if policy is not None else {DELETE_AFTER_COMMIT: "false"}
        self.options = TargetOptions(count_changes=False, table_properties=props)
        self.seconds: list[float] = []
        self.cpu: list[float] = []  # CPU seconds of each run (driver + JVM)
        self.maintenance: list[float] = []  # of each run's seconds, the maintenance's
        self.phases: list[tuple[float, float, float]] = []  # marks read, merge + commit, maintenance
        self.maintained: dict[str, int] = {}
        self.action_seconds: dict[str, float] = {}

    def run(self, changes: list[RowChange], policy: MaintenancePolicy | None, cpu: Cpu) -> None:
        c0 = cpu()
        t0 = time.perf_counter()
        with ChangeMerger(self.spark, DESTINATION, {"bench.soak": self.name}, self.options) as merger:
            merger.load_marks()  # the table loaded, its mark read (as a run's start does)
            tm = time.perf_counter()
            merger.merge(changes, changes[-1].end_position)
        t1 = time.perf_counter()
        if policy is not None:
            done = maintain_table(self.spark, self.name, policy, report=lambda *_: None)
            for action in done["ran"]:
                self.maintained[action] = self.maintained.get(action, 0) + 1
                seconds = float((done.get(action) or {}).get("seconds") or 0.0)
                self.action_seconds[action] = self.action_seconds.get(action, 0.0) + seconds
        t2 = time.perf_counter()
        self.cpu.append(cpu() - c0)
        self.seconds.append(t2 - t0)
        self.maintenance.append(t2 - t1)
        self.phases.append((tm - t0, t1 - tm, t2 - t1))


def _best(spark: Any, sql: str) -> float:
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        spark.sql(sql).collect()
        times.append(time.perf_counter() - t0)
    return min(times)


def _metadata(spark: Any, name: str) -> tuple[int, int]:
    table = load_iceberg_table(spark, name)
    assert table is not None, name
    location = str(table.location()).removeprefix("file:")
    files = [p for p in (Path(location) / "metadata").iterdir() if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def _equal(spark: Any, table: Table) -> bool:
    rows = spark.sql(f"SELECT id, a, b, c FROM {table.name}").collect()
    lake = {int(r["id"]): (r["id"], r["a"], r["b"], r["c"]) for r in rows}
    return len(lake) == len(rows) and lake == table.source.rows


def _scans(spark: Any, table: Table) -> tuple[float, float]:
    key = next(iter(table.source.rows))
    return _best(spark, f"SELECT count(*) FROM {table.name}"), _best(
        spark, f"SELECT * FROM {table.name} WHERE id = {key}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--changes", type=int, default=60, help="changes per run")
    ap.add_argument("--rows", type=int, default=20_000, help="rows loaded before the runs")
    ap.add_argument("--short", action="store_true", help="200 runs")
    ap.add_argument("--schedule", type=float, default=300.0, help="scheduled seconds between runs")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument(
        "--policy", default="", help="fields of the light policy changed (keep_snapshots=100,...)"
    )
    ap.add_argument("--tables", default="policy,off", help="which tables: policy, off or both")
    args = ap.parse_args()
    runs = 200 if args.short else args.runs
    warehouse = tempfile.mkdtemp(prefix="binlog-cdc-soak-")
    spark = create_session("binlog-cdc-soak", master=args.master, warehouse=warehouse)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.soak")
    # the light policy (orphans left to the maintenance task), with the fields --policy names changed
    default = MaintenancePolicy.parse(",".join(("orphan_interval=none", args.policy)))
    wanted = set(args.tables.split(","))
    tables = [
        t
        for t in (Table(spark, "lake.soak.policy", default, 1), Table(spark, "lake.soak.off", None, 1))
        if t.name.rsplit(".", 1)[1] in wanted
    ]
    cpu = Cpu(spark)
    for table in tables:  # the initial load: one run of --rows inserts
        table.run(table.source.changes(args.rows, inserts_only=True), None, cpu)
        table.seconds.clear()
        table.cpu.clear()
        table.maintenance.clear()
        table.phases.clear()
    print(
        f"# {runs} runs of {args.changes} changes on {args.rows} rows, master {args.master}, "
        f"schedule {args.schedule:.0f} s (snapshot_age {default.snapshot_age:.0f} s = "
        f"{max(1, round(default.snapshot_age / args.schedule))} runs); policy {default}"
    )
    started = time.perf_counter()
    age_runs = max(1, round(default.snapshot_age / args.schedule))  # the policy's age, in runs
    starts: list[float] = []  # each round's real start (time.time())
    for r in range(runs):
        starts.append(time.time())
        for table in tables:
            policy = table.policy
            if policy is not None and r >= age_runs:  # the policy's age in scheduled time
                now = time.time()
                policy = policy.replace(snapshot_age=now - starts[r - age_runs])
            table.run(table.source.changes(args.changes), policy, cpu)
        if (r + 1) % 100 == 0:
            line = ", ".join(
                f"{t.name} {statistics.fmean(t.seconds[-100:]):.3f} s ({statistics.fmean(t.cpu[-100:]):.3f} "
                f"s CPU)"
                for t in tables
            )
            took = time.perf_counter() - started
            print(
                f"  run {r + 1}: last 100 mean {line} ({took:.0f} s, load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    header = (
        f"{'table':<17} {'first100 s':>10} {'last100 s':>9} {'ratio':>6} "
        f"{'CPU first':>9} {'CPU last':>8} {'ratio':>6} {'count s':>8} {'lookup s':>8} "
        f"{'count* s':>8} {'lookup* s':>9} {'meta files':>10} {'meta MB':>8} {'data':>5} {'deletes':>7} "
        f"{'data*':>5} {'snaps':>6} {'maint s':>7}  lake==source  maintenance"
    )
    print(header)
    for table in tables:
        first, last = statistics.fmean(table.seconds[:100]), statistics.fmean(table.seconds[-100:])
        count_s, lookup_s = _scans(spark, table)
        files, size = _metadata(spark, table.name)
        health = read_health(spark, load_iceberg_table(spark, table.name))
        equal = _equal(spark, table)
        # the baseline: a freshly compacted copy of the same rows
        copy = table.name + "_compacted"
        spark.sql(f"CREATE OR REPLACE TABLE {copy} USING iceberg AS SELECT * FROM {table.name}")
        spark.sql(f"CALL lake.system.rewrite_data_files(table => '{copy.split('.', 1)[1]}', "
                  "options => map('rewrite-all', 'true'))")  # fmt: skip
        compacted = Table(spark, copy, None, 0)
        compacted.source = table.source
        count_c, lookup_c = _scans(spark, compacted)
        data_c = read_health(spark, load_iceberg_table(spark, copy)).data_files
        ratio = last / first
        cpu_first, cpu_last = statistics.fmean(table.cpu[:100]), statistics.fmean(table.cpu[-100:])
        print(
            f"{table.name:<17} {first:>10.3f} {last:>9.3f} {ratio:>6.2f} {cpu_first:>9.3f} {cpu_last:>8.3f} "
            f"{cpu_last / cpu_first:>6.2f} {count_s:>8.3f} {lookup_s:>8.3f} "
            f"{count_c:>8.3f} {lookup_c:>9.3f} {files:>10} {size / 2**20:>8.2f} {health.data_files:>5} "
            f"{health.delete_files:>7} {data_c:>5} {health.snapshots:>6} {sum(table.maintenance):>7.1f}  "
            f"{equal!s:<12}  {table.maintained}"
        )
    print("(CPU: seconds of CPU per run, user + system, this process and the Spark JVM together;")
    print(" * a compacted copy of the same rows, measured in this run: the baseline; maint s: the")
    print(" maintenance's seconds in all runs, included in the runs' wall times)")
    print("mean seconds per run of each phase, first 100 -> last 100: marks read (table loaded), merge")
    print("(staging, MERGE, commit, tag), maintenance (health read and the actions due); then the")
    print("actions' total seconds / times run")
    for table in tables:
        head = [statistics.fmean(p[i] for p in table.phases[:100]) for i in range(3)]
        tail = [statistics.fmean(p[i] for p in table.phases[-100:]) for i in range(3)]
        line = ", ".join(
            f"{what} {a:.3f} -> {b:.3f}"
            for what, a, b in zip(("marks", "merge", "maintenance"), head, tail, strict=True)
        )
        acts = ", ".join(
            f"{k} {v:.1f} s / {table.maintained[k]}" for k, v in sorted(table.action_seconds.items())
        )
        print(f"  {table.name}: {line}; {acts or 'no action'}")
    spark.stop()


if __name__ == "__main__":
    main()
