"""Running the prepared statements of a commit's targets, several targets side by side.

A target's statements (:data:`Step`: its table DDL, then one statement per piece, each with the
mark it leaves) run in order on one thread; different targets run on a small thread pool, since
Spark runs their jobs side by side (one MERGE of a small chunk leaves cores idle). The per-table
reads and checks of a run's start and end (marks, writers, snapshot ids: a table load and a few
py4j calls each, paid per table by a destination of hundreds) run on the same pool
(:meth:`TargetRunner.map`). Merges into one target are serialized process-wide by
:func:`table_lock`, which a commit holds for all its targets (in name order, so two commits never
deadlock).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from airflow_provider_binlog.faults import failpoint
from airflow_provider_binlog.lake.commits import CommittedMark
from airflow_provider_binlog.lake.spark.session import activate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Step = tuple["Callable[[], None] | None", "CommittedMark | None"]
"""A prepared statement of one target (``None``: nothing to run) and the mark it leaves (if any)."""

T = TypeVar("T")
R = TypeVar("R")

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def table_lock(name: str) -> threading.Lock:
    """The process-wide lock serializing merges into one target (``name`` as quoted)."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(name.lower(), threading.Lock())


class TargetRunner:
    """Runs each target's steps in order, up to ``parallel`` targets at once.

    :param spark: the session (made active on every pool thread).
    :param parallel: targets run at once.
    :param committed: called with ``(target, mark)`` after each step that leaves a mark.
    """

    def __init__(
        self, spark: SparkSession, parallel: int, committed: Callable[[str, CommittedMark], None]
    ) -> None:
        self.spark = spark
        self.parallel = parallel
        self._committed = committed
        self._pool: ThreadPoolExecutor | None = None

    def run_all(self, prepared: Sequence[tuple[str, list[Step]]]) -> None:
        """Run the targets' steps (on the pool, as :meth:`map`). Waits for every target, then raises
        the first failure; the targets that succeeded stay committed, with their marks."""
        self.map(self._run_target, [(target, steps) for target, steps in prepared if steps])

    def run_as_prepared(self, prepared: Iterable[tuple[str, list[Step]]]) -> None:
        """Like :meth:`run_all`, but each target starts on the pool as soon as ``prepared`` yields
        it, while the caller prepares the next (staging a chunk's next table while the ones before
        it merge). With one thread, everything is prepared first, then run.

        Waits for every started target, then raises the first failure in order. When preparing
        fails, the targets started before still run to their end (committed, with their marks, as
        when a later target's merge fails), then that failure is raised, with a note naming any
        started target that failed too.
        """
        if self.parallel <= 1:
            self.run_all(list(prepared))
            return
        futures: list[concurrent.futures.Future[None]] = []
        try:
            for work in prepared:
                if work[1]:
                    futures.append(self._start(self._run_target, work))
        except BaseException as exc:
            concurrent.futures.wait(futures)
            for future in futures:
                failed = future.exception()
                if failed is not None:
                    exc.add_note(f"a target started before this failure failed too: {failed!r}")
            raise
        concurrent.futures.wait(futures)
        for future in futures:
            future.result()

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``fn`` of every item, up to ``parallel`` at once, the results in the items' order.

        Waits for every item, then raises the first failure in the items' order. Not from a pool
        thread.
        """
        work = list(items)
        if len(work) <= 1 or self.parallel <= 1:
            return [fn(item) for item in work]
        futures = [self._start(fn, item) for item in work]
        concurrent.futures.wait(futures)
        return [future.result() for future in futures]

    def _start(self, fn: Callable[[T], R], item: T) -> concurrent.futures.Future[R]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.parallel, thread_name_prefix="binlog-cdc-merge")
        return self._pool.submit(self._call_here, fn, item)

    def _call_here(self, fn: Callable[[T], R], item: T) -> R:
        activate(self.spark)  # a pool thread's JVM thread has no active session of its own
        return fn(item)

    def _run_target(self, work: tuple[str, list[Step]]) -> None:
        failpoint("merge_table")  # the crash tests stop here with some targets committed
        self._run(*work)

    def _run(self, target: str, steps: list[Step]) -> None:
        """Run one target's steps in order, each followed by its mark."""
        for statement, mark in steps:
            if statement is not None:
                statement()
            if mark is not None:
                self._committed(target, mark)

    def close(self) -> None:
        """Wait for the pool's threads and stop them."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
