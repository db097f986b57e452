"""BinlogToSparkOperator: drain a destination's binlog changes into Iceberg tables with Spark.

One run::

    take the destination's running node  (waits running_timeout, then fails naming the holder)
    snapshot=initial|when_needed: snapshot (or resume the snapshot of) the tables that need one
    read the cursor; reconcile batches an earlier attempt left un-acked (marks vs. lake snapshots)
    fix the stop point (head at task start by default); start Spark in the committer thread and
          load each known target's mark there (batches read meanwhile wait in the store)
    loop: get batch -> merger.add_many (folded to the last change per key at once; the batch's
          memory in the store is released, not acked) ... every max_rows_per_commit /
          max_bytes_per_commit held, or when nothing more is buffered, hand the chunk to the
          committer thread: it stages the chunk and runs MERGE INTO per target (snapshot props
          carry the position), while this thread reads the next chunk; once the commit returned,
          this thread acks the chunk's batches (the cursor moves to the last transaction end).
          One commit at a time, acks in order.
    record the run (meta store + XCom summary); release the running node

Exactly once: the cursor moves only after Spark committed; the lake remembers, per table and
destination, the last change it holds, so a retry after a crash between commit and ack skips
what is already there.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, BaseOperator

from airflow_provider_binlog.faults import failpoint

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_binlog.canal.instance import CanalInstance
    from airflow_provider_binlog.canal.routing import Routes
    from airflow_provider_binlog.lake.merge import ChangeMerger, TargetOptions

log = logging.getLogger(__name__)


class CollectorPause:
    """Python's cyclic garbage collector paused while changes are drained.

    A drain allocates millions of small container objects (row changes, positions, keys) that die
    by reference counting; the collector would scan each of them at least once, which cost the
    operator process 40% of its CPU (``bench/end_to_end.py``, 1M changes: 29.5 against 17.8
    CPU-seconds). Cycles are rare on this path, so automatic collection is off while any drain
    runs in the process, and :meth:`tick` (after each commit) runs a full collection at most every
    ``interval`` seconds, which bounds what a cycle can hold on to. The objects alive when the first
    pause began are frozen out of those collections (``gc.freeze``) and thawed when the last ends.
    """

    _lock = threading.Lock()
    _active = 0
    _was_enabled = False

    def __init__(self, interval: float = 30.0) -> None:
        self.interval = interval
        self._last = 0.0
        self._on = False

    def __enter__(self) -> CollectorPause:
        cls = type(self)
        with cls._lock:
            if cls._active == 0:
                cls._was_enabled = gc.isenabled()
                gc.disable()
                gc.freeze()
            cls._active += 1
        self._on = True
        self._last = time.monotonic()
        return self

    def tick(self) -> None:
        """Collect now if ``interval`` seconds passed since the pause began or the last collection."""
        now = time.monotonic()
        if self._on and now - self._last >= self.interval:
            gc.collect()
            self._last = now

    def __exit__(self, *exc: object) -> None:
        if not self._on:
            return
        self._on = False
        cls = type(self)
        with cls._lock:
            cls._active -= 1
            if cls._active == 0:
                gc.unfreeze()
                if cls._was_enabled:
                    gc.enable()


SPARK_MASTER_ENV = "BINLOG_CDC_SPARK_MASTER"
WAREHOUSE_ENV = "BINLOG_CDC_WAREHOUSE"
SNAPSHOT_MODES = ("never", "initial", "when_needed")


def target_asset(target: str, source: str) -> Asset | None:
    """``lake.shop.orders`` -> ``Asset("iceberg://lake/shop/orders")`` (``None`` for templated targets);
    a target that is no valid table name fails here, when the DAG is parsed."""
    if "{" in target:
        return None
    from airflow_provider_binlog.lake.sql import check_target

    return Asset(uri="iceberg://" + "/".join(check_target(target, source)))


class BinlogToSparkOperator(BaseOperator):
    """Merge the binlog changes of ``tables`` since the destination's cursor into Iceberg tables.

    :param destination: the subscription (its cursor lives under this name in the meta store).
    :param tables: source ``schema.table`` (globs allowed) -> target ``catalog.namespace.table``
        (``{schema}``/``{table}`` allowed), e.g. ``{"shop.*": "lake.shop.{table}"}``.
    :param mysql_conn_id: the source connection.
    :param zookeeper_conn_id: the meta store / HA connection; ``None`` for a local file store.
    :param meta_dir: file meta store directory (without ZooKeeper).
    :param client_id: canal client id.
    :param server_id: replica server id to register with (default: the connection's, else random).
    :param start_from: where to start when the destination has no cursor yet: ``file:pos``,
        ``gtid:SET``, an ISO timestamp, or a recorded run's summary (see :mod:`..canal.points`).
        With a cursor, the cursor wins (so a retried or resumed backfill continues where it was).
        Not allowed with ``snapshot`` other than ``never`` (the snapshot decides the start).
    :param stop_at: ``head`` (the server's head at task start), ``data_interval_end``, ``file:pos``,
        ``gtid:SET`` or a timestamp.
    :param columns: canal column filter (``schema.table:col1/col2,...``).
    :param batch_size: entries per batch taken from the store.
    :param max_rows_per_commit: row images a Spark commit holds: one per key a chunk touches (its
        changes are folded to the last per key as they are read), so it bounds memory, not the
        changes a commit applies.
    :param max_bytes_per_commit: the estimated bytes of those row images (bounds memory). The
        store's read-ahead (changes read but not yet folded) is bounded by a quarter of both.
    :param running_timeout: seconds to wait for another consumer of the destination.
    :param spark_master: Spark master (default ``$BINLOG_CDC_SPARK_MASTER`` or ``local[*]``).
    :param spark_conf: more Spark configuration (cluster, catalog, jars.packages...).
    :param catalog: the Iceberg catalog name used in targets.
    :param warehouse: warehouse of the default Hadoop catalog (default ``$BINLOG_CDC_WAREHOUSE``).
    :param target_options: :class:`~..lake.merge.TargetOptions` for all targets or per target.
    :param stop_spark: stop the SparkSession at the end (off when the caller owns the session).
    :param snapshot: ``never`` (default: only the binlog), ``initial`` (first load the tables' existing
        rows, chunk by chunk, then continue from the binlog; see :mod:`..canal.snapshot`; a killed
        snapshot resumes) or ``when_needed`` (also snapshot tables added later and, when the
        cursor's binlog was purged, every table again from a new start).
    :param snapshot_chunk_size: rows per snapshot chunk.
    """

    #: seconds between progress lines in the task log (read, in the lake, merging, lag)
    progress_interval: float = 10.0

    template_fields: Sequence[str] = (
        "destination", "tables", "start_from", "stop_at", "spark_master", "spark_conf", "warehouse",
    )  # fmt: skip
    template_fields_renderers = {"tables": "json", "spark_conf": "json"}
    ui_color = "#dbeafe"

    def __init__(
        self,
        *,
        destination: str,
        tables: Mapping[str, str],
        mysql_conn_id: str = "mysql_default",
        zookeeper_conn_id: str | None = "zookeeper_default",
        meta_dir: str | None = None,
        client_id: int = 1001,
        server_id: int | None = None,
        start_from: Any = None,
        stop_at: Any = "head",
        columns: str | None = None,
        batch_size: int = 5_000,
        max_rows_per_commit: int = 1_000_000,
        max_bytes_per_commit: int = 1024 * 1024 * 1024,
        running_timeout: float = 60.0,
        spark_master: str | None = None,
        spark_conf: dict[str, str] | None = None,
        catalog: str = "lake",
        warehouse: str | None = None,
        target_options: TargetOptions | Mapping[str, TargetOptions] | None = None,
        stop_spark: bool = True,
        snapshot: str = "never",
        snapshot_chunk_size: int = 50_000,
        **kwargs: Any,
    ) -> None:
        if "outlets" not in kwargs and isinstance(tables, Mapping):
            kwargs["outlets"] = [a for a in (target_asset(t, s) for s, t in tables.items()) if a is not None]
        super().__init__(**kwargs)
        self.destination = destination
        self.tables = tables
        self.mysql_conn_id = mysql_conn_id
        self.zookeeper_conn_id = zookeeper_conn_id
        self.meta_dir = meta_dir
        self.client_id = client_id
        self.server_id = server_id
        self.start_from = start_from
        self.stop_at = stop_at
        self.columns = columns
        self.batch_size = batch_size
        self.max_rows_per_commit = max_rows_per_commit
        self.max_bytes_per_commit = max_bytes_per_commit
        self.running_timeout = running_timeout
        self.spark_master = spark_master
        self.spark_conf = spark_conf
        self.catalog = catalog
        self.warehouse = warehouse
        self.target_options = target_options
        self.stop_spark = stop_spark
        if snapshot not in SNAPSHOT_MODES:
            raise ValueError(f"snapshot must be one of {', '.join(SNAPSHOT_MODES)}, not {snapshot!r}")
        self.snapshot = snapshot
        self.snapshot_chunk_size = snapshot_chunk_size
        self._instance: CanalInstance | None = None
        if "{{" not in str(start_from):  # a template is checked once rendered, in execute
            self._check_start_from()

    # ------------------------------------------------------------------ pieces

    def _spark(self) -> Any:
        from airflow_provider_binlog.lake.session import create_session

        return create_session(
            app_name=f"binlog-cdc-{self.destination}",
            master=self.spark_master or os.environ.get(SPARK_MASTER_ENV) or None,
            warehouse=self.warehouse or os.environ.get(WAREHOUSE_ENV) or None,
            catalog=self.catalog,
            conf=dict(self.spark_conf or {}),
        )

    def _stop_point(self, context: Context, client: Any) -> Any:
        from airflow_provider_binlog.binlog.position import BinlogPosition
        from airflow_provider_binlog.canal.points import parse_point, resolve_stop

        value = self.stop_at
        if value == "data_interval_end":
            value = context.get("data_interval_end") or "head"
        start = None
        if value not in (None, "head") and parse_point(value).gtid is not None:
            # a GTID stop is searched from the oldest binlog the server still has
            files = client.binlog_files()
            start = BinlogPosition(files[0][0], 4) if files else None
        return resolve_stop(client, value, start)

    @staticmethod
    def _known_routes(hook: Any, routes: Routes) -> dict[str, str]:
        """Source -> target for every existing source table a route matches (glob routes resolved
        against ``information_schema``), so reconciliation sees every target."""
        known: dict[str, str] = {}
        conn = hook.source_connection()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                    "WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN "
                    "('mysql', 'sys', 'information_schema', 'performance_schema')"
                )
                for schema, table in cur.fetchall():
                    target = routes.target_for(str(schema), str(table))
                    if target is not None:
                        known[f"{schema}.{table}"] = target
        finally:
            conn.close()
        return known

    def _reconcile(self, instance: CanalInstance, merger: ChangeMerger) -> None:
        """Say what the lake holds of the batches an earlier attempt took but never acked."""
        marks = merger.committed()
        for batch_id, rng in sorted(instance.stale_marks.items()):
            end = rng.end.binlog_position if rng.end is not None else None
            start = rng.start.binlog_position if rng.start is not None else None
            # a table holds the batch when its newest commit reaches the batch's last entry: the
            # commit completing a chunk records the chunk's end (just past the last event), the
            # others the position of the last row event they applied
            holders = sorted(
                t for t, m in marks.items()
                if m and end
                and ((m.end_position and m.end_position > end) or (m.position and m.position >= end))
            )  # fmt: skip
            if holders:
                self.log.info(
                    "batch %d (%s..%s) of an earlier attempt is already committed to %s: its changes are "
                    "skipped there (changes of any other table in it are applied again), then it is acked",
                    batch_id, start, end, ", ".join(holders),
                )  # fmt: skip
            else:
                self.log.info(
                    "batch %d (%s..%s) of an earlier attempt was not committed: rolled back, "
                    "it is applied again from the cursor",
                    batch_id, start, end,
                )  # fmt: skip

    # ------------------------------------------------------------------ snapshot

    def _check_start_from(self) -> None:
        """``start_from`` with a snapshot is refused: both would decide where a destination without a
        cursor starts, and a snapshot must hand over to the binlog at its own consistent position
        (an earlier start only re-reads, a later one loses changes). With a cursor both are unused."""
        if self.snapshot != "never" and self.start_from not in (None, ""):
            raise ValueError(
                f"destination {self.destination!r}: start_from={self.start_from!r} and "
                f"snapshot={self.snapshot!r} both say where a destination without a cursor starts; the "
                "snapshot continues from the binlog at its own consistent position. Remove start_from to "
                "take the snapshot, or use snapshot='never' to read the binlog from start_from without "
                "loading the existing rows"
            )

    def _key_columns(self, target: str) -> tuple[str, ...]:
        from airflow_provider_binlog.lake.merge import TargetOptions
        from airflow_provider_binlog.lake.sql import parse_name

        opts = self.target_options
        if isinstance(opts, TargetOptions):
            return opts.key_columns
        for name, value in (opts or {}).items():
            if parse_name(name) == parse_name(target):
                return value.key_columns
        return ()

    def _initial_snapshot(self, hook: Any, instance: CanalInstance, routes: Routes) -> Any:
        """Snapshot (or resume the snapshot of) the tables that need one; return the SparkSession
        it opened, or ``None`` when nothing needed a snapshot. Runs under the destination's running
        node (taken by :meth:`execute` first; every progress write checks it), and before the stop
        point is fixed, so the binlog drain that follows reaches past the snapshot's start."""
        from airflow_provider_binlog.canal.errors import StartPositionError
        from airflow_provider_binlog.canal.snapshot import RUN_KEY, Snapshot, table_key
        from airflow_provider_binlog.canal.start import check_available
        from airflow_provider_binlog.lake import commits
        from airflow_provider_binlog.lake.snapshot import LakeChunkLoader
        from airflow_provider_binlog.lake.sql import parse_name, quote_parts

        meta, ident, client = instance.meta, instance.identity, instance.client
        meta.subscribe(ident)
        cursor = meta.get_cursor(ident).value
        known = self._known_routes(hook, routes)
        if cursor is not None and cursor.binlog_position is not None and self.snapshot == "when_needed":
            try:
                check_available(client, cursor.binlog_position, "stored cursor")
            except StartPositionError as exc:
                self.log.warning(
                    "destination %s: %s; taking a new snapshot of every table", self.destination, exc
                )
                for name in meta.list_keys(ident, "snapshot"):
                    meta.delete_value(ident, f"snapshot/{name}")
                meta.delete_cursor(ident)
                cursor = None
        record = meta.get_json(ident, RUN_KEY).value
        spark = None
        if record is not None and record.get("status") == "running":
            todo = {s: t for s, t in known.items() if s in record.get("tables", [])}  # resume
        elif cursor is None and record is None:
            todo = known
        elif self.snapshot == "when_needed":  # tables never snapshotted and never loaded
            spark = self._spark()
            todo = {
                s: t for s, t in known.items()
                if meta.get_json(ident, table_key(s)).value is None
                and commits.read_mark(spark, quote_parts(parse_name(t)), self.destination) is None
            }  # fmt: skip
        else:
            todo = {}
        if not todo:
            return spark
        spark = spark or self._spark()
        loader = LakeChunkLoader(spark, self.destination, todo, self.target_options)
        try:
            result = Snapshot(
                meta, ident, client, hook.source_connection,
                {s: self._key_columns(t) for s, t in todo.items()}, loader, self.snapshot_chunk_size,
                set_cursor="if_absent", guard=instance.running.check if instance.running else None,
            ).run()  # fmt: skip
        finally:
            loader.close()
        self.log.info("destination %s: snapshot done: %s", self.destination, result.as_dict())
        return spark

    # ------------------------------------------------------------------ execute

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_binlog.canal.change import Entry
        from airflow_provider_binlog.canal.errors import PurgedPositionError
        from airflow_provider_binlog.canal.points import parse_point
        from airflow_provider_binlog.canal.routing import Routes
        from airflow_provider_binlog.hooks.binlog import BinlogHook
        from airflow_provider_binlog.lake.merge import ChangeMerger, TableCounts
        from airflow_provider_binlog.lake.sql import check_target

        self._check_start_from()
        routes = Routes(dict(self.tables))
        for pattern, name in routes.routes.items():
            check_target(name, pattern)
        ti = context["ti"]
        run_id = str(context.get("run_id") or "manual")
        label = f"{ti.dag_id}/{ti.task_id}/{run_id}/try-{ti.try_number}"
        hook = BinlogHook(self.mysql_conn_id, self.zookeeper_conn_id, self.meta_dir, self.server_id)
        start_spec = parse_point(self.start_from) if self.start_from not in (None, "") else None
        instance = hook.instance(
            self.destination, routes.filter(self.columns), self.client_id, start_spec, label,
            max_entries=self.max_rows_per_commit // 4 + self.batch_size,
            max_bytes=self.max_bytes_per_commit // 4 + 64 * 1024 * 1024,
        )  # fmt: skip
        self._instance = instance
        spark = None
        merger: ChangeMerger | None = None
        # commits run on this thread (see the loop); it first starts Spark while the parser reads
        committer = ThreadPoolExecutor(1, thread_name_prefix="binlog-cdc-commit")
        session: Future[Any] | None = None  # Spark's start, then the merger's (one thread: in order)
        starting: Future[ChangeMerger] | None = None
        collector = CollectorPause()
        try:
            # one consumer per destination from before the snapshot to the end of the run
            instance.hold(self.running_timeout)
            if self.snapshot != "never":
                spark = self._initial_snapshot(hook, instance, routes)
            else:  # the JVM starts (seconds) while the stop point is fixed and the parser starts
                session = committer.submit(self._spark)
            stop = self._stop_point(context, instance.client)
            collector.__enter__()  # from the parser's start to the end of the drain
            try:
                point = instance.subscribe(stop_at=stop, running_timeout=self.running_timeout)
            except PurgedPositionError as exc:  # snapshot="when_needed" handled it before
                raise PurgedPositionError(
                    f"destination {self.destination}: {exc} This operator does that with "
                    'snapshot="when_needed".'
                ) from None
            self.log.info(
                "destination %s: reading %s .. %s (start: %s)", self.destination, point, stop, point.reason
            )
            instance.meta.record_run(
                instance.identity, run_id, state="running", start=str(point), stop=str(stop),
                try_number=ti.try_number, label=label,
            )  # fmt: skip

            def start_merger() -> ChangeMerger:
                """Spark, then the merger with every known target's mark loaded (the first fold of a
                target would wait for Spark to load its table otherwise)."""
                made = ChangeMerger(
                    spark or (session.result() if session is not None else self._spark()),
                    self.destination, self._known_routes(hook, routes),
                    self.target_options, max_rows=self.max_rows_per_commit + self.batch_size + 1,
                )  # fmt: skip
                made.load_marks()
                return made

            # Spark reads the lake's marks (seconds, with its start) while the first chunk is read
            starting = made_merger = committer.submit(start_merger)

            def open_merger() -> ChangeMerger:
                nonlocal spark, merger
                if merger is None:
                    merger = made_merger.result()
                    spark = merger.spark
                return merger

            if instance.stale_marks:
                self._reconcile(instance, open_merger())

            totals: dict[str, dict[str, int]] = {}
            # seconds of this loop on the main thread: waiting for the parser thread, buffering
            # entries, waiting for the commit thread, acking (merger.timings splits the commits)
            timings = {"spark_start": 0.0, "wait": 0.0, "buffer": 0.0, "commit_wait": 0.0, "ack": 0.0}
            clock = time.perf_counter
            pending: list[int] = []
            batches = rows = total_rows = commits = 0
            size = 0  # estimated bytes of the changes read for the chunk
            last_end = None
            started = last_log = time.monotonic()
            # One chunk commits in the committer thread while the next one is read. A batch's memory
            # in the store is released as soon as the merger folded it (the parser refills that
            # space); its ack waits, on this thread, until the commit holding it returned.
            in_flight: tuple[Future[tuple[dict[str, TableCounts], float]], list[int], int, int] | None = None

            def commit(chunk: Any, end: Any) -> tuple[dict[str, TableCounts], float]:
                assert merger is not None
                t0 = time.monotonic()
                return merger.commit(chunk, end), time.monotonic() - t0

            def settle() -> None:
                """Wait for the running commit, then ack its batches: the cursor moves only now."""
                nonlocal in_flight, total_rows, commits
                if in_flight is None:
                    return
                future, batch_ids, n, images = in_flight
                in_flight = None
                t0 = clock()
                committed, seconds = future.result()
                for target, counts in committed.items():
                    acc = totals.setdefault(target, {})
                    for k, v in counts.as_dict().items():
                        acc[k] = acc.get(k, 0) + v
                t1 = clock()
                timings["commit_wait"] += t1 - t0
                failpoint("after_commit")
                for batch_id in batch_ids:
                    failpoint("ack")
                    instance.ack(batch_id)
                timings["ack"] += clock() - t1
                failpoint("after_ack")
                commits += 1
                total_rows += n
                self.log.info(
                    "destination %s: chunk %d in the lake: %d changes as %d row images, merged in %.1f s; "
                    "acked up to %s",
                    self.destination, commits, n, images, seconds,
                    cursor.binlog_position if (cursor := instance.cursor) is not None else None,
                )  # fmt: skip
                collector.tick()

            early: list[tuple[int, tuple[Entry, ...]]] = []  # batches taken while Spark was starting

            def feed(
                batch_id: int | None = None, entries: tuple[Entry, ...] = (), wait_for_spark: bool = False
            ) -> None:
                """Fold a batch into the merger and release it from the store, or keep it aside
                until Spark is up (the merger reads the lake's marks)."""
                nonlocal rows
                if batch_id is not None:
                    early.append((batch_id, entries))
                if merger is None and not wait_for_spark and not made_merger.done():
                    return
                if merger is None:
                    t0 = clock()
                    open_merger()
                    timings["spark_start"] += clock() - t0
                assert merger is not None
                for taken_id, taken in early:
                    rows += merger.add_many(taken, routes.target_for)
                    instance.store.release(taken_id)
                early.clear()

            while True:
                if not pending and instance.done:
                    break
                t0 = clock()
                batch = instance.get_without_ack(self.batch_size, timeout=1.0)
                t1 = clock()
                timings["wait"] += t1 - t0
                if batch.id is not None:
                    failpoint("drain")
                    batches += 1
                    pending.append(batch.id)
                    started_spark = timings["spark_start"]
                    feed(batch.id, batch.entries)
                    size += batch.size
                    last_end = batch.entries[-1].end_position
                    timings["buffer"] += clock() - t1 - (timings["spark_start"] - started_spark)
                elif not pending and in_flight is not None:  # nothing to read now: give the commit time
                    wait([in_flight[0]], timeout=0.5)
                held = merger.held if merger is not None else 0  # nothing is folded before Spark is up
                # the held images' bytes, estimated from the changes read for them
                full = held >= self.max_rows_per_commit or (
                    rows and size * held // rows >= self.max_bytes_per_commit
                )
                # Spark is idle: commit what is held rather than let the chunk grow (the last chunk,
                # merged after everything is read, stays about what one commit's time reads)
                idle = (in_flight is None or in_flight[0].done()) and held >= self.max_rows_per_commit // 10
                if pending and (batch.id is None or full or (merger is not None and idle)):
                    feed(wait_for_spark=True)
                    assert merger is not None
                    failpoint("before_commit")
                    settle()  # one commit at a time: batches are acked in order
                    images = merger.held
                    chunk = merger.take()
                    in_flight = (committer.submit(commit, chunk, last_end), pending, rows, images)
                    pending, rows, size = [], 0, 0
                elif in_flight is not None and in_flight[0].done():
                    settle()  # ack as soon as the lake has the chunk
                now = time.monotonic()
                if now - last_log >= self.progress_interval:
                    last_log = now
                    merging = in_flight[2] if in_flight is not None else 0
                    lag = instance.lag_seconds
                    self.log.info(
                        "destination %s: %d changes read (%.0f/s), %d in the lake, %d merging; "
                        "read up to %s, lag %s",
                        self.destination, total_rows + merging + rows,
                        (total_rows + merging + rows) / (now - started), total_rows, merging, last_end,
                        "unknown" if lag is None else f"{lag:.1f} s",
                    )  # fmt: skip
            settle()
            cursor = instance.cursor
            end = str(cursor.binlog_position) if cursor is not None and cursor.binlog_position else str(point)
            elapsed = time.monotonic() - started
            summary = {
                "destination": self.destination,
                "start": str(point),
                "end": end,
                "stop": str(stop),
                "batches": batches,
                "commits": commits,
                "changes": total_rows,
                "seconds": round(elapsed, 3),
                "tables": totals,
                "timings": {
                    k: round(v, 3)
                    for k, v in {**timings, **(merger.timings if merger is not None else {})}.items()
                },
            }
            instance.meta.record_run(instance.identity, run_id, state="success", end=end, tables=totals)
            self.log.info(
                "destination %s: done, %d changes in %d batches, %.1f s; %s .. %s; %s; seconds %s",
                self.destination, total_rows, batches, elapsed, point, end, totals, summary["timings"],
            )  # fmt: skip
            return summary
        finally:
            self._instance = None
            instance.close()
            committer.shutdown(wait=True)  # a failed attempt leaves no statement running
            collector.__exit__()
            if merger is None and starting is not None and starting.exception() is None:
                merger = starting.result()  # made, never used
                spark = merger.spark
            if spark is None and session is not None and session.exception() is None:
                spark = session.result()  # started, never used
            if merger is not None:
                merger.close()
            hook.close()
            if spark is not None and self.stop_spark:
                spark.stop()

    def on_kill(self) -> None:
        """Release the running node without acking anything."""
        instance = self._instance
        if instance is not None:
            instance.close()
