"""The canal instance: one destination's durable subscription (what the Airflow hook holds).

::

    source --dump--> [reader thread: decode, filter, convert] --put--> EventStore --get/ack--> consumer
                                                                                   |
                                                    MetaManager: cursor (CAS), marks, runs, schema

Lifecycle::

    inst = CanalInstance(InstanceConfig(destination="shop", source=ReplicationConfig(...),
                                        filter=TableFilter("shop\\\\..*")),
                         meta=ZooKeeperMetaManager(zk), running=RunningNode(zk, identity, label))
    inst.subscribe(stop_at="head")            # HA, cursor / start position, reader thread
    while not inst.done:
        batch = inst.get_without_ack(1000, timeout=1.0)
        if batch.id is None:
            continue
        ...stage / merge batch.entries...
        inst.ack(batch.id)                    # moves the cursor (CAS) when the batch has an ack point
    inst.close()

* **Conversion** (:mod:`.convert`): row events become :class:`~.change.RowChange`, XID/COMMIT
  :class:`~.change.TransactionEnd`, DDL :class:`~.change.DdlEntry`; XA transactions and
  statement-format DML are handled there too.
* **Reading** (:mod:`.reader`): the reader thread dumps, converts and puts into the store; it
  reconnects after a lost connection and re-reads from the cursor after a rollback that the store
  cannot serve.
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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.errors import BinlogError
from airflow_provider_binlog.binlog.events_query import ExecuteLoadQueryEvent, QueryEvent
from airflow_provider_binlog.binlog.gtid import MariadbGtidList, MysqlGtidSet
from airflow_provider_binlog.binlog.position import BinlogPosition, file_number
from airflow_provider_binlog.binlog.rows import RowsEvent
from airflow_provider_binlog.canal.change import (
    DdlEntry,
    Entry,
    Op,
    TransactionEnd,
)
from airflow_provider_binlog.canal.convert import BeforeColumns, EntryConverter
from airflow_provider_binlog.canal.errors import (
    BatchOrderError,
    CanalError,
    MetaConflictError,
)
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.meta.base import MetaManager, Version
from airflow_provider_binlog.canal.meta.model import ClientIdentity, LogPosition, PositionRange
from airflow_provider_binlog.canal.positions.start import StartPoint, StartSpec, resolve_start, side_client
from airflow_provider_binlog.canal.reader import BinlogReader
from airflow_provider_binlog.canal.schema import SchemaHistory
from airflow_provider_binlog.canal.sql.statement import statement_changes
from airflow_provider_binlog.canal.store import Batch, EventStore
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
    :param reconnect_attempts: give up after this many consecutive failures (``None``: no count).
    :param reconnect_timeout: give up once the source has been unreachable for this many seconds in
        a row (``None``: no time bound); the consumer then gets a
        :class:`~.errors.SourceUnavailableError` naming the source, the last error and the position.
    :param schema_history: keep a schema history (needed with ``binlog_row_metadata=MINIMAL``).
    :param idle_end_interval: seconds after which a filtered-out transaction's end is put anyway.
    :param before_columns: the columns of each table's before images the consumer needs
        (:data:`~.convert.BeforeColumns`; ``None``: all). The drain sets it for its run: a merge by
        key needs the key columns of an update's or a delete's before image, nothing else.
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
    reconnect_timeout: float | None = 300.0
    schema_history: bool = True
    idle_end_interval: float = 1.0
    before_columns: BeforeColumns | None = field(default=None, compare=False, repr=False)

    @property
    def identity(self) -> ClientIdentity:
        return ClientIdentity(self.destination, self.client_id, self.filter.include)


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
        self._subscribed = False
        self._gtid_start: MariadbGtidList | MysqlGtidSet | None = None
        self.reader: BinlogReader | None = None  # the reader thread, from subscribe on

    def __repr__(self) -> str:
        return (
            f"CanalInstance({self.config.destination!r}, client_id={self.config.client_id}, {self.store!r})"
        )

    def _connect_source(self) -> Any:
        return self.client.connect()  # a failure names the address and the connection

    # ------------------------------------------------------------------ subscription

    def subscribe(
        self, stop_at: BinlogPosition | str | None = None, running_timeout: float = 0.0
    ) -> StartPoint:
        """Take the HA node, read the cursor (or decide the start), and start the reader thread.

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
                "destination %s: an earlier attempt left %d batches unacked (its batch ids %s); this "
                "attempt reads their range again from the cursor, in batches of its own, and skips "
                "what the lake holds",
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
            self._gtid_start = self._parse_gtid(self._cursor.gtid)
        elif point.gtid:
            self._gtid_start = self._parse_gtid(point.gtid)
        self._subscribed = True
        self._start_reader(point)
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
        except (pymysql.err.MySQLError, BinlogError) as exc:  # BinlogError: the connect's own errors
            code = getattr(exc, "code", None) or (exc.args[0] if exc.args else "?")
            log.warning(
                "destination %s: cannot read information_schema (error %s); column names come from "
                "the binlog only (binlog_row_metadata=FULL needed)",
                self.config.destination, code if isinstance(code, int) else exc,
            )  # fmt: skip
            self.history.connect = None

    def _start_reader(self, point: StartPoint) -> None:
        cfg = self.config
        converter = EntryConverter(
            cfg.destination, cfg.filter, lambda entries, size: None, self.history,
            idle_end_interval=cfg.idle_end_interval, gtid_position=self._gtid_start,
            before_columns=cfg.before_columns,
        )  # fmt: skip
        self.reader = BinlogReader(
            cfg.destination, self.client, self.store, cfg.filter, self.history, converter,
            reconnect_initial=cfg.reconnect_initial, reconnect_max=cfg.reconnect_max,
            reconnect_attempts=cfg.reconnect_attempts, reconnect_timeout=cfg.reconnect_timeout,
            thread_name=f"canal-{cfg.destination}-{cfg.client_id}",
        )  # fmt: skip
        self.reader.start(point, self.stop_at)

    # ------------------------------------------------------------------ consumer API

    def get_without_ack(self, batch_size: int = 1000, timeout: float | None = 1.0) -> Batch:
        """The next batch after ``get`` (see :meth:`EventStore.get_without_ack`); records its mark.

        :raises: the reader thread's error once everything before it was handed out.
        """
        self._check_subscribed()
        if self.running is not None:
            self.running.check()
        error = self.error
        if error is not None and self.store.buffered == 0:
            raise error
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
        elif (error := self.error) is not None and self.store.buffered == 0:
            raise error
        return batch

    def ack(self, batch_id: int) -> LogPosition | None:
        """Acknowledge the oldest outstanding batch; persist the cursor when it has an ack point.

        :return: the new cursor, or ``None`` when the batch lay inside a transaction.
        :raises SessionLostError: the HA session is suspended or lost (nothing is changed).
        :raises BatchOrderError: not the oldest outstanding batch (names both ids).
        :raises MetaConflictError: the cursor was moved by someone else.
        """
        return self.ack_many((batch_id,))

    def ack_many(self, batch_ids: Sequence[int]) -> LogPosition | None:
        """:meth:`ack` of the oldest outstanding batches ``batch_ids``, in order, as one: the cursor
        is written once, at the last ack point among them, and their marks are removed together.

        :return: the new cursor, or ``None`` when none of them has an ack point.
        :raises SessionLostError: the HA session is suspended or lost (nothing is changed).
        :raises BatchOrderError: they are not the oldest outstanding batches in order (nothing is
            changed; names the first one that is not and the batch in its place).
        :raises MetaConflictError: the cursor was moved by someone else (nothing is changed).
        """
        if not batch_ids:
            return None
        self._check_subscribed()
        if self.running is not None:
            self.running.check()
        batches = self.store.oldest_outstanding_batches(len(batch_ids))
        for i, batch_id in enumerate(batch_ids):
            if i >= len(batches) or batches[i].id != batch_id:
                raise BatchOrderError(batch_id, batches[i].id if i < len(batches) else None)
        point = next((b.ack_point for b in reversed(batches) if b.ack_point is not None), None)
        cursor = None
        if point is not None:  # the cursor first: if the compare-and-set fails, nothing is acked
            cursor = log_position(point, self.config.source)
            self._cursor_version = self.meta.set_cursor(self.identity, cursor, self._cursor_version)
            self._cursor = cursor
        for batch_id in batch_ids:
            self.store.ack(batch_id)
        self.meta.remove_marks(self.identity, batch_ids)
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
        """Reset the store and restart the dump at the durable cursor (see :meth:`BinlogReader.reread`)."""
        assert self.reader is not None
        cursor = self._cursor
        if cursor is not None and cursor.binlog_position is not None:
            pos = cursor.binlog_position
            skip = None if cursor.included else (pos.file_number, pos.pos, _FAR, _FAR)
            point = StartPoint(pos, None, skip, "cursor")
            gtid = self._parse_gtid(cursor.gtid) if cursor.gtid else None
        else:
            assert self.start_point is not None
            point, gtid = self.start_point, self._gtid_start
        self.reader.reread(point, gtid)

    def close(self) -> None:
        """Stop the reader thread, close the store and release the HA node (idempotent)."""
        if self.reader is not None:
            self.reader.stop()
        else:
            self.store.close()
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
        """What stopped the reader thread, if anything."""
        return self.reader.error if self.reader is not None else None

    @property
    def reading_finished(self) -> bool:
        """The reader thread reached the stop position (or failed)."""
        return self.reader is not None and self.reader.finished

    @property
    def done(self) -> bool:
        """Drain mode: everything up to the stop position was handed out and acked."""
        error = self.error
        if error is not None:
            raise error
        return self.reading_finished and self.store.buffered == 0 and not self.store.outstanding

    @property
    def reconnects(self) -> int:
        """How often the reader reconnected."""
        return self.reader.reconnects if self.reader is not None else 0

    @property
    def lag_seconds(self) -> float | None:
        """Seconds the reader is behind the server (0 when it is waiting at the head)."""
        if self.reader is None:
            return None
        conv = self.reader.converter
        if conv.caught_up:
            return 0.0
        if not conv.last_event_ts:
            return None
        return max(0.0, time.time() - conv.last_event_ts)

    def peek(self, limit: int | None = None) -> int:
        """Count matching row changes between the cursor (or start) and the server's head now; a
        statement-format DML counts once per routed table it writes (its rows are not in the binlog).

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
                if isinstance(body, QueryEvent | ExecuteLoadQueryEvent):
                    n = statement_changes(body, flt.matches)
                elif isinstance(body, RowsEvent) and body.table_map is not None:
                    n = len(body.rows) if flt.matches(body.schema, body.table) else 0
                else:
                    continue
                if not n or (skip is not None and (file_number(event.file), event.pos) <= skip[:2]):
                    continue
                count += n
                if limit is not None and count >= limit:
                    return count
        return count
