"""One run of a destination, from the running node to the summary (no Airflow here).

::

    take the destination's running node  (waits running_timeout, then fails naming the holder)
    snapshot=initial|when_needed: snapshot (or resume the snapshot of) the tables that need one,
          else start Spark in the committer thread (while the stop point is fixed and the parser starts)
    fix the stop point; subscribe (reads the cursor; batches an earlier attempt left un-acked are
          rolled back); record the run as running
    in the committer thread: the merger on Spark, every known target's mark loaded
    reconcile the earlier attempt's batches (marks vs. lake marks), then the loop (:mod:`.loop`)
    record the run (meta store) and return the summary; release the running node

The cyclic garbage collector is paused from the parser's start to the end of the drain
(:class:`.collector.CollectorPause`). Progress goes to ``report(level, line)`` (the operator's
logs to the task log).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from airflow_provider_binlog.drain import interval as interval_ends
from airflow_provider_binlog.drain.collector import CollectorPause
from airflow_provider_binlog.drain.context import DestinationContext, run_fields, store_capacity
from airflow_provider_binlog.drain.loop import ChunkLoop, Limits, Report
from airflow_provider_binlog.drain.observe import Observing, RunObserver
from airflow_provider_binlog.drain.reconcile import chunks_said, reconcile, snapshot_ids
from airflow_provider_binlog.drain.resnapshot import clean_leftovers
from airflow_provider_binlog.drain.snapshot import SNAPSHOT_MODES, initial_snapshot, snapshot_start_marks
from airflow_provider_binlog.drain.source import (
    CASCADE_MODES,
    Cascade,
    CascadeError,
    Retention,
    cascades,
    check_retention,
    known_routes,
    shadow_named,
)

if TYPE_CHECKING:
    from airflow_provider_binlog.canal.instance import CanalInstance
    from airflow_provider_binlog.canal.routing import Routes
    from airflow_provider_binlog.lake.write.merge import ChangeMerger, TargetOptions

__all__ = ["Drain", "RunSettings", "log_report", "run_fields", "store_capacity"]

log = logging.getLogger(__name__)


def log_report(level: int, line: str) -> None:
    """The default ``report``: this module's logger."""
    log.log(level, "%s", line)


@dataclass(frozen=True)
class RunSettings:
    """What a run does beyond its routes (the operator's parameters of the same names).

    :param run_id: the run's id in the meta store's run records.
    :param label: who runs (shown in the ``running`` node and the run record).
    :param try_number: the attempt (recorded).
    :param limits: batch and chunk sizes, progress interval.
    :param running_timeout: seconds to wait for another consumer of the destination.
    :param snapshot: ``never``, ``initial`` or ``when_needed``.
    :param snapshot_chunk_size: rows per snapshot chunk.
    :param stop_spark: stop the SparkSession at the end (off when the caller owns the session).
    :param reconnect_timeout: seconds the source may stay unreachable mid-run before the run fails
        with :class:`~..canal.errors.SourceUnavailableError` (the last error and the position; the
        cursor stays where the lake is); ``None``: retry for ever. The run sets it on its instance.
    :param reconnect_attempts: also fail after this many reconnect attempts in a row (``None``: no count).
    :param retention_headroom: warn at the start of the run when the cursor's binlog file may be
        purged (by the server's age-based retention) within this fraction of the retention; the
        numbers go to the summary's ``retention`` (see :func:`.source.retention_headroom`).
    :param on_cascade: a routed table that is the child of an ``ON DELETE/UPDATE CASCADE`` or
        ``SET NULL`` foreign key (changes the ROW binlog does not hold, see :class:`.source.Cascade`):
        ``warn`` (default: one warning per constraint, listed in the summary's ``cascades``),
        ``fail`` (the run stops before reading) or ``ignore``.
    :param staging_uri: where the run stages Parquet for Spark (a path or a ``pyarrow.fs`` URI the
        executors read too; ``local``: the driver's temporary directory); ``None``: the session's
        ``spark.binlog_cdc.staging_uri``, else ``<warehouse>/_binlog_cdc_staging`` (see
        :mod:`..lake.write.staging`). The run removes what killed runs of its destination left there.
    :param interval: how a timestamp stop (an interval's end) waits for the server to reach it
        (:mod:`.interval`).
    :param maintenance: a :class:`~..lake.maintenance.MaintenancePolicy`: at the start the tables
        without bounded metadata get it, at the end the tables the run committed to are maintained
        as it says (the summary's ``maintenance``; a failure there is a warning, the run is
        committed); ``None``: neither.
    """

    run_id: str = "manual"
    label: str = ""
    try_number: int = 1
    limits: Limits = field(default_factory=Limits)
    running_timeout: float = 60.0
    snapshot: str = "never"
    snapshot_chunk_size: int = 50_000
    stop_spark: bool = True
    reconnect_timeout: float | None = 300.0
    reconnect_attempts: int | None = None
    retention_headroom: float = 0.25
    on_cascade: str = "warn"
    staging_uri: str | None = None
    interval: interval_ends.IntervalSettings = field(default_factory=interval_ends.IntervalSettings)
    maintenance: Any = None

    def __post_init__(self) -> None:
        if not 0 <= self.retention_headroom <= 1:
            raise ValueError(
                f"retention_headroom is a fraction of the retention (0..1), not {self.retention_headroom!r}"
            )
        if self.on_cascade not in CASCADE_MODES:
            raise ValueError(f"on_cascade must be one of {', '.join(CASCADE_MODES)}, not {self.on_cascade!r}")
        if self.snapshot not in SNAPSHOT_MODES:
            raise ValueError(f"snapshot must be one of {', '.join(SNAPSHOT_MODES)}, not {self.snapshot!r}")


