"""Our entries (:mod:`..canal.change`) as canal's ``Entry`` messages (``EntryProtocol.proto``).

canal's conventions (``LogEventConvert``), as a canal client expects them:

* a transaction is ``TRANSACTIONBEGIN`` (``TransactionBegin``), one ``ROWDATA`` entry per row
  event (``RowChange`` with ``rowDatas``: before columns for UPDATE/DELETE, after columns for
  INSERT/UPDATE), then ``TRANSACTIONEND`` (``TransactionEnd``);
* a DDL is one ``ROWDATA`` entry of its own (``isDdl`` true, ``sql``, ``ddlSchemaName``, the header's
  eventType CREATE/ALTER/ERASE/TRUNCATE/RENAME/CINDEX/DINDEX/QUERY); a statement-format DML is a
  ``ROWDATA`` entry with eventType QUERY and ``isDdl`` false, inside its transaction;
* ``Header``: version 1, logfileName/logfileOffset (the event's start), serverId, serverenCode
  ``UTF-8``, executeTime (the event's time in milliseconds), sourceType MYSQL, schemaName,
  tableName, eventLength, eventType, gtid (the transaction's), and ``rowsCount`` in props of a
  row entry (plus ours, :data:`ROW_INDEX_PROP` and :data:`PAYLOAD_INDEX_PROP`, which canal clients
  ignore);
* ``Column``: index (in the table), sqlType and value as :mod:`.render` says, name, isKey,
  mysqlType, isNull, and ``updated`` (after images: the value differs from the before image's at the
  same index; every column of an INSERT).

Where ours holds less than the binlog events canal reads: the begin entry's header is the first
entry's of the transaction (we keep no BEGIN event), its threadId is 0, the end's transactionId is
empty (the XID number is not kept), and the serverId of a row entry is the last one seen on an ack
point. A transaction all of whose rows the filter dropped still shows as BEGIN + END.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Entry, Op, RowChange, TransactionEnd
from airflow_provider_binlog.canalnet.protocol import entry_pb
from airflow_provider_binlog.canalnet.render import Renderer, mysql_type, renderer

_OPS = {Op.INSERT: entry_pb.INSERT, Op.UPDATE: entry_pb.UPDATE, Op.DELETE: entry_pb.DELETE}
_DDL_TYPES = (  # leading words -> canal's EventType (canal's SimpleDdlParser decides the same kinds)
    (("CREATE", "TABLE"), entry_pb.CREATE),
    (("CREATE", "TEMPORARY"), entry_pb.CREATE),
    (("CREATE", "DATABASE"), entry_pb.CREATE),
    (("CREATE", "SCHEMA"), entry_pb.CREATE),
    (("ALTER",), entry_pb.ALTER),
    (("DROP", "TABLE"), entry_pb.ERASE),
    (("DROP", "TEMPORARY"), entry_pb.ERASE),
    (("DROP", "DATABASE"), entry_pb.ERASE),
    (("DROP", "SCHEMA"), entry_pb.ERASE),
    (("TRUNCATE",), entry_pb.TRUNCATE),
    (("RENAME",), entry_pb.RENAME),
    (("CREATE", "INDEX"), entry_pb.CINDEX),
    (("CREATE", "UNIQUE"), entry_pb.CINDEX),
    (("DROP", "INDEX"), entry_pb.DINDEX),
)

ROW_INDEX_PROP = "binlog-cdc.rowIndex"
"""Header prop of a ROWDATA entry of ours: the row index (in its event) of its first row."""
PAYLOAD_INDEX_PROP = "binlog-cdc.payloadIndex"
"""Header prop: the index of the event inside a compressed transaction payload (absent outside one)."""

ColumnTypes = Callable[[str, str], "dict[str, str] | None"]
"""``(schema, table) -> {column: COLUMN_TYPE}`` from the source, or ``None`` when unknown."""


def ddl_event_type(sql: str) -> int:
    """canal's EventType of a DDL statement (QUERY when it is none of the kinds canal names)."""
    words = [w.upper() for w in sql.replace("`", " ").split()[:3]]
    for prefix, kind in _DDL_TYPES:
        if tuple(words[: len(prefix)]) == prefix:
            return kind
    return entry_pb.QUERY


class _TablePlan:
    """Per table schema: each column's index, name, key flag, type text and renderer (built once)."""

    __slots__ = ("columns",)

    def __init__(self, schema: TableSchema, types: dict[str, str] | None) -> None:
        keys = set(schema.primary_key)
        self.columns: list[tuple[int, str, bool, str, Renderer]] = [
            (i, c.name, c.name in keys, (types or {}).get(c.name) or mysql_type(c), renderer(c))
            for i, c in enumerate(schema.columns)
        ]


