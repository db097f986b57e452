"""Event -> entry conversion (canal's converter, apart from the reader and the store).

An :class:`EntryConverter` is fed decoded :class:`~airflow_provider_binlog.binlog.event.Event`\\ s in
binlog order and hands the entries they make to a ``sink`` (the reader puts them in the store;
a test collects them). It needs no server: feeding it decoded events is enough.

* Row events of routed tables become :class:`~.change.RowChange` (one per row, order key
  ``(file number, event pos, payload index or -1, row index)``).
* XID/COMMIT become :class:`~.change.TransactionEnd`; DDL/TRUNCATE become :class:`~.change.DdlEntry`
  (one per affected routed table) and feed the :class:`~.schema.SchemaHistory`.
* A transaction with no matching change still yields its TransactionEnd when nothing was emitted
  for ``idle_end_interval`` seconds (so the cursor keeps moving on a busy source whose changes are
  all filtered out) and at the end of the stream (:meth:`EntryConverter.finish`).
* After every complete transaction ``progress(event)`` is called: a reconnect may resume after it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_binlog.binlog.constants import EventType
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
from airflow_provider_binlog.canal.errors import SchemaMismatchError
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.schema import SchemaHistory
from airflow_provider_binlog.canal.store import row_size
from airflow_provider_binlog.canal.unreadable import FileGapCheck, check_rotate, skip_unknown
from airflow_provider_binlog.errors import ConfigurationError

log = logging.getLogger(__name__)

_OPS = {"insert": Op.INSERT, "update": Op.UPDATE, "delete": Op.DELETE}
_HEARTBEATS = (EventType.HEARTBEAT_LOG_EVENT, EventType.HEARTBEAT_LOG_EVENT_V2)

GtidPosition = MariadbGtidList | MysqlGtidSet
Sink = Callable[[list[Entry], "int | None"], None]
"""``sink(entries, size_each)``: entries in order; ``size_each`` the store's size estimate of each
(the rows of one event), ``None`` to let the store estimate."""


@dataclass
class _Txn:
    gtid: str | None = None
    open: bool = False
    start: BinlogPosition | None = None  # where the open transaction began
    has_rows: bool = False
    commit_ts: int = 0


def _no_progress(event: Event) -> None:
    return None


class EntryConverter:
    """Turns decoded events into entries (see the module docstring).

    :param destination: the destination name the entries carry.
    :param filter: which tables (and columns) are routed.
    :param sink: receives the entries (see :data:`Sink`).
    :param history: the schema history fed with DDL of routed tables (``None``: none kept).
    :param progress: called with the last event of every complete transaction.
    :param idle_end_interval: seconds after which a filtered-out transaction's end is emitted anyway.
    :param gtid_position: the GTID position before the first event fed.
    :param clock: a monotonic clock (for the idle end).
    """

    def __init__(
        self,
        destination: str,
        filter: TableFilter,
        sink: Sink,
        history: SchemaHistory | None = None,
        progress: Callable[[Event], None] = _no_progress,
        idle_end_interval: float = 1.0,
        gtid_position: GtidPosition | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.destination = destination
        self.filter = filter
        self.sink = sink
        self.history = history
        self.progress = progress
        self.idle_end_interval = idle_end_interval
        self.gtid_position = gtid_position
        self.clock = clock
        self.caught_up = False  # a heartbeat came: the reader waits at the server's head
        self.last_event_ts = 0  # header timestamp of the last event read
        self._txn = _Txn()
        self._pending_end: TransactionEnd | None = None
        self._last_emit = 0.0
        self._unknown_warned: set[int] = set()
        self._gaps = FileGapCheck()

    # ------------------------------------------------------------------ stream boundaries

    def begin_stream(self) -> None:
        """A new dump starts (first read, reconnect or re-read): no transaction is open."""
        self._txn = _Txn()
        self._pending_end = None
        self._gaps = FileGapCheck()

    def reset(self, gtid_position: GtidPosition | None) -> None:
        """Reading restarts from the durable cursor: forget everything read after it."""
        self.begin_stream()
        self.gtid_position = gtid_position

    def finish(self) -> None:
        """The dump reached its stop position: emit a held transaction end."""
        if self._pending_end is not None:
            end, self._pending_end = self._pending_end, None
            self._emit([end])

    # ------------------------------------------------------------------ events

    def _emit(self, entries: list[Entry], size_each: int | None = None) -> None:
        self.sink(entries, size_each)
        self._last_emit = self.clock()

    def handle(self, event: Event) -> None:
        """Convert one event (in binlog order)."""
        code = event.header.type_code
        if code in _HEARTBEATS:
            self.caught_up = True
            return
        if event.header.timestamp:
            self.last_event_ts = event.header.timestamp
            self.caught_up = False
        body = event.body
        txn = self._txn
        if isinstance(body, RowsEvent):
            self._rows(event, body)
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
            self._query(event, body)
        elif code in (EventType.XID_EVENT, EventType.XA_PREPARE_LOG_EVENT):
            self._end(event)
        elif isinstance(body, RotateEvent):
            check_rotate(event, body, txn.start if txn.open else None)
        elif isinstance(body, UnknownEvent):
            skip_unknown(event, self._unknown_warned, self.destination)
        elif isinstance(body, GtidListEvent):
            self._gaps.gtid_list(event, body)

    def _advance_gtid(self) -> str | None:
        g = self._txn.gtid
        if g is not None:
            cur = self.gtid_position
            try:
                if "-" in g and ":" not in g:
                    base = cur if isinstance(cur, MariadbGtidList) else MariadbGtidList()
                    self.gtid_position = base.advance(g)
                else:
                    base_set = cur if isinstance(cur, MysqlGtidSet) else MysqlGtidSet()
                    self.gtid_position = base_set.add(g)
            except (ConfigurationError, ValueError):
                pass
        return str(self.gtid_position) if self.gtid_position else None

    @staticmethod
    def _key(event: Event, row: int) -> OrderKey:
        pidx = event.payload_index if event.payload_index is not None else -1
        return OrderKey(file_number(event.file), event.pos, pidx, row)

    def _end(self, event: Event) -> None:
        txn = self._txn
        gtid_set = self._advance_gtid()
        entry = TransactionEnd(
            destination=self.destination,
            position=event.position,
            end_position=event.end_position,
            gtid=txn.gtid,
            timestamp=txn.commit_ts or event.header.timestamp,
            order_key=self._key(event, 0),
            server_id=event.header.server_id,
            gtid_set=gtid_set,
        )
        self._txn = _Txn()
        self.progress(event)
        self._close(entry, txn.has_rows)

    def _close(self, end: TransactionEnd, had_rows: bool) -> None:
        """Emit a transaction's end now, or hold it while nothing routed was emitted lately."""
        if had_rows or self.clock() - self._last_emit >= self.idle_end_interval:
            self._pending_end = None
            self._emit([end])
        else:
            self._pending_end = end

    def _query(self, event: Event, body: QueryEvent) -> None:
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
            self._end(event)
            return
        stmt = parse_ddl(sql, body.schema)
        if stmt is None:
            if not txn.open:  # a statement-format or standalone statement outside a transaction
                self._end(event)
            return
        flt = self.filter
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
            ts = prev = None
            if self.history is not None and table is not None:
                found = self.history.at(schema, table, (file_number(event.file), event.pos))
                ts = found[0] if found else None
                if ts is not None:  # the schema its rows carry (projected by columns=)
                    ts = flt.table_schema(ts, event.position)
                found = self.history.at(schema, table, (file_number(event.file), event.pos - 1))
                prev = flt.table_schema(found[0], event.position) if found and found[0] else None
            entries.append(
                DdlEntry(
                    destination=self.destination,
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
                    previous_schema=prev,
                )
            )
        self._txn = _Txn()
        self.progress(event)
        if entries:
            self._pending_end = None
            self._emit(entries)
        else:
            end = TransactionEnd(
                self.destination, event.position, event.end_position, txn.gtid,
                event.header.timestamp, self._key(event, 0), event.header.server_id, gtid_set,
            )  # fmt: skip
            self._close(end, False)

    def _rows(self, event: Event, body: RowsEvent) -> None:
        tm = body.table_map
        if tm is None:
            return
        schema, table = tm.schema, tm.table
        flt = self.filter
        if not flt.matches(schema, table):
            return
        ts = tm.table_schema
        if ts.columns and ts.columns[0].name.startswith("@"):
            raise SchemaMismatchError(
                f"column names of {schema}.{table} are unknown at {event.position}: the binlog has no "
                "column metadata (binlog_row_metadata=MINIMAL) and information_schema could not be "
                "read; set binlog_row_metadata=FULL or give the user SELECT on the table"
            )
        ts = flt.table_schema(ts, event.position)  # refused tables stop here; column rules project it
        pk = ts.primary_key
        op = _OPS[body.kind]
        txn = self._txn
        txn.has_rows = True
        timestamp = txn.commit_ts or event.header.timestamp
        has_rules = flt.has_column_rules(schema, table)
        fn = file_number(event.file)
        pidx = event.payload_index if event.payload_index is not None else -1
        pos, end = event.position, event.end_position
        dest, gtid = self.destination, txn.gtid
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
        self._emit(out, size_each)
