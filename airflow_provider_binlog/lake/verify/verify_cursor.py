"""Compare source tables with their lake tables at one binlog position (``binlog-cdc verify --at-cursor``).

A plain comparison reads the source as it is now and the lake as the last run left it: while the
source is written, every change after the lake's position shows as a difference. This one
compares both sides at a fixed position, exactly, without waiting for anything:

1. **The lake is pinned first.** For each table, its current Iceberg snapshot and, among that
   snapshot's ancestors, the newest commit mark (:mod:`.commits`): the table holds the
   destination's changes up to the mark's order key ``K`` and none after it.
2. **Then the source is read at a position** ``P``: one ``START TRANSACTION WITH CONSISTENT
   SNAPSHOT`` for all tables, whose binlog position is known exactly
   (:func:`~airflow_provider_binlog.canal.verify_source.open_snapshot`). Pinned in this order,
   ``P`` is at or after every lake mark (the lake cannot hold a change the binlog does not have yet).
3. **The binlog between them is read** (:func:`~airflow_provider_binlog.canal.verify_source.changed_keys`):
   every key a row change after ``K`` and before ``P`` touched (before and after images). The
   source cannot be read back at ``K``, so these keys are left out and reported as "changed after
   the lake's position: N key(s), not compared".
4. **Every other key is compared** as :func:`.verify.verify_table` does, the lake as of the pinned
   snapshot. This is exact: a key no change touched between ``K`` and ``P`` has at ``P`` the value
   it had at ``K``, which is what a correct lake holds. A wrong lake row is found even while the
   source is written, unless that key is written too in the meantime.

The read starts at the mark's batch end when it has one, at a re-snapshot's position, and else at
the start of the binlog file of the mark's event (changes at or before ``K`` are skipped by their
order keys). Refused, with the reason: a table without a commit mark, or whose newest mark is the
initial snapshot's (it records no binlog position); a DDL, TRUNCATE or statement-format DML of the
table between ``K`` and ``P``; the binlog between them purged. Needs a user with SELECT and
REPLICATION SLAVE (and on MySQL RELOAD, see the module above).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.binlog.errors import PurgedBinlogError
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import OrderKey
from airflow_provider_binlog.canal.snapshot.initial import SNAPSHOT_FILE_NUMBER
from airflow_provider_binlog.canal.verify_source import WatchedTable, changed_keys, open_snapshot
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.sql import parse_name, quote_parts
from airflow_provider_binlog.lake.verify.verify import (
    AtPosition,
    TableDiff,
    choose_key,
    source_columns,
    verify_table,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_binlog.binlog.client import ReplicationClient

_RESNAPSHOT_PAYLOAD = -2  # canal.snapshot.resnapshot.mark_key


@dataclass(frozen=True)
class LakePin:
    """A lake table's pinned Iceberg snapshot and the newest commit mark among its ancestors."""

    target: str
    snapshot: int | None
    destination: str
    order_key: OrderKey
    position: BinlogPosition | None
    end_position: BinlogPosition | None

    @property
    def start(self) -> BinlogPosition:
        """Where reading the binlog after the mark may start (an event start at or before it)."""
        if self.end_position is not None:
            return self.end_position
        if self.position is None:
            raise LakeError(f"the commit mark of {self.target} names no binlog position")
        if self.order_key.payload_index == _RESNAPSHOT_PAYLOAD:
            return self.position
        return BinlogPosition(self.position.file, 4)

    @property
    def text(self) -> str:
        where = self.end_position or self.position
        return f"{where} (destination {self.destination})"


def pin(spark: SparkSession, target: str, destination: str | None = None, max_depth: int = 10_000) -> LakePin:
    """Pin ``target``'s current snapshot and find its newest commit mark (``destination``'s, or any).

    :raises LakeError: no table, no mark, or the newest mark is the initial snapshot's.
    """
    table = commits.load_iceberg_table(spark, quote_parts(parse_name(target)))
    if table is None:
        raise LakeError(f"lake table {target} does not exist: nothing to compare at a position")
    table.refresh()
    current = table.currentSnapshot()
    snap, depth = current, 0
    whose = f" of destination {destination}" if destination else ""
    while snap is not None and depth < max_depth:
        summary = snap.summary()
        found = summary.get(commits.DESTINATION)
        if found and summary.get(commits.ORDER_KEY) and (destination is None or found == destination):
            key = commits.parse_order_key(str(summary.get(commits.ORDER_KEY)))
            if key.file_number == SNAPSHOT_FILE_NUMBER:
                raise LakeError(
                    f"the newest commit mark{whose} in {target} is the initial snapshot's, which records "
                    "no binlog position: verify with --at-cursor once a run has merged a change of the "
                    "table, or without --at-cursor while the source is quiet"
                )
            pos, end = summary.get(commits.POSITION), summary.get(commits.END_POSITION)
            return LakePin(
                target,
                int(current.snapshotId()),
                str(found),
                key,
                BinlogPosition.parse(str(pos)) if pos else None,
                BinlogPosition.parse(str(end)) if end else None,
            )
        parent = snap.parentId()
        snap = table.snapshot(parent) if parent is not None else None
        depth += 1
    raise LakeError(
        f"lake table {target} has no binlog-cdc commit mark{whose} (in {depth} snapshots): nothing says "
        "which binlog position it is at; verify without --at-cursor, or name the --destination that loads it"
    )


def verify_at_cursor(
    conn: Any,
    client: ReplicationClient,
    spark: SparkSession,
    tables: Mapping[str, str],
    key_columns: Mapping[str, Sequence[str]] | None = None,
    destination: str | None = None,
    show: int = 10,
) -> list[TableDiff]:
    """Compare every ``source -> target`` pair at one binlog position (see the module docstring).

    :param conn: a pymysql connection to the source in autocommit mode (used for the consistent
        read; its transaction is ended here).
    :param client: reads the binlog between the lake's marks and the source's position.
    :param key_columns: ``{source: key columns}`` (default: primary key, else a unique NOT NULL key).
    :param destination: use this destination's commit marks (default: the newest mark of any).
    """
    keys = key_columns or {}
    pairs = sorted(tables.items())
    watched: list[tuple[str, str, tuple[str, ...]]] = []
    for source, _ in pairs:
        schema, _, table = source.partition(".")
        columns, pk = source_columns(conn, schema, table)
        watched.append((schema, table, choose_key(conn, source, columns, pk, keys.get(source)).columns))
    pins = [pin(spark, target, destination) for _, target in pairs]
    where = f"{client.config.user}@{client.config.address}"
    position = open_snapshot(conn, where)
    try:
        for p in pins:
            if p.start > position:
                raise LakeError(
                    f"the lake's mark of {p.target} ({p.text}) lies after the source's position {position}: "
                    "is the source the server the destination reads?"
                )
        start = min(p.start for p in pins)
        try:
            found = changed_keys(
                client,
                client.connect,
                [WatchedTable(s, t, k, p.order_key) for (s, t, k), p in zip(watched, pins, strict=True)],
                start,
                position,
            )
        except PurgedBinlogError as exc:
            raise LakeError(
                f"the binlog from {start} (the lake's position) to {position} cannot be read: {exc}"
            ) from None
        out = []
        for (source, target), (schema, table, _), p in zip(pairs, watched, pins, strict=True):
            at = AtPosition(
                str(position),
                p.text,
                p.snapshot,
                frozenset(found.keys[(schema, table)]),
                found.changes[(schema, table)],
            )
            out.append(verify_table(conn, spark, source, target, keys.get(source), show=show, at=at))
        return out
    finally:
        with conn.cursor() as cur:
            cur.execute("ROLLBACK")
