"""The exactly-once loop of one run: fold -> take -> commit in a second thread -> ack in order.

::

    get batch -> merger.add_many (folded to the last change per key at once; the batch's memory
        in the store is released, not acked) ... every max_rows_per_commit / max_bytes_per_commit
        held, when nothing more is buffered, or early when Spark is idle and a tenth of
        max_rows_per_commit is held, a hundredth of it per target on average: hand the chunk to
        the committer thread (it stages the chunk and runs MERGE INTO per target, the snapshot
        properties carrying the position) while this thread reads the next chunk; once that
        commit returned, this thread acks the chunk's batches. One commit at a time, acks in
        batch order.

The early hand-over lets Spark merge while the parser reads, but every target it holds is merged
again in the next chunk, and each MERGE has a fixed cost (about 0.4-0.6 JVM CPU-seconds for a
small table: planning, four stages, the Iceberg commit), so a chunk spread thin over many
targets (a wide destination: 200 tables of 500 row images each) waits until it is full or
nothing more is buffered. Which batches a chunk holds changes nothing else: whole batches, acked
in order once their commit returned.

Batches taken while Spark is still starting (the merger is built in the committer thread, where
it loads every known target's exactly-once mark) wait aside and are folded once it is up. They are
not released from the store until then, so an empty read while Spark starts may only mean that
the store is full of them: the loop then waits for Spark, folds them and reads on (an empty read
after that is "nothing more buffered"). Once they are folded, the store reads only a few batches
ahead (:func:`read_ahead`).

**A table re-snapshot mid-run.** When folding a batch raises
:class:`~..canal.sql.operations.ResnapshotNeeded` (a source operation on one table that the lake can only
follow by loading the table again) and the loop has a ``resnapshot`` handler: the running commit is
settled; what is held for that table is dropped; what is held for the others is committed and the
batches folded before the raising one are acked; the handler re-snapshots the table at a position
``S`` after the statement and returns the mark it left; the merger takes that mark; then the raising
batch is folded again from its start. Its entries of other targets that the lake already has, and
every change of the re-snapshotted table up to ``S``, are skipped by the marks (the statement too),
so no change is lost or applied twice; a crash anywhere in between reads the batch again after the
cursor, where the marks do the same. At the cut-over of an online schema-change tool whose copy the
run's ``copies`` followed, the re-snapshot swaps that lake copy in instead of reading the table
(:mod:`.online_copy`; every batch is screened once before its first fold, the copy rows first).

Exactly once: a batch is acked (the cursor moves) only after the commit holding it returned; a
failed commit acks nothing; the lake's marks make a retry after a crash between commit and ack
skip what is already there. Failpoints (:mod:`..faults`): ``drain`` (a batch taken),
``before_commit`` (a chunk about to be handed over), ``after_commit`` (its commit returned, nothing
acked yet), ``ack`` (before each ack), ``after_ack`` (a chunk's batches all acked).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, wait
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_provider_binlog.faults import failpoint

Report = Callable[[int, str], None]
log = logging.getLogger(__name__)


class Consumer(Protocol):
    """What the loop uses of a :class:`~..canal.instance.CanalInstance`."""

    store: Any

    def get_without_ack(self, batch_size: int = ..., timeout: float | None = ...) -> Any: ...

    def ack(self, batch_id: int) -> Any: ...

    def ack_many(self, batch_ids: Sequence[int]) -> Any: ...

    @property
    def done(self) -> bool: ...

    @property
    def cursor(self) -> Any: ...

    @property
    def lag_seconds(self) -> float | None: ...


class Merger(Protocol):
    """What the loop uses of a :class:`~..lake.write.merge.ChangeMerger`."""

    @property
    def held(self) -> int: ...

    @property
    def timings(self) -> dict[str, float]: ...

    # optional: ``targets`` (how many targets hold row images; see :func:`targets_held`)

    def add_many(self, entries: Sequence[Any], target_for: Any) -> int: ...

    def take(self) -> Any: ...

    def commit(self, chunk: Any, end: Any) -> dict[str, Any]: ...

    def committed(self) -> Mapping[str, Any]: ...

    def forget(self, target: str) -> int: ...

    def put_mark(self, target: str, mark: Any) -> None: ...


@dataclass(frozen=True)
class Limits:
    """How big a chunk grows.

    :param batch_size: entries per batch taken from the store (each batch costs a mark in the
        meta store and a call of the fold: 20,000 read 1M mixed changes 4-8% faster than 5,000).
    :param max_rows_per_commit: row images a commit holds (one per key a chunk touches).
    :param max_bytes_per_commit: the estimated bytes of those row images.
    :param progress_interval: seconds between progress lines.
    """

    batch_size: int = 20_000
    max_rows_per_commit: int = 1_000_000
    max_bytes_per_commit: int = 1024 * 1024 * 1024
    progress_interval: float = 10.0


def early_rows(limits: Limits, targets: int) -> int:
    """The row images a chunk holds before it is handed over early, Spark being idle: a tenth of
    ``max_rows_per_commit``, and a hundredth of it per target the chunk holds (with the defaults
    100k, and 10k per target: past 100 targets a chunk is handed over only when full or when
    nothing more is buffered)."""
    return max(limits.max_rows_per_commit // 10, targets * (limits.max_rows_per_commit // 100))


def read_ahead(limits: Limits) -> tuple[int, int]:
    """``(entries, estimated bytes)`` the store buffers ahead of the loop once Spark is up (the
    store's whole capacity, :func:`~.context.store_capacity`, is for the batches taken while Spark
    starts, which wait there until it is up): 8 batches, and a sixteenth of
    ``max_bytes_per_commit`` on top of 16 MiB (with the defaults 160,000 entries and 80 MiB: the
    bytes bound it first).

    The loop folds as it reads, and the parser thread and the loop share one interpreter, so a
    store read further ahead holds a chunk's worth of parsed changes more in memory and reads no
    faster: in a long drain the store was full whenever the progress line looked (255,000 changes,
    about 300 MB).
    """
    return 8 * limits.batch_size, limits.max_bytes_per_commit // 16 + 16 * 1024 * 1024


def targets_held(merger: Any) -> int:
    """How many targets the merger holds row images for (1 for a merger that does not say)."""
    return int(getattr(merger, "targets", 1)) if merger is not None else 0


@dataclass
class _InFlight:
    """The chunk the committer thread is merging."""

    future: Future[tuple[dict[str, Any], float]]
    batch_ids: list[int]
    changes: int
    images: int


class ChunkLoop:
    """One run's drain loop (see the module docstring); :meth:`run` returns when the instance is
    done and every batch is acked, or raises (then nothing past the last returned commit is acked).

    :param destination: named in the log lines.
    :param instance: the subscribed instance.
    :param merger: the merger being built in ``committer`` (Spark's start, the marks loaded).
    :param committer: one thread; the commits run there in order.
    :param target_for: ``(schema, table) -> target or None`` (the routes).
    :param limits: chunk size limits.
    :param report: ``report(level, line)`` for the task log.
    :param tick: called after each settled commit (the collector pause's tick).
    :param resnapshot: re-snapshots the table a :class:`~..canal.sql.operations.ResnapshotNeeded` names and
        returns the :class:`~..canal.snapshot.resnapshot.ResnapshotResult` (see the module docstring);
        ``None``: the error stops the run.
    :param copies: follows the shadow tables of online schema-change tools
        (:class:`~..canal.online_copy.OnlineCopies`): each batch is screened before it is folded, and a
        cut-over's re-snapshot swaps the shadow's lake copy in when it can (:mod:`.online_copy`).
    """

    def __init__(
        self,
        destination: str,
        instance: Consumer,
        merger: Future[Any],
        committer: Executor,
        target_for: Callable[[str, str], str | None],
        limits: Limits,
        report: Report,
        tick: Callable[[], None] = lambda: None,
        resnapshot: Callable[[Any], Any] | None = None,
        copies: Any = None,
    ) -> None:
        self.destination = destination
        self.instance = instance
        self.starting = merger
        self.committer = committer
        self.target_for = target_for
        self.limits = limits
        self.report = report
        self.tick = tick
        self.resnapshot = resnapshot
        self.copies = copies
        self.resolve = copies.resolver(target_for) if copies is not None else target_for
        self.resnapshots: list[Any] = []  # what each re-snapshot of this run returned
        self.merger: Merger | None = None  # set once Spark is up
        # seconds of this loop on the main thread: waiting for the parser thread, buffering
        # entries, waiting for the commit thread, acking (merger.timings splits the commits)
        self.timings = {"spark_start": 0.0, "wait": 0.0, "buffer": 0.0, "commit_wait": 0.0, "ack": 0.0}
        self.totals: dict[str, dict[str, int]] = {}
        self.batches = 0  # taken
        self.chunks = 0  # settled (committed, or found in the lake already, and acked)
        self.commits = 0  # settled chunks that wrote to the lake (the summary's ``commits``)
        self.changes = 0  # in the lake (settled commits)
        self.pending: list[int] = []  # batch ids of the chunk being read
        self.rows = 0  # changes folded into that chunk
        self.size = 0  # estimated bytes of the changes read for that chunk
        self.last_end: Any = None  # end position of the last batch taken
        self.early: list[tuple[int, Sequence[Any]]] = []  # batches taken while Spark was starting
        self.bounded = False  # whether the store's read-ahead was cut to read_ahead() (Spark is up)
        self.screened: set[int] = set()  # ids of the batches in ``early`` the copies screened
        self.in_flight: _InFlight | None = None
        self.started = self.last_log = 0.0  # set by run()

    # ------------------------------------------------------------------ Spark

    def open_merger(self) -> Merger:
        """The merger, waiting for Spark's start if needed."""
        if self.merger is None:
            self.merger = self.starting.result()
        return self.merger

    def _feed(
        self, batch_id: int | None = None, entries: Sequence[Any] = (), wait_for_spark: bool = False
    ) -> None:
        """Fold a batch into the merger and release it from the store, or keep it aside until
        Spark is up (the merger reads the lake's marks)."""
        if batch_id is not None:
            self.early.append((batch_id, entries))
        if self.merger is None and not wait_for_spark and not self.starting.done():
            return
        if self.merger is None:
            t0 = time.perf_counter()
            self.open_merger()
            self.timings["spark_start"] += time.perf_counter() - t0
        from airflow_provider_binlog.canal.sql.operations import ResnapshotNeeded

        merger = self.merger
        assert merger is not None
        early, last_raised = self.early, None
        while early:
            taken_id, taken = early[0]
            if self.copies is not None and taken_id not in self.screened:
                # once per batch, in order, after the run's start settled the copies (Spark is up);
                # a re-fold reuses the screened list
                taken = self.copies.screen(taken)
                early[0] = (taken_id, taken)
                self.screened.add(taken_id)
            try:
                self.rows += merger.add_many(taken, self.resolve)
            except ResnapshotNeeded as exc:
                if self.resnapshot is None or (exc.table, exc.position) == last_raised:
                    raise  # the re-snapshot's mark did not cover the statement: no loop
                last_raised = (exc.table, exc.position)
                self._resnapshot(exc, taken_id)
                continue  # the same batch again: the marks skip what the lake has now
            self.instance.store.release(taken_id)
            self.screened.discard(taken_id)
            early.pop(0)
        if not self.bounded:  # Spark is up and what waited for it is folded
            self.bounded = True
            self.instance.store.bound(*read_ahead(self.limits))

    def _resnapshot(self, exc: Any, batch_id: int) -> None:
        """Re-snapshot ``exc``'s table while batch ``batch_id`` was being folded (see the module
        docstring); on return the batch is to be folded again."""
        merger = self.merger
        assert merger is not None and self.resnapshot is not None
        target = exc.target or self.target_for(*exc.table.split(".", 1))
        if target is None:
            raise exc
        self.report(logging.WARNING, f"destination {self.destination}: {exc}; re-snapshotting {target}")
        self._settle()
        dropped = merger.forget(target)
        # the other targets' held rows go to the lake; the batches folded before this one are acked
        at = self.pending.index(batch_id)
        done, self.pending = self.pending[:at], self.pending[at:]
        images = merger.held
        future = self.committer.submit(self._commit, merger.take(), None)
        self.in_flight = _InFlight(future, done, self.rows, images)
        self.rows = 0
        self._settle()
        from airflow_provider_binlog.lake.resnapshot import resnapshot_mark

        decision = None
        if self.copies is not None:  # an online schema-change tool's cut-over: its lake copy, if it can
            from airflow_provider_binlog.drain.online_copy import prepare_swap

            decision = prepare_swap(self.copies, exc, merger, target, self.report)
        result = self.resnapshot(exc)
        if self.copies is not None:
            from airflow_provider_binlog.drain.online_copy import swapped

            swapped(self.copies, decision, result)
        merger.put_mark(target, resnapshot_mark(result.start))
        self.resnapshots.append(result)
        how = (
            f"its lake copy of {result.copied} swapped in"
            if getattr(result, "copied", "")
            else "re-snapshotted"
        )
        self.report(
            logging.INFO,
            f"destination {self.destination}: {target} {how} at {result.start} "
            f"({result.rows} rows, {dropped} held row images dropped); its changes after that are applied",
        )

    # ------------------------------------------------------------------ commits

    def _commit(self, chunk: Any, end: Any) -> tuple[dict[str, Any], float]:
        """In the committer thread."""
        assert self.merger is not None
        t0 = time.monotonic()
        return self.merger.commit(chunk, end), time.monotonic() - t0

    def _hand_over(self) -> None:
        """Settle the running commit, then give the held chunk to the committer thread."""
        self._feed(wait_for_spark=True)
        merger = self.merger
        assert merger is not None
        failpoint("before_commit")
        self._settle()  # one commit at a time: batches are acked in order
        images = merger.held
        chunk = merger.take()
        future = self.committer.submit(self._commit, chunk, self.last_end)
        self.in_flight = _InFlight(future, self.pending, self.rows, images)
        self.pending, self.rows, self.size = [], 0, 0

    def _settle(self) -> None:
        """Wait for the running commit, then ack its batches: the cursor moves only now."""
        flight = self.in_flight
        if flight is None:
            return
        self.in_flight = None
        clock = time.perf_counter
        t0 = clock()
        committed, seconds = flight.future.result()
        wrote, skipped = [], 0
        for target, counts in committed.items():
            acc = self.totals.setdefault(target, {})
            added = counts.as_dict()
            for k, v in added.items():
                acc[k] = acc.get(k, 0) + v
            skipped += added.get("skipped", 0)
            if added.get("commits"):
                wrote.append(target)
        t1 = clock()
        self.timings["commit_wait"] += t1 - t0
        self.chunks += 1
        # said before the ack: an attempt that dies between the two has logged what it committed
        self.report(logging.INFO, self._chunk_line(flight, seconds, wrote, skipped))
        failpoint("after_commit")
        for _batch_id in flight.batch_ids:
            failpoint("ack")
        self.instance.ack_many(flight.batch_ids)  # one cursor write for the chunk
        self.timings["ack"] += clock() - t1
        failpoint("after_ack")
        if wrote:
            self.commits += 1
        self.changes += flight.changes
        cursor = self.instance.cursor
        log.debug(
            "destination %s: chunk %d acked up to %s",
            self.destination, self.chunks, cursor.binlog_position if cursor is not None else None,
        )  # fmt: skip
        self.tick()

    def _chunk_line(self, flight: _InFlight, seconds: float, wrote: Sequence[str], skipped: int) -> str:
        """The task log's line for a settled chunk: what it committed to which tables, or that the
        lake already held it (an earlier attempt committed it and died before the ack)."""
        head = f"destination {self.destination}: chunk {self.chunks} ({len(flight.batch_ids)} batches"
        if not wrote:
            if skipped:
                return (
                    f"{head}, {flight.changes} changes): already in the lake (an earlier attempt committed "
                    "it and did not ack), nothing written; acking its batches"
                )
            return f"{head}, {flight.changes} changes): nothing to write to the lake; acking its batches"
        held = f"; {skipped} entries the lake already held skipped" if skipped else ""
        return (
            f"{head}, {flight.changes} changes, {flight.images} row images): committed to "
            f"{', '.join(sorted(wrote))} in {seconds:.1f} s{held}; acking its batches"
        )

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        """Drain until the instance is done and every batch is acked."""
        instance, limits, timings = self.instance, self.limits, self.timings
        clock = time.perf_counter
        self.started = self.last_log = time.monotonic()
        while True:
            if not self.pending and instance.done:
                break
            t0 = clock()
            batch = instance.get_without_ack(limits.batch_size, timeout=1.0)
            t1 = clock()
            timings["wait"] += t1 - t0
            if batch.id is not None:
                failpoint("drain")
                self.batches += 1
                self.pending.append(batch.id)
                started_spark = timings["spark_start"]
                self._feed(batch.id, batch.entries)
                self.size += batch.size
                self.last_end = batch.entries[-1].end_position
                timings["buffer"] += clock() - t1 - (timings["spark_start"] - started_spark)
            elif self.early and self.merger is None:
                # nothing came while Spark starts: the store may be full of the batches waiting
                # aside (not released until folded), not drained; fold them, then read on
                self._feed(wait_for_spark=True)
                continue
            elif not self.pending and self.in_flight is not None:  # nothing to read: give the commit time
                wait([self.in_flight.future], timeout=0.5)
            merger = self.merger
            held = merger.held if merger is not None else 0  # nothing is folded before Spark is up
            # the held images' bytes, estimated from the changes read for them
            full = held >= limits.max_rows_per_commit or (
                self.rows and self.size * held // self.rows >= limits.max_bytes_per_commit
            )
            # Spark is idle: commit what is held rather than let the chunk grow (the last chunk,
            # merged after everything is read, stays about what one commit's time reads), unless
            # it is spread too thin over its targets to pay for their MERGEs (module docstring)
            idle = (self.in_flight is None or self.in_flight.future.done()) and (
                held >= early_rows(limits, targets_held(merger))
            )
            if self.pending and (batch.id is None or full or (merger is not None and idle)):
                self._hand_over()
            elif self.in_flight is not None and self.in_flight.future.done():
                self._settle()  # ack as soon as the lake has the chunk
            now = time.monotonic()
            if now - self.last_log >= limits.progress_interval:
                self.last_log = now
                self._progress(now)
        self._settle()
        if self.copies is not None and self.merger is not None:  # staging tables of copies that ended
            from airflow_provider_binlog.drain.online_copy import finish

            finish(self.copies, self.merger, self.report)

    def _progress(self, now: float) -> None:
        merging = self.in_flight.changes if self.in_flight is not None else 0
        read = self.changes + merging + self.rows
        lag = self.instance.lag_seconds
        self.report(
            logging.INFO,
            f"destination {self.destination}: {read} changes read ({read / (now - self.started):.0f}/s), "
            f"{self.changes} in the lake, {merging} merging; read up to {self.last_end}, lag "
            + ("unknown" if lag is None else f"{lag:.1f} s"),
        )
