"""A run that reads a destination from a canal server (ours, :mod:`..canalnet.server`, or canal's)
instead of the MySQL binlog, with the same exactly-once handling as :class:`.run.Drain`.

::

    client = CanalClient("canal-host", 11111, "shop", user="canal", password=...)   # or zookeeper=zk
    summary = CanalDrain(client, Routes({"shop.orders": "lake.shop.orders"}), spark=factory).run()

* The connection rolls back whatever an earlier attempt left unacked, then subscribes
  (:meth:`~..canalnet.client.CanalClient.connect`): a retried attempt reads those batches again.
* :class:`~.loop.ChunkLoop` folds, commits in a second thread and acks each batch to the canal
  server only after the Iceberg commit holding it returned; the lake marks (order keys rebuilt from
  the canal headers, :mod:`..canalnet.decode`) make a batch the lake already holds -- a crash between
  commit and ack -- a no-op.
* The run ends when the server has nothing more within ``idle_wait`` seconds and every batch is
  acked (a canal server follows the binlog; there is no head position to stop at).

What this source does not do (the MySQL source does): the initial snapshot, table re-snapshots,
online schema-change copies and interval stops; a source operation that needs a re-snapshot stops
the run, naming it.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, TransactionEnd
from airflow_provider_binlog.canal.routing import Routes
from airflow_provider_binlog.canal.store import Batch, estimate_size
from airflow_provider_binlog.canalnet.client import CanalClient
from airflow_provider_binlog.canalnet.decode import EntryDecoder
from airflow_provider_binlog.drain.loop import ChunkLoop, Limits, Report
from airflow_provider_binlog.drain.reconcile import chunks_said, snapshot_ids

log = logging.getLogger(__name__)


def _log_report(level: int, line: str) -> None:
    log.log(level, line)


class _NoStore:
    """The loop releases a batch's memory in the store once folded; remote batches have none here."""

    def release(self, batch_id: int) -> None:
        return None

    def bound(self, max_entries: int | None = None, max_bytes: int | None = None) -> None:
        """The read-ahead is the canal server's own store."""
        return None


@dataclass(frozen=True)
class CanalCursor:
    """Where the acked batches end: the binlog position of the last ack point (as the loop logs it)."""

    binlog_position: BinlogPosition

    def __str__(self) -> str:
        return str(self.binlog_position)


class CanalServerConsumer:
    """What :class:`~.loop.ChunkLoop` consumes, over a canal client.

    :param client: a connected client.
    :param idle_wait: seconds a GET may come back empty before the run counts as caught up.
    """

    def __init__(self, client: CanalClient, idle_wait: float = 2.0) -> None:
        self.client = client
        self.idle_wait = idle_wait
        self.store = _NoStore()
        self.decoder = EntryDecoder(client.destination)
        self._outstanding: deque[tuple[int, Any]] = deque()
        self._cursor: Any = None
        self._idle_since: float | None = None

    def get_without_ack(self, batch_size: int = 1000, timeout: float | None = 1.0) -> Batch:
        wait = max(0.05, min(timeout if timeout is not None else self.idle_wait, self.idle_wait))
        while True:
            batch_id, entries = self.client.get_without_ack(batch_size, wait)
            if batch_id <= 0:
                now = time.monotonic()
                self._idle_since = self._idle_since or now - wait
                return Batch(None, (), 0, 0, None)
            self._idle_since = None
            ours = tuple(self.decoder.decode(entries))
            if not ours:  # only TRANSACTIONBEGIN entries: nothing to fold, nothing to wait for
                self._outstanding.append((batch_id, None))
                self.ack(batch_id)
                continue
            ack_point = next(
                (e for e in reversed(ours) if type(e) is TransactionEnd
                 or (type(e) is DdlEntry and e.ends_statement)),
                None,
            )  # fmt: skip
            self._outstanding.append((batch_id, ack_point))
            return Batch(batch_id, ours, 0, len(ours), ack_point, sum(estimate_size(e) for e in ours))

    def ack(self, batch_id: int) -> None:
        """Ack to the canal server (in order, after the lake commit: the loop calls it then)."""
        oldest, ack_point = self._outstanding[0]
        if oldest != batch_id:
            raise ValueError(f"batch {batch_id} is not the oldest outstanding batch, {oldest} is")
        self.client.ack(batch_id)
        self._outstanding.popleft()
        if ack_point is not None:
            self._cursor = CanalCursor(ack_point.position)

    def ack_many(self, batch_ids: Sequence[int]) -> None:
        """:meth:`ack` of each (canal's protocol acks one batch per message)."""
        for batch_id in batch_ids:
            self.ack(batch_id)

    @property
    def done(self) -> bool:
        """Caught up: the last GET found nothing for ``idle_wait`` seconds and nothing is unacked."""
        return (
            not self._outstanding
            and self._idle_since is not None
            and (time.monotonic() - self._idle_since >= self.idle_wait)
        )

    @property
    def cursor(self) -> Any:
        """The last acked ack point's position (``None`` before the first)."""
        return self._cursor

    @property
    def lag_seconds(self) -> float | None:
        return None


