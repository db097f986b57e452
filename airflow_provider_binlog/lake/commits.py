"""Exactly-once bookkeeping in Iceberg snapshot summaries.

Every commit the merge makes carries these snapshot summary properties:

==============================  ====================================================================
``binlog-cdc.destination``      the destination (subscription) whose changes the commit applied
``binlog-cdc.order-key``        ``file_number:pos:payload_index:row_index`` of the last entry applied
                                by this commit (inclusive); entries at or before it are skipped
``binlog-cdc.position``         ``file:pos`` of the event holding that entry
``binlog-cdc.end-position``     the batch's end position (set on the commit that completes a batch)
``binlog-cdc.gtid``             GTID of the last entry's transaction, when known
==============================  ====================================================================

The committed mark of a table for a destination is read from the newest snapshot among the current
snapshot's ancestors that names that destination (other writers, e.g. compaction, may commit in
between). Keep enough snapshots when expiring (``history.expire.min-snapshots-to-keep``) that the
newest one of ours survives; without a mark a retried batch is applied again, which a keyed MERGE
absorbs but an append-only table does not.

The properties ride on ``org.apache.iceberg.spark.CommitMetadata``'s thread-local: set just around
the statement (py4j pins each Python thread to one JVM thread, where the commit runs) and removed
in ``finally``. This needs the classic py4j gateway, not Spark Connect.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import OrderKey
from airflow_provider_binlog.lake.errors import LakeError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PREFIX = "binlog-cdc."
DESTINATION = PREFIX + "destination"
ORDER_KEY = PREFIX + "order-key"
POSITION = PREFIX + "position"
END_POSITION = PREFIX + "end-position"
GTID = PREFIX + "gtid"


@dataclass(frozen=True, slots=True)
class CommittedMark:
    """What a table holds for one destination.

    :param order_key: the last entry applied (inclusive).
    :param position: the event position of that entry.
    :param end_position: the end position of the last completed batch, if the newest commit completed one.
    :param gtid: GTID of the last applied transaction, if known.
    :param snapshot_id: the Iceberg snapshot carrying the mark.
    """

    order_key: OrderKey
    position: BinlogPosition | None
    end_position: BinlogPosition | None
    gtid: str | None
    snapshot_id: int

    def covers(self, key: OrderKey) -> bool:
        """True when the entry with this order key is already in the table."""
        return tuple(key) <= tuple(self.order_key)


def format_order_key(key: OrderKey) -> str:
    return ":".join(str(int(x)) for x in key)


def parse_order_key(text: str) -> OrderKey:
    parts = text.split(":")
    if len(parts) != 4:
        raise LakeError(f"invalid {ORDER_KEY} snapshot property {text!r}")
    return OrderKey(*(int(p) for p in parts))


def mark_properties(
    destination: str,
    order_key: OrderKey,
    position: BinlogPosition | None,
    end_position: BinlogPosition | None,
    gtid: str | None,
) -> dict[str, str]:
    """The snapshot properties of one commit."""
    props = {DESTINATION: destination, ORDER_KEY: format_order_key(order_key)}
    if position is not None:
        props[POSITION] = str(position)
    if end_position is not None:
        props[END_POSITION] = str(end_position)
    if gtid:
        props[GTID] = gtid
    return props


def _mark_from_summary(summary: Mapping[str, str], snapshot_id: int) -> CommittedMark:
    pos = summary.get(POSITION)
    end = summary.get(END_POSITION)
    return CommittedMark(
        order_key=parse_order_key(summary[ORDER_KEY]),
        position=BinlogPosition.parse(pos) if pos else None,
        end_position=BinlogPosition.parse(end) if end else None,
        gtid=summary.get(GTID) or None,
        snapshot_id=snapshot_id,
    )


def load_iceberg_table(spark: SparkSession, name: str) -> Any | None:
    """Return the JVM ``org.apache.iceberg.Table`` for a quoted multi-part name, or ``None`` if absent."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import AnalysisException

    from airflow_provider_binlog.lake.session import activate

    activate(spark)  # Spark3Util resolves the catalog through the thread's active session
    jvm: Any = spark._jvm
    try:
        return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)
    except AnalysisException as exc:
        if exc.getErrorClass() in ("TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND"):
            return None
        raise
    except Py4JJavaError as exc:
        if "NoSuchTableException" in str(exc.java_exception.getClass().getName()):
            return None
        raise


def read_mark(
    spark: SparkSession, name: str, destination: str, max_depth: int = 10_000
) -> CommittedMark | None:
    """Return the table's committed mark for ``destination``, or ``None`` (no table or no mark).

    :param name: quoted multi-part table name (see :func:`..sql.quote_parts`).
    """
    table = load_iceberg_table(spark, name)
    return None if table is None else mark_of(table, destination, max_depth)


def mark_of(table: Any, destination: str, max_depth: int = 10_000) -> CommittedMark | None:
    """Return the committed mark for ``destination`` of a loaded JVM Iceberg table, or ``None``."""
    table.refresh()
    snap = table.currentSnapshot()
    depth = 0
    while snap is not None and depth < max_depth:
        summary = snap.summary()
        if summary.get(DESTINATION) == destination and summary.get(ORDER_KEY):
            return _mark_from_summary({k: summary.get(k) for k in summary.keySet()}, int(snap.snapshotId()))
        parent = snap.parentId()
        snap = table.snapshot(parent) if parent is not None else None
        depth += 1
    return None


@contextlib.contextmanager
def commit_properties(spark: SparkSession, properties: Mapping[str, str]) -> Iterator[None]:
    """Attach ``properties`` to every Iceberg commit this thread makes inside the block."""
    jvm: Any = spark._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    cls = jvm.java.lang.Class.forName("org.apache.iceberg.spark.CommitMetadata", True, loader)
    field = cls.getDeclaredField("COMMIT_PROPERTIES")
    field.setAccessible(True)
    local = field.get(None)
    jmap = jvm.java.util.HashMap()
    for k, v in properties.items():
        jmap.put(k, v)
    local.set(jmap)
    try:
        yield
    finally:
        local.remove()


class Marks:
    """The committed marks of one destination's targets as one merger knows them: read from a
    table once, then moved on by the merger's own commits.

    :param spark: the session.
    :param destination: whose marks.
    :param found: told each target whose table exists when its mark is first read (``set.add``).
    """

    def __init__(self, spark: SparkSession, destination: str, found: Callable[[str], None]) -> None:
        self.spark = spark
        self.destination = destination
        self._found = found
        self.known: dict[str, CommittedMark | None] = {}
        """Target (quoted name) -> its mark (``None``: no table or no mark), for targets read so far."""

    def get(self, target: str) -> CommittedMark | None:
        """The target's mark, read from its table the first time."""
        known = self.known
        if target not in known:
            table = load_iceberg_table(self.spark, target)
            if table is not None:
                self._found(target)
            known[target] = None if table is None else mark_of(table, self.destination)
        return known[target]

    def read(self, target: str) -> CommittedMark | None:
        """The target's mark read from its table now (not cached, but remembered)."""
        mark = read_mark(self.spark, target, self.destination)
        self.known[target] = mark
        return mark

    def put(self, target: str, mark: CommittedMark) -> None:
        """The target committed up to ``mark``."""
        self.known[target] = mark
