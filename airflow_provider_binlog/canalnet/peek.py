"""Count a destination's committed row changes after its acked cursor on a canal server, moving
nothing: what the sensor asks a canal server.

canal has no read-only request, so a peek is a short consumer: connect (canal's client starts with a
rollback, then subscribes), ``getWithoutAck`` until ``limit`` matching changes are committed or the
server hands out nothing more within ``wait`` seconds, then ``rollback`` (every batch handed out
comes again to the next consumer) and close once the server closed its side (so the rollback is
done before the hold is released). It never acks, so the cursor stays where it was. The
caller runs it under the destination client's hold (:mod:`.hold`): a peek beside a running consumer
would roll back that consumer's in-flight batches.

Counting follows the MySQL sensor's: row changes of tables the filter matches (rows of an
``INSERT``/``UPDATE``/``DELETE`` entry, one per statement-format DML of a matching table) count once
their transaction's end (``TRANSACTIONEND``) came; DDL counts nothing. Every wait is bounded: each
GET by ``wait`` plus the client's timeout, the whole peek by ``budget`` seconds.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from airflow_provider_binlog.canal.errors import CanalError
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canalnet.client import CanalClient
from airflow_provider_binlog.canalnet.protocol import entry_pb

_ROW_OPS = frozenset((entry_pb.INSERT, entry_pb.UPDATE, entry_pb.DELETE))


class CanalPeekError(CanalError):
    """A peek failed: the canal server did not answer (refused, timed out), broke the protocol, or
    refused a request."""


@dataclass(frozen=True)
class PeekResult:
    """What a peek saw.

    :param count: committed matching row changes after the cursor (stops growing at the limit).
    :param position: ``file:pos`` of the first matching change counted.
    :param end: ``file:pos`` just past the transaction end that brought the count to its value.
    :param held_by: who held the destination client, when the peek did not read for that reason.
    """

    count: int
    position: str | None = None
    end: str | None = None
    held_by: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "position": self.position, "end": self.end}


class _Counter:
    """Committed matching changes in entry order (a transaction may span GETs)."""

    def __init__(self, flt: TableFilter) -> None:
        self.flt = flt
        self.count = self.pending = 0
        self.first: str | None = None
        self.pending_first: str | None = None
        self.end: str | None = None

    def add(self, entries: list[Any], limit: int) -> None:
        """Count ``entries``, stopping at the transaction end that brings the count to ``limit``."""
        for entry in entries:
            if self.count >= limit:
                return
            h = entry.header
            if entry.entryType == entry_pb.TRANSACTIONEND:
                if self.pending:
                    self.count += self.pending
                    self.first = self.first or self.pending_first
                    self.end = f"{h.logfileName}:{h.logfileOffset + h.eventLength}"
                self.pending, self.pending_first = 0, None
            elif entry.entryType == entry_pb.ROWDATA:
                if not h.tableName or not self.flt.matches(h.schemaName, h.tableName):
                    continue
                change = entry_pb.RowChange.FromString(entry.storeValue)
                if change.isDdl:
                    continue
                n = len(change.rowDatas) if change.eventType in _ROW_OPS else 1  # statement DML: 1
                if n:
                    self.pending += n
                    self.pending_first = self.pending_first or f"{h.logfileName}:{h.logfileOffset}"


def peek(
    client: CanalClient,
    flt: TableFilter,
    limit: int,
    wait: float = 1.0,
    budget: float = 30.0,
    batch_size: int = 1000,
    stop: threading.Event | None = None,
) -> PeekResult:
    """Count (see the module docstring); the client is connected here and closed before returning.

    :param client: a client of the destination (not connected; its filter is the subscription's).
    :param flt: which tables count (include and black list, matched on each entry's header).
    :param limit: stop once this many committed changes were counted.
    :param wait: seconds a GET waits for more before the count is final.
    :param budget: the longest the GETs may take together (a busy server that keeps handing out
        changes of other tables ends the peek there, with what was counted).
    :param batch_size: entries per GET.
    :param stop: set from another thread to end the peek early (checked between GETs).
    """
    counter = _Counter(flt)
    client.connect()
    try:
        deadline = time.monotonic() + budget
        while counter.count < limit and time.monotonic() < deadline:
            if stop is not None and stop.is_set():
                break
            batch_id, entries = client.get_without_ack(batch_size, wait)
            if batch_id <= 0:
                break
            counter.add(entries, limit)
        client.rollback()  # nothing acked: every batch handed out goes back to the store
        client.close_and_wait()  # the rollback and the server's end of this connection are done
    finally:
        client.close()
    return PeekResult(counter.count, counter.first, counter.end)