class Drain:
    """One run of a destination (see the module docstring).

    :param instance: the destination's instance, built with :func:`~.context.run_fields` (not yet
        subscribed; one built with :func:`store_capacity` alone gets the others here); the run owns
        it from here and closes it.
    :param routes: source tables -> targets.
    :param settings: the run's settings.
    :param spark: starts the SparkSession (called in the committer thread).
    :param connect: opens a plain connection to the source (``information_schema``, snapshots).
    :param target_options: :class:`~..lake.write.merge.TargetOptions` for all targets or per target.
    :param on_schema_change: the merger's policy for DDL statements (see
        :class:`~..lake.write.merge.ChangeMerger`).
    :param report: ``report(level, line)`` for progress and decisions.
    :param observer: told the lags, commit durations and per-table counts (:mod:`.observe`).
    """

    def __init__(
        self,
        instance: CanalInstance,
        routes: Routes,
        settings: RunSettings,
        *,
        spark: Callable[[], Any],
        connect: Callable[[], Any],
        target_options: TargetOptions | Mapping[str, TargetOptions] | None = None,
        on_schema_change: str | Mapping[str, str] | None = None,
        report: Report = log_report,
        observer: RunObserver | None = None,
    ) -> None:
        # built once: what the snapshot, the re-snapshots, the cleanup and the loop read (.context)
        self.context = DestinationContext.of(instance, routes, connect, target_options, settings)
        self.instance = instance
        self.routes = routes
        self.settings = settings
        self.spark_factory = spark
        self.connect = connect
        self.target_options = target_options
        self.on_schema_change = on_schema_change
        self.report = report
        self.observing = Observing(observer, instance.config.destination, report)
        self.destination = instance.config.destination
        self.spark: Any = None  # the session, once this run started or used one
        self.session: Future[Any] | None = None  # Spark's start in the committer thread
        self.starting: Future[ChangeMerger] | None = None  # then the merger's
        self.loop: ChunkLoop | None = None
        self.retention: Retention | None = None  # the cursor file's headroom, checked at the start
        self.cascades: list[Cascade] = []  # routed children of cascading foreign keys
        self.held_at: float | None = None  # when this run took the destination (epoch seconds)
        self.snapshot_marks: dict[str, Any] = {}
        """Targets a snapshot loaded after the cursor -> the mark at its start (snapshot_start_marks)."""
        self.interval: dict[str, Any] | None = None  # an interval run's ends (the summary's)
        self.stale = False  # an earlier attempt left batches un-acked (a crash between commit and ack)
        self.held_earlier: set[str] = set()  # targets holding such batches: that attempt committed them
        self._staging_conf: tuple[Any, str | None] | None = None  # (session, its setting before)

    def _spark(self) -> Any:
        """Start (or join) the session; a run's ``staging_uri`` becomes the session's staging setting
        (so the snapshot's, the re-snapshots' and the drain's mergers all stage there) until the end."""
        spark = self.spark_factory()
        uri = self.settings.staging_uri
        if uri and self._staging_conf is None:
            from airflow_provider_binlog.lake.write.staging import STAGING_CONF

            self._staging_conf = (spark, spark.conf.get(STAGING_CONF, None))
            spark.conf.set(STAGING_CONF, uri)
        return spark

    def _make_merger(self) -> ChangeMerger:
        """In the committer thread: Spark, then the merger with every known target's mark loaded
        (the first fold of a target would wait for Spark to load its table otherwise)."""
        from airflow_provider_binlog.lake.shards.shard_writers import check_merger
        from airflow_provider_binlog.lake.sql import parse_name, quote_parts
        from airflow_provider_binlog.lake.write.merge import ChangeMerger

        spark = self.spark or (self.session.result() if self.session is not None else self._spark())
        ctx = self.context  # staging tables of killed re-snapshot attempts go first
        clean_leftovers(ctx.meta, ctx.identity, spark, self.routes.target_for, guard=ctx.guard)
        limits = self.settings.limits
        known = known_routes(self.connect, self.routes)
        merger = ChangeMerger(
            spark, self.destination, known, self.target_options,
            max_rows=limits.max_rows_per_commit + limits.batch_size + 1,
            on_schema_change=self.on_schema_change,
        )  # fmt: skip
        self._clean_staging(merger.staging.root)
        # another destination filling a target without a shard column stops here
        properties = merger.load_marks()
        check_merger(merger, properties)
        # a table snapshotted after the cursor: nothing before its snapshot's start applies to it again
        marks = snapshot_start_marks(
            ctx.meta, ctx.identity, known, lambda t: merger.marks.get(quote_parts(parse_name(t)))
        )
        for target, mark in marks.items():
            merger.put_mark(target, mark)
        self.snapshot_marks = marks
        if self.settings.maintenance is not None:
            from airflow_provider_binlog.lake.maintenance.bounded import bring_under

            policy = self.settings.maintenance  # tables without bounded metadata get it (logged once)
            bring_under(spark, properties, policy, self.report, merger.display, merger.runner.map)
        return merger

    def _clean_staging(self, root: str) -> None:
        """Remove the staging areas killed runs of this destination left (created before it was held)."""
        from airflow_provider_binlog.lake.write.staging import clean_orphans, destination_folder

        if self.held_at is None:
            return
        removed = clean_orphans(root, self.destination, self.held_at)
        if removed:
            self.report(
                logging.INFO,
                f"destination {self.destination}: removed {len(removed)} staging area(s) earlier runs "
                f"left in {destination_folder(root, self.destination)}",
            )

    def run(self, stop_at: Any = "head") -> dict[str, Any]:
        """Drain to ``stop_at`` (``head``, ``file:pos``, ``gtid:SET``, a timestamp); return the summary:
        destination, start, end, stop, batches, commits, changes, seconds, tables, timings."""
        from airflow_provider_binlog.canal.errors import PurgedPositionError

        instance, settings, report = self.instance, self.settings, self.report
        # commits run on this thread (see the loop); it first starts Spark while the parser reads
        committer = ThreadPoolExecutor(1, thread_name_prefix="binlog-cdc-commit")
        collector = CollectorPause()
        try:
            # one consumer per destination from before the snapshot to the end of the run
            instance.hold(settings.running_timeout)
            self.held_at = time.time()
            self.cascades = self._check_cascades()
            for skipped in shadow_named(self.connect, self.routes):  # never left out silently
                report(logging.WARNING, skipped.describe(self.destination))
            if settings.snapshot != "never":
                self.spark = initial_snapshot(
                    self.context, known_routes(self.connect, self.routes),
                    mode=settings.snapshot, chunk_size=settings.snapshot_chunk_size,
                    target_options=self.target_options, spark=self._spark, report=report,
                )  # fmt: skip
            else:  # the JVM starts (seconds) while the stop point is fixed and the parser starts
                self.session = committer.submit(self._spark)
            plan = interval_ends.plan_stop(instance.client, stop_at, settings.interval, report)
            stop = plan.stop
            collector.__enter__()  # from the parser's start to the end of the drain
            try:
                point = instance.subscribe(stop_at=stop, running_timeout=settings.running_timeout)
            except PurgedPositionError as exc:  # snapshot="when_needed" handled it before
                raise PurgedPositionError(
                    f"destination {self.destination}: {exc} This operator does that with "
                    'snapshot="when_needed".'
                ) from None
            report(
                logging.INFO,
                f"destination {self.destination}: reading {point} .. {stop} (start: {point.reason})",
            )
            self.retention = self._check_retention(point)
            matches = instance.config.filter.matches  # the lag is of this destination's tables only
            self.observing.lag("start", instance.client, point.position, point.skip_through is None, matches)
            instance.meta.record_run(
                instance.identity, settings.run_id, state="running", start=str(point), stop=str(stop),
                try_number=settings.try_number, label=settings.label,
            )  # fmt: skip
            # Spark reads the lake's marks (seconds, with its start) while the first chunk is read
            self.starting = committer.submit(self._make_merger)
            from airflow_provider_binlog.canal.online_copy import OnlineCopies

            ctx = self.context
            copies = OnlineCopies(
                self.destination, ctx.meta, ctx.identity, self.routes.target_for, ctx.filter, ctx.guard,
                report,
            )  # fmt: skip
            loop = self.loop = ChunkLoop(
                self.destination, instance, self.starting, committer, self.routes.target_for,
                settings.limits, report, collector.tick, resnapshot=self._resnapshot, copies=copies,
            )  # fmt: skip
            if instance.stale_marks:
                self.stale = True
                for stale in reconcile(instance.stale_marks, loop.open_merger().committed()):
                    report(logging.INFO, stale.describe())
                    self.held_earlier.update(stale.holders)
                for target, mark in self.snapshot_marks.items():  # read again from the lake there
                    loop.open_merger().put_mark(target, mark)
            with self._interval(point, plan), self.observing.commits():
                loop.run()
            if (cursor := instance.cursor) is not None:
                self.observing.lag("end", instance.client, cursor.binlog_position, cursor.included, matches)
            summary = self._finish(point, stop, loop)
            self._maintain(loop, summary)
            self._read_point(loop, summary)
            return summary
        finally:
            instance.close()
            committer.shutdown(wait=True)  # a failed attempt leaves no statement running
            if self.loop is not None:  # what the run read and committed, also when it failed
                self.observing.tables(self.loop.merger, self.loop.totals)
            collector.__exit__()
            self._close(failing=sys.exc_info()[1] is not None)

    def _interval(self, point: Any, plan: interval_ends.StopPlan) -> Any:
        """For an interval run (a timestamp stop): both ends (the summary's ``interval``) and the
        snapshot properties of every commit of the run (:mod:`.interval`); else nothing."""
        found = plan.interval
        if found is None:
            return contextlib.nullcontext()
        from airflow_provider_binlog.lake.commits import run_properties

        start = interval_ends.start_point(self.instance.client, point)
        end, stop = interval_ends.interval_ends(start, found)
        self.interval = interval_ends.summary(start, end, stop, found)
        self.report(
            logging.INFO,
            f"destination {self.destination}: interval until {self.interval['until']}: from {start} to "
            f"{end} (stop {stop}: {found.reason})",
        )
        return run_properties(self.destination, interval_ends.properties(start, end, found))

    def _check_cascades(self) -> list[Cascade]:
        """Warn about (or, with ``on_cascade="fail"``, stop for) routed tables that are children of
        cascading foreign keys: the ROW binlog misses their cascaded changes."""
        if self.settings.on_cascade == "ignore":
            return []
        found = cascades(self.connect, known_routes(self.connect, self.routes))
        for cascade in found:
            self.report(logging.WARNING, cascade.describe(self.destination))
        if found and self.settings.on_cascade == "fail":
            children = "; ".join(f"{c.child} is the child of `{c.constraint}` ({c.rules})" for c in found)
            raise CascadeError(
                f"destination {self.destination}: on_cascade='fail' and {children}: the ROW binlog misses "
                "the changes those foreign keys make; see the warnings above for the remedies"
            )
        return found

    def _check_retention(self, point: Any) -> Retention | None:
        """Report how far the start's binlog file is from being purged (a warning within the
        configured headroom); a failed check is reported and does not stop the run."""
        if point.position is None:
            return None
        return check_retention(
            self.instance.client, self.connect, self.destination, point.position.file,
            self.settings.retention_headroom, self.report,
        )  # fmt: skip

    def _resnapshot(self, exc: Any) -> Any:
        """Re-snapshot the table of a :class:`~..canal.sql.operations.ResnapshotNeeded` (on the loop's
        thread, the committer idle): at a position after its statement, under this run's running
        node, with the target's options."""
        from airflow_provider_binlog.drain.resnapshot import resnapshot
        from airflow_provider_binlog.drain.snapshot import target_options_for

        assert self.loop is not None
        merger: Any = self.loop.open_merger()
        ctx = self.context
        source = exc.table
        target = exc.target or self.routes.target_for(*source.split(".", 1))
        if target is None:
            raise exc
        return resnapshot(
            ctx.meta, ctx.identity, ctx.client, self.connect, merger.spark, source, target,
            options=target_options_for(self.target_options, target),
            chunk_size=self.settings.snapshot_chunk_size, after=exc.position, guard=ctx.guard,
            table_filter=ctx.filter,
        )  # fmt: skip

    def _finish(self, point: Any, stop: Any, loop: ChunkLoop) -> dict[str, Any]:
        instance = self.instance
        cursor = instance.cursor
        end = str(cursor.binlog_position) if cursor is not None and cursor.binlog_position else str(point)
        elapsed = time.monotonic() - loop.started
        timings = {**loop.timings, **(loop.merger.timings if loop.merger is not None else {})}
        summary = {
            "destination": self.destination,
            "start": str(point),
            "end": end,
            "stop": str(stop),
            "batches": loop.batches,
            "commits": loop.commits,
            "changes": loop.changes,
            "seconds": round(elapsed, 3),
            "tables": loop.totals,
            "timings": {k: round(v, 3) for k, v in timings.items()},
        }
        if self.retention is not None:
            summary["retention"] = self.retention.as_dict()
        if self.interval is not None:
            summary["interval"] = self.interval
        if self.cascades:
            summary["cascades"] = [c.as_dict() for c in self.cascades]
        if loop.resnapshots:
            summary["resnapshots"] = [r.as_dict() for r in loop.resnapshots]
        earlier = self._committed_earlier(loop)
        if earlier:
            summary["committed_earlier"] = earlier
        snapshots = self._snapshots(loop)
        if snapshots:
            summary["snapshots"] = snapshots
        lineage = self._lineage(loop)
        if lineage is not None:
            summary["lineage"] = lineage
        instance.meta.record_run(
            instance.identity, self.settings.run_id, state="success", end=end, tables=loop.totals
        )
        self.report(
            logging.INFO,
            f"destination {self.destination}: done, {loop.changes} changes in {loop.batches} batches, "
            f"{chunks_said(loop)}, {elapsed:.1f} s; {point} .. {end}; {loop.totals}; "
            f"seconds {summary['timings']}",
        )
        return summary

    def _committed_earlier(self, loop: ChunkLoop) -> list[str]:
        """The targets whose changes an earlier, failed attempt committed and never acked, which this
        run found in the lake (skipped) and acked: the summary's ``committed_earlier``. That attempt
        announced nothing (a failed task emits no asset event), so this run does (:mod:`..operators.assets`).
        Changes skipped for another reason (a cursor moved back by hand) are not among them."""
        if not self.stale:
            return []
        skipped = {t for t, counts in loop.totals.items() if counts.get("skipped")}
        return sorted(self.held_earlier | skipped)

    def _maintain(self, loop: ChunkLoop, summary: dict[str, Any]) -> None:
        """Maintain the tables the run committed to by ``settings.maintenance`` (the run is committed
        and acked: a failure is reported, never raised); the summary's ``maintenance``."""
        policy, merger = self.settings.maintenance, cast(Any, loop.merger)
        tables = list(summary.get("snapshots") or ())
        if policy is None or merger is None or not tables:
            return
        from airflow_provider_binlog.lake.maintenance import maintain

        try:
            summary["maintenance"] = maintain(merger.spark, tables, policy, report=self.report)
        except Exception as exc:
            self.report(
                logging.WARNING,
                f"destination {self.destination}: maintenance of {tables} after the run failed (the run's "
                f"changes are committed): {type(exc).__name__}: {exc}",
            )

    def _read_point(self, loop: ChunkLoop, summary: dict[str, Any]) -> None:
        """Tag every lake table of the destination at the run's end, after its commits and maintenance
        (:mod:`..lake.read_point`); the summary's ``read_point``. The run is committed and acked: a
        failure is reported, never raised."""
        merger: Any = loop.merger
        if merger is None and self.starting is not None and self.starting.exception() is None:
            merger = self.starting.result()  # a run without changes: the tables are tagged at its end too
        cursor = self.instance.cursor
        # exclusive: past the last batch's COMMIT (a cursor is that COMMIT's start, already taken)
        end = loop.last_end or (cursor.binlog_position if cursor is not None else None)
        if merger is None or end is None:
            return
        from airflow_provider_binlog.lake.read_point import move_read_point

        tables = sorted({merger.display(t) for t in merger.routes.values()})
        try:
            found = move_read_point(merger.spark, self.destination, tables, end, map_=merger.runner.map)
        except Exception as exc:
            self.report(
                logging.WARNING,
                f"destination {self.destination}: the read point at {end} was not moved (the run's changes "
                f"are committed; readers keep the one before): {type(exc).__name__}: {exc}",
            )
            return
        summary["read_point"] = found
        if found["moved"]:
            self.report(
                logging.INFO,
                f"destination {self.destination}: read point {found['point_tag']} (and {found['tag']}) on "
                f"{len(found['tables'])} table(s), {found['seconds']} s",
            )
        elif found.get("unchanged"):
            self.report(
                logging.INFO,
                f"destination {self.destination}: every table is at read point {found['point_tag']} still",
            )
        elif not found.get("off"):
            self.report(
                logging.WARNING if found.get("blocked") else logging.INFO,
                f"destination {self.destination}: read point not moved to {end}: {found['reason']}",
            )

    def _snapshots(self, loop: ChunkLoop) -> dict[str, str]:
        """Lake table -> its Iceberg snapshot id after this run's last commit to it (the newest
        snapshot that names this destination), for every table the run committed to: changes
        (``tables``, ``commits`` > 0), changes an earlier, failed attempt committed and this one
        acked (:meth:`_committed_earlier`) or a re-snapshot. The summary's ``snapshots``, each id
        as a string of its digits: a 64-bit id as a JSON number loses digits wherever JSON numbers
        are doubles (the Airflow UI, JavaScript). A failure to read them is reported and leaves
        them out."""
        committed = [t for t, counts in loop.totals.items() if counts.get("commits")]
        committed += [t for t in self._committed_earlier(loop) if t not in committed]
        committed += [r.target for r in loop.resnapshots if not r.gone]
        return snapshot_ids(loop.merger, committed, self.destination, self.report)

    def _lineage(self, loop: ChunkLoop) -> dict[str, Any] | None:
        """What the run committed, for lineage (:func:`..lake.verify.describe.describe_run`): the source
        tables per lake table and both sides' columns; a failure is reported and leaves it out."""
        merger: Any = loop.merger
        loaded = [(r.source, r.target) for r in loop.resnapshots if not r.gone]
        if merger is None or not (merger.sources or loaded):
            return None
        from airflow_provider_binlog.lake.verify.describe import describe_run

        try:
            return describe_run(merger.spark, merger.sources, loaded, merger.runner.map)
        except Exception as exc:
            self.report(
                logging.WARNING,
                f"destination {self.destination}: cannot describe the lake tables for lineage: "
                f"{type(exc).__name__}: {exc}",
            )
            return None

    def _close(self, failing: bool = False) -> None:
        """Close the merger and stop Spark (when this run owns it), also when they were made but never
        used; the committer thread has ended.

        :param failing: the run is failing: an error here is logged as a warning instead of raised,
            so the run's own error (what failed, where the cursor stays) is the one the task shows
            (a driver JVM that died refuses every later call, its stop too).
        """
        try:
            self._close_all()
        except Exception as exc:
            if not failing:
                raise
            self.report(
                logging.WARNING,
                f"destination {self.destination}: closing after the failure below failed too: "
                f"{type(exc).__name__}: {exc}",
            )

    def _close_all(self) -> None:
        merger: Any = self.loop.merger if self.loop is not None else None
        if merger is None and self.starting is not None and self.starting.exception() is None:
            merger = self.starting.result()  # made, never used
        if merger is not None:
            self.spark = merger.spark
        if self.spark is None and self.session is not None and self.session.exception() is None:
            self.spark = self.session.result()  # started, never used
        try:
            if merger is not None:
                merger.close()
        finally:
            self._stop_spark()

    def _stop_spark(self) -> None:
        if self.spark is not None and self.settings.stop_spark:
            from airflow_provider_binlog.lake.spark.session import stop_session

            stop_session(self.spark)
        elif self._staging_conf is not None:  # the session lives on: its own staging setting back
            from airflow_provider_binlog.lake.write.staging import STAGING_CONF

            session, before = self._staging_conf
            session.conf.unset(STAGING_CONF) if before is None else session.conf.set(STAGING_CONF, before)
