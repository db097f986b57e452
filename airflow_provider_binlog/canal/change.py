"""The change model: what the instance hands to consumers, in the server's commit order.

Entries are :class:`RowChange` (one row of a row event), :class:`DdlEntry` (DDL or TRUNCATE, or a
row-changing statement logged in statement format) and :class:`TransactionEnd` (the XID or COMMIT
that closes a transaction; an ack point unless an XA transaction prepared before it is still
unresolved).
Every entry has an :class:`OrderKey` that sorts entries exactly as the server committed them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.sql.ddl import DdlStatement, parse_ddl


class Op(str, enum.Enum):
    """The kind of a row change."""

    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"


class OrderKey(NamedTuple):
    """Total order of entries: binlog file number, event offset, index inside a compressed
    transaction payload (-1 outside one), row index inside the event."""

    file_number: int
    pos: int
    payload_index: int
    row_index: int


@dataclass(slots=True)
class RowChange:
    """One changed row. Read-only by contract: the store and every consumer share it.

    Not a frozen dataclass only for speed: a frozen ``__init__`` sets each field through
    ``object.__setattr__`` (2.9 against 0.5 microseconds per change, paid by the parser for
    every row). With the C row decoder the converter builds them in C without ``__init__`` and
    untracked by the cyclic garbage collector (``_rowdecode.records``, :mod:`.convert`): a
    change must never be made part of a reference cycle (nothing it holds refers back to it).

    :param destination: the subscription the change was read for.
    :param schema: source database.
    :param table: source table.
    :param op: insert, update or delete.
    :param before: row image before the change (update, delete), keyed by column name.
    :param after: row image after the change (insert, update), keyed by column name.
    :param primary_key: names of the primary-key columns.
    :param position: position of the row event.
    :param end_position: position just past the row event.
    :param gtid: GTID of the transaction (``uuid:n``, ``uuid:tag:n`` or MariaDB ``d-s-n``), if any.
    :param timestamp: commit time, seconds since the epoch (from the event header).
    :param order_key: sorts changes as the server committed them.
    :param table_schema: the table's columns as of this change (shared, not copied per row).
    """

    destination: str
    schema: str
    table: str
    op: Op
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    primary_key: tuple[str, ...]
    position: BinlogPosition
    end_position: BinlogPosition
    gtid: str | None
    timestamp: int
    order_key: OrderKey
    table_schema: TableSchema | None = None

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.table}"


class DdlKind(str, enum.Enum):
    """What a :class:`DdlEntry` holds.

    ``STATEMENT_DML``: an INSERT/UPDATE/DELETE/REPLACE/LOAD DATA logged as a statement
    (``binlog_format=STATEMENT`` or ``MIXED``) that writes the routed table: the binlog holds the
    statement, not its rows. It sits inside its transaction (``ends_statement=False``: never an ack
    point; the transaction's end follows it) and carries no schema.
    """

    DDL = "ddl"
    TRUNCATE = "truncate"
    STATEMENT_DML = "statement_dml"


@dataclass(frozen=True, slots=True)
class DdlEntry:
    """A DDL statement (or TRUNCATE) in the stream; it ends its own transaction and is an ack point.
    Also a statement-format DML (:attr:`DdlKind.STATEMENT_DML`), which is neither.

    :param table: the table it affects, ``None`` when not about one table (e.g. CREATE DATABASE).
    :param sql: the statement text as logged.
    :param table_schema: the table's columns after the statement, when known.
    :param server_id: the server id in the event header.
    :param gtid_set: the executed GTID set / MariaDB GTID position after this statement, when known.
    :param ends_statement: ``False`` for all but the last entry of a statement about several
        tables (``DROP TABLE a, b``); only the last one is an ack point.
    :param durable: ``False`` while an XA transaction prepared before it is unresolved: the cursor
        may not move here, or a restart would miss that transaction (see :mod:`.convert`).
    :param previous_schema: the table's columns just before the statement, when known (``None``
        also when the table did not exist).
    :param statement: the parsed statement (:func:`.sql.ddl.parse_ddl` of ``sql`` with ``schema`` as
        the default schema; ``None``: not DDL the grammar reads, and always for a statement-format
        DML). Parsed once: the converter hands over its parse, an entry made without one parses its
        ``sql`` when made; every consumer reads it here (the lake parses no SQL). Not compared.
    """

    destination: str
    schema: str
    table: str | None
    kind: DdlKind
    sql: str
    position: BinlogPosition
    end_position: BinlogPosition
    gtid: str | None
    timestamp: int
    order_key: OrderKey
    table_schema: TableSchema | None = None
    server_id: int = 0
    gtid_set: str | None = None
    ends_statement: bool = True
    durable: bool = True
    previous_schema: TableSchema | None = None
    statement: DdlStatement | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.statement is None and self.kind is not DdlKind.STATEMENT_DML:
            object.__setattr__(self, "statement", parse_ddl(self.sql, self.schema))


@dataclass(frozen=True, slots=True)
class TransactionEnd:
    """The XID or COMMIT that closes a transaction: the place a cursor may point to.

    :param gtid_set: the executed GTID set / MariaDB GTID position after this transaction, when known.
    :param durable: ``False`` while an XA transaction prepared before it is unresolved: the cursor
        may not move here, or a restart would miss that transaction (see :mod:`.convert`).
    """

    destination: str
    position: BinlogPosition
    end_position: BinlogPosition
    gtid: str | None
    timestamp: int
    order_key: OrderKey
    server_id: int = 0
    gtid_set: str | None = None
    durable: bool = True


Entry = RowChange | DdlEntry | TransactionEnd
