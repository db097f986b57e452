"""Benchmark: initial snapshot of the 11-column benchmark table into Iceberg.

Loads ``--rows`` rows (default 1M) of the 11-column table (INT, BIGINT, VARCHAR, DECIMAL(12,4),
DATETIME(6), JSON, TEXT, DOUBLE, TINYINT, INT, DATE) into a throwaway MariaDB
(``airflow_provider_binlog.dev.services``), then snapshots it with
:class:`~airflow_provider_binlog.canal.snapshot.initial.Snapshot` into a local Iceberg table
(``--master``, default ``local[2]``) in ``--chunk-size`` chunks, and prints rows/s for the whole
snapshot and for the read side alone (SELECT + conversion + watermarks), plus this process's peak
RSS (the JVM is a separate process; its heap is Spark's setting). Run:
``.venv/bin/python bench/snapshot.py --rows 200000``.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchtable

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.canal.change import RowChange
from airflow_provider_binlog.canal.meta import MemoryMetaManager
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.snapshot.initial import Snapshot
from airflow_provider_binlog.dev.services import MariaDbServer

BATCH = 2000


def load(server: MariaDbServer, rows: int) -> None:
    conn = server.connect()
    with conn.cursor() as cur:
        benchtable.create(cur)
        benchtable.insert_rows(cur, rows, BATCH)
    conn.close()


class Loader:
    """Times the lake side; ``spark`` ``None`` = read side only (chunks are dropped)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    def reset(self, source: str) -> None:
        if self.inner is not None:
            self.inner.reset(source)

    def committed_chunk(self, source: str) -> int | None:
        return None if self.inner is None else self.inner.committed_chunk(source)

    def load(self, source: str, changes: list[RowChange]) -> None:
        t0 = time.perf_counter()
        if self.inner is not None:
            self.inner.load(source, changes)
        self.seconds += time.perf_counter() - t0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--chunk-size", type=int, default=100_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--read-only", action="store_true", help="read and convert chunks, write nothing")
    args = ap.parse_args()

    server = MariaDbServer(server_id=21).start()
    try:
        t0 = time.perf_counter()
        load(server, args.rows)
        print(f"loaded {args.rows} rows in {time.perf_counter() - t0:.1f}s", flush=True)
        src = ReplicationConfig(
            host=server.host, port=server.port, user=server.repl_user, password=server.repl_password
        )
        spark = inner = None
        if not args.read_only:
            from airflow_provider_binlog.lake.snapshot import LakeChunkLoader
            from airflow_provider_binlog.lake.spark.session import create_session

            warehouse = tempfile.mkdtemp(prefix="binlog-cdc-bench-snapshot-")
            spark = create_session("binlog-cdc-bench-snapshot", master=args.master, warehouse=warehouse)
            inner = LakeChunkLoader(spark, "bench", {"bench.t": "lake.bench.t"})
        loader = Loader(inner)
        snap = Snapshot(
            MemoryMetaManager(), ClientIdentity("bench", 1001, "bench\\.t"), ReplicationClient(src),
            lambda: server.connect(), {"bench.t": None}, loader, chunk_size=args.chunk_size,
        )  # fmt: skip
        t0 = time.perf_counter()
        result = snap.run()
        total = time.perf_counter() - t0
        rows = result.tables["bench.t"].rows
        read = total - loader.seconds
        print(
            json.dumps(
                {
                    "rows": rows,
                    "chunks": result.tables["bench.t"].chunks,
                    "seconds": round(total, 2),
                    "rows_per_s": round(rows / total),
                    "read_seconds": round(read, 2),
                    "read_rows_per_s": round(rows / read),
                    "lake_seconds": round(loader.seconds, 2),
                    "peak_rss_mb": round(peak_rss_mb(), 1),
                    "master": args.master,
                    "read_only": args.read_only,
                }
            ),
            flush=True,
        )
        if spark is not None:
            n = spark.sql("SELECT count(*) FROM lake.bench.t").collect()[0][0]
            assert n == rows, (n, rows)
            if inner is not None:
                inner.close()
            spark.stop()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
