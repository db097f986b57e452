"""Benchmark: the operator's main-thread Python of a drain without Spark: folding (``collapse``) and
staging (``stage``: folded keys -> Arrow columns -> Parquet), over real decoded row changes.

``--capture``: a throwaway MariaDB gets ``bench/end_to_end.py``'s tables, base load and mixed
workload; our canal instance reads the workload's binlog range and the batches (lists of
``RowChange``) are pickled to ``--data``. Without it, the pickled batches are folded per target as
the drain folds them (:meth:`.lake.pending.Pending.add`, the routes' grouping), then every piece is
staged the way :class:`.lake.write.statements.Statements` stages it (``piece_columns`` ->
``StagingArea.write_columns``) into a temporary folder; CPU seconds of each phase are printed
(best of ``--repeat``).

    .venv/bin/python bench/fold_stage.py --capture --changes 300000    # once (~1 min)
    .venv/bin/python bench/fold_stage.py                                # the timings
    BENCH_PRODUCT=<checkout> .venv/bin/python bench/fold_stage.py       # another checkout's package
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, os.environ.get("BENCH_PRODUCT") or str(Path(__file__).resolve().parents[1]))


def capture(changes: int, base: int, out: Path) -> None:
    import end_to_end as e2e

    from airflow_provider_binlog.canal.instance import InstanceConfig
    from airflow_provider_binlog.canal.positions.points import parse_point
    from airflow_provider_binlog.canal.routing import Routes
    from airflow_provider_binlog.dev.services import MariaDbServer
    from airflow_provider_binlog.drain import Wiring
    from airflow_provider_binlog.drain.wiring import source_from_uri

    server = MariaDbServer().start()
    try:
        kinds = e2e.table_kinds(None)
        conn = server.connect()
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {e2e.SCHEMA}")
            for name, kind in kinds.items():
                cur.execute(e2e.DDL[kind].format(name=name))
        conn.close()
        w = e2e.Workload(11, kinds)
        e2e.run_sql(server, e2e.base_statements(w, base, 1000, 20_000))
        (f, p, *_), *_ = server.execute("SHOW MASTER STATUS")
        start = f"{f}:{p}"
        e2e.run_sql(server, e2e.mixed_statements(w, changes, 1000, 20_000, e2e.MIXES["mixed"], spread=False))
        (f, p, *_), *_ = server.execute("SHOW MASTER STATUS")
        stop = f"{f}:{p}"
        source = source_from_uri(server.airflow_uri(), "the bench source")
        with tempfile.TemporaryDirectory() as meta:
            routes = Routes(e2e.ROUTES).filter(None)
            config = InstanceConfig("fold-stage", source, routes, start=parse_point(start))
            inst = Wiring(meta_dir=meta).instance(config, "bench")
            batches = []
            inst.subscribe(stop_at=stop)
            try:
                while not inst.done:
                    batch = inst.get_without_ack(5000, timeout=1.0)
                    if batch.id is None:
                        continue
                    batches.append(list(batch.entries))
                    inst.ack(batch.id)
            finally:
                inst.close()
        with out.open("wb") as fh:
            pickle.dump(batches, fh, protocol=pickle.HIGHEST_PROTOCOL)
        print(f"captured {sum(map(len, batches)):,} entries in {len(batches)} batches to {out}")
    finally:
        server.stop()


def measure(batches: list[list[Any]]) -> tuple[float, float, int, int]:
    from airflow_provider_binlog.lake.ddl.ddl import lake_columns
    from airflow_provider_binlog.lake.options import ACTION_COLUMN, TargetOptions
    from airflow_provider_binlog.lake.pending import Pending
    from airflow_provider_binlog.lake.routes import TargetRoutes
    from airflow_provider_binlog.lake.types import STRING, LakeColumn
    from airflow_provider_binlog.lake.write.staging import StagingArea
    from airflow_provider_binlog.lake.write.statements import piece_columns

    routes = TargetRoutes({f"bench.{t}": f"lake.bench.{t}" for t in ("customers", "orders", "events")})
    opts = TargetOptions()
    pending: dict[str, Pending] = {}
    cpu = time.process_time
    t0 = cpu()
    for batch in batches:
        by_target, _rows = routes.split(batch)
        for target, taken in by_target.items():
            p = pending.get(target)
            if p is None:
                p = pending[target] = Pending.new(opts, None)
            p.add(taken, target)
    collapse = cpu() - t0
    held = sum(p.held for p in pending.values())
    rows = 0
    with tempfile.TemporaryDirectory() as tmp:
        area = StagingArea(tmp, "bench")
        t0 = cpu()
        for target, p in pending.items():
            schemas = [s for seg in p.segments for s in seg.values()]
            columns = lake_columns(schemas, opts, target)
            names = [c.name for c in columns]
            stage_cols = [*columns, LakeColumn(ACTION_COLUMN, STRING)]
            for piece in p.pieces:
                items = list(piece.state.items())  # type: ignore[union-attr]
                _uri, n = area.write_columns(
                    target,
                    stage_cols,
                    piece_columns(items, names, piece.keys, False, None),  # type: ignore[union-attr]
                )
                rows += n
        stage = cpu() - t0
    return collapse, stage, held, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--capture", action="store_true")
    ap.add_argument("--changes", type=int, default=300_000)
    ap.add_argument("--base", type=int, default=90_000)
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "fold_stage_batches.pkl")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.capture:
        capture(args.changes, args.base, args.data)
        return 0
    with args.data.open("rb") as fh:
        batches = pickle.load(fh)
    n = sum(map(len, batches))
    gc.disable()  # as the drain runs (drain/collector.py)
    best: tuple[float, float, int, int] | None = None
    for _ in range(args.repeat):
        r = measure(batches)
        best = r if best is None else (min(best[0], r[0]), min(best[1], r[1]), r[2], r[3])
        gc.collect()
    assert best is not None
    collapse, stage, held, rows = best
    print(f"{n:,} entries -> {held:,} row images ({rows:,} staged): collapse {collapse:.2f} CPU-s "
          f"({n / collapse:,.0f} entries/s), stage {stage:.2f} CPU-s "
          f"({rows / stage:,.0f} rows/s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