def committed_earlier(totals: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The lake tables that already held batches this run got from the canal server: the summary's
    ``committed_earlier``. A canal server gives a client again only what it never acked (the
    connection's rollback hands back an earlier attempt's unacked batches), so a batch a table
    skips is one an earlier, failed attempt committed and did not ack -- a crash between commit and
    ack. That attempt announced nothing (a failed task emits no asset event); this run does
    (:mod:`..operators.assets`)."""
    return sorted(t for t, counts in totals.items() if counts.get("skipped"))


class CanalDrain:
    """One run from a canal server into the lake (see the module docstring).

    :param client: the canal client (not connected yet).
    :param routes: source tables -> lake tables.
    :param spark: the session factory.
    :param limits: chunk limits.
    :param target_options: :class:`~..lake.write.merge.TargetOptions` for all targets or per target.
    :param on_schema_change: the merger's DDL policy.
    :param connect: a source connection factory to resolve glob routes (``None``: the routes' exact
        names only; glob-routed targets are found as their changes come).
    :param idle_wait: see :class:`CanalServerConsumer`.
    :param report: ``report(level, line)``.
    :param maintenance: a :class:`~..lake.maintenance.MaintenancePolicy` (``None``: none), as the
        binlog run's: at the start the tables without bounded metadata get it, at the end the tables
        the run committed to are maintained (the summary's ``maintenance``; a failure there is a
        warning: the run's batches are committed and acked).
    """

    def __init__(
        self,
        client: CanalClient,
        routes: Routes,
        *,
        spark: Callable[[], Any],
        limits: Limits | None = None,
        target_options: Any = None,
        on_schema_change: str | Mapping[str, str] | None = None,
        connect: Callable[[], Any] | None = None,
        idle_wait: float = 2.0,
        report: Report = _log_report,
        maintenance: Any = None,
    ) -> None:
        self.client = client
        self.routes = routes
        self.spark_factory = spark
        self.limits = limits or Limits()
        self.target_options = target_options
        self.on_schema_change = on_schema_change
        self.connect = connect
        self.idle_wait = idle_wait
        self.report = report
        self.maintenance = maintenance
        self.destination = client.destination

    def _make_merger(self) -> Any:
        from airflow_provider_binlog.drain.source import known_routes
        from airflow_provider_binlog.lake.shards.shard_writers import check_merger
        from airflow_provider_binlog.lake.write.merge import ChangeMerger

        spark = self.spark_factory()
        known = known_routes(self.connect, self.routes) if self.connect is not None else self.routes.exact
        merger = ChangeMerger(
            spark, self.destination, known, self.target_options,
            max_rows=self.limits.max_rows_per_commit + self.limits.batch_size + 1,
            on_schema_change=self.on_schema_change,
        )  # fmt: skip
        properties = merger.load_marks()
        check_merger(merger, properties)  # as the binlog source's start (drain/run.py)
        if self.maintenance is not None:  # tables without bounded metadata get it (logged once)
            from airflow_provider_binlog.lake.maintenance.bounded import bring_under

            bring_under(spark, properties, self.maintenance, self.report, merger.display, merger.runner.map)
        return merger

    def _maintain(self, loop: ChunkLoop, summary: dict[str, Any]) -> None:
        """Maintain the tables the run committed to (the run is committed and acked: a failure is
        reported, never raised); the summary's ``maintenance``."""
        merger: Any = loop.merger
        tables = [t for t, counts in loop.totals.items() if counts.get("commits")]
        if self.maintenance is None or merger is None or not tables:
            return
        from airflow_provider_binlog.lake.maintenance import maintain

        try:
            summary["maintenance"] = maintain(merger.spark, tables, self.maintenance, report=self.report)
        except Exception as exc:
            self.report(
                logging.WARNING,
                f"destination {self.destination}: maintenance of {tables} after the run failed (the run's "
                f"changes are committed): {type(exc).__name__}: {exc}",
            )

    def _snapshots(self, loop: ChunkLoop, earlier: Sequence[str]) -> dict[str, str]:
        """Lake table -> its snapshot id (digits as a string) after this run, for the tables it
        committed to and those of ``committed_earlier``, as the binlog run's summary has them; a
        failure to read them is reported and leaves them out."""
        tables = [t for t, counts in loop.totals.items() if counts.get("commits")]
        tables += [t for t in earlier if t not in tables]
        return snapshot_ids(loop.merger, tables, self.destination, self.report)

    def run(self) -> dict[str, Any]:
        """Connect (rollback + subscribe), drain until caught up, return the summary."""
        committer = ThreadPoolExecutor(1, thread_name_prefix="binlog-cdc-commit")
        started = time.monotonic()
        try:
            starting = committer.submit(self._make_merger)
            self.client.connect()
            consumer = CanalServerConsumer(self.client, self.idle_wait)
            self.report(logging.INFO, f"destination {self.destination}: reading from canal server "
                        f"{self.client.host}:{self.client.port}")  # fmt: skip
            loop = ChunkLoop(
                self.destination, consumer, starting, committer, self.routes.target_for, self.limits,
                self.report,
            )  # fmt: skip
            loop.run()
            summary: dict[str, Any] = {
                "destination": self.destination,
                "source": f"canal://{self.client.host}:{self.client.port}",
                "end": str(consumer.cursor) if consumer.cursor is not None else None,
                "batches": loop.batches,
                "commits": loop.commits,
                "changes": loop.changes,
                "seconds": round(time.monotonic() - started, 3),
                "tables": loop.totals,
            }
            earlier = committed_earlier(loop.totals)
            if earlier:
                summary["committed_earlier"] = earlier
            snapshots = self._snapshots(loop, earlier)
            if snapshots:
                summary["snapshots"] = snapshots
            self.report(logging.INFO, f"destination {self.destination}: done from the canal server, "
                        f"{loop.changes} changes in {loop.batches} batches, {chunks_said(loop)}")  # fmt: skip
        finally:
            # the server has given back what this run left unacked before the run's hold is let go
            self.client.close_and_wait()
            committer.shutdown(wait=True)
        self._maintain(loop, summary)  # every batch acked, the connection closed
        return summary
