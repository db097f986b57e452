"""Benchmark: a task's Spark start and first MERGEs with and without the driver's class archive.

Each run is a fresh process, as an Airflow task is: it creates the product's local session
(``lake.spark.session.create_session``, ``local[2]``), then commits two chunks of changes of every column
type through ``ChangeMerger`` (the first creates the Iceberg table, the second is a MERGE with
updates, a key change and deletes), reads the table back and checks its row count. Printed per
mode: wall seconds of the session start and of the two commits, and the Spark JVM's CPU seconds
(user + system, psutil) at the end. Modes run interleaved (A B A B ...) so load drifts hit both:

* ``off``: ``BINLOG_CDC_CLASS_ARCHIVE=off``, the JVM loads every class from the jars (the baseline);
* ``archive``: the product default once ``python -m airflow_provider_binlog.lake.spark.jars`` built the
  archive (:mod:`airflow_provider_binlog.lake.spark.class_archive`).

    .venv/bin/python bench/spark_start.py              # 4 runs per mode
    .venv/bin/python bench/spark_start.py --runs 2 --conf spark.driver.extraClassPath=...

Measured 2026-11-24, 2 cores, otherwise idle: see docs/performance-history-2026-12-01.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def one_run(conf: dict[str, str], rows: int) -> dict[str, float]:
    """The measured work, in this process (a child of :func:`main`)."""
    import psutil

    t0 = time.monotonic()
    from airflow_provider_binlog.lake.spark.session import create_session
    from airflow_provider_binlog.lake.spark.training import training_changes
    from airflow_provider_binlog.lake.write.merge import ChangeMerger

    with tempfile.TemporaryDirectory(prefix="binlog-cdc-bench-start-") as work:
        spark = create_session(master="local[2]", warehouse=str(Path(work) / "wh"), conf=conf)
        t1 = time.monotonic()
        jvm = next(p for p in psutil.Process().children(recursive=True) if p.name() == "java")
        changes = training_changes(rows)
        half = len(changes) // 2
        marks = [t1]
        with ChangeMerger(
            spark, "bench", {"train.t": "lake.train.t"}, staging_root=str(Path(work) / "st")
        ) as m:
            for part in (changes[:half], changes[half:]):
                m.add_many(part)
                m.commit(m.take(), part[-1].end_position)
                marks.append(time.monotonic())
        count = spark.table("lake.train.t").count()
        cpu = sum(jvm.cpu_times()[:2])
        spark.stop()
    return {
        "session": t1 - t0, "create": marks[1] - marks[0], "merge": marks[2] - marks[1],
        "total": marks[2] - t0, "jvm_cpu": cpu, "rows": count,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=4, help="runs per mode")
    parser.add_argument(
        "--rows", type=int, default=20_000, help="rows inserted (a third updated, a fifth deleted)"
    )
    parser.add_argument("--conf", action="append", default=[], help="extra Spark setting k=v (both modes)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    conf = dict(kv.split("=", 1) for kv in args.conf)
    if args.child:
        print(json.dumps(one_run(conf, args.rows)))
        return 0
    from airflow_provider_binlog.lake.spark import class_archive

    archive = class_archive.build()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; {os.cpu_count()} cores; "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; archive {archive}")  # fmt: skip
    results: dict[str, list[dict[str, float]]] = {"off": [], "archive": []}
    for i in range(args.runs):
        for mode in results:
            env = dict(os.environ, **{class_archive.ARCHIVE_ENV: "off" if mode == "off" else "on"})
            cmd = [sys.executable, __file__, "--child", "1", "--rows", str(args.rows)]
            cmd += [a for kv in args.conf for a in ("--conf", kv)]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(proc.stdout[-2000:], proc.stderr[-4000:], file=sys.stderr)
                return 1
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            results[mode].append(r)
            print(f"run {i + 1} {mode:>7}: session {r['session']:.2f} s, create {r['create']:.2f} s, "
                  f"merge {r['merge']:.2f} s, total {r['total']:.2f} s, JVM CPU {r['jvm_cpu']:.1f} s, "
                  f"{r['rows']:.0f} rows")  # fmt: skip
    rows = {r["rows"] for rs in results.values() for r in rs}
    if len(rows) != 1:
        print(f"modes disagree on the row count: {rows}", file=sys.stderr)
        return 1
    med = {m: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for m, rs in results.items()}
    for m, v in med.items():
        print(
            f"median {m:>7}: session {v['session']:.2f} s, first commit {v['create']:.2f} s, "
            f"MERGE {v['merge']:.2f} s, total {v['total']:.2f} s, JVM CPU {v['jvm_cpu']:.1f} s"
        )
    off, on = med["off"], med["archive"]
    print(
        f"RESULT: with the class archive a task's Spark start and first two commits take "
        f"{on['total']:.1f} s instead of {off['total']:.1f} s ({off['total'] / on['total']:.2f}x), "
        f"JVM CPU {on['jvm_cpu']:.1f} instead of {off['jvm_cpu']:.1f} s "
        f"({off['jvm_cpu'] / on['jvm_cpu']:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
