"""Committed matching row changes in a binlog stream, one record per transaction.

What a waiting sensor's trigger (:func:`~..triggers.binlog.follow`) and an asset watcher
(:mod:`.watch`) count: row images of tables the filter matches, and statement-format DML of a
routed table (one change per routed table it writes, its rows are not in the binlog), counted once
the transaction that holds them commits (XID, ``COMMIT`` or ``XA COMMIT``). A transaction that
touched no matching table yields nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_binlog.binlog.events import XidEvent
from airflow_provider_binlog.binlog.events_query import ExecuteLoadQueryEvent, QueryEvent
from airflow_provider_binlog.binlog.position import file_number
from airflow_provider_binlog.binlog.rows import RowsEvent
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.sql.statement import routed_dml

#: the key a statement whose tables cannot be named counts under
UNNAMED = "(statement)"


def commits(body: Any) -> bool:
    """Whether an event body ends a transaction."""
    return isinstance(body, XidEvent) or (
        isinstance(body, QueryEvent) and body.sql.strip().upper() in ("COMMIT", "XA COMMIT")
    )


@dataclass(frozen=True)
class Committed:
    """One committed transaction's matching changes.

    :param first: ``file:pos`` of its first matching change.
    :param end: ``file:pos`` just after its commit event (where reading on starts).
    :param counts: row changes per ``schema.table``.
    """

    first: str
    end: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def changes(self) -> int:
        return sum(self.counts.values())


def _statement_counts(body: QueryEvent | ExecuteLoadQueryEvent, flt: TableFilter) -> dict[str, int]:
    query = body.query if isinstance(body, ExecuteLoadQueryEvent) else body
    routed = routed_dml(query.sql, query.schema, flt.matches)
    if routed is None:
        return {}
    return {f"{s}.{t}": 1 for s, t in routed} or {UNNAMED: 1}


def committed(
    stream: Iterable[Any],
    flt: TableFilter,
    skip_through: Sequence[int] | None = None,
    stop: threading.Event | None = None,
) -> Iterator[Committed]:
    """The committed transactions of ``stream`` with matching changes, in binlog order.

    :param stream: binlog events (a dump or a file reader).
    :param flt: which tables count.
    :param skip_through: order key prefix ``(file_number, pos)`` of the already consumed cursor
        event: changes at or before it do not count.
    :param stop: ends the iteration at the next event once set (a heartbeat wakes a blocking dump).
    """
    skip = tuple(skip_through[:2]) if skip_through else None
    pending: dict[str, int] = {}
    first: str | None = None
    for event in stream:
        if stop is not None and stop.is_set():
            return
        body = event.body
        counts: dict[str, int] = {}
        if isinstance(body, RowsEvent) and body.table_map is not None:
            if flt.matches(body.schema, body.table):
                counts = {f"{body.schema}.{body.table}": len(body.rows)}
        elif isinstance(body, QueryEvent | ExecuteLoadQueryEvent):
            counts = _statement_counts(body, flt)
        if not counts:
            if commits(body):
                if first is not None and any(pending.values()):
                    yield Committed(first, str(event.end_position), pending)
                pending, first = {}, None
            continue
        if skip is not None and (file_number(event.file), event.pos) <= skip:
            continue
        for table, n in counts.items():
            pending[table] = pending.get(table, 0) + n
        first = first or str(event.position)
