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
* **Statement-format DML** (a QUERY or EXECUTE_LOAD_QUERY event whose statement writes rows,
  :mod:`.statement`) on a routed table becomes a :class:`~.change.DdlEntry` of kind
  ``STATEMENT_DML`` per routed table it writes, at its place inside its transaction (never an ack
  point: the transaction's end follows it). The binlog holds no rows for it, so the consumer
  decides: the lake's fold stops the run or re-snapshots the table (class ``statement_dml`` of
  ``on_schema_change``, :mod:`.operations`), and skips it like any other change its mark covers
  (after a re-snapshot taken past it). Inside an XA transaction it is held and released with the
  rows. On tables that are not routed, and in the ``mysql`` schema, it is ignored; a DML statement
  whose tables cannot be named raises :class:`~.errors.StatementDmlError`.

XA transactions
---------------
What the server writes (MariaDB 10.11, read with the parser; MySQL 8 writes the same groups with
``XA START`` as a QUERY event where MariaDB flags the GTID event)::

    XA START..END; XA PREPARE   GTID(FL_PREPARED_XA, xid) rows.. QUERY "XA END X'..',X'..',n" XA_PREPARE
    XA COMMIT                    GTID(FL_STANDALONE|FL_COMPLETED_XA, xid) QUERY "XA COMMIT X'..',X'..',n"
    XA ROLLBACK (prepared)       GTID(FL_STANDALONE|FL_COMPLETED_XA, xid) QUERY "XA ROLLBACK X'..',X'..',n"
    XA ROLLBACK (not prepared)   nothing
    XA COMMIT .. ONE PHASE       MariaDB: GTID rows.. XID (an ordinary transaction)
                                 MySQL: GTID QUERY "XA START" rows.. "XA END" XA_PREPARE(one_phase=1)

So the rows come at the PREPARE, and the decision later, any number of transactions after it
(even in a later run). The converter therefore:

* holds the rows (and statement-format DML entries) of an XA group back (in memory) and, at its
  XA_PREPARE, keeps them by XID;