class EntryEncoder:
    """Turns a stream of our entries into canal ``Entry`` messages, in order.

    It keeps whether a transaction is open (a ``TRANSACTIONBEGIN`` is due before its first entry)
    across batches; :meth:`state` and :meth:`restore` let the server put it back after a rollback.

    :param column_types: the source's column type texts (``mysqlType``); ``None``: from the binlog.
    """

    def __init__(self, column_types: ColumnTypes | None = None) -> None:
        self.in_transaction = False
        self.server_id = 0
        self._column_types = column_types
        self._plans: dict[int, tuple[TableSchema, _TablePlan]] = {}

    def state(self) -> tuple[bool, int]:
        return self.in_transaction, self.server_id

    def restore(self, state: tuple[bool, int]) -> None:
        self.in_transaction, self.server_id = state

    def encode(self, entries: Iterable[Entry]) -> list[bytes]:
        """canal entries, serialized, for a batch of ours (consecutive rows of one row event become
        one ``ROWDATA`` entry)."""
        out: list[Any] = []
        group: list[RowChange] = []
        for entry in entries:
            if type(entry) is RowChange:
                if group and not _same_event(group[-1], entry):
                    out.append(self._rows(group))
                    group = []
                if not self.in_transaction:
                    out.append(self._begin(entry))
                group.append(entry)
                continue
            if group:
                out.append(self._rows(group))
                group = []
            if type(entry) is TransactionEnd:
                if not self.in_transaction:
                    out.append(self._begin(entry))
                self.server_id = entry.server_id or self.server_id
                out.append(self._end(entry))
                self.in_transaction = False
            elif type(entry) is DdlEntry:
                self.server_id = entry.server_id or self.server_id
                if entry.kind is DdlKind.STATEMENT_DML:
                    if not self.in_transaction:
                        out.append(self._begin(entry))
                    out.append(self._ddl(entry, entry_pb.QUERY, False))
                else:
                    out.append(self._ddl(entry, ddl_event_type(entry.sql), True))
                    self.in_transaction = False
        if group:
            out.append(self._rows(group))
        return [e.SerializeToString() for e in out]

    # ------------------------------------------------------------------ pieces

    def _header(self, entry: Entry, schema: str, table: str, event_type: int | None) -> Any:
        header = entry_pb.Header(
            version=1, logfileName=entry.position.file, logfileOffset=entry.position.pos,
            serverId=getattr(entry, "server_id", 0) or self.server_id, serverenCode="UTF-8",
            executeTime=entry.timestamp * 1000, sourceType=entry_pb.MYSQL, schemaName=schema,
            tableName=table, eventLength=max(0, entry.end_position.pos - entry.position.pos),
            gtid=entry.gtid or "",
        )  # fmt: skip
        if event_type is not None:
            header.eventType = event_type
        return header

    def _begin(self, entry: Entry) -> Any:
        self.in_transaction = True
        return entry_pb.Entry(
            header=self._header(entry, "", "", None), entryType=entry_pb.TRANSACTIONBEGIN,
            storeValue=entry_pb.TransactionBegin(threadId=0).SerializeToString(),
        )  # fmt: skip

    def _end(self, entry: TransactionEnd) -> Any:
        return entry_pb.Entry(
            header=self._header(entry, "", "", None), entryType=entry_pb.TRANSACTIONEND,
            storeValue=entry_pb.TransactionEnd(transactionId="").SerializeToString(),
        )  # fmt: skip

    def _ddl(self, entry: DdlEntry, event_type: int, is_ddl: bool) -> Any:
        change = entry_pb.RowChange(
            eventType=event_type, isDdl=is_ddl, sql=entry.sql, ddlSchemaName=entry.schema
        )
        return entry_pb.Entry(
            header=self._header(entry, entry.schema, entry.table or "", event_type),
            entryType=entry_pb.ROWDATA, storeValue=change.SerializeToString(),
        )  # fmt: skip

    def _plan(self, schema: TableSchema) -> _TablePlan:
        hit = self._plans.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        types = self._column_types(schema.schema, schema.table) if self._column_types else None
        plan = _TablePlan(schema, types)
        if len(self._plans) > 4096:
            self._plans.clear()
        self._plans[id(schema)] = (schema, plan)
        return plan

    def _rows(self, rows: list[RowChange]) -> Any:
        first = rows[0]
        op = _OPS[first.op]
        change = entry_pb.RowChange(eventType=op, isDdl=False)
        for row in rows:
            data = change.rowDatas.add()
            plan = self._plan(row.table_schema) if row.table_schema is not None else None
            before = (
                self._columns(data.beforeColumns, row.before, plan, None) if row.before is not None else {}
            )
            if row.after is not None:
                self._columns(data.afterColumns, row.after, plan, before)
        header = self._header(first, first.schema, first.table, op)
        header.props.add(key="rowsCount", value=str(len(rows)))
        # ours: where the rows sit in the event (a batch may split an event; a compressed payload
        # holds several events at one offset), so a client rebuilds the exact order keys
        header.props.add(key=ROW_INDEX_PROP, value=str(first.order_key.row_index))
        if first.order_key.payload_index >= 0:
            header.props.add(key=PAYLOAD_INDEX_PROP, value=str(first.order_key.payload_index))
        return entry_pb.Entry(
            header=header, entryType=entry_pb.ROWDATA, storeValue=change.SerializeToString()
        )

    @staticmethod
    def _columns(
        target: Any, image: dict[str, Any], plan: _TablePlan | None, before: dict[int, str | None] | None
    ) -> dict[int, str | None]:
        texts: dict[int, str | None] = {}
        if plan is None:  # no schema known: names and text only
            for i, (name, value) in enumerate(image.items()):
                text = None if value is None else str(value)
                col = target.add(index=i, name=name, isNull=text is None, value=text or "")
                col.updated = before is not None and before.get(i, "\0") != text
                texts[i] = text
            return texts
        for index, name, is_key, type_text, render in plan.columns:
            if name not in image:
                continue  # not in a MINIMAL/NOBLOB image: canal leaves it out too
            sql_type, text = render(image[name])
            col = target.add(
                index=index, sqlType=sql_type, name=name, isKey=is_key, isNull=text is None,
                value=text or "", mysqlType=type_text,
            )  # fmt: skip
            if before is not None:
                col.updated = index not in before or before[index] != text
            texts[index] = text
        return texts


def _same_event(a: RowChange, b: RowChange) -> bool:
    return a.order_key[:3] == b.order_key[:3] and a.op is b.op and a.table == b.table and a.schema == b.schema
