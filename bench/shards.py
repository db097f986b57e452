"""Benchmark: three sharded sources into one Iceberg table, in parallel (as mapped tasks run) and in
sequence (one task reading every shard in turn).

Starts three throwaway MariaDB servers and a PostgreSQL (the Iceberg JDBC catalog: writers at once
need a catalog that takes concurrent commits), writes ``--changes`` row changes per server to its
``orders`` table (overlapping keys: inserts, updates, deletes in transactions of 50), then drains
them with one destination per server (:mod:`airflow_provider_binlog.dev.shard_runs`: a process per
run, ``--master`` each, shard column ``_shard`` = destination):

* ``parallel``: the three runs at once into ``lake.bench.orders_par``;
* ``sequence``: the three runs one after another into ``lake.bench.orders_seq`` (fresh destinations
  from the same start), whose one-run figure is the baseline.

Prints changes/s of each (wall time from the first start to the last end, Spark's start included,
as a task pays it), the per-run figures, the Iceberg commit conflicts the parallel runs retried, the
machine's load average before and after, and checks both tables hold the same rows. Run:
``.venv/bin/python bench/shards.py --changes 300000`` (``--changes 30000`` on a busy machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_provider_binlog.dev.services import MariaDbServer, PostgresServer
from airflow_provider_binlog.dev.shard_runs import (
    CATALOG_PASSWORD_ENV,
    ORDERS_DDL,
    SOURCE_ENV,
    ShardRun,
    ShardSpec,
    ShardWriter,
    binlog_head,
    run_all,
)


def fill(server: MariaDbServer, changes: int, seed: int) -> tuple[str, int]:
    """Create ``bench.orders`` and write about ``changes`` row changes; return (start, changes)."""
    conn = server.connect()
    head = binlog_head(conn)
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE bench")
        cur.execute(ORDERS_DDL.format(table="bench.orders"))
    conn.close()
    writer = ShardWriter(lambda: server.connect("bench"), ["orders"], seed=seed)
    while writer.changes < changes:
        writer.step(50)
    writer.stop()
    return head, writer.changes


def _changes(runs: list[ShardRun]) -> int:
    return sum(int((r.summary or {}).get("changes", 0)) for r in runs)


def _check(runs: list[ShardRun]) -> None:
    for r in runs:
        if r.returncode != 0 or r.summary is None:
            raise SystemExit(f"run {r.spec.destination} failed:\n{r.tail()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--changes", type=int, default=300_000, help="row changes per source")
    ap.add_argument("--master", default="local[1]", help="Spark master of each run")
    ap.add_argument("--commit-rows", type=int, default=200_000)
    args = ap.parse_args()
    load_before = os.getloadavg()
    servers = [MariaDbServer(server_id=71 + i) for i in range(3)]
    postgres = PostgresServer()
    with tempfile.TemporaryDirectory(prefix="binlog-cdc-bench-shards-") as tmp:
        try:
            for s in servers:
                s.start()
            postgres.start()
            db = postgres.create_database("bench_shards")
            t0 = time.monotonic()
            filled = [fill(s, args.changes, seed=i) for i, s in enumerate(servers)]
            print(
                f"filled {sum(n for _h, n in filled)} changes on 3 servers in {time.monotonic() - t0:.0f} s"
            )
            envs = []
            for s in servers:
                env = dict(os.environ)
                env[SOURCE_ENV] = f"mysql://{s.root_user}:{s.root_password}@{s.host}:{s.port}"
                env[CATALOG_PASSWORD_ENV] = postgres.password
                envs.append(env)

            def specs(kind: str) -> list[ShardSpec]:
                return [
                    ShardSpec(
                        destination=f"{kind}{i}", connection=f"mysql_{i}",
                        routes={"bench.orders": f"lake.bench.orders_{kind}"}, start_from=head,
                        meta_dir=str(Path(tmp) / "meta"), catalog="lake", catalog_uri=postgres.jdbc_url(db),
                        catalog_user=postgres.user, warehouse=str(Path(tmp) / "warehouse"),
                        commit_rows=args.commit_rows, batch_size=5000, spark_master=args.master,
                        driver_memory="1g",
                    )
                    for i, (head, _n) in enumerate(filled)
                ]  # fmt: skip

            logs = Path(tmp)
            t0 = time.monotonic()
            par = run_all(specs("par"), envs, [logs / f"par{i}.log" for i in range(3)], [None] * 3)
            par_s = time.monotonic() - t0
            _check(par)
            seq: list[ShardRun] = []
            t0 = time.monotonic()
            for i, spec in enumerate(specs("seq")):
                seq += run_all([spec], [envs[i]], [logs / f"seq{i}.log"], [None])
            seq_s = time.monotonic() - t0
            _check(seq)
            retried = sum(
                log.read_text(errors="replace").count("commit conflict on")
                for log in (logs / f"par{i}.log" for i in range(3))
            )
            n_par, n_seq = _changes(par), _changes(seq)
            print(
                f"parallel: {n_par} changes in {par_s:.1f} s = {n_par / par_s:,.0f} changes/s "
                f"(runs {', '.join(f'{r.seconds:.0f} s' for r in par)}; commit conflicts retried: {retried})"
            )
            print(
                f"sequence: {n_seq} changes in {seq_s:.1f} s = {n_seq / seq_s:,.0f} changes/s "
                f"(runs {', '.join(f'{r.seconds:.0f} s' for r in seq)})"
            )
            one = seq[0]
            print(
                f"baseline, one run alone: {_changes([one])} changes in {one.seconds:.1f} s = "
                f"{_changes([one]) / one.seconds:,.0f} changes/s"
            )
            print(f"parallel / sequence: {seq_s / par_s:.2f}x")
            print(
                f"load average (1, 5, 15 min) before {load_before}, after {os.getloadavg()}; "
                f"cores {os.cpu_count()}"
            )
            from airflow_provider_binlog.lake.spark.session import create_session, jdbc_catalog_conf

            conf = jdbc_catalog_conf(postgres.jdbc_url(db), postgres.user, postgres.password,
                                     str(Path(tmp) / "warehouse"), "lake")  # fmt: skip
            spark = create_session("bench-shards-check", master="local[1]", catalog="lake", conf=conf)
            cols = "id, customer, amount, note, updated"
            a = spark.sql(f"SELECT replace(_shard, 'par', '') AS s, {cols} FROM lake.bench.orders_par")
            b = spark.sql(f"SELECT replace(_shard, 'seq', '') AS s, {cols} FROM lake.bench.orders_seq")
            diff = a.exceptAll(b).count() + b.exceptAll(a).count()
            rows = a.count()
            spark.stop()
            source = sum(int(srv.execute("SELECT count(*) FROM bench.orders")[0][0]) for srv in servers)
            ok = not diff and rows == source
            if ok:
                print(f"check: both tables hold the same {rows} rows, as many as the sources")
            else:
                print(f"check: {diff} rows differ between the tables; {rows} lake rows, {source} source rows")
            return 0 if ok else 1
        finally:
            for s in servers:
                s.stop()
            postgres.stop()


if __name__ == "__main__":
    sys.exit(main())
