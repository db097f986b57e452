"""Benchmark: one MERGE of the end-to-end shape under Spark/Iceberg variants, interleaved in one warm JVM.

Each round builds, for every variant, a fresh Iceberg table of ``--rows`` rows (id bigint, int,
bigint, varchar, decimal(12,2), timestamp, date, int: the shape of ``bench/end_to_end.py``'s
tables) and applies ``--merges`` consecutive staged change sets of ``--keys`` collapsed keys each
(60% update of live keys, 25% insert of new keys, 15% delete of live keys), each read from a
staged Parquet file and merged with the product's statement (``MERGE INTO t USING stage s ON id
WHEN MATCHED AND s.action='D' THEN DELETE WHEN MATCHED AND s.action='U' THEN UPDATE SET ...
WHEN NOT MATCHED AND s.action='U' THEN INSERT ...``) inside ``commits.commit_properties``. Every
variant of a round gets the same change sets; the order of the variants rotates between rounds.
Reported per variant: wall seconds and JVM CPU seconds (psutil on the JVM pid) per merge
position (1st..Nth merge into the table) and their median over rounds. Table creation and the
base load are not timed; the staged file's read is.

A variant is table properties, runtime SQL settings, or the
staged side built from Arrow in memory (``PythonSQLUtils.toDataFrame``: a local relation) instead
of Parquet. ``--jit`` instead compares static JVM options (the C2 JIT on or off) over a whole run,
session start included, in fresh processes alternately.

Measured 2026-11-22 (2 cores shared with other jobs, load 2-7: compare CPU seconds more than wall;
differences under ~15% did not hold from one run to the next). JVM CPU seconds of merges 1..5 into
one table, median of the rounds; ``base`` = the defaults before (format-version 2, merge-on-read).
Run 1: 2 rounds of 20 variants; run 2: 3 rounds of 8.

=======================================  ===  ========================  ============
variant                                  run  merges 1..5 (JVM CPU s)   sum 5 merges
=======================================  ===  ========================  ============
base (v2, position delete files)         1    2.1 2.5 2.7 3.4 3.3       14.1
format-version 3 (deletion vectors)      1    2.2 2.2 2.0 2.1 2.2       10.7
v3 + distribution-mode none              1    1.8 2.1 1.8 1.8 1.8       9.2
v2 + distribution-mode none              1    2.3 3.0 4.0 4.7 5.4       19.2
v2 delete granularity partition / file   1                              12.1 / 14.0
v2 broadcast threshold 64 MB / off       1                              13.6 / 13.9
v2 shuffle partitions 2 / 4, AQE off     1                              15.6 / 16.0, 15.2
v2 copy-on-write                         1    5.5 3.7 3.3 3.6 3.3       19.4
v2 staged side from Arrow in memory      1    4.8 5.2 5.4 5.7 6.3       27.4
v2 snappy / uncompressed / zstd level 1  1                              14.3 / 15.6 / 14.5
v2 write.delete.mode copy-on-write       1                              12.5
v2 + rewrite_position_delete_files       1    (4.1 s of its own after merge 3; merges 4-5 no faster)
base (v2, position delete files)         2    2.5 2.7 3.1 3.3 3.8       15.3
format-version 3 (deletion vectors)      2    1.9 2.5 2.4 2.2 2.4       11.4
v3 + distribution-mode none              2    2.2 2.2 2.3 2.0 2.4       11.0
v3 + none + shuffle partitions 2 / 4     2                              9.7 / 10.6
v3 + none + broadcast threshold 64 MB    2                              10.2
v3 + none + AQE off / snappy             2                              12.2 / 10.6
=======================================  ===  ========================  ============

A head-to-head rerun (4 rounds, 3 merges): v3 7.3, v3 + none 7.2, v3 + 2 / 4 shuffle partitions
6.4 / 6.4 JVM CPU s. Whole runs (``--jit``: session start, a 130k-row table, 5 merges into v3):
C1 only 35.3 s JVM CPU, C1+C2 62.3 s; with C1 only, G1 37.2 s, ParallelGC 34.5 s, SerialGC 33.8 s.

    PYTHONPATH=. .venv/bin/python -u bench/merge_variants.py --rounds 2
    PYTHONPATH=. .venv/bin/python -u bench/merge_variants.py --variants base,dist-none --merges 5
    PYTHONPATH=. .venv/bin/python -u bench/merge_variants.py --jit --rounds 3
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.spark.session import create_session

COLUMNS = (
    "id bigint, customer bigint, big bigint, sku string, amount decimal(12,2), created timestamp, day date, "
    "rev int"
)
NAMES = [c.split()[0] for c in COLUMNS.split(", ")]
ARROW = pa.schema(
    [
        ("id", pa.int64()),
        ("customer", pa.int64()),
        ("big", pa.int64()),
        ("sku", pa.string()),
        ("amount", pa.decimal128(12, 2)),
        ("created", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
        ("rev", pa.int32()),
        ("_cdc_action", pa.string()),
    ]
)
MOR = {f"write.{k}.mode": "merge-on-read" for k in ("merge", "update", "delete")}
COW = {f"write.{k}.mode": "copy-on-write" for k in ("merge", "update", "delete")}
DIST_NONE = {f"write.{k}.distribution-mode": "none" for k in ("merge", "update", "delete")}


@dataclass
class Variant:
    props: dict[str, str] = field(default_factory=dict)  # over format-version 2 + merge-on-read
    conf: dict[str, str] = field(default_factory=dict)  # runtime SQL settings during the merges
    arrow: bool = False  # staged side from Arrow in memory instead of Parquet
    compact_after: int = 0  # rewrite_position_delete_files after this merge (not timed in the merge)


VARIANTS: dict[str, Variant] = {
    "base": Variant(),
    "dist-none": Variant(props=DIST_NONE),
    "gran-partition": Variant(props={"write.delete.granularity": "partition"}),
    "gran-file": Variant(props={"write.delete.granularity": "file"}),
    "v3": Variant(props={"format-version": "3"}),
    "bcast-64m": Variant(conf={"spark.sql.autoBroadcastJoinThreshold": str(64 << 20)}),
    "no-bcast": Variant(conf={"spark.sql.autoBroadcastJoinThreshold": "-1"}),
    "sp2": Variant(conf={"spark.sql.shuffle.partitions": "2"}),
    "sp4": Variant(conf={"spark.sql.shuffle.partitions": "4"}),
    "sp16": Variant(conf={"spark.sql.shuffle.partitions": "16"}),
    "v2": Variant(props={"format-version": "2"}),
    "mor": Variant(props=MOR),
    "aqe-off": Variant(conf={"spark.sql.adaptive.enabled": "false"}),
    "arrow": Variant(arrow=True),
    "cow": Variant(props=COW),
    "snappy": Variant(props={"write.parquet.compression-codec": "snappy"}),
    "uncompressed": Variant(props={"write.parquet.compression-codec": "uncompressed"}),
    "zstd1": Variant(props={"write.parquet.compression-level": "1"}),
    "file-64m": Variant(props={"write.target-file-size-bytes": str(64 << 20)}),
    "compact3": Variant(compact_after=3),
    "delete-cow": Variant(props={"write.delete.mode": "copy-on-write"}),
}


def variant(name: str) -> Variant:
    """The variant called ``name``: one of :data:`VARIANTS`, or several joined by ``+`` (applied in order)."""
    out = Variant()
    for part in name.split("+"):
        v = VARIANTS[part]
        out = Variant(
            props={**out.props, **v.props},
            conf={**out.conf, **v.conf},
            arrow=out.arrow or v.arrow,
            compact_after=v.compact_after or out.compact_after,
        )
    return out


def _counts(keys: int) -> tuple[int, int]:
    """(inserts, deletes) of a change set of ``keys`` keys; the rest are updates."""
    return int(keys * 0.25), int(keys * 0.15)


def _arrow_stage(
    rng: random.Random, live: list[int], next_id: int, keys: int, rev: int
) -> tuple[pa.Table, list[int], int]:
    """One collapsed change set over ``live`` ids: (table, live ids after it, next new id)."""
    n_ins, n_del = _counts(keys)
    n_upd = keys - n_ins - n_del
    touched = rng.sample(live, n_upd + n_del)
    updates, deletes = touched[:n_upd], touched[n_upd:]
    inserts = list(range(next_id, next_id + n_ins))
    upserts = updates + inserts
    rng.shuffle(upserts)
    t0 = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    d0 = datetime.date(2024, 1, 1)
    cols: dict[str, list[Any]] = {n: [] for n in ARROW.names}
    for k in upserts:
        cols["id"].append(k)
        cols["customer"].append(rng.randrange(10**6))
        cols["big"].append(rng.getrandbits(62))
        cols["sku"].append(f"sku-{rng.getrandbits(40):x}")
        cols["amount"].append(decimal.Decimal(rng.randrange(10**9)).scaleb(-2))
        cols["created"].append(t0 + datetime.timedelta(seconds=rng.randrange(10**7)))
        cols["day"].append(d0 + datetime.timedelta(days=rng.randrange(1000)))
        cols["rev"].append(rev)
        cols["_cdc_action"].append("U")
    for k in deletes:
        cols["id"].append(k)
        for n in NAMES[1:]:
            cols[n].append(None)
        cols["_cdc_action"].append("D")
    table = pa.Table.from_pydict(cols, schema=ARROW)
    dead = set(deletes)
    return table, [k for k in live if k not in dead] + inserts, next_id + n_ins


def change_sets(rows: int, keys: int, merges: int, seed: int) -> Iterator[pa.Table]:
    rng = random.Random(seed)
    live, next_id = list(range(rows)), rows
    for i in range(merges):
        table, live, next_id = _arrow_stage(rng, live, next_id, keys, i + 1)
        yield table


class Bench:
    def __init__(self, spark: Any, rows: int, stage_dir: str) -> None:
        self.spark = spark
        self.rows = rows
        self.stage_dir = stage_dir
        self.jvm = psutil.Process(int(spark._jvm.java.lang.ProcessHandle.current().pid()))

    def cpu(self) -> float:
        t = self.jvm.cpu_times()
        return float(t.user + t.system)

    def create(self, name: str, v: Variant) -> str:
        target = f"lake.bench.{name}"
        props = {"format-version": "2", **MOR, **v.props}
        tbl = ", ".join(f"'{k}' = '{val}'" for k, val in props.items())
        self.spark.sql(f"DROP TABLE IF EXISTS {target} PURGE")
        self.spark.sql(f"CREATE TABLE {target} ({COLUMNS}) USING iceberg TBLPROPERTIES ({tbl})")
        self.spark.sql(
            f"INSERT INTO {target} SELECT id, id % 1000000, id * 7919, concat('sku-', hex(id * 31)), "
            "CAST(id / 7 AS DECIMAL(12,2)), TIMESTAMP'2024-01-01 00:00:00' + make_interval(0,0,0,0,0,0,id), "
            f"date_add(DATE'2024-01-01', CAST(id % 1000 AS INT)), 0 FROM range({self.rows})"
        )
        return target

    def stage(self, v: Variant, path: str, table: pa.Table) -> str:
        view = f"stage_{uuid.uuid4().hex}"
        if v.arrow:
            from pyspark.sql import DataFrame
            from pyspark.sql.pandas.types import from_arrow_schema

            sink = os.path.join(self.stage_dir, f"{view}.arrows")
            with pa.OSFile(sink, "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
                w.write_table(table, max_chunksize=10_000)
            jvm = self.spark._jvm
            batches = jvm.PythonSQLUtils.readArrowStreamFromFile(sink)
            schema = from_arrow_schema(table.schema)
            jdf = jvm.PythonSQLUtils.toDataFrame(batches, schema.json(), self.spark._jsparkSession)
            os.remove(sink)
            DataFrame(jdf, self.spark).createOrReplaceTempView(view)
        else:
            reader = self.spark.read.option("datetimeRebaseMode", "CORRECTED")
            reader.parquet(path).createOrReplaceTempView(view)
        return view

    def merge(self, target: str, v: Variant, path: str, table: pa.Table, seq: int) -> tuple[float, float]:
        saved = {k: self.spark.conf.get(k, None) for k in v.conf}
        for k, val in v.conf.items():
            self.spark.conf.set(k, val)
        try:
            c0, t0 = self.cpu(), time.perf_counter()
            view = self.stage(v, path, table)
            src = view
            cols = NAMES
            stmt = (
                f"MERGE INTO {target} t USING {src} s ON t.id = s.id "
                "WHEN MATCHED AND s._cdc_action = 'D' THEN DELETE "
                "WHEN MATCHED AND s._cdc_action = 'U' THEN UPDATE SET "
                + ", ".join(f"t.{c} = s.{c}" for c in cols)
                + f" WHEN NOT MATCHED AND s._cdc_action = 'U' THEN INSERT ({', '.join(cols)}) "
                f"VALUES ({', '.join('s.' + c for c in cols)})"
            )
            props = {commits.DESTINATION: "bench", commits.ORDER_KEY: f"1:{seq}:-1:0"}
            with commits.commit_properties(self.spark, props):
                self.spark.sql(stmt)
            wall, cpu = time.perf_counter() - t0, self.cpu() - c0
            self.spark.catalog.dropTempView(view)
        finally:
            for k, old in saved.items():
                if old is None:
                    self.spark.conf.unset(k)
                else:
                    self.spark.conf.set(k, old)
        return wall, cpu

    def check(self, target: str, expected_rows: int, seq: int) -> str:
        n = self.spark.sql(f"SELECT count(*) FROM {target}").collect()[0][0]
        summary = self.spark.sql(
            f"SELECT summary['{commits.ORDER_KEY}'] FROM {target}.snapshots "
            "ORDER BY committed_at DESC LIMIT 1"
        ).collect()[0][0]
        files = self.spark.sql(
            f"SELECT content, count(*), sum(record_count) FROM {target}.files "
            "GROUP BY content ORDER BY content"
        ).collect()
        assert n == expected_rows, (target, n, expected_rows)
        assert summary == f"1:{seq}:-1:0", (target, summary)
        return " ".join(f"c{r[0]}:{r[1]}f/{r[2]}r" for r in files)


def run_variants(args: argparse.Namespace) -> None:
    warehouse = tempfile.mkdtemp(prefix="merge-variants-")
    stage_dir = tempfile.mkdtemp(prefix="merge-variants-stage-")
    spark = create_session("merge-variants", master=args.master, warehouse=warehouse)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    bench = Bench(spark, args.rows, stage_dir)
    names = args.variants.split(",")
    unknown = [p for n in names for p in n.split("+") if p not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    wall: dict[str, list[list[float]]] = {n: [[] for _ in range(args.merges)] for n in names}
    cpu: dict[str, list[list[float]]] = {n: [[] for _ in range(args.merges)] for n in names}
    compact: dict[str, list[float]] = {n: [] for n in names}
    try:
        # warm-up: one table and one merge, not counted
        sets = list(change_sets(args.rows, args.keys, 1, seed=1))
        path = os.path.join(stage_dir, "warm.parquet")
        pq.write_table(sets[0], path, compression="snappy")
        t = bench.create("warm", Variant())
        bench.merge(t, Variant(), path, sets[0], 1)
        for rnd in range(args.rounds):
            sets = list(change_sets(args.rows, args.keys, args.merges, seed=100 + rnd))
            paths = []
            for i, table in enumerate(sets):
                p = os.path.join(stage_dir, f"r{rnd}m{i}.parquet")
                pq.write_table(table, p, compression="snappy")
                paths.append(p)
            order = names[rnd % len(names) :] + names[: rnd % len(names)]
            for name in order:
                v = variant(name)
                target = bench.create(name.replace("-", "_").replace("+", "_"), v)
                expected = args.rows
                files = ""
                for i, table in enumerate(sets):
                    w, c = bench.merge(target, v, paths[i], table, i + 1)
                    wall[name][i].append(w)
                    cpu[name][i].append(c)
                    n_ins, n_del = _counts(table.num_rows)
                    expected += n_ins - n_del
                    if v.compact_after == i + 1:
                        t0 = time.perf_counter()
                        spark.sql(
                            "CALL lake.system.rewrite_position_delete_files(table => "
                            f"'bench.{target.split('.')[-1]}', options => map('rewrite-all', 'true'))"
                        )
                        compact[name].append(time.perf_counter() - t0)
                files = bench.check(target, expected, args.merges)
                print(
                    f"round {rnd} {name:<14} "
                    + " ".join(
                        f"{w:5.2f}/{c:5.2f}"
                        for w, c in zip([x[-1] for x in wall[name]], [x[-1] for x in cpu[name]], strict=True)
                    )
                    + f"  {files}",
                    flush=True,
                )
                spark.sql(f"DROP TABLE {target} PURGE")
    finally:
        spark.stop()
        shutil.rmtree(warehouse, ignore_errors=True)
        shutil.rmtree(stage_dir, ignore_errors=True)
    print(
        f"\n# {args.rounds} rounds, table {args.rows} rows, {args.keys} keys per merge, master {args.master}"
    )
    print("# median over rounds, wall s / JVM CPU s, per merge position; 'all' = sum over positions")
    head = " ".join(f"{'merge ' + str(i + 1):>11}" for i in range(args.merges))
    print(f"{'variant':<15} {head} {'all':>13}")
    for name in names:
        ws = [statistics.median(x) for x in wall[name]]
        cs = [statistics.median(x) for x in cpu[name]]
        cells = " ".join(f"{w:5.2f}/{c:5.2f}" for w, c in zip(ws, cs, strict=True))
        extra = f"  (compaction {statistics.median(compact[name]):.2f} s)" if compact[name] else ""
        print(f"{name:<15} {cells} {sum(ws):6.2f}/{sum(cs):6.2f}{extra}")


def run_jit_child(args: argparse.Namespace) -> None:
    """One whole run in this process: session start + ``--merges`` merges; print JSON figures."""
    t_start = time.perf_counter()
    warehouse = tempfile.mkdtemp(prefix="merge-variants-")
    stage_dir = tempfile.mkdtemp(prefix="merge-variants-stage-")
    conf = {}
    if args.java_opts is not None:
        from airflow_provider_binlog.lake.spark.session import quiet_log_config

        conf["spark.driver.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile=file:{quiet_log_config()} {args.java_opts}"
        )
    spark = create_session("merge-variants", master=args.master, warehouse=warehouse, conf=conf)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    bench = Bench(spark, args.rows, stage_dir)
    started = time.perf_counter() - t_start
    v = variant(args.jit_variant)
    target = bench.create("t", v)
    merges = []
    for i, table in enumerate(change_sets(args.rows, args.keys, args.merges, seed=5)):
        p = os.path.join(stage_dir, f"m{i}.parquet")
        pq.write_table(table, p, compression="snappy")
        merges.append(bench.merge(target, v, p, table, i + 1))
    total_cpu = bench.cpu()
    spark.stop()
    shutil.rmtree(warehouse, ignore_errors=True)
    shutil.rmtree(stage_dir, ignore_errors=True)
    print(
        json.dumps(
            {"start": started, "merges": merges, "jvm_cpu": total_cpu, "total": time.perf_counter() - t_start}
        )
    )


def run_jit(args: argparse.Namespace) -> None:
    options = dict(item.split("=", 1) for item in args.java_variants.split(";"))
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in options}
    for rnd in range(args.rounds):
        items = list(options.items())
        if rnd % 2:
            items.reverse()
        for label, opts in items:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--jit-child",
                    f"--java-opts={opts}",
                    "--rows",
                    str(args.rows),
                    "--keys",
                    str(args.keys),
                    "--merges",
                    str(args.merges),
                    "--jit-variant",
                    args.jit_variant,
                    "--master",
                    args.master,
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            r = json.loads(out.strip().splitlines()[-1])
            results[label].append(r)
            print(
                f"round {rnd} {label:<34} total {r['total']:6.2f} s, JVM CPU {r['jvm_cpu']:6.2f} s, "
                f"start {r['start']:.2f} s, merges " + " ".join(f"{w:.2f}" for w, _ in r["merges"]),
                flush=True,
            )
    print(
        f"\n# whole run (session start + table + {args.merges} merges of {args.keys} keys), "
        f"median of {args.rounds}"
    )
    for label, rs in results.items():
        print(
            f"{label:<34} wall {statistics.median(r['total'] for r in rs):6.2f} s  "
            f"JVM CPU {statistics.median(r['jvm_cpu'] for r in rs):6.2f} s  "
            f"merges wall {statistics.median(sum(w for w, _ in r['merges']) for r in rs):6.2f} s"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated, of: {', '.join(VARIANTS)}"
    )
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--merges", type=int, default=5, help="consecutive merges into each table")
    ap.add_argument("--rows", type=int, default=130_000, help="base table rows")
    ap.add_argument("--keys", type=int, default=70_000, help="collapsed keys per merge")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--jit", action="store_true", help="compare the JIT settings over whole runs instead")
    ap.add_argument(
        "--java-variants",
        default="C1 only=-XX:TieredStopAtLevel=1;C1+C2 (JVM default)=",
        help="for --jit: label=JVM options, separated by ';'",
    )
    ap.add_argument("--jit-variant", default="base", help="the table variant the --jit runs merge into")
    ap.add_argument("--jit-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--java-opts", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.jit_child:
        run_jit_child(args)
    elif args.jit:
        run_jit(args)
    else:
        run_variants(args)


if __name__ == "__main__":
    main()
