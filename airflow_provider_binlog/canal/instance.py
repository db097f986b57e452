"""The canal instance: one destination's durable subscription (what the Airflow hook holds).

::

    source --dump--> [parser thread: decode, filter, convert] --put--> EventStore --get/ack--> consumer
                                                                                   |
                                                    MetaManager: cursor (CAS), marks, runs, schema

Lifecycle::

    inst = CanalInstance(InstanceConfig(destination="shop", source=ReplicationConfig(...),
                                        filter=TableFilter("shop\\\\..*")),
                         meta=ZooKeeperMetaManager(zk), running=RunningNode(zk, identity, label))
    inst.subscribe(stop_at="head")            # HA, cursor / start position, parser thread
    while not inst.done:
        batch = inst.get_without_ack(1000, timeout=1.0)
        if batch.id is None:
            continue
        ...stage / merge batch.entries...
        inst.ack(batch.id)                    # moves the cursor (CAS) when the batch has an ack point
    inst.close()

* **Conversion**: row events become :class:`~.change.RowChange` (one per row, order key
  ``(file number, event pos, payload index or -1, row index)``), XID/COMMIT become
  :class:`~.change.TransactionEnd`, DDL/TRUNCATE become :class:`~.change.DdlEntry` (one per
  affected table) and feed the :class:`~.schema.SchemaHistory`. A transaction with no matching
  change still yields its TransactionEnd when nothing was put for a second (so the cursor keeps
  moving on a busy source whose changes are all filtered out) and at the stop position.
* **Reconnect**: a :class:`~airflow_provider_binlog.binlog.errors.ConnectionLostError` restarts the
  dump after a backoff (``reconnect_initial`` doubling up to ``reconnect_max``) from the end of the
  last complete transaction read; entries already put are recognised by their order key and not
  put twice.
* **Ack**: checks the HA node first (a lost ZooKeeper session refuses the ack; a suspended
  connection is waited for up to twice the session timeout) and that the batch is the oldest
  outstanding one; when it has an ack point, writes the cursor with compare-and-set (a lost race
  raises and leaves the batch outstanding); then releases the batch in the store and removes its
  mark. With an HA node the cursor and mark writes are fenced by its epoch (see :mod:`.ha`): once
  another consumer acquired, they fail with ``FencedError`` and change nothing.
* **Rollback**: moves the store's get cursor back to its ack cursor; if part of an open
  transaction was already released, the store is reset and the dump restarts from the durable
  cursor (see :mod:`.store`).
* **Marks**: each batch handed out is recorded as a canal mark; marks left by an earlier attempt
  are read at :meth:`CanalInstance.subscribe` (:attr:`CanalInstance.stale_marks`) and cleared;
  batch ids continue after them.
* **Drain mode**: ``subscribe(stop_at="head")`` fixes the stop position at the head observed then
  (or any position); :attr:`CanalInstance.done` turns true when everything up to it was handed out
  and acked.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pymysql

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.errors import ConnectionLostError, PurgedBinlogError
from airflow_provider_binlog.binlog.event import Event, UnknownEvent
from airflow_provider_binlog.binlog.events import RotateEvent
from airflow_provider_binlog.binlog.events_gtid import GtidEvent
from airflow_provider_binlog.binlog.events_mariadb import GtidListEvent, MariadbGtidEvent
from airflow_provider_binlog.binlog.events_query import QueryEvent
from airflow_provider_binlog.binlog.gtid import MariadbGtidList, MysqlGtidSet
from airflow_provider_binlog.binlog.position import BinlogPosition, file_number
from airflow_provider_binlog.binlog.rows import RowsEvent
from airflow_provider_binlog.canal.change import (
    DdlEntry,
    DdlKind,
    Entry,
    Op,
    OrderKey,
    RowChange,
    TransactionEnd,
)
from airflow_provider_binlog.canal.ddl import parse_ddl
from airflow_provider_binlog.canal.errors import (
    BatchOrderError,
    CanalError,
    MetaConflictError,
    SchemaMismatchError,
    StartPositionError,
)
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.meta.base import MetaManager, Version
from airflow_provider_binlog.canal.meta.model import ClientIdentity, LogPosition, PositionRange
from airflow_provider_binlog.canal.schema import SchemaHistory
from airflow_provider_binlog.canal.start import StartPoint, StartSpec, resolve_start, side_client
from airflow_provider_binlog.canal.store import Batch, EventStore, StoreResetError, row_size
from airflow_provider_binlog.canal.unreadable import FileGapCheck, check_rotate, skip_unknown, unreadable
from airflow_provider_binlog.errors import ConfigurationError

log = logging.getLogger(__name__)

_OPS = {"insert": Op.INSERT, "update": Op.UPDATE, "delete": Op.DELETE}
_HEARTBEATS = (EventType.HEARTBEAT_LOG_EVENT, EventType.HEARTBEAT_LOG_EVENT_V2)
_FAR = 1 << 62


@dataclass(frozen=True)
class InstanceConfig:
    """One destination.

    :param destination: the destination name (the ZooKeeper node under ``/otter/canal/destinations``).
    :param source: how to reach MySQL/MariaDB (its password never shows in a repr).
    :param filter: which tables and columns.
    :param client_id: canal's client id (1001 by default).
    :param start: where to start without a stored cursor.
    :param max_entries: store capacity in entries.
    :param max_bytes: store capacity in estimated bytes.
    :param reconnect_initial: first reconnect delay in seconds.
    :param reconnect_max: longest reconnect delay.
    :param reconnect_attempts: give up after this many consecutive failures (``None``: never).
    :param schema_history: keep a schema history (needed with ``binlog_row_metadata=MINIMAL``).
    :param idle_end_interval: seconds after which a filtered-out transaction's end is put anyway.
    """

    destination: str
    source: ReplicationConfig
    filter: TableFilter = field(default_factory=TableFilter)
    client_id: int = 1001
    start: StartSpec = field(default_factory=StartSpec)
    max_entries: int = 16_384
    max_bytes: int = 64 * 1024 * 1024
    reconnect_initial: float = 0.5
    reconnect_max: float = 30.0
    reconnect_attempts: int | None = None
    schema_history: bool = True
    idle_end_interval: float = 1.0

    @property
    def identity(self) -> ClientIdentity:
        return ClientIdentity(self.destination, self.client_id, self.filter.include)


@dataclass
class _Txn:
    gtid: str | None = None
    open: bool = False
    start: BinlogPosition | None = None  # where the open transaction began
    has_rows: bool = False
    commit_ts: int = 0


def log_position(entry: TransactionEnd | DdlEntry, source: ReplicationConfig) -> LogPosition:
    """canal's cursor for an ack point."""
    return LogPosition(
        journal_name=entry.position.file,
        position=entry.position.pos,
        timestamp=entry.timestamp * 1000,
        server_id=entry.server_id,
        gtid=entry.gtid_set or "",
        included=False,
        slave_id=-1,
        address=source.host,
        port=source.port,
    )


