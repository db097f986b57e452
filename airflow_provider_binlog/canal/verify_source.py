"""The source side of ``binlog-cdc verify --at-cursor``: a read at a known binlog position, and the
keys the binlog changed between two positions.

**A read at a position.** :func:`open_snapshot` starts ``START TRANSACTION WITH CONSISTENT
SNAPSHOT`` on a connection and returns the binlog position ``P`` its read view matches exactly:
every transaction before ``P`` is visible to the connection's SELECTs, none at or after it. MariaDB
(and Percona Server) report ``P`` in the session status ``binlog_snapshot_file`` /
``binlog_snapshot_position`` (see :mod:`.snapshot.position` for why that is exact). MySQL has no
such status: there the transaction is started under a brief ``FLUSH TABLES WITH READ LOCK`` and the
head read before the lock is released, as ``mysqldump --single-transaction --source-data`` does
(the lock waits for every commit in progress and blocks new ones, so the head and the read view
agree; the ``RELOAD`` privilege is needed).

**Keys changed between positions.** :func:`changed_keys` reads the binlog from a start position up
to ``P`` (a dump of its own, with a random server id) through the same
:class:`~.convert.EntryConverter` the destinations use, with a filter of just the tables asked
about, and collects, per table, the key of every row image (before and after) of every row change
whose order key lies after that table's ``after`` order key. XA transactions come out at their
commit's place, a PREPARE before the start found by the :class:`~.xa_lookback.XaLookback`, as in a
destination's run. A change of such a table the row images do not describe (DDL, TRUNCATE, a
statement-format DML) raises :class:`VerifyPositionError`: which rows it changed is unknown, so no
comparison at that position could be exact. So does a row image without the key's columns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_binlog.binlog.client import ReplicationClient
from airflow_provider_binlog.binlog.position import BinlogPosition, file_number
from airflow_provider_binlog.canal.change import DdlEntry, Entry, OrderKey, RowChange
from airflow_provider_binlog.canal.convert import EntryConverter
from airflow_provider_binlog.canal.errors import CanalError
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.positions.xa_lookback import XaLookback
from airflow_provider_binlog.canal.schema import SchemaHistory
from airflow_provider_binlog.canal.snapshot.position import consistent_read, global_read_lock, head

DESTINATION = "binlog-cdc-verify"


class VerifyPositionError(CanalError):
    """No exact comparison at a binlog position is possible (the message says why and what to do)."""


def open_snapshot(conn: Any, where: str) -> BinlogPosition:
    """Start a consistent-snapshot transaction on ``conn`` and return the binlog position its read
    view matches exactly (the caller ends the transaction).

    :param where: ``user@host:port`` for messages.
    :raises VerifyPositionError: binary logging is off, or MySQL without the ``RELOAD`` privilege.
    """
    with conn.cursor() as cur:
        pos = consistent_read(cur)
        if pos is not None:
            return pos
        cur.execute("ROLLBACK")
        remedy = "Grant RELOAD, or verify without --at-cursor while the source is quiet"
        with global_read_lock(cur, where, VerifyPositionError, "the read's binlog position", remedy):
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            pos = head(cur)  # UNLOCK TABLES ends the global read lock only: the transaction stays
    if pos is None:
        raise VerifyPositionError(f"binary logging is off on {where}: there is no position to compare at")
    return pos


@dataclass(frozen=True)
class WatchedTable:
    """A table whose keys :func:`changed_keys` collects.

    :param key: the key's column names.
    :param after: only changes with an order key above this one count (the lake's mark).
    """

    schema: str
    table: str
    key: tuple[str, ...]
    after: OrderKey


@dataclass
class ChangedKeys:
    """What :func:`changed_keys` found, per ``(schema, table)``."""

    keys: dict[tuple[str, str], set[tuple[Any, ...]]] = field(default_factory=dict)
    changes: dict[tuple[str, str], int] = field(default_factory=dict)


def table_filter(tables: Sequence[tuple[str, str]]) -> TableFilter:
    """A filter matching exactly these tables."""
    return TableFilter(include=",".join(f"{re.escape(s)}\\.{re.escape(t)}" for s, t in tables))


def changed_keys(
    client: ReplicationClient,
    connect: Callable[[], Any],
    tables: Sequence[WatchedTable],
    start: BinlogPosition,
    stop: BinlogPosition,
) -> ChangedKeys:
    """The keys of ``tables`` that row changes after each table's ``after`` and before ``stop`` touch.

    :param client: reads the binlog (a user with REPLICATION SLAVE).
    :param connect: a plain connection for ``information_schema`` (column names when the binlog
        has no column metadata).
    :param start: an event start at or before every table's first change to count.
    :param stop: the end (a position between transactions, e.g. :func:`open_snapshot`'s).
    :raises VerifyPositionError: see the module docstring.
    """
    watched = {(t.schema, t.table): t for t in tables}
    out = ChangedKeys({name: set() for name in watched}, dict.fromkeys(watched, 0))
    if start >= stop:
        return out
    flt = table_filter(list(watched))
    history = SchemaHistory(connect=connect)

    def sink(entries: list[Entry], size_each: int | None = None) -> None:
        for e in entries:
            if isinstance(e, RowChange):
                w = watched.get((e.schema, e.table))
                if w is None or tuple(e.order_key) <= tuple(w.after):
                    continue
                found = out.keys[(e.schema, e.table)]
                out.changes[(e.schema, e.table)] += 1
                for image in (e.before, e.after):
                    if image is None:
                        continue
                    try:
                        found.add(tuple(image[c] for c in w.key))
                    except KeyError:
                        raise VerifyPositionError(
                            f"{e.schema}.{e.table}: the row image at {e.position} lacks key column(s) "
                            f"{', '.join(c for c in w.key if c not in image)} (binlog_row_image=MINIMAL "
                            "and a key other than the primary key?): the keys changed after the lake's "
                            "position cannot be known; give --key the primary key, or verify without "
                            "--at-cursor while the source is quiet"
                        ) from None
            elif isinstance(e, DdlEntry) and e.table is not None:
                w = watched.get((e.schema, e.table))
                if w is not None and tuple(e.order_key) > tuple(w.after):
                    raise VerifyPositionError(
                        f"{e.schema}.{e.table}: a {e.kind.value.replace('_', ' ')} statement at "
                        f"{e.position}, after the lake's position, changed rows the binlog does not "
                        f"list: no exact comparison at {stop}. Let the destination run past it, then "
                        "verify again"
                    )

    converter = EntryConverter(
        DESTINATION, flt, sink, history, lookback=XaLookback(DESTINATION, client, flt, history)
    )
    stream = client.dump(start, stop_at=stop)
    ctx = stream.parser.ctx

    def resolver(table_map: Any) -> Any:
        if not flt.matches(table_map.schema, table_map.table):
            return None
        h = ctx.header
        key = (file_number(ctx.file), (h.log_pos - h.event_size) if h is not None else 0)
        return history.resolve(table_map, key)

    ctx.schema_resolver = resolver
    converter.begin_stream()
    try:
        for event in stream:
            converter.handle(event)
        converter.finish()
    finally:
        stream.close()
    return out


__all__ = [
    "ChangedKeys",
    "VerifyPositionError",
    "WatchedTable",
    "changed_keys",
    "open_snapshot",
    "table_filter",
]
