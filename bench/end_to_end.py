"""Benchmark: mixed binlog changes drained and merged into Iceberg by the drain (what
``BinlogToSparkOperator.execute`` runs: :mod:`airflow_provider_binlog.drain`).

What it does, in one run::

    throwaway MariaDB (dev.services)  --  3 tables in schema ``bench`` (INT/BIGINT/VARCHAR/DECIMAL/
                                          DATETIME/TIMESTAMP/ENUM/JSON/TEXT/DATE/DOUBLE columns)
    1. base load: ``--base`` rows (default 30% of --changes), split over the 3 tables
    2. run A (operator, not the measured one): drains the base load into fresh Iceberg tables
    3. mixed workload: exactly ``--changes`` row changes, 60% update / 25% insert / 15% delete,
       spread over the 3 tables, in transactions of ``--txn`` changes made of multi-row statements
       of up to ``--stmt`` rows (INSERT ... VALUES; INSERT ... ON DUPLICATE KEY UPDATE on live keys
       for updates, each bumping ``rev`` so every update is logged; DELETE ... WHERE id IN (...))
    4. run B, THE MEASURED RUN: ``Drain.run`` (the operator's run) drains the mixed workload (cursor
       left by run A, stop point = head at task start) and merges it into the Iceberg tables
    5. parse-only comparison on the same binlog range: our canal instance (read + decode + convert
       to RowChange, acked batch by batch, nothing merged) vs python-mysql-replication
       (``BinLogStreamReader`` into Python dicts, started at the range's GTID state: see
       :func:`mariadb_start`), every value touched in both
    6. verify: every lake table equals its source table (``lake.verify.verify.verify_tables``)

Counting: a "change" is one row image change in the binlog (one ``RowChange``): an inserted,
updated or deleted row. A multi-row statement of k rows is k changes. Transaction ends and the
base load (run A) are not counted in the measured figures. The operator's own count
(``summary["changes"]``) and the baseline's row count are both checked against ``--changes``.

Each operator run executes in its own spawned process, as an Airflow task does, so its peak RSS
(``ru_maxrss``) is the operator's alone; the Spark JVM (a child of it) is sampled with psutil.
The split comes from timing counters in the product (``summary["timings"]``: ``wait`` = consumer
blocked on the parser, ``buffer`` = routing and folding entries, of which ``collapse`` = the
folding to the last change per key, ``commit_wait`` = main thread waiting for the committer
thread; in that thread ``stage`` = Arrow/Parquet write, ``spark`` = Spark read of the staged file,
table DDL and MERGE; ``ack`` = cursor writes; all wall seconds, the threads share one GIL) plus the
parser thread's CPU seconds (psutil, by thread id), and the operator's log line per chunk. The
``--write-mode`` and ``--count-changes`` options compare against the non-default ``TargetOptions``.

    .venv/bin/python -u bench/end_to_end.py                    # 1M changes (~5 min with the baseline)
    .venv/bin/python bench/end_to_end.py --changes 100000      # a quick run
    .venv/bin/python bench/end_to_end.py --workload insert     # 1M inserts of new keys (no fold)
    .venv/bin/python bench/end_to_end.py --tables 200          # 200 tables, 500k changes, 1k-4k each
    .venv/bin/python bench/end_to_end.py --changes 10000000 --no-baseline   # a long drain
    .venv/bin/python bench/end_to_end.py --changes 100 --tables 1 --no-baseline  # a small run's split
    .venv/bin/python bench/end_to_end.py --variant-env BINLOG_CDC_X=off  # A/B of a toggle, same range
    .venv/bin/python bench/end_to_end.py --profile prof.out    # cProfile of run B's main thread
    .venv/bin/python bench/end_to_end.py --cluster             # also on a Spark standalone cluster
    .venv/bin/python bench/end_to_end.py --master spark://h:7077 --conf spark.driver.host=...
    .venv/bin/python bench/end_to_end.py --staging local,warehouse   # the staging roots compared
    .venv/bin/python bench/end_to_end.py --peer    # and the peer's glue, same ranges (bench/peer.py)

The meta store is a throwaway ZooKeeper (the product's; ``--file-meta`` for the file store). Every
measured run prints its split (Spark's start, the marks, the summed commit time), the per-table fixed
cost (Iceberg commits and table loads: count and mean time), the rates between the drain's progress
lines (read / merged changes per second, every 10 s) and the target of issue #20 its shape measures
(1M mixed: 120k changes/s and RSS < 1 GB; ``--workload insert``: 100k; ``--tables``: 60k; 1,000 changes
or fewer: under 3 s; 5M or more: RSS < 1 GB).

Variants: each Spark master (``--master``; with ``--cluster`` a standalone master and worker started
here from the PySpark installation, the worker in its own mount namespace when run as root, see
:mod:`airflow_provider_binlog.dev.topology`) and each staging root (``--staging``: ``local`` = the
driver's temporary directory, ``warehouse`` = the default ``<warehouse>/_binlog_cdc_staging``) is a
destination of its own with its own warehouse: run A of every variant loads the base, then the
workload is written once, then the measured runs B go one after the other over the same binlog
range, and their figures are printed side by side; ``--variant-env K=V`` adds a variant whose run
process has these environment variables (a product toggle measured A/B; ``BENCH_PRODUCT=<checkout>``
runs that checkout's package, e.g. a ``git worktree`` of an earlier commit; ``BENCH_MAX_MB=<n>``
runs it with ``max_bytes_per_commit`` n MiB, ``BENCH_MAX_ROWS=<n>`` with ``max_rows_per_commit``
n, ``BENCH_CONF=k=v;k2=v2`` with these Spark settings; ``BENCH_MEMPROBE=1`` prints what the memory
holds at each progress line, see ``bench/memprobe.py``). A master other than
``local`` is compared with ``local[2]`` unless ``--no-compare-local``.

Measured 2026-11-24 16:49 UTC, 2 cores (load average 1.5 at the start: other benchmarks had just
run). 1M changes, ``local[2]``, file meta store, product defaults (batch 5,000, up to 1M row images
or 1 GiB per commit, changes folded to the last per key as they are read, the tables of a chunk
merged side by side, merge-on-read format-version 3 tables, the C row decoder, the cyclic GC paused
during the drain, the driver's class archive built by ``dev.sh setup``, one shuffle partition per
core), tables of 100k rows each growing to ~133k:

* end to end 1,000,000 changes in 15.5 s = **64,585 changes/s** (target 50k/s: met); operator CPU
  9.2 s (parser thread 3.4 s), Spark JVM CPU 15.1 s;
* 2 commits: chunk 1 = 255k changes read while Spark started and loaded the marks, 202k row images,
  merged in 7.3 s; chunk 2 = 745k changes, 439k row images, merged in 4.6 s;
* peak RSS: operator process 634 MB (under the 1 GB target), Spark JVM 750 MB;
* parse only, same range: ours 115,337 changes/s vs python-mysql-replication 20,662 changes/s = 5.6x
  (it counted 1,000,030 rows: it re-reads some events after a reconnect; ours exactly 1,000,000);
* lake == source for all 3 tables (133,018 / 134,907 / 132,075 rows).

Same machine, same day: the build before this session's changes 48,564 changes/s (JVM 21.9
CPU-s); with the class archive and the marks loaded early, 8 shuffle partitions, 54.3k-57.7k in 4
runs; the final build 60.5k and 64.6k in 2 runs. The machine's speed varies by day: on 2026-11-22
the same baseline parsed 10.4k changes/s (20.7k today), and the build of then made 37,521 changes/s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import multiprocessing
import os
import queue
import random
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SCHEMA = "bench"
DDL = {  # by kind; ``{name}`` is the table's name (the kind itself, or kind_NNN with --tables)
    "customers": """
        CREATE TABLE bench.`{name}` (
            id INT UNSIGNED PRIMARY KEY, name VARCHAR(100) NOT NULL, email VARCHAR(200),
            tier ENUM('free', 'pro', 'enterprise') NOT NULL, balance DECIMAL(14, 4),
            signed_up DATETIME(6), active TINYINT(1) NOT NULL, score DOUBLE, rev INT NOT NULL
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    "orders": """
        CREATE TABLE bench.`{name}` (
            id BIGINT PRIMARY KEY, customer_id INT UNSIGNED NOT NULL, sku VARCHAR(32) NOT NULL,
            quantity SMALLINT NOT NULL, amount DECIMAL(12, 2) NOT NULL,
            status ENUM('new', 'paid', 'shipped', 'cancelled') NOT NULL, note TEXT,
            created DATETIME(6) NOT NULL, day DATE, rev INT NOT NULL
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    "events": """
        CREATE TABLE bench.`{name}` (
            id BIGINT PRIMARY KEY, kind VARCHAR(16) NOT NULL, payload JSON, ts TIMESTAMP(3) NULL,
            value DOUBLE, big BIGINT, rev INT NOT NULL
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
}
KINDS = tuple(DDL)
ROUTES = {f"{SCHEMA}.*": f"lake.{SCHEMA}.{{table}}"}
DESTINATION = "bench"


def table_kinds(tables: int | None) -> dict[str, str]:
    """Table name -> kind: the 3 kinds themselves by default, else ``tables`` tables cycling through
    the kinds (``customers_000``, ``orders_001``, ...)."""
    if tables is None:
        return {k: k for k in KINDS}
    return {f"{KINDS[i % 3]}_{i:03d}": KINDS[i % 3] for i in range(tables)}


def targets(kinds: dict[str, str]) -> dict[str, str]:
    return {f"{SCHEMA}.{t}": f"lake.{SCHEMA}.{t}" for t in kinds}


# ------------------------------------------------------------------------------------ the load


def _q(v: Any) -> str:
    """A SQL literal (the generator only makes ints, floats, None and quote-free ASCII strings)."""
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v + "'"
    return repr(v)


class Workload:
    """Generates rows and statements; keeps the live keys of each table."""

    TIERS = ("free", "pro", "enterprise")
    STATUSES = ("new", "paid", "shipped", "cancelled")
    KINDS = ("click", "view", "buy", "login", "logout")

    def __init__(self, seed: int, kinds: dict[str, str] | None = None) -> None:
        self.rng = random.Random(seed)
        self.kinds = kinds if kinds is not None else table_kinds(None)
        self.tables = tuple(self.kinds)
        self.live: dict[str, list[int]] = {t: [] for t in self.tables}
        self.next_id: dict[str, int] = {t: 1 for t in self.tables}
        cols = {
            "customers": "id name email tier balance signed_up active score rev",
            "orders": "id customer_id sku quantity amount status note created day rev",
            "events": "id kind payload ts value big rev",
        }
        self.columns = {t: tuple(cols[k].split()) for t, k in self.kinds.items()}

    def row(self, table: str, key: int) -> str:
        r = self.rng
        kind = self.kinds[table]
        if kind == "customers":
            values: tuple[Any, ...] = (
                key, f"name-{key}-{r.getrandbits(24):x}",
                None if r.random() < 0.1 else f"user{key}@example.com",
                self.TIERS[r.randrange(3)], f"{r.randrange(10**9) / 10**4:.4f}",
                f"2024-{1 + r.randrange(12):02d}-{1 + r.randrange(28):02d} "
                f"{r.randrange(24):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}.{r.randrange(10**6):06d}",
                r.randrange(2), r.random() * 1000, 0,
            )  # fmt: skip
        elif kind == "orders":
            values = (
                key, r.randrange(1, 10**6), f"SKU-{r.randrange(10**5):05d}", r.randrange(1, 100),
                f"{r.randrange(10**7) / 100:.2f}", self.STATUSES[r.randrange(4)],
                None if r.random() < 0.3 else "note " * r.randrange(1, 12),
                f"2025-{1 + r.randrange(12):02d}-{1 + r.randrange(28):02d} "
                f"10:{r.randrange(60):02d}:00.{r.randrange(10**6):06d}",
                f"2025-{1 + r.randrange(12):02d}-{1 + r.randrange(28):02d}", 0,
            )  # fmt: skip
        else:
            doc = {"k": key, "tags": ["a", str(r.randrange(97))], "ok": r.random() < 0.5}
            values = (
                key, self.KINDS[r.randrange(5)], json.dumps(doc),
                f"2025-06-{1 + r.randrange(28):02d} {r.randrange(24):02d}:00:00.{r.randrange(1000):03d}",
                r.random(), r.getrandbits(62), 0,
            )  # fmt: skip
        return "(" + ",".join(map(_q, values)) + ")"

    def insert(self, table: str, n: int) -> str:
        first = self.next_id[table]
        self.next_id[table] = first + n
        self.live[table].extend(range(first, first + n))
        cols = ",".join(self.columns[table])
        return f"INSERT INTO {SCHEMA}.`{table}` ({cols}) VALUES " + ",".join(
            self.row(table, k) for k in range(first, first + n)
        )

    def update(self, table: str, n: int) -> str:
        keys = self.rng.sample(self.live[table], n)
        cols = self.columns[table]
        sets = ",".join(f"{c}=VALUES({c})" for c in cols[1:-1]) + ",rev=rev+1"
        return (
            f"INSERT INTO {SCHEMA}.`{table}` ({','.join(cols)}) VALUES "
            + ",".join(self.row(table, k) for k in keys)
            + f" ON DUPLICATE KEY UPDATE {sets}"
        )

    def delete(self, table: str, n: int) -> str:
        live = self.live[table]
        picks = sorted(self.rng.sample(range(len(live)), n), reverse=True)
        keys = []
        for i in picks:  # swap-remove, highest index first
            keys.append(live[i])
            live[i] = live[-1]
            live.pop()
        return f"DELETE FROM {SCHEMA}.`{table}` WHERE id IN ({','.join(map(str, keys))})"


def run_sql(server: Any, statements: Any) -> None:
    conn = server.connect(SCHEMA)
    conn.autocommit(False)
    try:
        with conn.cursor() as cur:
            for stmt in statements:
                if stmt == "COMMIT":
                    conn.commit()
                else:
                    cur.execute(stmt)
        conn.commit()
    finally:
        conn.close()


def base_statements(w: Workload, rows: int, stmt: int, txn: int) -> Any:
    per_table = rows // len(w.tables)
    in_txn = 0
    for table in w.tables:
        done = 0
        while done < per_table:
            n = min(stmt, per_table - done)
            yield w.insert(table, n)
            done += n
            in_txn += n
            if in_txn >= txn:
                yield "COMMIT"
                in_txn = 0


MIXES = {  # --workload: percent insert, update, delete
    "mixed": (25, 60, 15),
    "insert": (100, 0, 0),
}


def table_budgets(rng: random.Random, tables: tuple[str, ...], changes: int) -> dict[str, int]:
    """``changes`` split over ``tables`` with weights drawn from 1,000..4,000 (with 200 tables and
    500k changes: 1k-4k changes per table, 2.5k on average)."""
    weights = [rng.randint(1_000, 4_000) for _ in tables]
    total = sum(weights)
    budgets = {t: changes * w // total for t, w in zip(tables, weights, strict=True)}
    budgets[tables[-1]] += changes - sum(budgets.values())
    return budgets


def _split(changes: int, mix: tuple[int, int, int]) -> dict[str, int]:
    ins, upd = changes * mix[0] // 100, changes * mix[1] // 100
    return {"insert": ins, "update": upd, "delete": changes - ins - upd}


def mixed_statements(
    w: Workload,
    changes: int,
    stmt: int,
    txn: int,
    mix: tuple[int, int, int] = MIXES["mixed"],
    spread: bool = False,
) -> Any:
    """Exactly ``changes`` row changes, ``mix`` percent insert / update / delete, interleaved.

    The tables of a statement are drawn uniformly, or with ``spread`` each table has its share from
    :func:`table_budgets`, split by ``mix`` (the ``--tables`` workload).
    """  # fmt: skip
    rng = w.rng
    tables = w.tables
    if spread:
        left = {t: _split(n, mix) for t, n in table_budgets(rng, tables, changes).items()}
    else:
        left = {"": _split(changes, mix)}
    in_txn = 0
    stuck = 0
    while left:
        if spread:
            open_ = list(left)
            key = rng.choices(open_, weights=[sum(left[t].values()) for t in open_])[0]
        else:
            key = ""
        ops = left[key]
        op = rng.choices([o for o, n in ops.items() if n], weights=[n for n in ops.values() if n])[0]
        table = key or tables[rng.randrange(len(tables))]
        n = min(rng.randint(stmt // 2, stmt), ops[op])
        if op != "insert":
            n = min(n, len(w.live[table]) - 1)
            if n <= 0:
                stuck += 1
                if stuck > 100_000:
                    raise SystemExit(f"the workload generator is stuck ({ops}): give a larger --base")
                continue
        ops[op] -= n
        if not any(ops.values()):
            del left[key]
        in_txn += n
        yield getattr(w, op)(table, n)
        if in_txn >= txn:
            yield "COMMIT"
            in_txn = 0


# ------------------------------------------------------------------------------------ one operator run


def _rss_sampler(stop: threading.Event, out: dict[str, float]) -> None:
    import psutil

    me = psutil.Process()
    parser_cpu = 0.0
    while True:
        try:
            kids = me.children(recursive=True)
            jvm = sum(k.memory_info().rss for k in kids if "java" in k.name())
            out["jvm_peak"] = max(out.get("jvm_peak", 0), jvm)
            out["self_peak_sampled"] = max(out.get("self_peak_sampled", 0), me.memory_info().rss)
            names = {t.native_id: t.name for t in threading.enumerate()}
            for t in me.threads():
                if names.get(t.id, "").startswith("canal-"):
                    parser_cpu = max(parser_cpu, t.user_time + t.system_time)
            out["parser_cpu"] = parser_cpu
            out["jvm_cpu"] = sum(sum(k.cpu_times()[:2]) for k in kids if "java" in k.name())
        except Exception:  # a child may vanish between the listing and the read
            pass
        if stop.wait(0.25):
            return


def _drain(params: dict[str, Any], destination: str) -> Any:
    """The canal instance and the drain of one run, from plain config (what the operator builds
    from its parameters and connections), and the wiring to close after it."""
    from airflow_provider_binlog.canal.instance import InstanceConfig
    from airflow_provider_binlog.canal.positions.points import parse_point
    from airflow_provider_binlog.canal.routing import Routes
    from airflow_provider_binlog.drain import (
        Drain,
        Limits,
        RunSettings,
        Wiring,
        ZooKeeperConfig,
        source_connection,
        store_capacity,
    )
    from airflow_provider_binlog.drain.wiring import source_from_uri
    from airflow_provider_binlog.lake.spark.session import create_session
    from airflow_provider_binlog.lake.write.merge import TargetOptions

    source = source_from_uri(params["source_uri"], "the bench source")
    zk = ZooKeeperConfig.from_uri(params["zk_uri"], "the bench ZooKeeper") if params["zk_uri"] else None
    wiring = Wiring(zk, params["meta_dir"])
    routes = Routes(ROUTES)
    limits = Limits(
        params["batch_size"],
        **{k: v for k, v in (("max_rows_per_commit", params["max_rows"]),
                             ("max_bytes_per_commit", params["max_bytes"])) if v is not None},
    )  # fmt: skip
    start = parse_point(params["start_from"]) if params["start_from"] else None
    config = InstanceConfig(
        destination,
        source,
        routes.filter(None),
        **({"start": start} if start else {}),
        **store_capacity(limits),
    )
    label = f"bench_end_to_end/{params['task_id']}"
    settings = RunSettings(
        run_id=params["task_id"], label=label, limits=limits, staging_uri=params.get("staging_uri")
    )
    opts = {k: params[k] for k in ("write_mode", "count_changes") if params[k] is not None}

    def spark() -> Any:
        t0 = time.perf_counter()
        try:
            return create_session(
                app_name=f"binlog-cdc-{destination}", master=params["master"], warehouse=params["warehouse"],
                conf={"spark.driver.memory": params["driver_memory"], **params["conf"]},
            )  # fmt: skip
        finally:
            probe.spent("spark_start", time.perf_counter() - t0)

    drain = Drain(
        wiring.instance(config, label), routes, settings, spark=spark,
        connect=lambda: source_connection(source), target_options=TargetOptions(**opts) if opts else None,
        observer=probe,
    )  # fmt: skip
    return drain, wiring


class Probe:
    """The run's split, measured from outside the product: Spark's start (the session factory), the
    marks (``ChangeMerger.load_marks``: every known table loaded), each Iceberg table load
    (``lake.commits.load_iceberg_table``), each commit (the run's observer, retries included) and the
    progress lines' counts (rates per interval)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.commits: list[float] = []
        self.loads: list[float] = []
        self.progress: list[tuple[float, int, int, int]] = []  # (monotonic, read, in the lake, RSS)
        self.lock = threading.Lock()

    def spent(self, what: str, seconds: float) -> None:
        with self.lock:
            self.seconds[what] = self.seconds.get(what, 0.0) + seconds

    # the observer (drain/observe.py)
    def lag(self, when: str, seconds: float) -> None:
        pass

    def commit(self, table: str, seconds: float) -> None:
        with self.lock:
            self.commits.append(seconds)

    def tables(self, read: Any, merged: Any) -> None:
        pass

    def install(self) -> None:
        """Wrap the product's table load and mark loading (this process only)."""
        import logging
        import re

        from airflow_provider_binlog.lake import commits
        from airflow_provider_binlog.lake.write import merge

        load = commits.load_iceberg_table

        def timed_load(spark: Any, name: str) -> Any:
            t0 = time.perf_counter()
            try:
                return load(spark, name)
            finally:
                with self.lock:
                    self.loads.append(time.perf_counter() - t0)

        commits.load_iceberg_table = timed_load  # type: ignore[assignment]
        load_marks = merge.ChangeMerger.load_marks

        def timed_marks(merger: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return load_marks(merger)
            finally:
                self.spent("marks", time.perf_counter() - t0)

        merge.ChangeMerger.load_marks = timed_marks  # type: ignore[method-assign]
        import psutil

        line = re.compile(r"(\d+) changes read \(.*?\), (\d+) in the lake")
        probe = self
        me = psutil.Process()
        from memprobe import from_env  # BENCH_MEMPROBE=1|trace: what grows (bench/memprobe.py)

        mem = from_env()

        class Progress(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                m = line.search(record.getMessage())
                if m:
                    probe.progress.append((time.monotonic(), int(m[1]), int(m[2]), me.memory_info().rss))
                    if mem is not None:
                        mem.at_progress(probe.progress[-1][3])

        logging.getLogger().addHandler(Progress())

    def result(self) -> dict[str, Any]:
        return {
            "split": dict(self.seconds), "commit_times": list(self.commits),
            "load_times": list(self.loads), "progress": list(self.progress),
        }  # fmt: skip


probe = Probe()


def operator_run(params: dict[str, Any], result: Any) -> None:
    """Child process: one drain run (what ``BinlogToSparkOperator.execute`` runs; optionally under
    cProfile)."""
    os.environ.update(params["env"])
    if params["env"].get("BENCH_MAX_MB"):  # a variant's max_bytes_per_commit (A/B of the limit)
        params = {**params, "max_bytes": int(params["env"]["BENCH_MAX_MB"]) << 20}
    if params["env"].get("BENCH_MAX_ROWS"):  # a variant's max_rows_per_commit
        params = {**params, "max_rows": int(params["env"]["BENCH_MAX_ROWS"])}
    if params["env"].get("BENCH_CONF"):  # a variant's Spark settings, "k=v;k2=v2"
        more = dict(kv.split("=", 1) for kv in params["env"]["BENCH_CONF"].split(";"))
        params = {**params, "conf": {**params["conf"], **more}}
    if params["env"].get("BENCH_PRODUCT"):  # another checkout's package (an A/B of two builds)
        sys.path.insert(0, params["env"]["BENCH_PRODUCT"])
    import logging

    logging.basicConfig(level=logging.INFO, format="    [op] %(message)s", force=True)
    for noisy in ("py4j", "airflow", "kazoo"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    import airflow_provider_binlog.drain  # noqa: F401  (imported before the clock starts, as the operator is)

    probe.install()
    from timeline import from_env as timeline_from_env  # BENCH_TIMELINE=1: bench/timeline.py

    timeline = timeline_from_env(dict(os.environ))

    stop = threading.Event()
    samples: dict[str, float] = {}
    sampler = threading.Thread(target=_rss_sampler, args=(stop, samples), daemon=True)
    sampler.start()
    cpu0 = os.times()
    t0 = time.perf_counter()
    if timeline is not None:
        timeline.start()
    drain, wiring = _drain(params, params.get("destination", DESTINATION))
    try:
        if params["profile"]:
            import cProfile

            prof = cProfile.Profile()
            summary = prof.runcall(drain.run, "head")
            prof.dump_stats(params["profile"])
        else:
            summary = drain.run("head")
    finally:
        wiring.close()
    wall = time.perf_counter() - t0
    cpu1 = os.times()
    stop.set()
    sampler.join()
    if timeline is not None:
        print("\n".join(timeline.lines(wall)), flush=True)
    result.put(
        {
            "summary": summary,
            "wall": wall,
            "cpu": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
            "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            **samples,
            **probe.result(),
        }
    )


def run_operator(params: dict[str, Any], target: Any = None) -> dict[str, Any]:
    """``target(params, queue)`` (default :func:`operator_run`) in a spawned process: its result."""
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=target or operator_run, args=(params, q))
    p.start()
    try:
        out: dict[str, Any] | None = None
        while out is None:  # an operator process that died without a result ends the wait
            alive = p.is_alive()  # before the wait: a result put just before the end is still read
            try:
                out = q.get(timeout=5)
            except queue.Empty:
                if not alive:
                    p.join()
                    raise SystemExit(
                        f"operator run {params['task_id']} died without a result (exit {p.exitcode})"
                    ) from None
    except KeyboardInterrupt:
        p.terminate()
        raise
    p.join()
    if p.exitcode != 0:
        raise SystemExit(f"operator run {params['task_id']} failed (exit {p.exitcode})")
    return out


# ------------------------------------------------------------------------------------ parse-only


def touch(image: dict[str, Any] | None) -> int:
    n = 0
    if image:
        for v in image.values():
            if v is not None:
                n += 1
    return n


def ours_parse(source_uri: str, start: str, stop: Any, meta_dir: str) -> tuple[int, float]:
    """Our canal instance (parser thread: read, decode, filter, convert) drained to ``stop``."""
    from airflow_provider_binlog.canal.change import RowChange
    from airflow_provider_binlog.canal.instance import InstanceConfig
    from airflow_provider_binlog.canal.positions.points import parse_point
    from airflow_provider_binlog.canal.routing import Routes
    from airflow_provider_binlog.drain import Wiring
    from airflow_provider_binlog.drain.wiring import source_from_uri

    source = source_from_uri(source_uri, "the bench source")
    config = InstanceConfig("bench-parse-only", source, Routes(ROUTES).filter(None), start=parse_point(start))
    inst = Wiring(meta_dir=meta_dir).instance(config, "bench")
    rows = 0
    t0 = time.perf_counter()
    inst.subscribe(stop_at=stop)
    try:
        while not inst.done:
            batch = inst.get_without_ack(5000, timeout=1.0)
            if batch.id is None:
                continue
            for e in batch.entries:
                if type(e) is RowChange:
                    touch(e.before)
                    touch(e.after)
                    rows += 1
            inst.ack(batch.id)
    finally:
        inst.close()
    return rows, time.perf_counter() - t0


def mariadb_start(settings: dict[str, Any], start: str) -> dict[str, Any]:
    """The ``BinLogStreamReader`` arguments that start a stream from MariaDB at ``start`` (``file:pos``).

    With ``is_mariadb=True`` python-mysql-replication (1.0.17) ignores ``log_file`` and ``log_pos``:
    it asks for position 4 of no file name, and the server starts at the GTID state given as
    ``auto_position`` (none: at its first binlog). So the state is the server's
    ``BINLOG_GTID_POS(file, pos)``.
    """
    import pymysql

    file, _, pos = start.rpartition(":")
    conn = pymysql.connect(
        host=settings["host"], port=settings["port"], user=settings["user"], password=settings["passwd"]
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, int(pos)))
            (state,) = cur.fetchone()
    finally:
        conn.close()
    return {"is_mariadb": True, "auto_position": state or ""}


def baseline_parse(server: Any, start: str, expected: int) -> tuple[int, float]:
    """python-mysql-replication from the same file:pos until ``expected`` row changes were read.

    Blocking mode: against MariaDB the non-blocking mode does not stop at the end of the binlog (the
    server drops the connection, the reader reconnects and re-reads); the workload is written
    before, so the loop stops at exactly ``expected`` rows.
    """
    import logging

    logging.getLogger("pymysqlreplication").setLevel(logging.ERROR)
    from pymysqlreplication.binlogstream import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    settings = {
        "host": server.host,
        "port": server.port,
        "user": server.root_user,
        "passwd": server.root_password,
    }
    stream = BinLogStreamReader(
        connection_settings=settings, server_id=987654, **mariadb_start(settings, start),
        blocking=True, only_schemas=[SCHEMA],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], enable_logging=False,
    )  # fmt: skip
    rows = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 3600
    for ev in stream:
        for r in ev.rows:
            if "values" in r:
                touch(r["values"])
            else:
                touch(r["before_values"])
                touch(r["after_values"])
            rows += 1
        if rows >= expected or time.monotonic() > deadline:
            break
    stream.close()
    return rows, time.perf_counter() - t0


# ------------------------------------------------------------------------------------ main


def _mb(n: float) -> str:
    return f"{n / 2**20:,.0f} MB"


def report_run(name: str, r: dict[str, Any], expected: int | None) -> None:
    s = r["summary"]
    n = s["changes"]
    t = s.get("timings", {})
    wall = r["wall"]
    print(f"\n{name}: {n:,} changes in {wall:.1f} s = {n / wall:,.0f} changes/s end to end "
          f"(run wall, Spark start included); drain loop {s['seconds']:.1f} s = "
          f"{n / s['seconds']:,.0f} changes/s; {s['batches']} batches, {s['commits']} commits")  # fmt: skip
    if expected is not None and n != expected:
        print(f"  !! the operator counted {n} changes, the workload made {expected}")
    if t:
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in t.items())
        print(f"  operator main thread: {parts}")
    print(f"  parser thread CPU (read+decode+convert): {r.get('parser_cpu', 0):.1f} s"
          f" = {n / max(r.get('parser_cpu', 0), 1e-9):,.0f} changes per parser-CPU-second")  # fmt: skip
    print(f"  operator process CPU (all threads) {r['cpu']:.1f} s; Spark JVM CPU {r.get('jvm_cpu', 0):.1f} s")
    print(f"  peak RSS: operator process {_mb(r['maxrss'])} (ru_maxrss); Spark JVM child "
          f"{_mb(r.get('jvm_peak', 0))} (sampled every 0.25 s)")  # fmt: skip
    tables = sorted(s["tables"].items())
    for target, counts in tables if len(tables) <= 6 else (*tables[:3], *tables[-2:]):
        print(f"  {target}: {counts}")
    if len(tables) > 6:
        print(f"  ... {len(tables)} lake tables in all")
    split = r.get("split", {})
    commits, loads = r.get("commit_times", []), r.get("load_times", [])
    merge_s = sum(commits)
    print(f"  split: Spark start {split.get('spark_start', 0):.2f} s, marks {split.get('marks', 0):.2f} s "
          f"(every known table loaded), commits {merge_s:.2f} s (summed over the commit thread), "
          f"wall {wall:.2f} s")  # fmt: skip
    if commits:
        ordered = sorted(commits)
        print(f"  per-table fixed cost: {len(commits)} Iceberg commits (MERGE/INSERT/DDL), "
              f"{merge_s / len(commits) * 1000:,.0f} ms each on average (median "
              f"{ordered[len(ordered) // 2] * 1000:,.0f} ms, max {ordered[-1] * 1000:,.0f} ms); "
              f"{len(loads)} table loads, {sum(loads) / max(len(loads), 1) * 1000:,.0f} ms each "
              f"({sum(loads):.2f} s in all)")  # fmt: skip
    progress = r.get("progress", [])
    if len(progress) >= 2:
        rates = [
            f"{(b[1] - a[1]) / (b[0] - a[0]):,.0f}/{(b[2] - a[2]) / (b[0] - a[0]):,.0f}"
            for a, b in itertools.pairwise(progress)
        ]
        print(f"  rates between progress lines (read/merged changes per s): {' '.join(rates)}")
        print(f"  operator RSS at the progress lines (MB): {' '.join(f'{p[3] >> 20}' for p in progress)}")


PEER = "peer: python-mysql-replication + pyiceberg"


def report_peer(name: str, r: dict[str, Any], expected: int) -> None:
    s = r["summary"]
    n, wall = s["changes"], r["wall"]
    print(f"\n{name}: {n:,} changes in {wall:.1f} s = {n / wall:,.0f} changes/s end to end (read and "
          f"fold {s['read']:.1f} s, pyiceberg delete/upsert {s['write']:.1f} s); {s['commits']} commits; "
          f"process CPU {r['cpu']:.1f} s; peak RSS {_mb(r['maxrss'])}")  # fmt: skip
    if n != expected:
        print(f"  !! the peer's glue counted {n} changes, the workload made {expected}")


def issue_target(args: Any, rate: float, wall: float, rss: int) -> tuple[str, bool]:
    """The target of issue #20 this run's shape measures (its text, met or not)."""
    small = rss < 2**30
    if args.changes <= 1_000:
        return "execute() under 3 s", wall < 3.0
    if args.tables:
        return ">= 60,000 changes/s", rate >= 60_000
    if args.workload == "insert":
        return ">= 100,000 changes/s", rate >= 100_000
    if args.changes >= 5_000_000:
        return "peak RSS < 1 GB (and within 80% of the 1M figure: compare by hand)", small
    return ">= 120,000 changes/s and RSS < 1 GB", rate >= 120_000 and small


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--changes", type=int, default=None,
        help="row changes in the measured run (default 1M; 500k with --tables)",
    )  # fmt: skip
    ap.add_argument(
        "--workload", choices=tuple(MIXES), default="mixed", help="mixed, or insert (new keys only)"
    )
    ap.add_argument(
        "--tables", type=int, default=None,
        help="this many source tables (default: 3), each taking 1k-4k parts of the changes",
    )  # fmt: skip
    ap.add_argument("--base", type=int, default=None, help="rows pre-loaded (default 30%% of --changes)")
    ap.add_argument("--txn", type=int, default=20_000, help="row changes per source transaction")
    ap.add_argument("--stmt", type=int, default=1_000, help="rows per multi-row statement (at most)")
    ap.add_argument("--batch-size", type=int, default=20_000, help="operator batch_size")
    ap.add_argument("--max-rows", type=int, default=None, help="operator max_rows_per_commit")
    ap.add_argument("--max-mb", type=int, default=None, help="operator max_bytes_per_commit in MiB")
    ap.add_argument(
        "--write-mode",
        choices=("copy-on-write", "merge-on-read"),
        default=None,
        help="TargetOptions.write_mode (default: the product's)",
    )
    ap.add_argument(
        "--count-changes",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="TargetOptions.count_changes (default: the product's)",
    )
    ap.add_argument("--master", default="local[2]", help="Spark master")
    ap.add_argument("--cluster", action="store_true", help="start a standalone master + worker, use it")
    ap.add_argument("--worker-cores", type=int, default=1, help="--cluster: cores of the worker")
    ap.add_argument("--worker-memory", default="2g", help="--cluster: memory of the worker")
    ap.add_argument("--executor-memory", default="1g", help="spark.executor.memory (cluster masters)")
    ap.add_argument(
        "--compare-local",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with a cluster master, also measure local[2] over the same range",
    )
    ap.add_argument(
        "--staging",
        default=None,
        help="staging roots to compare, comma-separated: local (driver's temp dir), warehouse "
        "(<warehouse>/_binlog_cdc_staging), or a path/URI (default: the product's)",
    )
    ap.add_argument("--driver-memory", default="1g", help="spark.driver.memory (the JVM heap)")
    ap.add_argument("--conf", action="append", default=[], help="more Spark configuration, key=value")
    ap.add_argument(
        "--zookeeper", dest="zookeeper", action="store_true", default=True,
        help="a throwaway ZooKeeper as meta store (the default: the product's)",
    )  # fmt: skip
    ap.add_argument("--file-meta", dest="zookeeper", action="store_false", help="the file meta store instead")
    ap.add_argument(
        "--variant-env",
        action="append",
        default=[],
        metavar="K=V[,K=V]",
        help="one more measured variant with these environment variables in its process (A/B of a "
        "product toggle over the same binlog range); repeatable",
    )
    ap.add_argument("--no-baseline", action="store_true", help="skip the parse-only comparison")
    ap.add_argument(
        "--peer", action="store_true",
        help="also the peer's glue over the same ranges: python-mysql-replication, pyiceberg (bench/peer.py)",
    )  # fmt: skip
    ap.add_argument("--peer-chunk", type=int, default=1_000_000, help="--peer: row changes folded per write")
    ap.add_argument("--no-verify", action="store_true", help="skip the lake == source check")
    ap.add_argument("--profile", default=None, help="write a cProfile of the measured run here")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    if args.changes is None:
        args.changes = 500_000 if args.tables else 1_000_000
    if args.peer:
        import peer

        if peer.missing():
            print(peer.missing(), file=sys.stderr)
            return 2
    kinds = table_kinds(args.tables)
    mix = MIXES[args.workload]
    base_rows = args.base if args.base is not None else max(3_000, args.changes * 3 // 10)

    from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
    from airflow_provider_binlog.dev.topology import LOOPBACK_DRIVER, SparkStandalone

    work = Path(tempfile.mkdtemp(prefix="binlog-cdc-bench-"))
    server = MariaDbServer().start()
    zk = ZooKeeperServer().start() if args.zookeeper else None
    cluster = None
    print(f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC; {os.cpu_count()} cores; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} (shared machine: expect noise)")  # fmt: skip
    print(
        f"MariaDB on {server.port}; meta store {'ZooKeeper ' + zk.hosts if zk else 'file'}; work dir {work}"
    )
    source_uri = server.airflow_uri()
    common = {
        "env": {}, "source_uri": source_uri, "meta_dir": str(work / "meta"),
        "zk_uri": zk.airflow_uri("/binlog-cdc-bench", timeout=15) if zk is not None else None,
        "batch_size": args.batch_size,
        "max_rows": args.max_rows, "max_bytes": None if args.max_mb is None else args.max_mb << 20,
        "driver_memory": args.driver_memory, "profile": None,
        "write_mode": args.write_mode, "count_changes": args.count_changes,
    }  # fmt: skip
    user_conf = dict(kv.split("=", 1) for kv in args.conf)
    try:
        master = args.master
        if args.cluster:
            isolate = os.geteuid() == 0
            cluster = SparkStandalone(
                work / "spark", worker_cores=args.worker_cores, worker_memory=args.worker_memory,
                isolate_worker=isolate, shared=(str(work),),
            ).start()  # fmt: skip
            master = cluster.url
            print(f"standalone cluster {master}: worker {args.worker_cores} core(s), {args.worker_memory}"
                  f"{', own mount namespace (private /tmp)' if isolate else ''}")  # fmt: skip
        masters = [master]
        if not master.startswith("local") and args.compare_local:
            masters.append("local[2]")
        stagings: list[str | None] = [x.strip() for x in args.staging.split(",")] if args.staging else [None]
        envs: list[dict[str, str]] = [{}] + [
            dict(kv.split("=", 1) for kv in spec.split(",")) for spec in args.variant_env
        ]
        variants: list[dict[str, Any]] = []
        for m, staging, env in ((m, st, e) for m in masters for st in stagings for e in envs):
            if True:
                i = len(variants)
                conf = dict(user_conf)
                if not m.startswith("local"):
                    conf = {"spark.executor.memory": args.executor_memory, **conf}
                    if cluster is not None:
                        conf = {**LOOPBACK_DRIVER, **conf}
                label = m if staging is None else f"{m}, staging {staging}"
                if env:
                    label += ", " + ",".join(f"{k}={v}" for k, v in env.items())
                variants.append({
                    **common, "label": label, "master": m, "conf": conf, "env": env,
                    "destination": DESTINATION if i == 0 else f"{DESTINATION}-{i}",
                    "warehouse": str(work / ("warehouse" if i == 0 else f"warehouse-{i}")),
                    "staging_uri": None if staging in (None, "warehouse") else staging,
                })  # fmt: skip
        conn = server.connect()
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {SCHEMA}")
            for name, kind in kinds.items():
                cur.execute(DDL[kind].format(name=name))
            cur.execute("SHOW MASTER STATUS")
            f, p = cur.fetchone()[:2]
        conn.close()
        p0 = f"{f}:{p}"
        w = Workload(args.seed, kinds)
        t0 = time.perf_counter()
        run_sql(server, base_statements(w, base_rows, args.stmt, args.txn))
        base_rows = sum(len(v) for v in w.live.values())
        print(
            f"1. base load: {base_rows:,} inserted rows in {time.perf_counter() - t0:.1f} s "
            f"(binlog from {p0})"
        )

        for v in variants:
            ra = run_operator({**v, "task_id": "run_a_base", "start_from": p0})
            report_run(f"2. run A [{v['label']}] (base load, not the measured run)", ra, base_rows)

        (f, p, *_), *_ = server.execute("SHOW MASTER STATUS")
        p1 = f"{f}:{p}"
        peer_params = {
            "settings": {"host": server.host, "port": server.port, "user": server.root_user,
                         "passwd": server.root_password},
            "warehouse": str(work / "warehouse-peer"), "sources": sorted(targets(kinds)),
            "chunk": args.peer_chunk,
        }  # fmt: skip
        if args.peer:
            pa_ = run_operator({**peer_params, "start": p0, "stop": p1}, peer.peer_run)
            report_peer("2. peer run A (base load, not the measured run)", pa_, base_rows)
        t0 = time.perf_counter()
        run_sql(server, mixed_statements(w, args.changes, args.stmt, args.txn, mix, spread=bool(args.tables)))
        load_s = time.perf_counter() - t0
        (f, p, *_), *_ = server.execute("SHOW MASTER STATUS")
        head = f"{f}:{p}"
        sizes = server.execute("SHOW BINARY LOGS")
        print(f"\n3. {args.workload} workload: {args.changes:,} changes ({mix[1]}% update, {mix[0]}% insert, "
              f"{mix[2]}% delete) over {len(kinds)} tables in "
              f"{load_s:.1f} s; binlog {p1} .. {head}; "
              f"binlog files {[(r[0], _mb(r[1])) for r in sizes]}")  # fmt: skip

        measured = []
        for v in variants:
            rb = run_operator({**v, "task_id": "run_b_measured", "start_from": None, "profile": args.profile})
            title = f"4. run B [{v['label']}], MEASURED: {args.workload} workload through the drain"
            report_run(title, rb, args.changes)
            measured.append((v, rb))
        if args.profile:
            print(f"  cProfile of the operator main thread written to {args.profile}")
        peer_b = None
        if args.peer:
            peer_b = run_operator({**peer_params, "start": p1, "stop": head}, peer.peer_run)
            report_peer(
                "4. peer run B, MEASURED: the same range through the peer's glue", peer_b, args.changes
            )

        ratio = None
        if not args.no_baseline:
            n_ours, s_ours = ours_parse(source_uri, p1, head, str(work / "meta"))
            n_base, s_base = baseline_parse(server, p1, args.changes)
            ratio = (n_ours / s_ours) / (n_base / s_base)
            print(f"\n5. parse only, same binlog range {p1} .. {head}, every value touched:")
            print(f"  ours (canal instance -> RowChange): {n_ours:,} changes in {s_ours:.1f} s = "
                  f"{n_ours / s_ours:,.0f} changes/s")  # fmt: skip
            print(f"  python-mysql-replication (dicts):   {n_base:,} changes in {s_base:.1f} s = "
                  f"{n_base / s_base:,.0f} changes/s")  # fmt: skip
            print(f"  ratio ours / python-mysql-replication: {ratio:.1f}x")
            if n_ours != args.changes or n_base != args.changes:
                print(f"  !! counts differ from {args.changes}: ours {n_ours}, baseline {n_base}")

        ok = True
        if not args.no_verify:
            from airflow_provider_binlog.lake.spark.session import create_session
            from airflow_provider_binlog.lake.verify.verify import verify_tables

            t0 = time.perf_counter()
            print("\n6. verify (lake == source, value by value):")
            lakes: list[tuple[str, str | None, Any]] = [(v["label"], v["warehouse"], None) for v in variants]
            if peer_b is not None:  # the peer's glue: its tables' metadata files
                lakes.append((PEER, None, peer_b["summary"]["metadata"]))
            for label, warehouse, metadata in lakes:
                spark = create_session(app_name="bench-verify", master="local[2]", warehouse=warehouse)
                conn = server.connect()
                try:
                    if metadata is None:
                        diffs = verify_tables(conn, spark, targets(kinds))
                    else:
                        diffs = peer.verify_peer(conn, spark, str(work / "peer-check"), metadata)
                finally:
                    conn.close()
                    spark.stop()
                ok = ok and all(d.equal for d in diffs)
                for d in diffs:
                    print(f"  [{label}] " + d.describe())
            print(f"  ({time.perf_counter() - t0:.0f} s)")

        print("\nside by side (run B):")
        for v, rb in measured:
            n, wall = rb["summary"]["changes"], rb["wall"]
            print(f"  {v['label']:<40} {n / wall:>9,.0f} changes/s  {wall:6.1f} s  operator CPU "
                  f"{rb['cpu']:5.1f} s  driver JVM CPU {rb.get('jvm_cpu', 0):5.1f} s  commits "
                  f"{rb['summary']['commits']}")  # fmt: skip
        if peer_b is not None:
            n, wall = peer_b["summary"]["changes"], peer_b["wall"]
            print(f"  {PEER:<40} {n / wall:>9,.0f} changes/s  {wall:6.1f} s  process CPU "
                  f"{peer_b['cpu']:5.1f} s  peak RSS {_mb(peer_b['maxrss'])}  commits "
                  f"{peer_b['summary']['commits']}")  # fmt: skip
        v, rb = measured[0]
        n, wall = rb["summary"]["changes"], rb["wall"]
        rate = n / wall
        what, target_ok = issue_target(args, rate, wall, rb["maxrss"])
        print(
            f"\nRESULT [{v['label']}]: {rate:,.0f} changes/s end to end ({n:,} changes, {wall:.1f} s), "
            f"operator peak RSS {_mb(rb['maxrss'])}, Spark JVM peak {_mb(rb.get('jvm_peak', 0))}"
            + (f", parse {ratio:.1f}x python-mysql-replication" if ratio else "")
            + (
                f", {rate / (peer_b['summary']['changes'] / peer_b['wall']):.1f}x the peer's glue "
                f"({peer_b['summary']['changes'] / peer_b['wall']:,.0f} changes/s)"
                if peer_b
                else ""
            )
            + f"; target {what}: {'MET' if target_ok else 'MISSED'}; "
            f"lake == source: {'yes' if ok else 'NO'}; load average now "
            + " ".join(f"{x:.1f}" for x in os.getloadavg())
        )
        return 0 if ok else 1
    finally:
        if cluster is not None:
            cluster.stop()
        if zk is not None:
            zk.stop()
        server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
