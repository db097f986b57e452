"""Benchmark: the per-table fixed cost of a chunk commit over many small tables (a wide destination).

One warm Spark session, ``--tables`` Iceberg tables made by a first :class:`ChangeMerger` commit
(``--base`` inserted rows each, not timed), then ``--rounds`` timed chunk commits, each holding
``--rows`` changes per table (60% update of live keys, 25% insert of new keys, 15% delete; with
``--inserts`` only inserts of new keys), folded and committed by a fresh merger like a run's chunk
(the table DDL check included). Per round: wall seconds, JVM CPU seconds (psutil on the JVM pid),
operator CPU seconds, Iceberg commits, and the Spark jobs, stages and tasks the round ran with
the tasks' own CPU (the rest of the JVM's CPU is the driver's: analysis, planning, commits), read
from Spark's event log, and the py4j calls the operator made (``BENCH_PY4J_SITES=1`` also prints
them by the product's line that made them; the ``m`` commands of py4j's own thread are the deletes
of JVM objects Python dropped).

    PYTHONPATH=. .venv/bin/python -u bench/merge_wide.py --tables 30 --rows 400 --rounds 2
    PYTHONPATH=. .venv/bin/python -u bench/merge_wide.py --inserts      # new keys only
    PYTHONPATH=. .venv/bin/python -u bench/merge_wide.py --conf spark.sql.adaptive.enabled=false
    BENCH_PRODUCT=/tmp/checkout PYTHONPATH=. .venv/bin/python -u bench/merge_wide.py   # another build
    BENCH_PY4J_SITES=1 PYTHONPATH=. .venv/bin/python -u bench/merge_wide.py --tables 40 --rows 2000

Measured 2026-11-29 03:44-03:48 UTC (load 0.8-2.9), 40 tables x 2000 changes, round 1, every
table merged by the driver: 404 py4j calls and 0.156 JVM CPU-seconds per commit before
``lake/spark/java_classes.py`` and ``lake/spark/table_schema.py``, 200 and 0.094 after.

Measured 2026-11-29 12:42-13:02 UTC (load 1.0-2.7), 20 tables x 2000 changes, 12 rounds: py4j
calls per commit in the 12th round 384 / 346 with ``lake/native/content_files.py`` (the planned files
and the new deletion vectors through Iceberg's JSON), 807 / 865 before it (the calls grew with
the files each round adds).

Measured 2026-11-25 02:38-02:45 UTC, 2 cores shared (load average 8-14: compare CPU seconds, and
expect +-15%), 30 tables x 400 changes, rounds 1 and 2, JVM CPU-seconds per commit:

==========================================  ===========  ===================================
variant                                     per commit   Spark jobs per table (1 stage each)
==========================================  ===========  ===================================
mixed, defaults                             0.49, 0.55   5 (staged file's schema + 4 MERGE)
mixed, spark.sql.iceberg.distribution-mode  0.47, 0.44   4
=none
mixed, spark.sql.adaptive.enabled=false     0.43, 0.41   2 jobs, 5 stages
inserts, MERGE (``BINLOG_CDC_NEW_KEYS=off``  0.33, 0.28   4 (no file in the key range: no
or the checkout before lake/native/new_keys.py)                  target scan)
inserts, lake/native/new_keys.py                   0.23, 0.21   2 (staged file's schema + the write)
==========================================  ===========  ===================================

The tasks' own CPU is under 0.1 s per commit in every variant: the rest is the driver's
(analysis, planning and re-planning, scheduling, the Iceberg commit).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import decimal
import glob
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

if os.environ.get("BENCH_PRODUCT"):
    sys.path.insert(0, os.environ["BENCH_PRODUCT"])

import psutil
from merge import schema_of  # bench/merge.py: the same table shape

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
from airflow_provider_binlog.lake.spark.session import create_session
from airflow_provider_binlog.lake.write.merge import ChangeMerger, TargetOptions


class Source:
    """Changes to ``tables`` tables, interleaved, in binlog order."""

    def __init__(self, tables: int, seed: int = 7) -> None:
        self.names = [f"t{i:03d}" for i in range(tables)]
        self.schemas = {n: schema_of(n) for n in self.names}
        self.live: dict[str, list[int]] = {n: [] for n in self.names}
        self.next_id = dict.fromkeys(self.names, 0)
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

    def changes(self, per_table: int, inserts_only: bool) -> Iterator[RowChange]:
        r = self.rng
        for _ in range(per_table):
            for name in self.names:
                self.pos += 50
                pos = BinlogPosition("mysql-bin.000001", self.pos)
                live = self.live[name]
                x = 0.0 if inserts_only or not live else r.random()
                if x < 0.25:
                    key = self.next_id[name]
                    self.next_id[name] += 1
                    live.append(key)
                    op, before, after = Op.INSERT, None, self._row(key)
                elif x < 0.85:
                    key = r.choice(live)
                    op, before, after = Op.UPDATE, self._row(key), self._row(key)
                else:
                    i = r.randrange(len(live))
                    key = live[i]
                    live[i] = live[-1]
                    live.pop()
                    op, before, after = Op.DELETE, self._row(key), None
                yield RowChange(
                    "bench", "bench", name, op, before, after, ("id",), pos,
                    BinlogPosition(pos.file, pos.pos + 50), None, 1_700_000_000,
                    OrderKey(1, pos.pos, -1, 0), self.schemas[name],
                )  # fmt: skip


def events(log_dir: str, seen: int) -> tuple[list[dict[str, Any]], int]:
    """The Spark listener events logged since line ``seen``."""
    files = glob.glob(os.path.join(log_dir, "*"))
    if not files:
        return [], seen
    with open(files[0]) as fh:
        lines = fh.readlines()
    return [json.loads(line) for line in lines[seen:]], len(lines)


def spark_work(evs: list[dict[str, Any]]) -> dict[str, float]:
    out = {"jobs": 0.0, "stages": 0.0, "tasks": 0.0, "task_cpu": 0.0}
    for e in evs:
        kind = e.get("Event")
        if kind == "SparkListenerJobStart":
            out["jobs"] += 1
        elif kind == "SparkListenerStageCompleted":
            out["stages"] += 1
        elif kind == "SparkListenerTaskEnd":
            out["tasks"] += 1
            metrics = e.get("Task Metrics") or {}
            out["task_cpu"] += (
                metrics.get("Executor CPU Time", 0) + metrics.get("Executor Deserialize CPU Time", 0)
            ) / 1e9
    return out


def _product_frame() -> str:
    """The innermost caller in the product's package, as ``module:line function``."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if "airflow_provider_binlog" in name:
            return f"{name.rsplit('airflow_provider_binlog/', 1)[-1]}:{frame.f_lineno} {frame.f_code.co_name}"
        frame = frame.f_back
    return "(outside the product)"


