"""Reliability figures: the crash matrix and the sustained load, at settings larger than CI's.

Starts its own MariaDB and ZooKeeper (``airflow_provider_binlog.dev.services``) and a local Spark,
then:

1. crash matrix (:mod:`airflow_provider_binlog.dev.crash`): ``--scenarios`` scenarios of
   ``--kills`` SIGKILLs each, taking turns at the failpoints (drain, before_commit, merge_table,
   file_written, after_commit, ack, after_ack) and a timer (a random moment mid-run), each at a
   hit its run is certain to make; after each scenario the lake is compared with the source value by value and
   the ledger's append-only log must hold every change once;
2. load (:mod:`airflow_provider_binlog.dev.load`): a writer at ``--rate`` statements/s while
   ``--runs`` operator runs drain back to back; the lag after each run, then lake == source.

Prints the seed, kills per kind of kill point, divergences, and the per-run lag. Exit status 1
when anything diverged. Run::

    .venv/bin/python -u bench/reliability.py                       # 10 x 4 kills, 10 load runs
    .venv/bin/python -u bench/reliability.py --scenarios 3 --runs 4
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

from airflow_provider_binlog.dev import demo_data
from airflow_provider_binlog.dev.crash import CrashMatrix, RunSpec
from airflow_provider_binlog.dev.load import run_load
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.lake.spark.session import create_session
from airflow_provider_binlog.lake.verify.verify import verify_tables


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", type=int, default=10, help="crash-matrix scenarios")
    p.add_argument("--kills", type=int, default=4, help="kills per scenario")
    p.add_argument("--seed", type=int, default=None, help="crash-matrix seed (default: random)")
    p.add_argument("--rate", type=float, default=300.0, help="load: writer statements per second")
    p.add_argument("--runs", type=int, default=10, help="load: operator runs while the writer writes")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 20)

    with tempfile.TemporaryDirectory(prefix="binlog-cdc-reliability-") as tmp:
        work = Path(tmp)
        mariadb = MariaDbServer().start()
        zookeeper = ZooKeeperServer().start()
        warehouse = str(work / "warehouse")
        spark = create_session(
            app_name="binlog-cdc-reliability", master="local[2]", warehouse=warehouse,
            conf={"spark.sql.catalog.lake.cache-enabled": "false"},  # the runs write from other processes
        )  # fmt: skip
        failed = False
        try:
            conn = mariadb.connect()
            start = demo_data.recreate_schema(conn)
            ns = f"crash_{uuid.uuid4().hex[:8]}"
            env = {
                **os.environ,
                "AIRFLOW_CONN_MYSQL_DEFAULT": mariadb.airflow_uri(),
                "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zookeeper.airflow_uri(f"/reliability-{ns}"),
            }

            def verify(tables: dict[str, str]) -> list[str]:
                check = mariadb.connect()
                try:
                    return [d.describe() for d in verify_tables(check, spark, tables) if not d.equal]
                finally:
                    check.close()

            spec = RunSpec(f"crash-{ns}", ns, warehouse, start)
            matrix = CrashMatrix(spec, env, work, conn, spark, "lake", verify, seed=seed)
            started = time.monotonic()
            for _ in range(args.scenarios):
                failed |= matrix.scenario(args.kills).diverged
            print(matrix.report() + f"; {time.monotonic() - started:.0f} s", flush=True)
            conn.close()

            report = run_load(mariadb, zookeeper, warehouse, rate=args.rate, runs=args.runs)
            print("\n".join(report.lines()), flush=True)
            failed |= not report.equal
        finally:
            spark.stop()
            zookeeper.stop()
            mariadb.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
