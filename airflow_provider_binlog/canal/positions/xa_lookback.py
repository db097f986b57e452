"""Find an XA transaction's PREPARE group in the binlogs before a reader's start point.

MariaDB and MySQL log an XA transaction's rows at ``XA PREPARE`` and its ``XA COMMIT`` later, as a
group of its own (:mod:`.convert`). A reader that starts after the PREPARE of an XA transaction
still unresolved there (a snapshot's handover position, a first start at the head, ``start_from``)
reads the COMMIT without the rows. :class:`XaLookback` is what the converter then asks: it reads
the binlogs the server still has backwards, one file at a time, newest first, each with its own
dump from ``file:4`` (the start point's file only up to the start point), and keeps the last
group of that XID that ends in its XA_PREPARE. The group's events go through an
:class:`~.convert.EntryConverter` with the destination's filter (routing, column rules), and its
TABLE_MAPs are resolved with the destination's schema history at their own position, so the rows
come out as if the reader had held them since the PREPARE; the converter releases them at the
COMMIT's place.

It answers a reason instead when no binlog the server has holds that PREPARE (purged), or when
the search took longer than ``timeout`` seconds; the converter then stops with
:class:`~.errors.XaPrepareUnseenError`. The dumps register with a server id of their own, so they
never disconnect the reader's dump.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from airflow_provider_binlog.binlog.client import ReplicationClient
from airflow_provider_binlog.binlog.event import Event
from airflow_provider_binlog.binlog.events import XaPrepareEvent
from airflow_provider_binlog.binlog.events_gtid import GtidEvent
from airflow_provider_binlog.binlog.events_mariadb import MariadbGtidEvent, MariadbGtidFlag
from airflow_provider_binlog.binlog.events_query import QueryEvent
from airflow_provider_binlog.binlog.position import BinlogPosition, file_number
from airflow_provider_binlog.canal.convert import EntryConverter, Held, XaId, xa_id_of_statement, xid_text
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.schema import SchemaHistory

log = logging.getLogger(__name__)

_FL_PREPARED_XA = int(MariadbGtidFlag.FL_PREPARED_XA)


class XaLookback:
    """Called as ``lookback(xid, before)``: the held entries of the XA transaction ``xid`` from its
    last PREPARE group ending before ``before``, or a reason (``str``) why it was not found.

    :param destination: the destination the entries carry.
    :param client: the reader's replication client (its settings, with another server id).
    :param filter: the destination's filter.
    :param history: the schema history to decode TABLE_MAPs with (``None``: the binlog's own
        column metadata only).
    :param timeout: seconds the whole search may take.
    :param clock: a monotonic clock.
    """

    def __init__(
        self,
        destination: str,
        client: ReplicationClient,
        filter: TableFilter,
        history: SchemaHistory | None,
        timeout: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.destination = destination
        self.client = client
        self.filter = filter
        self.history = history
        self.timeout = timeout
        self.clock = clock
        self.files_read = 0  # binlog files read by searches so far (for tests and logs)

    def __call__(self, xid: XaId, before: BinlogPosition) -> list[Held] | str:
        deadline = self.clock() + self.timeout
        files = self.client.binlog_files()
        names = [name for name, _ in files]
        if before.file not in names:
            return f"the binlog {before.file} it would be searched back from is no longer on the server"
        scan = ReplicationClient(
            replace(self.client.config, server_id=0x60000000 + random.randrange(1 << 24))
        )
        for name, size in reversed(files[: names.index(before.file) + 1]):
            end = before if name == before.file else BinlogPosition(name, size)
            if end.pos <= 4:
                continue
            group = self._search(scan, xid, BinlogPosition(name, 4), end, deadline)
            self.files_read += 1
            if isinstance(group, str):
                return group
            if group is not None:
                held = self._convert(group, xid)
                log.info(
                    "destination %s: XA transaction %s was prepared at %s, before this reader's start "
                    "point; read its %d routed change(s) back from there",
                    self.destination, xid_text(xid), group[-1].position, len(held),
                )  # fmt: skip
                return held
        return (
            f"none of the binlogs the server still has ({names[0]} to {before}) holds it: the binlog "
            "holding it was purged"
        )

    def _search(
        self, scan: ReplicationClient, xid: XaId, start: BinlogPosition, end: BinlogPosition, deadline: float
    ) -> list[Event] | str | None:
        """The last PREPARE group of ``xid`` in ``[start, end)``, ``None`` when there is none, or a
        reason when the time bound ran out."""
        stream = scan.dump(start, stop_at=end)
        history = self.history
        if history is not None and history.connect is not None:
            ctx = stream.parser.ctx
            matches = self.filter.matches

            def resolver(table_map: Any) -> Any:
                if not matches(table_map.schema, table_map.table):
                    return None
                h = ctx.header
                key = (file_number(ctx.file), (h.log_pos - h.event_size) if h is not None else 0)
                return history.resolve(table_map, key)

            ctx.schema_resolver = resolver
        found: list[Event] | None = None
        group: list[Event] | None = None
        first_query = False  # MySQL: the group's first statement tells whether it is this XA's
        try:
            for event in stream:
                if self.clock() > deadline:
                    return f"it was not found within the search's time bound ({self.timeout:.0f} s)"
                if event.position >= end:
                    break
                body = event.body
                if isinstance(body, MariadbGtidEvent):
                    ours = bool(body.flags & _FL_PREPARED_XA) and body.xa_format_id is not None
                    ours = ours and (body.xa_format_id, body.xa_gtrid or b"", body.xa_bqual or b"") == xid
                    group, first_query = ([event] if ours else None), False
                    continue
                if isinstance(body, GtidEvent):
                    group, first_query = [event], True
                    continue
                if group is None:
                    continue
                if first_query and isinstance(body, QueryEvent):
                    first_query = False
                    sql = body.sql.strip()
                    if not sql[:9].upper().startswith("XA START") or xa_id_of_statement(sql) != xid:
                        group = None
                        continue
                group.append(event)
                if isinstance(body, XaPrepareEvent):
                    if (body.format_id, body.gtrid, body.bqual) == xid and not body.one_phase:
                        found = group
                    group = None
        finally:
            stream.close()
        return found

    def _convert(self, group: list[Event], xid: XaId) -> list[Held]:
        """The group's entries as the reader's converter would have held them."""
        conv = EntryConverter(self.destination, self.filter, lambda entries, size: None, history=None)
        for event in group:
            conv.handle(event)
        return conv.held(xid)