* at ``XA COMMIT`` hands them out **as changes at the commit's place**: position and order key of
  the ``XA COMMIT`` event (row index counting through the transaction's rows). That is where they
  become visible on the source, and they cannot conflict with what committed in between (the
  prepared transaction holds its row locks until then). It also keeps the lake's exactly-once
  marks right: those skip what sorts at or before a table's mark, and other transactions' changes
  merged between PREPARE and COMMIT have moved the marks past the PREPARE;
* at ``XA ROLLBACK`` drops them; a one-phase commit is an ordinary commit;
* while any prepared XA transaction is unresolved, marks every transaction end and DDL entry it
  emits ``durable=False``: the store never makes them ack points (:mod:`.store`).

Why the cursor then never passes the oldest unresolved PREPARE: the cursor only moves to a batch's
ack point, and only durable entries are ack points. A durable entry is emitted only when no
PREPARE read so far is unresolved; every PREPARE before it was resolved before it. So every cursor
lies before the oldest PREPARE unresolved at that cursor's place, and a restart (which resumes at
the cursor; a re-read after a rollback too, with a fresh converter) reads that PREPARE's rows
again before its COMMIT. A drain that stops at a stop point with a transaction still prepared
ends with its cursor before that PREPARE: the rows are not applied, and the next run applies them
exactly once, at the COMMIT (transactions between PREPARE and cursor-to-be are read again and
skipped by the lake's marks). A reconnect within a run resumes after the last transaction and
keeps the converter, prepared rows included.

An ``XA COMMIT`` whose PREPARE was not read (prepared before the point this reader started at: a
snapshot's handover position, a first start at the head, ``start_from``) makes the converter ask
its ``lookback`` (:class:`~.xa_lookback.XaLookback`, set by the reader) for that PREPARE group in
the binlogs before the first transaction it read; the group's rows, converted with the same filter
and the schema history at their position, are released at the COMMIT's place as if they had been
held. When the PREPARE cannot be found (purged, or the search's time bound ran out), reading stops
with :class:`~.errors.XaPrepareUnseenError` (XID, the commit's ``file:pos``, the remedy) before
anything at or after the commit is handed out. An ``XA ROLLBACK`` of such an XID has nothing to
apply. Nothing else makes a COMMIT of an unseen XID: one prepared and committed before the start
has its COMMIT before the start too, and a restart resumes at a cursor before every PREPARE it has
not seen resolved, or (a cursor a converter without that PREPARE moved) after the start point the
lookback searches back from again.

Limits: prepared rows are held in memory (XA transactions are usually small); a binlog purged past
an unresolved PREPARE makes the cursor's file unreadable (a :class:`~.errors.PurgedPositionError`
then says so).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from airflow_provider_binlog.binlog import values
from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.event import Event, UnknownEvent
from airflow_provider_binlog.binlog.events import RotateEvent, XaPrepareEvent
from airflow_provider_binlog.binlog.events_gtid import GtidEvent
from airflow_provider_binlog.binlog.events_mariadb import GtidListEvent, MariadbGtidEvent, MariadbGtidFlag
from airflow_provider_binlog.binlog.events_query import ExecuteLoadQueryEvent, QueryEvent
from airflow_provider_binlog.binlog.gtid import MariadbGtidList, MysqlGtidSet
from airflow_provider_binlog.binlog.position import BinlogPosition, file_number
from airflow_provider_binlog.binlog.rows import RowsEvent, image_pairs
from airflow_provider_binlog.canal import hidden_columns
from airflow_provider_binlog.canal.change import (
    DdlEntry,
    DdlKind,
    Entry,
    Op,
    OrderKey,
    RowChange,
    TransactionEnd,
)
from airflow_provider_binlog.canal.errors import (
    SchemaMismatchError,
    StatementDmlError,
    XaError,
    XaPrepareUnseenError,
)
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.schema import SchemaHistory
from airflow_provider_binlog.canal.sql.ddl import parse_ddl
from airflow_provider_binlog.canal.sql.statement import routed_dml
from airflow_provider_binlog.canal.store import row_size
from airflow_provider_binlog.canal.unreadable import FileGapCheck, check_rotate, skip_unknown
from airflow_provider_binlog.errors import ConfigurationError

log = logging.getLogger(__name__)

_OPS = {"insert": Op.INSERT, "update": Op.UPDATE, "delete": Op.DELETE}
_new_key = tuple.__new__
_MODES = {"update": 0, "insert": 1, "delete": 2}  # records(): (before, after) pairs, after, before
_ROW_FIELDS = (
    "destination", "schema", "table", "op", "before", "after", "primary_key", "position", "end_position",
    "gtid", "timestamp", "order_key", "table_schema",
)  # fmt: skip
_ROW_SLOTS = (4, 5, 11)  # before, after, order_key: set per row by records()


def _record_builder() -> tuple[Any, Any]:
    """The C extension's ``records`` and its plan for :class:`RowChange`, or ``(None, None)``
    (no C decoder, ``BINLOG_CDC_PURE_PYTHON``): the rows of an event then become RowChanges
    without a Python ``__init__`` call per row. The plan names every slot, in the field order
    :meth:`EntryConverter._rows` passes the values in (checked here)."""
    mod = values.native_module()
    names = tuple(f.name for f in fields(RowChange))
    if mod is None or not hasattr(mod, "records") or names != _ROW_FIELDS:
        return None, None
    if hasattr(RowChange, "__post_init__") or RowChange.__init__.__qualname__ != "RowChange.__init__":
        return None, None
    return mod.records, mod.record_plan(RowChange, names)


_records, _record_plan = _record_builder()
_HEARTBEATS = (EventType.HEARTBEAT_LOG_EVENT, EventType.HEARTBEAT_LOG_EVENT_V2)

GtidPosition = MariadbGtidList | MysqlGtidSet
Sink = Callable[[list[Entry], "int | None"], None]
"""``sink(entries, size_each)``: entries in order; ``size_each`` the store's size estimate of each
(the rows of one event), ``None`` to let the store estimate."""


XaId = tuple[int, bytes, bytes]
"""An XA transaction's id: format id, gtrid, bqual."""

_FL_PREPARED_XA = int(MariadbGtidFlag.FL_PREPARED_XA)
_FL_COMPLETED_XA = int(MariadbGtidFlag.FL_COMPLETED_XA)
_XID_TEXT = re.compile(r"X'([0-9A-Fa-f]*)'\s*,\s*X'([0-9A-Fa-f]*)'\s*,\s*(\d+)")
Held = RowChange | DdlEntry
"""What an XA transaction holds until its XA COMMIT: row changes and statement-format DML entries."""


@dataclass
class _Txn:
    gtid: str | None = None
    open: bool = False
    start: BinlogPosition | None = None  # where the open transaction began
    has_rows: bool = False
    commit_ts: int = 0
    xa: XaId | None = None  # an XA transaction's group: its rows are held back
    xa_rows: list[Held] | None = None
    completes: XaId | None = None  # the XA transaction an XA COMMIT/ROLLBACK group resolves


def xa_id_of_statement(sql: str) -> XaId | None:
    """The XID in a statement as the server logs it (``XA COMMIT X'61',X'',1``)."""
    m = _XID_TEXT.search(sql)
    if m is None:
        return None
    return int(m.group(3)), bytes.fromhex(m.group(1)), bytes.fromhex(m.group(2))


Lookback = Callable[[XaId, BinlogPosition], "list[Held] | str"]
"""``lookback(xid, before)``: the held entries of ``xid``'s PREPARE group found in the binlogs before
``before``, or why it was not found (:class:`~.xa_lookback.XaLookback`)."""


BeforeColumns = Callable[[str, str, TableSchema], "Sequence[str] | None"]
"""``before_columns(schema, table, table_schema)``: the columns of the table's before images (of
updates and deletes) a consumer needs, ``None`` for all of them. The others are not decoded, which
saves about half of an UPDATE's values (a merge by key needs only its key columns)."""

_Routed = tuple[Any, "TableSchema | None", bool, "frozenset[int] | None"]


def xid_text(xid: XaId) -> str:
    """An XID as the server writes it (``X'61',X'',1``)."""
    return f"X'{xid[1].hex()}',X'{xid[2].hex()}',{xid[0]}"


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
    :param lookback: finds the PREPARE of an XA transaction committed after the start point and
        prepared before it (``None``: such a commit stops reading).
    :param before_columns: the columns of a table's before images its consumer needs
        (:data:`BeforeColumns`; ``None``: every column of every table).
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
        lookback: Lookback | None = None,
        before_columns: BeforeColumns | None = None,
    ) -> None:
        self.destination = destination
        self.filter = filter
        self.sink = sink
        self.before_columns = before_columns
        self.history = history
        self.progress = progress
        self.idle_end_interval = idle_end_interval
        self.gtid_position = gtid_position
        self.clock = clock
        self.lookback = lookback
        self.caught_up = False  # a heartbeat came: the reader waits at the server's head
        self.last_event_ts = 0  # header timestamp of the last event read
        self._txn = _Txn()
        self._pending_end: TransactionEnd | None = None
        self._last_emit = 0.0
        self._unknown_warned: set[int] = set()
        self._gaps = FileGapCheck()
        self._prepared: dict[XaId, list[Held]] = {}  # unresolved XA PREPAREs, oldest first
        self._read_from: BinlogPosition | None = None  # the first transaction read since the reset
        self._routes: dict[int, _Routed] = {}  # id(TABLE_MAP) -> _routed

    # ------------------------------------------------------------------ stream boundaries

    def begin_stream(self) -> None:
        """A new dump starts (first read, reconnect or re-read): no transaction is open."""
        self._txn = _Txn()
        self._pending_end = None
        self._gaps = FileGapCheck()

    def reset(self, gtid_position: GtidPosition | None) -> None:
        """Reading restarts from the durable cursor: forget everything read after it (prepared XA
        transactions included: they lie after the cursor and are read again)."""
        self.begin_stream()
        self._prepared = {}
        self._read_from = None
        self.gtid_position = gtid_position

    @property
    def prepared(self) -> tuple[XaId, ...]:
        """The XA transactions prepared and not resolved yet, oldest first."""
        return tuple(self._prepared)

    def held(self, xid: XaId) -> list[Held]:
        """What the prepared XA transaction ``xid`` holds (its rows, in order; empty if unknown)."""
        return list(self._prepared.get(xid, ()))

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
            self._read_from = self._read_from or event.position
        elif isinstance(body, MariadbGtidEvent):
            txn.gtid = str(body.gtid)
            txn.open = not body.standalone
            self._read_from = self._read_from or event.position
            txn.start = event.position if txn.open else None
            self._gaps.gtid(body)
            txn.has_rows = False
            txn.commit_ts = 0
            if body.flags & (_FL_PREPARED_XA | _FL_COMPLETED_XA) and body.xa_format_id is not None:
                xid = (body.xa_format_id, body.xa_gtrid or b"", body.xa_bqual or b"")
                if body.flags & _FL_PREPARED_XA:
                    txn.xa, txn.xa_rows = xid, []
                else:
                    txn.completes = xid
        elif isinstance(body, QueryEvent):
            self._query(event, body)
        elif code == EventType.XID_EVENT:
            self._end(event)
        elif isinstance(body, XaPrepareEvent):
            self._xa_prepare(event, body)
        elif isinstance(body, ExecuteLoadQueryEvent):
            n = self._statement_dml(event, body.query)
            if not txn.open:
                self._end(event, n)
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

    def _end(self, event: Event, row_index: int = 0) -> None:
        txn = self._txn
        gtid_set = self._advance_gtid()
        entry = TransactionEnd(
            destination=self.destination,
            position=event.position,
            end_position=event.end_position,
            gtid=txn.gtid,
            timestamp=txn.commit_ts or event.header.timestamp,
            order_key=self._key(event, row_index),
            server_id=event.header.server_id,
            gtid_set=gtid_set,
            durable=not self._prepared,
        )
        self._txn = _Txn()
        self.progress(event)
        self._close(entry, txn.has_rows)

    # ------------------------------------------------------------------ XA (see the module docstring)

    def _xa_prepare(self, event: Event, body: XaPrepareEvent) -> None:
        txn = self._txn
        xid = (body.format_id, body.gtrid, body.bqual)
        if txn.xa_rows is None and txn.has_rows:
            raise XaError(
                f"XA transaction {xid_text(xid)} prepared at {event.position}: its rows were handed out "
                "before it was recognised as an XA transaction (no XA flag on its GTID event and no "
                "XA START); it cannot be followed safely"
            )
        rows = txn.xa_rows or []
        if body.one_phase:  # MySQL's XA COMMIT .. ONE PHASE: committed here, rows in their place
            txn.has_rows = bool(rows)
            if rows:
                self._emit(list(rows))
            self._end(event)
            return
        self._advance_gtid()
        self._prepared.pop(xid, None)
        self._prepared[xid] = rows
        self._txn = _Txn()
        self.progress(event)

    def _xa_resolve(self, event: Event, sql: str, commit: bool) -> None:
        """``XA COMMIT`` / ``XA ROLLBACK`` of a prepared transaction (its group's last event)."""
        txn = self._txn
        xid = txn.completes or xa_id_of_statement(sql)
        rows = self._prepared.pop(xid, None) if xid is not None else None
        if rows is None:
            if txn.xa_rows is not None and xid == txn.xa:  # XA COMMIT .. ONE PHASE as a statement
                rows = txn.xa_rows
            elif not commit:  # a rollback of a PREPARE before the start: nothing was applied
                log.info(
                    "destination %s: XA ROLLBACK of XA transaction %s at %s, prepared before this "
                    "reader's start point: nothing to apply",
                    self.destination, xid_text(xid) if xid else "?", event.position,
                )  # fmt: skip
                rows = []
            else:  # prepared before the start point: its rows were never read; look back for them
                rows = self._look_back(event, xid)
        if not commit:
            rows = []
        fn = file_number(event.file)
        pidx = event.payload_index if event.payload_index is not None else -1
        pos, end, ts = event.position, event.end_position, event.header.timestamp
        out: list[Entry] = []
        durable = not self._prepared
        for i, r in enumerate(rows):
            key = OrderKey(fn, event.pos, pidx, i)
            if type(r) is DdlEntry:  # a statement-format DML: at the commit's place too
                out.append(
                    replace(r, position=pos, end_position=end, gtid=txn.gtid, timestamp=ts, order_key=key,
                            durable=durable)
                )  # fmt: skip
                continue
            assert type(r) is RowChange
            out.append(
                RowChange(
                    r.destination,
                    r.schema,
                    r.table,
                    r.op,
                    r.before,
                    r.after,
                    r.primary_key,
                    pos,
                    end,
                    txn.gtid,
                    ts,
                    key,
                    r.table_schema,
                )
            )
        if out:
            self._emit(out)
        txn.has_rows = bool(out)
        self._end(event, len(out))

    def _look_back(self, event: Event, xid: XaId | None) -> list[Held]:
        """The rows of an XA transaction committed at ``event`` and prepared before this reader's
        start point, from the binlogs before it; or :class:`~.errors.XaPrepareUnseenError`."""
        shown = xid_text(xid) if xid else "(no XID in the statement)"
        if xid is None or self.lookback is None:
            reason = "was not read (it lies before the point this reader started at)"
        else:
            before = min(self._read_from or event.position, self._txn.start or event.position, event.position)
            found = self.lookback(xid, before)
            if not isinstance(found, str):
                return found
            reason = found
        raise XaPrepareUnseenError(shown, str(event.position), reason)

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
        if upper == "BEGIN":
            txn.open = True
            txn.start = txn.start or event.position
            return
        if upper.startswith("XA "):
            verb = [*upper.split(), "", ""][1]
            if verb in ("COMMIT", "ROLLBACK"):
                # the group of an XA COMMIT/ROLLBACK of a prepared transaction ends here, no XID after
                # it (or a one-phase commit logged as a statement: its rows are the group's own)
                self._xa_resolve(event, sql, verb == "COMMIT")
                return
            txn.open = True
            txn.start = txn.start or event.position
            if verb in ("START", "BEGIN") and txn.xa is None:  # MySQL: the group is an XA one
                txn.xa, txn.xa_rows = xa_id_of_statement(sql) or (0, b"", b""), []
            return
        if upper.startswith("COMMIT") or upper.startswith("ROLLBACK"):
            self._end(event)
            return
        stmt = parse_ddl(sql, body.schema)
        if stmt is None:
            n = self._statement_dml(event, body)
            if not txn.open:  # a statement-format or standalone statement outside a transaction
                self._end(event, n)  # its end sorts after the entries of the statement
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
        targets += [new for _, new in stmt.renames if new not in targets]  # a RENAME's new names too
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
                    durable=not self._prepared,
                    previous_schema=prev,
                    statement=stmt if schema == body.schema else None,  # else parsed in its schema
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
                durable=not self._prepared,
            )  # fmt: skip
            self._close(end, False)

    def _statement_dml(self, event: Event, body: QueryEvent) -> int:
        """A statement writing rows (statement format): one ``STATEMENT_DML`` entry per routed table
        it writes, in its transaction (held with the rows in an XA transaction); nothing for other
        tables. Returns how many entries it made.

        :raises StatementDmlError: a DML statement whose tables cannot be named.
        """
        routed = routed_dml(body.sql, body.schema, self.filter.matches)
        if routed is None:
            return 0
        if not routed:  # DML whose tables could not be named: stop, it may write a routed one
            raise StatementDmlError("(a table of this statement)", body.sql, str(event.position))
        txn = self._txn
        entries: list[Held] = [
            DdlEntry(
                destination=self.destination,
                schema=schema,
                table=table,
                kind=DdlKind.STATEMENT_DML,
                sql=body.sql,
                position=event.position,
                end_position=event.end_position,
                gtid=txn.gtid,
                timestamp=txn.commit_ts or event.header.timestamp,
                order_key=self._key(event, i),
                server_id=event.header.server_id,
                ends_statement=False,  # inside its transaction: the transaction's end is the ack point
                durable=not self._prepared,
            )
            for i, (schema, table) in enumerate(routed)
        ]
        txn.has_rows = True  # its transaction's end follows at once (not held as idle)
        if txn.xa_rows is not None:  # an XA transaction's: waits for its XA COMMIT
            txn.xa_rows.extend(entries)
        else:
            self._emit(list(entries))
        return len(entries)

    def _routed(self, event: Event, tm: Any) -> _Routed:
        """``(tm, schema its rows carry, has column rules, before images' columns)`` for a TABLE_MAP,
        ``(tm, None, False, None)`` when its table is not routed; remembered per TABLE_MAP (every
        rows event of a statement shares one). A refused table or unknown column names raise, and
        are not remembered."""
        schema, table = tm.schema, tm.table
        flt = self.filter
        if not flt.matches(schema, table):
            known: _Routed = (tm, None, False, None)
        else:
            ts = tm.table_schema
            if ts.columns and ts.columns[0].name.startswith("@"):
                raise SchemaMismatchError(
                    f"column names of {schema}.{table} are unknown at {event.position}: the binlog has no "
                    "column metadata (binlog_row_metadata=MINIMAL) and information_schema could not be "
                    "read; set binlog_row_metadata=FULL or give the user SELECT on the table"
                )
            hidden = hidden_columns.hidden_names(ts)
            ts = flt.table_schema(hidden_columns.visible_schema(ts), event.position)  # refused tables
            # stop here; column rules project it; MariaDB's hidden hash columns never reach the lake
            rules = flt.has_column_rules(schema, table) or bool(hidden)
            known = (tm, ts, rules, self._before_kept(tm.table_schema, ts))
        if len(self._routes) >= 1024:
            self._routes.clear()
        self._routes[id(tm)] = known
        return known

    def _before_kept(self, decoded: TableSchema, ts: TableSchema) -> frozenset[int] | None:
        """The column indexes of ``decoded`` (the TABLE_MAP's schema) the before images keep, by
        :attr:`before_columns` (``ts``: the table as the rows carry it); ``None``: all of them, also
        when a column it names is not one of the table's (the images stay whole, and a consumer
        missing a column says so)."""
        if self.before_columns is None:
            return None
        names = self.before_columns(ts.schema, ts.table, ts)
        if names is None:
            return None
        index = {c.name: i for i, c in enumerate(decoded.columns)}
        if not names or any(n not in index for n in names):
            return None
        return frozenset(index[n] for n in names)

    def _rows(self, event: Event, body: RowsEvent) -> None:
        tm = body.table_map
        if tm is None:
            return
        known = self._routes.get(id(tm))
        if known is None or known[0] is not tm:
            known = self._routed(event, tm)
        ts = known[1]
        if ts is None:
            return
        schema, table = tm.schema, tm.table
        pos, end = event.position, event.end_position
        pk = ts.primary_key
        kind = body.kind
        op = _OPS[kind]
        txn = self._txn
        txn.has_rows = True
        timestamp = txn.commit_ts or event.header.timestamp
        fn = file_number(event.file)
        pidx = event.payload_index if event.payload_index is not None else -1
        ep = event.pos
        dest, gtid = self.destination, txn.gtid
        rows = body.rows_keeping(known[3])
        # The per-row loop of the parser thread: one comprehension per kind, order keys built with
        # tuple.__new__ (an OrderKey(...) call runs namedtuple's Python __new__: twice the cost).
        if known[2]:
            project = self.filter.project
            hidden = hidden_columns.hidden_names(tm.table_schema)
            if hidden:
                project = _without(hidden, project)
            out: list[Entry] = [
                RowChange(
                    dest, schema, table, op, project(schema, table, b, pk), project(schema, table, a, pk),
                    pk, pos, end, gtid, timestamp, _new_key(OrderKey, (fn, ep, pidx, i)), ts,
                )
                for i, (b, a) in enumerate(image_pairs(kind, rows))
            ]  # fmt: skip
        elif _records is not None:
            template = (dest, schema, table, op, None, None, pk, pos, end, gtid, timestamp, None, ts)
            out = _records(_record_plan, template, rows, _MODES[kind], OrderKey, (fn, ep, pidx), _ROW_SLOTS)
        elif kind == "update":
            out = [
                RowChange(dest, schema, table, op, b, a, pk, pos, end, gtid, timestamp,
                          _new_key(OrderKey, (fn, ep, pidx, i)), ts)
                for i, (b, a) in enumerate(rows)
            ]  # fmt: skip
        elif kind == "insert":
            out = [
                RowChange(dest, schema, table, op, None, a, pk, pos, end, gtid, timestamp,
                          _new_key(OrderKey, (fn, ep, pidx, i)), ts)
                for i, a in enumerate(rows)
            ]  # fmt: skip
        else:
            out = [
                RowChange(dest, schema, table, op, b, None, pk, pos, end, gtid, timestamp,
                          _new_key(OrderKey, (fn, ep, pidx, i)), ts)
                for i, b in enumerate(rows)
            ]  # fmt: skip
        if not out:
            return
        if txn.xa_rows is not None:  # an XA transaction's rows wait for its XA COMMIT
            txn.xa_rows.extend(out)  # type: ignore[arg-type]
            return
        first = out[0]
        assert type(first) is RowChange
        size_each = row_size(
            len(first.before or ()) + len(first.after or ()),
            (first.before is not None) + (first.after is not None),
            body.rows_bytes // len(out),
        )
        self._emit(out, size_each)


def _without(
    hidden: frozenset[str], project: Callable[..., dict[str, Any] | None]
) -> Callable[..., dict[str, Any] | None]:
    """``project`` of row images from which the ``hidden`` columns are left out first."""

    def out(schema: str, table: str, row: Any, pk: Any) -> dict[str, Any] | None:
        if row is None:
            return None
        return project(schema, table, {k: v for k, v in row.items() if k not in hidden}, pk)

    return out
