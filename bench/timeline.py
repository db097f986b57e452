"""Where a small run's wall time goes: a timeline probe for ``bench/end_to_end.py`` (issue #20).

Set ``BENCH_TIMELINE=1`` in a run's environment (``--variant-env BENCH_TIMELINE=1``, or exported)
and the measured run wraps the steps of :class:`~airflow_provider_binlog.drain.run.Drain` and of the
lake side in timers; after the run it prints one line per step: its thread, its start and end in
seconds after the run's start, and its duration, in order of start. Steps nest (a step's time
includes the steps it called). Nothing of the product changes; the wrappers cost microseconds.
"""

from __future__ import annotations

import functools
import importlib
import threading
import time
from typing import Any

# (module, attribute path) of the steps: the critical path of a run from its hold to its end
STEPS = (
    ("airflow_provider_binlog.drain.wiring", "Wiring.instance"),
    ("airflow_provider_binlog.drain.wiring", "Wiring.close"),
    ("airflow_provider_binlog.canal.instance", "CanalInstance.hold"),
    ("airflow_provider_binlog.canal.instance", "CanalInstance.subscribe"),
    ("airflow_provider_binlog.canal.instance", "CanalInstance.close"),
    ("airflow_provider_binlog.drain.run", "Drain._check_cascades"),
    ("airflow_provider_binlog.drain.run", "Drain._spark"),
    ("airflow_provider_binlog.drain.run", "Drain._make_merger"),
    ("airflow_provider_binlog.drain.run", "Drain._check_retention"),
    ("airflow_provider_binlog.drain.run", "Drain._finish"),
    ("airflow_provider_binlog.drain.run", "Drain._snapshots"),
    ("airflow_provider_binlog.drain.run", "Drain._lineage"),
    ("airflow_provider_binlog.drain.run", "Drain._close"),
    ("airflow_provider_binlog.drain.interval", "plan_stop"),
    ("airflow_provider_binlog.drain.observe", "Observing.lag"),
    ("airflow_provider_binlog.drain.loop", "ChunkLoop.run"),
    ("airflow_provider_binlog.lake.spark.session", "create_session"),
    ("airflow_provider_binlog.lake.spark.session", "stop_session"),
    ("airflow_provider_binlog.lake.write.merge", "ChangeMerger.load_marks"),
    ("airflow_provider_binlog.lake.write.merge", "ChangeMerger.commit"),
    ("airflow_provider_binlog.lake.write.staging", "StagingArea.for_session"),
    ("airflow_provider_binlog.lake.write.staging", "StagedViews.stage"),
    ("airflow_provider_binlog.lake.write.statements", "Statements.prepare"),
    ("airflow_provider_binlog.lake.commits", "commit"),
    ("airflow_provider_binlog.lake.commits", "load_iceberg_table"),
    ("airflow_provider_binlog.lake.ddl.ddl", "TargetTables.ensure"),
    ("airflow_provider_binlog.lake.ddl.ddl", "evolve_table"),
    ("airflow_provider_binlog.lake.commits", "Marks.get"),
    ("airflow_provider_binlog.lake.native.new_keys", "untouched_snapshot"),
    ("airflow_provider_binlog.lake.native.new_keys", "insert"),
    ("airflow_provider_binlog.lake.native.new_keys", "insert_file"),
    ("airflow_provider_binlog.lake.native.file_append", "write_file"),
    ("airflow_provider_binlog.lake.native.file_append", "data_file"),
    ("airflow_provider_binlog.lake.native.file_append", "commit_overwrite"),
    ("airflow_provider_binlog.lake.native.position_delta", "merge_file"),
    ("airflow_provider_binlog.lake.native.position_delta", "plan"),
    ("airflow_provider_binlog.lake.native.position_delta", "write_vectors"),
    ("airflow_provider_binlog.lake.native.position_delta", "commit_delta"),
    ("airflow_provider_binlog.lake.shards.shard_writers", "check_merger"),
)


class Timeline:
    """The recorded steps: (thread, name, start, end), seconds since :meth:`start`."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.spans: list[tuple[str, str, float, float]] = []
        self.lock = threading.Lock()

    def start(self) -> None:
        self.t0 = time.perf_counter()

    def wrap(self, name: str, fn: Any) -> Any:
        timeline = self

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                end = time.perf_counter()
                span = (threading.current_thread().name, name, t - timeline.t0, end - timeline.t0)
                with timeline.lock:
                    timeline.spans.append(span)

        return timed

    def install(self) -> None:
        """Wrap every step that this build has (a step missing in another checkout is left out)."""
        for module_name, path in STEPS:
            try:
                owner: Any = importlib.import_module(module_name)
                *parents, attr = path.split(".")
                for parent in parents:
                    owner = getattr(owner, parent)
                fn = getattr(owner, attr)
            except (ImportError, AttributeError):
                continue
            setattr(owner, attr, self.wrap(path, fn))
        # module-level functions imported by name elsewhere: the drain's own references
        run = importlib.import_module("airflow_provider_binlog.drain.run")
        for name in ("known_routes", "clean_leftovers"):
            if hasattr(run, name):
                setattr(run, name, self.wrap(name, getattr(run, name)))

    def wrap_sql(self) -> None:
        """Each ``spark.sql`` statement a step of its own, named by its first words."""
        from pyspark.sql import SparkSession

        sql = SparkSession.sql
        timeline = self

        def timed_sql(session: Any, query: str, *args: Any, **kwargs: Any) -> Any:
            step = timeline.wrap("sql " + " ".join(query.split())[:60], sql)
            return step(session, query, *args, **kwargs)

        SparkSession.sql = timed_sql  # type: ignore[method-assign]

    def lines(self, wall: float) -> list[str]:
        out = [f"  timeline (s after the run's start; wall {wall:.2f} s):"]
        for thread, name, start, end in sorted(self.spans, key=lambda s: s[2]):
            out.append(f"    {start:6.2f} .. {end:6.2f}  {end - start:6.3f}  {thread[:24]:<24} {name}")
        return out


def from_env(environ: dict[str, str]) -> Timeline | None:
    """A timeline when ``BENCH_TIMELINE`` is set (installed), else ``None``."""
    if not environ.get("BENCH_TIMELINE"):
        return None
    timeline = Timeline()
    timeline.install()
    timeline.wrap_sql()
    return timeline