class Py4jCalls:
    """Counts the commands this process sends to the JVM (py4j round trips), on every thread."""

    def __init__(self) -> None:
        from py4j import clientserver, java_gateway

        self.count = 0
        self.sites: collections.Counter[str] = collections.Counter()
        trace = bool(os.environ.get("BENCH_PY4J_SITES"))
        for cls in (clientserver.ClientServerConnection, java_gateway.GatewayConnection):
            original = cls.send_command

            def counted(conn: Any, command: str, _original: Any = original) -> Any:
                self.count += 1  # a lost increment under threads is noise, not a wrong figure
                if trace:
                    site = _product_frame()
                    if site == "(outside the product)":
                        site += " " + command.split("\n", 2)[0] + " " + threading.current_thread().name[:20]
                    self.sites[site] += 1
                return _original(conn, command)

            cls.send_command = counted  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=40)
    ap.add_argument("--base", type=int, default=300, help="rows per table before the timed rounds")
    ap.add_argument("--rows", type=int, default=500, help="changes per table and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--inserts", action="store_true", help="only inserts of new keys")
    ap.add_argument("--parallel", type=int, default=4, help="targets merged at once")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--conf", action="append", default=[], help="more Spark configuration, key=value")
    ap.add_argument(
        "--table-property", action="append", default=[], help="a property of the tables made, key=value"
    )
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="binlog-cdc-wide-")
    log_dir = os.path.join(work, "events")
    os.makedirs(log_dir)
    conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{log_dir}"}
    conf.update(item.split("=", 1) for item in args.conf)
    spark = create_session("binlog-cdc-wide", master=args.master, warehouse=f"{work}/wh", conf=conf)
    jvm = psutil.Process(int(spark._jvm.java.lang.ProcessHandle.current().pid()))
    me = psutil.Process()
    src = Source(args.tables)
    routes = {f"bench.{n}": f"lake.bench.{n}" for n in src.names}
    print(
        f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"load {os.getloadavg()[0]:.1f}, "
        f"{args.tables} tables x {args.rows} changes/round, parallel {args.parallel}, "
        f"product {os.environ.get('BENCH_PRODUCT') or 'this checkout'}, conf {args.conf}",
        flush=True,
    )
    calls = Py4jCalls()
    seen = 0
    try:
        for rnd in range(args.rounds + 1):
            per = args.base if rnd == 0 else args.rows
            entries = list(src.changes(per, inserts_only=rnd == 0 or args.inserts))
            _, seen = events(log_dir, seen)
            j0, o0, t0 = jvm.cpu_times(), me.cpu_times(), time.perf_counter()
            c0 = calls.count
            calls.sites.clear()  # each round's own (BENCH_PY4J_SITES)
            options = TargetOptions(table_properties=dict(kv.split("=", 1) for kv in args.table_property))
            with ChangeMerger(
                spark, "bench", routes, options, max_rows=10**9, parallel=args.parallel
            ) as merger:
                merger.load_marks()
                merger.add_many(entries)
                counts = merger.commit(merger.take(), entries[-1].end_position)
            wall = time.perf_counter() - t0
            j1, o1 = jvm.cpu_times(), me.cpu_times()
            sent = calls.count - c0
            time.sleep(0.5)  # the event log's writer catches up
            evs, seen = events(log_dir, seen)
            work_done = spark_work(evs)
            jcpu = (j1.user - j0.user) + (j1.system - j0.system)
            ocpu = (o1.user - o0.user) + (o1.system - o0.system)
            commits = sum(c.commits for c in counts.values())
            label = "setup" if rnd == 0 else f"round {rnd}"
            print(
                f"{label:>8}: {len(entries)} changes, {commits} commits, wall {wall:.1f} s, "
                f"JVM CPU {jcpu:.1f} s "
                f"({jcpu / max(commits, 1):.3f}/commit; tasks {work_done['task_cpu']:.1f} s), operator CPU "
                f"{ocpu:.1f} s; py4j calls {sent} ({sent / max(commits, 1):.0f}/commit); "
                f"Spark jobs {work_done['jobs']:.0f}, stages {work_done['stages']:.0f}, "
                f"tasks {work_done['tasks']:.0f}; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            for site, n in calls.sites.most_common(40):
                print(f"  {n:7d}  {site}")
    finally:
        spark.stop()
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("# kept", work)


if __name__ == "__main__":
    main()