def _entry_log_position(entry: Entry, source: ReplicationConfig) -> LogPosition:
    server_id = getattr(entry, "server_id", 0) or None
    pos = entry.position
    return LogPosition(
        pos.file, pos.pos, entry.timestamp * 1000, server_id, None, True, -1, source.host, source.port
    )


class CanalInstance:
    """A destination's subscription (see the module docstring).

    :param config: the destination's settings.
    :param meta: where the cursor, marks and records live.
    :param running: the HA node (ZooKeeper); ``None`` for single-consumer setups. It is attached
        to ``meta`` as the fence of this client's cursor and mark writes (see :mod:`.ha`).
    :param client: a replication client (default: one built from ``config.source``).
    :param connect: a connection factory for ``information_schema`` (default: ``config.source``'s
        user; ``None`` disables lookups).
    """

    def __init__(
        self,
        config: InstanceConfig,
        meta: MetaManager,
        running: Any | None = None,
        client: ReplicationClient | None = None,
        connect: Callable[[], Any] | bool | None = True,
    ) -> None:
        self.config = config
        self.meta = meta
        self.running = running
        self.client = client or ReplicationClient(config.source)
        self.identity = config.identity
        if running is not None:
            meta.attach_fence(self.identity, running)  # cursor and mark writes carry its epoch
        if connect is True:
            connect = self._connect_source
        self.history: SchemaHistory | None = (
            SchemaHistory(meta, self.identity, connect or None) if config.schema_history else None
        )
        self.store = EventStore(config.max_entries, config.max_bytes)
        self.stale_marks: dict[int, PositionRange] = {}
        self.start_point: StartPoint | None = None
        self.stop_at: BinlogPosition | None = None
        self._cursor: LogPosition | None = None
        self._cursor_version: Version = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._restart = threading.Event()
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._finished = False
        self._subscribed = False
        self._stream: Any = None
        # reading state (parser thread)
        self._resume: StartPoint | None = None
        self._skip_through: tuple[int, int, int, int] | None = None
        self._last_put: tuple[int, int, int, int] | None = None
        self._txn = _Txn()
        self._gtid_pos: MariadbGtidList | MysqlGtidSet | None = None
        self._pending_end: TransactionEnd | None = None
        self._last_put_time = 0.0
        self._last_event_ts = 0
        self._caught_up = False
        self._unknown_warned: set[int] = set()
        self._gaps = FileGapCheck()
        self.reconnects = 0

    def __repr__(self) -> str:
        return (
            f"CanalInstance({self.config.destination!r}, client_id={self.config.client_id}, {self.store!r})"
        )

    def _connect_source(self) -> Any:
        c = self.config.source
        return pymysql.connect(
            host=c.host, port=c.port, user=c.user, password=c.password, ssl=c.ssl,
            connect_timeout=c.connect_timeout, autocommit=True, charset="utf8mb4",
        )  # fmt: skip

    # ------------------------------------------------------------------ subscription

    def subscribe(
        self, stop_at: BinlogPosition | str | None = None, running_timeout: float = 0.0
    ) -> StartPoint:
        """Take the HA node, read the cursor (or decide the start), and start the parser thread.

        :param stop_at: ``"head"`` (the head now), a ``file:pos`` or :class:`BinlogPosition` to
            drain up to, or ``None`` to follow the binlog.
        :param running_timeout: seconds to wait for another consumer to release the destination.
        :return: where reading starts.
        """
        if self._subscribed:
            raise CanalError(f"destination {self.config.destination!r} is already subscribed")
        self.hold(running_timeout)
        try:
            return self._subscribe(stop_at)
        except BaseException:
            if self.running is not None:
                with contextlib.suppress(Exception):
                    self.running.release()
            raise

    def hold(self, running_timeout: float = 0.0) -> None:
        """Take the HA node now, when it is not held yet (nothing to do without HA).

        :meth:`subscribe` does it; a caller that must be the destination's one consumer earlier --
        the initial snapshot writes the destination's progress and cursor -- calls it first and
        keeps the node through the subscription.

        :raises RunningHeldError: another consumer still holds it after ``running_timeout`` seconds.
        """
        if self.running is not None and not self.running.held:
            self.running.acquire(timeout=running_timeout)

    def _subscribe(self, stop_at: BinlogPosition | str | None) -> StartPoint:
        self.meta.subscribe(self.identity)
        self.stale_marks = self.meta.marks(self.identity)
        if self.stale_marks:
            log.info(
                "destination %s: %d batches from an earlier attempt were never acked (ids %s); "
                "they will be delivered again from the cursor",
                self.config.destination, len(self.stale_marks), list(self.stale_marks),
            )  # fmt: skip
            self.meta.clear_marks(self.identity)
            self.store = EventStore(
                self.config.max_entries, self.config.max_bytes, first_batch_id=max(self.stale_marks) + 1
            )
        point = self.pin_start()
        self.start_point = point
        if stop_at == "head":
            self.stop_at = self.client.head_position()
        elif isinstance(stop_at, str):
            self.stop_at = BinlogPosition.parse(stop_at)
        else:
            self.stop_at = stop_at
        if self.history is not None and self.history.connect is not None:
            self._bootstrap_history()
        if self._cursor is not None and self._cursor.gtid:
            self._gtid_pos = self._parse_gtid(self._cursor.gtid)
        elif point.gtid:
            self._gtid_pos = self._parse_gtid(point.gtid)
        self._resume = point
        self._skip_through = point.skip_through
        self._subscribed = True
        self._start_thread()
        return point

    def pin_start(self) -> StartPoint:
        """Decide where reading starts and, when the destination has no cursor yet, store that
        point as its cursor (``included``: the event there is still to be read).

        Without the pin, a destination that starts at the head would start at a *later* head the
        next time and skip what was committed in between. :meth:`subscribe` calls it; a sensor
        calls it before counting, so that it and the next run count from the same point. A start
        by GTID alone (no ``file:pos``) is not pinned.
        """
        cursor, version = self.meta.get_cursor(self.identity)
        point = resolve_start(self.client, cursor, self.config.start)
        if cursor is None and point.position is not None:
            src = self.config.source
            pinned = LogPosition(
                point.position.file, point.position.pos, None, None, point.gtid or None, True, -1,
                src.host, src.port,
            )  # fmt: skip
            self.meta.subscribe(self.identity)
            try:
                version = self.meta.set_cursor(self.identity, pinned, None)
                cursor = pinned
                log.info("destination %s: no cursor yet, pinned the start %s", self.config.destination, point)
            except MetaConflictError:  # pinned (or acked) concurrently: use that one
                cursor, version = self.meta.get_cursor(self.identity)
                point = resolve_start(self.client, cursor, self.config.start)
        self._cursor, self._cursor_version = cursor, version
        return point

    def _parse_gtid(self, text: str) -> MariadbGtidList | MysqlGtidSet | None:
        try:
            if self.client.server_info().is_mariadb:
                return MariadbGtidList.parse(text)
            return MysqlGtidSet.parse(text)
        except (ConfigurationError, ValueError):
            return None

    def _bootstrap_history(self) -> None:
        assert self.history is not None
        try:
            head = self.client.head_position()
            tables = self.history.list_tables(self.config.filter.matches)
            n = self.history.bootstrap(tables, head)
            if n:
                log.info(
                    "destination %s: schema history bootstrapped for %d tables at %s",
                    self.config.destination,
                    n,
                    head,
                )
        except pymysql.err.MySQLError as exc:
            log.warning(
                "destination %s: cannot read information_schema (error %s); column names come from "
                "the binlog only (binlog_row_metadata=FULL needed)",
                self.config.destination, exc.args[0] if exc.args else "?",
            )  # fmt: skip
            self.history.connect = None

    def _start_thread(self) -> None:
        self._finished = False
        self._error = None
        self._thread = threading.Thread(
            target=self._run, name=f"canal-{self.config.destination}-{self.config.client_id}", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------------ consumer API

    def get_without_ack(self, batch_size: int = 1000, timeout: float | None = 1.0) -> Batch:
        """The next batch after ``get`` (see :meth:`EventStore.get_without_ack`); records its mark.

        :raises: the parser thread's error once everything before it was handed out.
        """
        self._check_subscribed()
        if self.running is not None:
            self.running.check()
        if self._error is not None and self.store.buffered == 0:
            raise self._error
        batch = self.store.get_without_ack(batch_size, timeout)
        if batch.id is not None:
            src = self.config.source
            ack = log_position(batch.ack_point, src) if batch.ack_point is not None else None
            self.meta.add_mark(
                self.identity,
                batch.id,
                PositionRange(
                    _entry_log_position(batch.entries[0], src),
                    _entry_log_position(batch.entries[-1], src),
                    ack,
                    batch.end_seq,
                ),
            )
        elif self._error is not None and self.store.buffered == 0:
            raise self._error
        return batch

    def ack(self, batch_id: int) -> LogPosition | None:
        """Acknowledge the oldest outstanding batch; persist the cursor when it has an ack point.

        :return: the new cursor, or ``None`` when the batch lay inside a transaction.
        :raises SessionLostError: the HA session is suspended or lost (nothing is changed).
        :raises BatchOrderError: not the oldest outstanding batch (names both ids).
        :raises MetaConflictError: the cursor was moved by someone else.
        """
        self._check_subscribed()
        if self.running is not None:
            self.running.check()
        oldest = self.store.oldest_outstanding()
        if oldest is None or oldest.id != batch_id:
            raise BatchOrderError(batch_id, oldest.id if oldest is not None else None)
        cursor = None
        if oldest.ack_point is not None:
            # the cursor first: if the compare-and-set fails, the batch stays outstanding
            cursor = log_position(oldest.ack_point, self.config.source)
            self._cursor_version = self.meta.set_cursor(self.identity, cursor, self._cursor_version)
            self._cursor = cursor
        self.store.ack(batch_id)
        self.meta.remove_mark(self.identity, batch_id)
        return cursor

    def rollback(self) -> None:
        """Give back every outstanding batch: the next gets deliver the same changes again."""
        self._check_subscribed()
        outstanding = self.store.outstanding
        if not self.store.rollback():
            self._reread_from_cursor()
        for batch_id in outstanding:
            with contextlib.suppress(CanalError):
                self.meta.remove_mark(self.identity, batch_id)

    def _reread_from_cursor(self) -> None:
        """Reset the store and restart the dump at the durable cursor.

        Under the instance lock, so the parser thread cannot record progress from the old read
        after the reset (it checks the restart flag under the same lock).
        """
        with self._lock:
            cursor = self._cursor
            if cursor is not None and cursor.binlog_position is not None:
                pos = cursor.binlog_position
                skip = None if cursor.included else (pos.file_number, pos.pos, _FAR, _FAR)
                self._resume = StartPoint(pos, None, skip, "cursor")
                self._gtid_pos = self._parse_gtid(cursor.gtid) if cursor.gtid else None
            else:
                assert self.start_point is not None
                self._resume = self.start_point
            self._skip_through = self._resume.skip_through
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

    def close(self) -> None:
        """Stop the parser thread, close the store and release the HA node (idempotent)."""
        self._stop.set()
        self.store.close()
        stream = self._stream
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.close()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.running is not None:
            with contextlib.suppress(Exception):
                self.running.close()
        self._subscribed = False

    def __enter__(self) -> CanalInstance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_subscribed(self) -> None:
        if not self._subscribed:
            raise CanalError(f"destination {self.config.destination!r} is not subscribed")

    # ------------------------------------------------------------------ state

    @property
    def cursor(self) -> LogPosition | None:
        """The last acknowledged ack point (canal's cursor)."""
        return self._cursor

    @property
    def error(self) -> BaseException | None:
        return self._error

    @property
    def reading_finished(self) -> bool:
        """The parser thread reached the stop position (or failed)."""
        return self._finished

    @property
    def done(self) -> bool:
        """Drain mode: everything up to the stop position was handed out and acked."""
        if self._error is not None:
            raise self._error
        return self._finished and self.store.buffered == 0 and not self.store.outstanding

    @property
    def lag_seconds(self) -> float | None:
        """Seconds the reader is behind the server (0 when it is waiting at the head)."""
        if self._caught_up:
            return 0.0
        if not self._last_event_ts:
            return None
        return max(0.0, time.time() - self._last_event_ts)

    def peek(self, limit: int | None = None) -> int:
        """Count matching row changes between the cursor (or start) and the server's head now.

        Reads with a separate dump and moves nothing.

        :param limit: stop counting once this many were found.
        """
        cursor, _ = self.meta.get_cursor(self.identity)
        point = resolve_start(self.client, cursor, self.config.start)
        head = self.client.head_position()
        if point.position is not None and point.position >= head:
            return 0
        skip = point.skip_through
        count = 0
        flt = self.config.filter
        scanner = side_client(self.client)
        with scanner.dump(
            point.position, gtid=None if point.position else point.gtid, stop_at=head
        ) as stream:
            for event in stream:
                body = event.body
                if not isinstance(body, RowsEvent) or body.table_map is None:
                    continue
                if not flt.matches(body.schema, body.table):
                    continue
                if skip is not None and (file_number(event.file), event.pos) <= skip[:2]:
                    continue
                count += len(body.rows)
                if limit is not None and count >= limit:
                    return count
        return count

    # ------------------------------------------------------------------ parser thread

    def _run(self) -> None:
        attempt = 0
        delay = self.config.reconnect_initial
        try:
            while not self._stop.is_set():
                with self._lock:
                    self._restart.clear()
                    generation = self.store.generation
                    point = self._resume
                assert point is not None
                try:
                    self._read(point, generation)
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
                    attempt += 1
                    self.reconnects += 1
                    limit = self.config.reconnect_attempts
                    if limit is not None and attempt > limit:
                        raise
                    log.warning(
                        "destination %s: %s; reconnecting in %.1fs (attempt %d)",
                        self.config.destination, exc, delay, attempt,
                    )  # fmt: skip
                    if self._stop.wait(delay):
                        break
                    delay = min(delay * 2, self.config.reconnect_max)
                    continue
                attempt = 0
        except PurgedBinlogError as exc:
            self._error = StartPositionError(str(exc))
        except Exception as exc:
            if not self.store.closed:
                self._error = unreadable(exc, self.config.destination, self.client, self._resume) or exc
                log.error("destination %s: reading stopped: %s", self.config.destination, exc)
        finally:
            self._finished = True
            with contextlib.suppress(Exception):
                self.store.flush()

    def _read(self, point: StartPoint, generation: int) -> None:
        stream = self.client.dump(
            point.position,
            gtid=None if point.position is not None else point.gtid,
            stop_at=self.stop_at,
            include_heartbeats=True,
        )
        self._stream = stream
        history = self.history
        if history is not None and history.connect is not None:
            ctx = stream.parser.ctx

            matches = self.config.filter.matches

            def resolver(table_map: Any) -> Any:
                if not matches(table_map.schema, table_map.table):
                    return None  # never decoded: no lookups, no history for other tables
                h = ctx.header
                key = (file_number(ctx.file), (h.log_pos - h.event_size) if h is not None else 0)
                return history.resolve(table_map, key)

            ctx.schema_resolver = resolver
        self._txn = _Txn()
        self._pending_end = None
        self._gaps = FileGapCheck()
        try:
            for event in stream:
                if self._stop.is_set() or self._restart.is_set():
                    return
                self._handle(event, generation)
                # progress: a reconnect resumes after the last complete transaction
            if self._pending_end is not None and not self._restart.is_set():
                self._put([self._pending_end], generation)
                self._pending_end = None
        finally:
            self._stream = None
            stream.close()

    def _put(self, entries: list[Entry], generation: int, size_each: int | None = None) -> None:
        if not entries:
            return
        skip = self._skip_through
        last = self._last_put
        seen = max(skip, last) if skip is not None and last is not None else skip if last is None else last
        keep = entries
        if seen is not None and tuple(entries[0].order_key) <= seen:  # re-read after a reconnect
            keep = [e for e in entries if tuple(e.order_key) > seen]
        if not keep:
            return
        self.store.put(keep, generation=generation, size_each=size_each)
        with self._lock:
            if not self._restart.is_set():
                self._last_put = tuple(keep[-1].order_key)  # type: ignore[assignment]
        self._last_put_time = time.monotonic()

    def _handle(self, event: Event, generation: int) -> None:
        code = event.header.type_code
        if code in _HEARTBEATS:
            self._caught_up = True
            return
        if event.header.timestamp:
            self._last_event_ts = event.header.timestamp
            self._caught_up = False
        body = event.body
        txn = self._txn
        if isinstance(body, RowsEvent):
            self._rows(event, body, generation)
        elif isinstance(body, GtidEvent):
            txn.gtid = None if body.anonymous else str(body.gtid)
            txn.open = True
            txn.start = event.position
            txn.has_rows = False
            txn.commit_ts = body.immediate_commit_timestamp // 1_000_000
        elif isinstance(body, MariadbGtidEvent):
            txn.gtid = str(body.gtid)
            txn.open = not body.standalone
            txn.start = event.position if txn.open else None
            self._gaps.gtid(body)
            txn.has_rows = False
            txn.commit_ts = 0
        elif isinstance(body, QueryEvent):
            self._query(event, body, generation)
        elif code in (EventType.XID_EVENT, EventType.XA_PREPARE_LOG_EVENT):
            self._end(event, generation)
        elif isinstance(body, RotateEvent):
            check_rotate(event, body, txn.start if txn.open else None)
        elif isinstance(body, UnknownEvent):
            skip_unknown(event, self._unknown_warned, self.config.destination)
        elif isinstance(body, GtidListEvent):
            self._gaps.gtid_list(event, body)

    def _advance_gtid(self) -> str | None:
        g = self._txn.gtid
        if g is not None:
            cur = self._gtid_pos
            try:
                if "-" in g and ":" not in g:
                    base = cur if isinstance(cur, MariadbGtidList) else MariadbGtidList()
                    self._gtid_pos = base.advance(g)
                else:
                    base_set = cur if isinstance(cur, MysqlGtidSet) else MysqlGtidSet()
                    self._gtid_pos = base_set.add(g)
            except (ConfigurationError, ValueError):
                pass
        return str(self._gtid_pos) if self._gtid_pos else None

    def _key(self, event: Event, row: int) -> OrderKey:
        pidx = event.payload_index if event.payload_index is not None else -1
        return OrderKey(file_number(event.file), event.pos, pidx, row)

    def _end(self, event: Event, generation: int) -> None:
        txn = self._txn
        gtid_set = self._advance_gtid()
        entry = TransactionEnd(
            destination=self.config.destination,
            position=event.position,
            end_position=event.end_position,
            gtid=txn.gtid,
            timestamp=txn.commit_ts or event.header.timestamp,
            order_key=self._key(event, 0),
            server_id=event.header.server_id,
            gtid_set=gtid_set,
        )
        had_rows = txn.has_rows
        self._txn = _Txn()
        self._progress(event)
        if had_rows or time.monotonic() - self._last_put_time >= self.config.idle_end_interval:
            self._pending_end = None
            self._put([entry], generation)
        else:
            self._pending_end = entry

    def _progress(self, event: Event) -> None:
        """A transaction ended at ``event``: a reconnect may resume just after it."""
        with self._lock:
            if not self._restart.is_set():
                self._resume = StartPoint(event.end_position, None, None, "reconnect")

    def _query(self, event: Event, body: QueryEvent, generation: int) -> None:
        sql = body.sql.strip()
        upper = sql[:16].upper()
        txn = self._txn
        if upper == "BEGIN" or upper.startswith("XA "):
            txn.open = True
            # XA COMMIT/ROLLBACK of a prepared transaction end their group without an XID after them
            done = upper.startswith(("XA COMMIT", "XA ROLLBACK"))
            txn.start = None if done else txn.start or event.position
            return
        if upper.startswith("COMMIT") or upper.startswith("ROLLBACK"):
            self._end(event, generation)
            return
        stmt = parse_ddl(sql, body.schema)
        if stmt is None:
            if not txn.open:  # a statement-format or standalone statement outside a transaction
                self._end(event, generation)
            return
        flt = self.config.filter
        names = [*stmt.tables, *(new for _, new in stmt.renames)]
        if self.history is not None and any(flt.matches(schema, table) for schema, table in names):
            try:
                self.history.apply_ddl(stmt, event.position)
            except Exception as exc:  # the history must not stop the stream; decoding checks it
                log.warning("schema history could not apply %r: %s", sql[:200], exc)
        gtid_set = self._advance_gtid()
        entries: list[Entry] = []
        targets: list[tuple[str, str | None]] = list(stmt.tables) or [(body.schema, None)]
        kind = DdlKind.TRUNCATE if stmt.kind == "truncate" else DdlKind.DDL
        targets = [(schema, table) for schema, table in targets if flt.matches(schema, table)]
        for i, (schema, table) in enumerate(targets):
            ts = None
            if self.history is not None and table is not None:
                found = self.history.at(schema, table, (file_number(event.file), event.pos))
                ts = found[0] if found else None
            entries.append(
                DdlEntry(
                    destination=self.config.destination,
                    schema=schema,
                    table=table,
                    kind=kind,
                    sql=sql,
                    position=event.position,
                    end_position=event.end_position,
                    gtid=txn.gtid,
                    timestamp=event.header.timestamp,
                    order_key=self._key(event, i),
                    table_schema=ts,
                    server_id=event.header.server_id,
                    gtid_set=gtid_set,
                    ends_statement=i == len(targets) - 1,
                )
            )
        self._txn = _Txn()
        self._progress(event)
        if entries:
            self._pending_end = None
            self._put(entries, generation)
        else:
            end = TransactionEnd(
                self.config.destination, event.position, event.end_position, txn.gtid,
                event.header.timestamp, self._key(event, 0), event.header.server_id, gtid_set,
            )  # fmt: skip
            if time.monotonic() - self._last_put_time >= self.config.idle_end_interval:
                self._pending_end = None
                self._put([end], generation)
            else:
                self._pending_end = end

    def _rows(self, event: Event, body: RowsEvent, generation: int) -> None:
        tm = body.table_map
        if tm is None:
            return
        schema, table = tm.schema, tm.table
        flt = self.config.filter
        if not flt.matches(schema, table):
            return
        ts = tm.table_schema
        if ts.columns and ts.columns[0].name.startswith("@"):
            raise SchemaMismatchError(
                f"column names of {schema}.{table} are unknown at {event.position}: the binlog has no "
                "column metadata (binlog_row_metadata=MINIMAL) and information_schema could not be "
                "read; set binlog_row_metadata=FULL or give the user SELECT on the table"
            )
        pk = ts.primary_key
        op = _OPS[body.kind]
        txn = self._txn
        txn.has_rows = True
        timestamp = txn.commit_ts or event.header.timestamp
        has_rules = flt.has_column_rules(schema, table)
        fn = file_number(event.file)
        pidx = event.payload_index if event.payload_index is not None else -1
        pos, end = event.position, event.end_position
        dest, gtid = self.config.destination, txn.gtid
        out: list[Entry] = []
        for i, (before, after) in enumerate(body.images()):
            if has_rules:
                before = flt.project(schema, table, before, pk)
                after = flt.project(schema, table, after, pk)
            out.append(
                RowChange(
                    dest,
                    schema,
                    table,
                    op,
                    before,
                    after,
                    pk,
                    pos,
                    end,
                    gtid,
                    timestamp,
                    OrderKey(fn, event.pos, pidx, i),
                    ts,
                )
            )
        if not out:
            return
        first = out[0]
        assert isinstance(first, RowChange)
        size_each = row_size(
            len(first.before or ()) + len(first.after or ()),
            (first.before is not None) + (first.after is not None),
            body.rows_bytes // len(out),
        )
        self._put(out, generation, size_each)
