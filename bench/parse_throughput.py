"""Benchmark: decode a binlog of inserts and updates with this client and with python-mysql-replication.

Loads ``--rows`` inserts (default 200k) and half as many updates of an 11-column table into a
throwaway MariaDB (``airflow_provider_binlog.dev.services``), then reads the whole binlog of that
load over the replication protocol twice, in the same run, touching every value of every row image:

* ours: :class:`~airflow_provider_binlog.binlog.client.ReplicationClient` (file:pos dump up to the
  head position), every value of ``RowsEvent.rows``;
* baseline: ``pymysqlreplication.BinLogStreamReader`` from the same file:pos (non-blocking), every
  value of ``event.rows``.

Prints rows/s for both (wall clock, and the process's CPU time, which shared or busy machines
distort less) and the ratio last. Run: ``.venv/bin/python bench/parse_throughput.py``
(``--rows 20000`` for a quick run, ``--repeat N`` to take the best of N decoding passes).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchtable

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.binlog.rows import RowsEvent
from airflow_provider_binlog.dev.services import MariaDbServer

BATCH = 1000


def load(server: MariaDbServer, rows: int) -> tuple[BinlogPosition, BinlogPosition]:
    """Insert ``rows`` rows and update ``rows // 2`` of them; return the binlog start and head."""
    conn = server.connect()
    with conn.cursor() as cur:
        benchtable.create(cur)
        cur.execute("SHOW MASTER STATUS")
        f, p = cur.fetchone()[:2]
        start = BinlogPosition(f, int(p))
        benchtable.insert_rows(cur, rows, BATCH)
        for base in range(0, rows // 2, BATCH):
            hi = min(base + BATCH, rows // 2)
            cur.execute(
                "UPDATE bench.t SET qty = qty + 1, score = score / 2, name = CONCAT(name, '!') "
                "WHERE id >= %s AND id < %s",
                (base, hi),
            )
        cur.execute("SHOW MASTER STATUS")
        f, p = cur.fetchone()[:2]
        head = BinlogPosition(f, int(p))
    conn.close()
    return start, head


def touch(row: dict[str, Any]) -> int:
    n = 0
    for v in row.values():
        if v is not None:
            n += 1
    return n


def ours(server: MariaDbServer, start: BinlogPosition, head: BinlogPosition) -> tuple[int, float, float]:
    client = ReplicationClient(
        ReplicationConfig(
            host=server.host, port=server.port, user=server.repl_user, password=server.repl_password
        )
    )
    rows = 0
    t0, c0 = time.perf_counter(), time.process_time()
    with client.dump(start, stop_at=head) as stream:
        for ev in stream:
            body = ev.body
            if isinstance(body, RowsEvent) and body.table == "t":
                for r in body.rows:
                    if type(r) is tuple:
                        touch(r[0])
                        touch(r[1])
                    else:
                        touch(r)
                    rows += 1
    return rows, time.perf_counter() - t0, time.process_time() - c0


def baseline(server: MariaDbServer, start: BinlogPosition, head: BinlogPosition) -> tuple[int, float, float]:
    from pymysqlreplication.binlogstream import BinLogStreamReader
    from pymysqlreplication.event import XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    settings = {
        "host": server.host,
        "port": server.port,
        "user": server.root_user,
        "passwd": server.root_password,
    }
    stream = BinLogStreamReader(
        connection_settings=settings, server_id=987654, log_file=start.file, log_pos=start.pos,
        resume_stream=True, blocking=True, is_mariadb=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent], enable_logging=False,
    )  # fmt: skip
    rows = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for ev in stream:
        # stop at the head seen after loading (a non-blocking dump of MariaDB reconnects forever)
        done = (stream.log_file, stream.log_pos) >= (head.file, head.pos)
        if isinstance(ev, XidEvent) or ev.table != "t":
            if done:
                break
            continue
        for r in ev.rows:
            if "values" in r:
                touch(r["values"])
            else:
                touch(r["before_values"])
                touch(r["after_values"])
            rows += 1
        if done:
            break
    stream.close()
    return rows, time.perf_counter() - t0, time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000, help="inserted rows (updates: half as many)")
    ap.add_argument("--repeat", type=int, default=1, help="decoding passes per library (best is kept)")
    args = ap.parse_args(argv)
    server = MariaDbServer(server_id=1).start()
    try:
        t0 = time.perf_counter()
        start, head = load(server, args.rows)
        print(f"loaded {args.rows} inserts + {args.rows // 2} updates in {time.perf_counter() - t0:.1f} s; "
              f"binlog {start} .. {head}")  # fmt: skip
        best: dict[str, list[float]] = {"ours": [0.0, 0.0], "base": [0.0, 0.0]}
        counts = {"ours": 0, "base": 0}
        for _ in range(args.repeat):
            for key, label, run in (
                ("ours", "ours (binlog.client)     ", lambda: ours(server, start, head)),
                ("base", "python-mysql-replication ", lambda: baseline(server, start, head)),
            ):
                n, wall, cpu = run()
                counts[key] = n
                best[key] = [max(best[key][0], n / wall), max(best[key][1], n / cpu)]
                print(f"{label}: {n} rows in {wall:.2f} s = {n / wall:,.0f} rows/s "
                      f"(CPU {cpu:.2f} s = {n / cpu:,.0f} rows/s)")  # fmt: skip
        expected = args.rows + args.rows // 2
        if counts["ours"] != expected or counts["base"] != expected:
            print(f"row counts differ from {expected}: {counts}", file=sys.stderr)
            return 1
        wall_ratio = best["ours"][0] / best["base"][0]
        cpu_ratio = best["ours"][1] / best["base"][1]
        print(
            f"ratio (ours / python-mysql-replication): {wall_ratio:.1f}x wall clock,"
            f" {cpu_ratio:.1f}x CPU time"
        )
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    raise SystemExit(main())
