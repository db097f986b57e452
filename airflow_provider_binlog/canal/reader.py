"""The reader thread: dump from a start point, convert, put into the store; reconnect; re-read.

::

    ReplicationClient.dump --events--> EntryConverter.handle --entries--> EventStore.put

* **Reconnect**: a :class:`~airflow_provider_binlog.binlog.errors.ConnectionLostError` restarts the
  dump after a backoff (``reconnect_initial`` doubling up to ``reconnect_max``) from the end of the
  last complete transaction read (the converter reports it, :meth:`BinlogReader._progress`); the
  converter keeps its state, and entries already put are recognised by their order key and not
  put twice. The retries are bounded: once the source has failed for ``reconnect_timeout``
  seconds (or ``reconnect_attempts`` times) in a row, reading stops with a
  :class:`~.errors.SourceUnavailableError` naming the source, the last error and the position it
  would have resumed at. A dump that received events before it failed starts a new count.
* **Re-read** (:meth:`BinlogReader.reread`): the consumer rolled back past what the store can hand
  out again; the store is reset and the dump restarts from the durable cursor with a fresh
  converter state.
* **Errors** end the thread; :attr:`BinlogReader.error` holds them (an unreadable binlog becomes an
  :class:`~.errors.UnreadableBinlogError`, a purged start a :class:`~.errors.StartPositionError`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from airflow_provider_binlog.binlog.client import ReplicationClient
from airflow_provider_binlog.binlog.errors import ConnectionLostError, PurgedBinlogError
from airflow_provider_binlog.binlog.event import Event
from airflow_provider_binlog.binlog.position import BinlogPosition, file_number
from airflow_provider_binlog.binlog.rows import RowsEvent
from airflow_provider_binlog.canal.change import Entry
from airflow_provider_binlog.canal.convert import EntryConverter, GtidPosition
from airflow_provider_binlog.canal.errors import SourceUnavailableError, StartPositionError, StoreClosedError
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.positions.start import StartPoint
from airflow_provider_binlog.canal.positions.xa_lookback import XaLookback
from airflow_provider_binlog.canal.schema import SchemaHistory
from airflow_provider_binlog.canal.store import EventStore, StoreResetError
from airflow_provider_binlog.canal.unreadable import unreadable

log = logging.getLogger(__name__)


class BinlogReader:
    """One destination's reader thread (see the module docstring).

    :param destination: for thread names and messages.
    :param client: the replication client.
    :param store: where entries go.
    :param filter: which tables are routed (only those are decoded with the schema history).
    :param history: the schema history (``None``, or one without a connection: no resolver).
    :param converter: the event -> entry converter; its sink and progress are set here.
    :param reconnect_initial: first reconnect delay in seconds.
    :param reconnect_max: longest reconnect delay.
    :param reconnect_attempts: give up after this many consecutive failures (``None``: no count).
    :param reconnect_timeout: give up once the source has failed for this many seconds in a row
        (``None``: no time bound). With neither bound the reader retries for ever.
    :param thread_name: the thread's name.
    """

    def __init__(
        self,
        destination: str,
        client: ReplicationClient,
        store: EventStore,
        filter: TableFilter,
        history: SchemaHistory | None,
        converter: EntryConverter,
        reconnect_initial: float = 0.5,
        reconnect_max: float = 30.0,
        reconnect_attempts: int | None = None,
        reconnect_timeout: float | None = None,
        thread_name: str | None = None,
    ) -> None:
        self.destination = destination
        self.client = client
        self.store = store
        self.filter = filter
        self.history = history
        self.converter = converter
        converter.sink = self._sink
        converter.progress = self._progress
        if converter.lookback is None:  # XA prepared before the start point, committed after it
            converter.lookback = XaLookback(destination, client, filter, history)
        self.reconnect_initial = reconnect_initial
        self.reconnect_max = reconnect_max
        self.reconnect_attempts = reconnect_attempts
        self.reconnect_timeout = reconnect_timeout
        self.thread_name = thread_name or f"canal-{destination}"
        self.stop_at: BinlogPosition | None = None
        self.reconnects = 0
        self.error: BaseException | None = None
        self.finished = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._restart = threading.Event()
        self._lock = threading.Lock()
        self._stream: Any = None
        self._resume: StartPoint | None = None
        self._fresh_gtid: tuple[GtidPosition | None] | None = None  # set by reread: reset the converter
        self._skip_through: tuple[int, int, int, int] | None = None
        self._last_put: tuple[int, int, int, int] | None = None
        self._generation = 0
        self._received = False  # the current dump received an event (resets the failure count)
        self._rows: list[Entry] = []  # row changes converted and not put yet (see _sink)
        self._row_sizes: list[int] = []
        self._row_bytes = 0
        self._flush_at = max(1, min(1024, store.max_entries // 16))
        self._flush_bytes = store.max_bytes // 16

    # ------------------------------------------------------------------ control

    def start(self, point: StartPoint, stop_at: BinlogPosition | None) -> None:
        """Start the thread reading from ``point`` up to ``stop_at`` (``None``: follow)."""
        self.stop_at = stop_at
        self._resume = point
        self._skip_through = point.skip_through
        self._start_thread()

    def _start_thread(self) -> None:
        self.finished = False
        self.error = None
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def reread(self, point: StartPoint, gtid_position: GtidPosition | None) -> None:
        """Reset the store and restart the dump at ``point`` (the durable cursor).

        Under the reader lock, so the thread cannot record progress from the old read after the
        reset (it checks the restart flag under the same lock).
        """
        with self._lock:
            self._resume = point
            self._fresh_gtid = (gtid_position,)
            self._skip_through = point.skip_through
            self._last_put = None
            self._restart.set()
            self.store.reset()
        stream = self._stream
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.close()
        if self._thread is None or not self._thread.is_alive():
            if self._thread is not None:
                self._thread.join(timeout=30)
            self._start_thread()

    def stop(self) -> None:
        """Stop reading: close the store and the stream, wait for the thread (up to 30 s)."""
        self._stop.set()
        self.store.close()
        stream = self._stream
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.close()
        if self._thread is not None:
            self._thread.join(timeout=30)

    @property
    def resume(self) -> StartPoint | None:
        """Where a reconnect would resume (the end of the last complete transaction read)."""
        return self._resume

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        attempt = 0
        delay = self.reconnect_initial
        failing_since: float | None = None
        try:
            while not self._stop.is_set():
                with self._lock:
                    self._restart.clear()
                    self._generation = self.store.generation
                    point = self._resume
                    fresh, self._fresh_gtid = self._fresh_gtid, None
                assert point is not None
                if fresh is not None:
                    self.converter.reset(fresh[0])
                self._received = False
                try:
                    self._read(point)
                    if self._restart.is_set():
                        continue
                    break
                except StoreResetError:
                    continue
                except ConnectionLostError as exc:
                    if self._stop.is_set():
                        break
                    if self._restart.is_set():
                        continue
                    now = time.monotonic()
                    if self._received or failing_since is None:  # a new outage
                        attempt, delay, failing_since = 0, self.reconnect_initial, now
                    attempt += 1
                    self.reconnects += 1
                    wait = self._reconnect_wait(exc, attempt, delay, now - failing_since)
                    log.warning(
                        "destination %s: %s; reconnecting in %.1fs (attempt %d)",
                        self.destination, exc, wait, attempt,
                    )  # fmt: skip
                    if self._stop.wait(wait):
                        break
                    delay = min(delay * 2, self.reconnect_max)
                    continue
        except PurgedBinlogError as exc:
            self.error = StartPositionError(str(exc))
        except SourceUnavailableError as exc:
            if not self.store.closed:
                self.error = exc
                log.error("destination %s: reading stopped: %s", self.destination, exc)
        except Exception as exc:
            if not self.store.closed:
                self.error = unreadable(exc, self.destination, self.client, self._resume) or exc
                log.error("destination %s: reading stopped: %s", self.destination, exc)
        finally:
            self.finished = True
            with contextlib.suppress(Exception):
                self.store.flush()

    def _reconnect_wait(self, exc: ConnectionLostError, attempt: int, delay: float, failing: float) -> float:
        """The delay before the next attempt, or raise :class:`SourceUnavailableError` when a bound
        is reached (``failing``: seconds since the outage began)."""
        limit, timeout = self.reconnect_attempts, self.reconnect_timeout
        over = (limit is not None and attempt > limit) or (timeout is not None and failing >= timeout)
        if not over:
            return delay if timeout is None else max(0.0, min(delay, timeout - failing))
        resume = self._resume
        where = resume.position if resume is not None and resume.position is not None else resume
        origin = getattr(self.client.config, "origin", "")
        source = f"{self.client.config.address}{f' ({origin})' if origin else ''}"
        tries = attempt - 1
        bound = [f"{failing:.0f} s"]
        if tries:
            bound.append(f"{tries} reconnect attempt{'s' if tries > 1 else ''}")
        raise SourceUnavailableError(
            f"destination {self.destination}: the source {source} was unreachable for "
            f"{' and '.join(bound)} (reconnect_timeout={timeout if timeout is not None else 'none'}, "
            f"reconnect_attempts={limit if limit is not None else 'none'}); last error: {exc}. Reading "
            f"stopped at {where} (the end of the last complete transaction read): the cursor does not "
            "move past it, and the next run resumes from the cursor",
            str(where) if where is not None else None,
        ) from None

    def _read(self, point: StartPoint) -> None:
        stream = self.client.dump(
            point.position,
            gtid=None if point.position is not None else point.gtid,
            stop_at=self.stop_at,
            include_heartbeats=True,
            annotate_rows=False,  # the converter never reads them (a multi-row INSERT's whole text)
        )
        self._stream = stream
        history = self.history
        if history is not None and history.connect is not None:
            ctx = stream.parser.ctx

            matches = self.filter.matches

            def resolver(table_map: Any) -> Any:
                if not matches(table_map.schema, table_map.table):
                    return None  # never decoded: no lookups, no history for other tables
                h = ctx.header
                key = (file_number(ctx.file), (h.log_pos - h.event_size) if h is not None else 0)
                return history.resolve(table_map, key)

            ctx.schema_resolver = resolver
        converter = self.converter
        converter.begin_stream()
        handle = converter.handle
        stop, restart = self._stop, self._restart
        self._rows, self._row_sizes, self._row_bytes = [], [], 0
        flush = self._flush
        try:
            for event in stream:
                if stop.is_set() or restart.is_set():
                    return
                self._received = True
                handle(event)
                if self._rows and type(event.body) is not RowsEvent:
                    flush()
            if not restart.is_set():
                converter.finish()
        finally:
            self._stream = None
            stream.close()
            # what was converted before the stream ended or failed goes in, as if put per event
            # (not after a stop or a re-read: the store is closed or reset)
            if self._rows and not stop.is_set() and not restart.is_set():
                with contextlib.suppress(StoreClosedError):
                    flush()

    def _sink(self, entries: list[Entry], size_each: int | None = None) -> None:
        """The converter's sink: the row changes of consecutive rows events (one statement's, up to
        a sixteenth of the store's capacity in entries or bytes) are put together after the last of
        them (one store put, not one per event); anything else puts them first, then itself."""
        if size_each is not None:
            self._rows.extend(entries)
            self._row_sizes.extend([size_each] * len(entries))
            self._row_bytes += size_each * len(entries)
            if len(self._rows) >= self._flush_at or self._row_bytes >= self._flush_bytes:
                self._flush()
            return
        if self._rows:
            self._flush()
        self._put(entries)

    def _flush(self) -> None:
        rows, sizes = self._rows, self._row_sizes
        if rows:
            self._rows, self._row_sizes, self._row_bytes = [], [], 0
            self._put(rows, sizes)

    def _put(self, entries: list[Entry], sizes: list[int] | None = None) -> None:
        if not entries:
            return
        skip = self._skip_through
        last = self._last_put
        seen = max(skip, last) if skip is not None and last is not None else skip if last is None else last
        keep = entries
        if seen is not None and entries[0].order_key <= seen:  # re-read after a reconnect
            kept = [i for i, e in enumerate(entries) if e.order_key > seen]
            keep = [entries[i] for i in kept]
            if sizes is not None:
                sizes = [sizes[i] for i in kept]
        if not keep:
            return
        self.store.put(keep, generation=self._generation, sizes=sizes)
        with self._lock:
            if not self._restart.is_set():
                self._last_put = keep[-1].order_key  # an OrderKey is a tuple

    def _progress(self, event: Event) -> None:
        """A transaction ended at ``event``: a reconnect may resume just after it."""
        with self._lock:
            if not self._restart.is_set():
                self._resume = StartPoint(event.end_position, None, None, "reconnect")
