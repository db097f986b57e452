"""A table re-snapshot at a binlog point: rebuild ONE lake table from its source table, consistent
with the stream, replacing its contents in one lake commit, exactly once across crashes.

The remedy for any source operation whose effect on rows is not in the binlog (statement-format
DML, partition maintenance, a type change the lake cannot rewrite exactly...). Built on the
chunked watermark snapshot (:mod:`.initial`)::

    S = consistent_start()                    the position whose read view every later chunk contains
    for each chunk n: read it (low/high watermarks, reconciled), load it into a STAGING table
    swap: the target's contents := the staging table's, in one commit whose mark is S
          (the merge's own exactly-once mark, :mod:`...lake.commits`), then drop the staging table

**Why the mark at S is exact.** The mark is :func:`mark_key` ``(file(S), pos(S), -2, -1)``: every
entry of an event before ``S`` sorts at or below it, every entry at or after ``S`` above it. After
the swap the drain skips the table's changes up to ``S`` (the staging rows hold them: every chunk
was read after the snapshot that fixed ``S``) and applies those after ``S``; a chunk that already
reflects a later change gets it again, which sets the same final row (full images), exactly the
hand-over of the initial snapshot. Other tables are untouched. The drain never moves a table's mark
backwards, and a re-snapshot refuses to: a mark already past ``S`` (a run applied changes past it
to the old table meanwhile) makes a new attempt at a new ``S``.

**Crashes.** Progress lives in the meta store, under the destination::

    resnapshot/{schema.table}   {"attempt": "3f9c..", "target": "lake.db.t", "start": "file:pos",
                                 "source": "schema.table",
                                 "status": "loading"|"swapping"|"done"|"abandoned", "chunk": n,
                                 "last_key": [...], "rows": N, "pending": {...}|null}

* a crash while loading leaves the target untouched; the next run resumes the staging table at
  the last chunk whose commit is known (a chunk committed before its progress write is found by
  its mark in the staging table, as in :mod:`.initial`);
* ``swapping`` is written before the swap; the swap's commit names the attempt, so after a crash
  the next run tells a done swap (then only drops the staging table) from one not made (then
  makes it): never twice, never lost;
* the staging table is dropped BEFORE ``done`` is written: a ``done`` record has none left;
* staging tables of other attempts (killed, or abandoned) are dropped at the start of the next;
* an attempt that will not be completed is ``abandoned`` (:meth:`TableResnapshot.abandon`; its
  staging table dropped first): the table is gone (renamed or dropped since its statement), its
  mark went past ``S``, or it is no longer routed to the record's target. A run cannot count on
  re-reading the statement that asked for an attempt (a crash after the swap leaves a mark at
  ``S`` that covers it), so the drain settles every unfinished record at its start
  (:func:`settle`, :func:`...drain.resnapshot.clean_leftovers`).

One process at a time: the caller holds the destination's ``running`` node (the drain does; the
CLI takes it) and ``guard`` checks it before every progress write.

Failpoints: ``snapshot_before_load`` / ``snapshot_after_load`` around each chunk (as the initial
snapshot), ``resnapshot_before_swap`` and ``resnapshot_after_swap`` around the swap.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_provider_binlog.binlog.client import ReplicationClient
from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.binlog.position import BinlogPosition, file_number
from airflow_provider_binlog.canal.change import OrderKey
from airflow_provider_binlog.canal.meta.base import MetaManager
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.snapshot.initial import ChunkReader, Projection, chunk_changes
from airflow_provider_binlog.canal.snapshot.position import consistent_start
from airflow_provider_binlog.canal.snapshot.values import (
    SnapshotError,
    decode_key,
    encode_key,
    table_key,
    table_schema,
)
from airflow_provider_binlog.faults import failpoint

log = logging.getLogger(__name__)

PREFIX = "resnapshot"
START_WAIT_SECONDS = 10.0

STAGING_INFIX = "__resnapshot_"
"""A staging table is named ``{table}{STAGING_INFIX}{attempt}`` beside its target (re-snapshots and
the lake copies of online schema-change tools, :mod:`.online_copy`)."""
ATTEMPT = re.compile(r"[0-9a-f]{12}")
"""An attempt id: 12 lowercase hex digits (only staging names of exactly that form count)."""


def staging_parts(target_parts: Sequence[str], attempt: str) -> tuple[str, ...]:
    """The name parts of the staging table of ``attempt`` beside the target ``target_parts``.

    :raises ValueError: ``attempt`` is not 12 lowercase hex digits.
    """
    if not ATTEMPT.fullmatch(attempt):
        raise ValueError(f"a re-snapshot attempt is 12 lowercase hex digits, not {attempt!r}")
    return (*target_parts[:-1], f"{target_parts[-1]}{STAGING_INFIX}{attempt}")


def resnapshot_key(source: str) -> str:
    """The progress record key of ``schema.table``'s re-snapshot."""
    return PREFIX + table_key(source)[len("snapshot") :]


def mark_key(start: BinlogPosition) -> OrderKey:
    """The order key of a re-snapshot at ``start``: above every entry of an event before it, below
    every entry of the event at it (payload indexes are >= -1)."""
    return OrderKey(file_number(start.file), start.pos, -2, -1)


class TableSwapper(Protocol):
    """The lake side of one table's re-snapshot (:class:`~...lake.resnapshot.LakeResnapshot`)."""

    def prepare(self, attempt: str, ts: TableSchema) -> None:
        """Drop staging tables of other attempts; create this attempt's (empty) for ``ts``."""

    def committed_chunk(self, attempt: str) -> int | None:
        """The last chunk number the attempt's staging table holds (``None``: none)."""

    def load(self, attempt: str, changes: list[Any]) -> None:
        """Commit one chunk's rows to the attempt's staging table (skipping a chunk it holds)."""

    def mark_position(self) -> OrderKey | None:
        """The target's committed mark for the destination (``None``: no table or no mark)."""

    def swapped(self, attempt: str) -> bool:
        """Whether the target's history holds this attempt's swap."""

    def swap(self, attempt: str, start: BinlogPosition) -> None:
        """Replace the target's contents with the staging table's in one commit marked at ``start``."""

    def drop_staging(self, attempt: str) -> None:
        """Drop the attempt's staging table (if there)."""


@dataclass
class ResnapshotResult:
    """What a re-snapshot did.

    :param source: the source table.
    :param target: the lake table.
    :param start: the position ``S`` the lake table now equals the source at.
    :param attempt: the attempt's id (in the swap commit's properties).
    :param rows: rows loaded.
    :param chunks: chunks read by this call (a resumed attempt read fewer).
    :param resumed: an earlier attempt's progress was taken up.
    :param seconds: wall time.
    :param gone: the source table no longer existed (nothing was loaded; see
        :func:`...drain.resnapshot.resnapshot`).
    :param copied: the shadow table (``schema.table``) whose lake copy was swapped in instead of a
        load from the source (an online schema-change tool's cut-over, :mod:`.online_copy`).
    """

    source: str
    target: str
    start: BinlogPosition
    attempt: str
    rows: int = 0
    chunks: int = 0
    resumed: bool = False
    seconds: float = 0.0
    gone: bool = False
    copied: str = ""

    @property
    def mark(self) -> OrderKey:
        return mark_key(self.start)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "target": self.target, "start": str(self.start), "attempt": self.attempt,
            "rows": self.rows, "chunks": self.chunks, "resumed": self.resumed, "seconds": self.seconds,
            "gone": self.gone, "copied": self.copied,
        }  # fmt: skip


class TableResnapshot:
    """Re-snapshot one table (see the module docstring); :meth:`run` resumes an unfinished attempt.

    :param meta: the destination's meta store (progress).
    :param identity: the destination's client identity.
    :param client: replication client of the source (watermarks).
    :param connect: returns a pymysql connection to the source.
    :param source: ``schema.table``.
    :param target: the lake table (named in the progress record and the result).
    :param swapper: the lake side.
    :param key_columns: chunk key (``None``/empty: the primary key).
    :param chunk_size: rows per chunk.
    :param after: a position ``S`` must lie after (the statement that needs the re-snapshot);
        waited for up to :data:`START_WAIT_SECONDS` (a transaction in the binlog and not yet
        visible puts ``S`` before it for a moment).
    :param guard: called before every progress write (the running node's check).
    :param project: the destination's column rules (:func:`~.initial.column_projection`): the
        staging table, hence the swapped-in target, holds the kept columns only.
    """

    def __init__(
        self,
        meta: MetaManager,
        identity: ClientIdentity,
        client: ReplicationClient,
        connect: Callable[[], Any],
        source: str,
        target: str,
        swapper: TableSwapper,
        key_columns: Sequence[str] | None = None,
        chunk_size: int = 50_000,
        after: BinlogPosition | None = None,
        guard: Callable[[], None] | None = None,
        project: Projection | None = None,
    ) -> None:
        self.meta = meta
        self.identity = identity
        self.client = client
        self.connect = connect
        self.source = source
        self.target = target
        self.swapper = swapper
        self.key_columns = tuple(key_columns or ())
        self.chunk_size = chunk_size
        self.after = after
        self.guard = guard
        self.project = project
        self.key = resnapshot_key(source)

    def progress(self) -> dict[str, Any] | None:
        value: dict[str, Any] | None = self.meta.get_json(self.identity, self.key).value
        return value

    def _put(self, value: dict[str, Any]) -> None:
        if self.guard is not None:
            self.guard()
        self.meta.update_json(self.identity, self.key, lambda _old: value)

    def start_position(self) -> BinlogPosition:
        """A consistent snapshot position after ``after`` (what a new attempt starts at)."""
        return self._start()

    def _start(self) -> BinlogPosition:
        src = self.client.config
        where = f"{src.user}@{src.address}"
        deadline = time.monotonic() + START_WAIT_SECONDS
        while True:
            start = consistent_start(self.connect, where)
            if self.after is None or start > self.after:
                return start
            if time.monotonic() >= deadline:
                raise SnapshotError(
                    f"re-snapshot of {self.source}: the consistent snapshot position {start} is still not "
                    f"after {self.after} after {START_WAIT_SECONDS:g} s"
                )
            time.sleep(0.2)

    def _usable(self, prog: dict[str, Any] | None) -> bool:
        """Whether ``prog`` is an unfinished attempt for this target that can still be completed."""
        if not unfinished(prog) or prog is None or prog.get("target") != self.target:
            return False
        start = BinlogPosition.parse(prog["start"])
        if self.after is not None and not start > self.after:
            return False
        return completable(prog, self.swapper)

    def abandon(self, why: str) -> str | None:
        """Give up this table's unfinished attempt for this target, if there is one: drop its staging
        table, then record it ``abandoned`` (with ``why``); return its id."""
        prog = self.progress()
        if not unfinished(prog) or prog is None or prog.get("target") != self.target:
            return None
        self.swapper.drop_staging(prog["attempt"])
        self._put({**prog, "status": "abandoned", "pending": None, "why": why})
        log.info("re-snapshot of %s: attempt %s abandoned (%s)", self.source, prog["attempt"], why)
        return str(prog["attempt"])

    def run(self) -> ResnapshotResult:
        """Re-snapshot the table (resuming an unfinished attempt); return what was done."""
        t0 = time.monotonic()
        self.meta.subscribe(self.identity)
        prog = self.progress()
        resumed = self._usable(prog)
        if not resumed and unfinished(prog) and prog is not None and prog.get("target") == self.target:
            self.swapper.drop_staging(prog["attempt"])  # replaced by the new attempt's record below
        if not resumed or prog is None:
            start = self._start()
            attempt = secrets.token_hex(6)
            prog = {
                "attempt": attempt, "source": self.source, "target": self.target, "start": str(start),
                "status": "loading", "chunk": 0, "last_key": None, "rows": 0, "pending": None,
            }  # fmt: skip
            self._put(prog)
        attempt, start = prog["attempt"], BinlogPosition.parse(prog["start"])
        res = ResnapshotResult(self.source, self.target, start, attempt, resumed=resumed)
        log.info("re-snapshot of %s into %s at %s (attempt %s)", self.source, self.target, start, attempt)
        if prog["status"] == "loading":
            prog = self._load(prog, res)
        if prog["status"] == "swapping":
            if not self.swapper.swapped(attempt):
                failpoint("resnapshot_before_swap")
                self.swapper.swap(attempt, start)
                failpoint("resnapshot_after_swap")
            self.swapper.drop_staging(attempt)  # before "done": a done record has no staging table
            prog = {**prog, "status": "done", "pending": None}
            self._put(prog)
        res.rows = int(prog.get("rows", 0))
        res.seconds = round(time.monotonic() - t0, 3)
        log.info("re-snapshot of %s done: %s", self.source, res.as_dict())
        return res

    def _load(self, prog: dict[str, Any], res: ResnapshotResult) -> dict[str, Any]:
        schema, _, table = self.source.partition(".")
        full = table_schema(self.connect, schema, table)
        ts = self.project(full) if self.project is not None else full
        attempt = prog["attempt"]
        self.swapper.prepare(attempt, ts)
        pending = prog.get("pending")
        if pending is not None:
            committed = self.swapper.committed_chunk(attempt)
            if committed is not None and committed >= pending["chunk"]:
                prog = _done_chunk(prog, pending)
                self._put(prog)
            else:
                prog = {**prog, "pending": None}
        reader = ChunkReader(
            self.client, self.connect, full, self.key_columns or None, self.chunk_size, self.project
        )
        try:
            while prog["status"] == "loading":
                n = int(prog["chunk"]) + 1
                chunk = reader.read(n, decode_key(prog["last_key"]))
                pending = {
                    "chunk": n,
                    "last_key": prog["last_key"] if chunk.last_key is None else encode_key(chunk.last_key),
                    "rows": len(chunk.rows),
                    "final": chunk.final,
                }
                prog = {**prog, "pending": pending}
                self._put(prog)
                failpoint("snapshot_before_load")
                if chunk.rows:
                    self.swapper.load(
                        attempt, chunk_changes(self.identity.destination, ts, reader.keys, chunk)
                    )
                failpoint("snapshot_after_load")
                prog = _done_chunk(prog, pending)
                self._put(prog)
                res.chunks += 1
                log.info(
                    "re-snapshot of %s: chunk %d, %d rows (%d reconciled), %s..%s",
                    self.source, n, len(chunk.rows), chunk.reconciled, chunk.low, chunk.high,
                )  # fmt: skip
        finally:
            reader.close()
        return prog


UNFINISHED = ("loading", "swapping")


def unfinished(prog: dict[str, Any] | None) -> bool:
    """Whether a progress record is an attempt that was neither done nor abandoned (it may own a
    staging table)."""
    return prog is not None and prog.get("status") in UNFINISHED


def completable(prog: dict[str, Any], swapper: TableSwapper) -> bool:
    """Whether the unfinished attempt ``prog`` can still be completed in its target: its swap is
    made (only the bookkeeping is left), or the target's mark is still before its ``S`` (else a run
    applied changes past ``S`` to the old table: swapping at ``S`` would move the mark back)."""
    if prog["status"] == "swapping" and swapper.swapped(prog["attempt"]):
        return True
    mark = swapper.mark_position()
    return mark is None or tuple(mark) < tuple(mark_key(BinlogPosition.parse(prog["start"])))


def source_of(key: str, prog: dict[str, Any]) -> str:
    """The source table of the progress record at ``key`` (records before ``source`` was written
    carry it only in the key's escaped form, see :func:`resnapshot_key`)."""
    if prog.get("source"):
        return str(prog["source"])
    esc = key.rsplit("/", 1)[-1]
    return re.sub(r"(?:=[0-9a-f]{2})+", lambda m: bytes.fromhex(m.group().replace("=", "")).decode(), esc)


def settle(
    meta: MetaManager,
    identity: ClientIdentity,
    swapper_for: Callable[[str, str], TableSwapper],
    routed: Callable[[str, str], bool],
    guard: Callable[[], None] | None = None,
) -> dict[str, str | None]:
    """Settle the destination's unfinished re-snapshot attempts (at the start of a run, before any
    new one): an attempt whose swap is made is finished (staging table dropped, ``done``); one that
    cannot be completed (mark past ``S``) or whose source is no longer routed to its target
    (``routed(source, target)`` false) is abandoned (staging table dropped, ``abandoned``); others
    are kept for the re-snapshot that resumes them.

    :param swapper_for: ``(source, target) -> TableSwapper``.
    :return: target -> the attempt still in progress for it (``None``: none), for every target an
        unfinished record named; empty when there was none (nothing else was read).
    """
    live: dict[str, str | None] = {}
    for name in meta.list_keys(identity, PREFIX):
        key = f"{PREFIX}/{name}"
        prog: dict[str, Any] | None = meta.get_json(identity, key).value
        if not unfinished(prog) or prog is None:
            continue
        source, target, attempt = source_of(key, prog), str(prog["target"]), str(prog["attempt"])
        swapper = swapper_for(source, target)
        live.setdefault(target, None)
        if prog["status"] == "swapping" and swapper.swapped(attempt):
            status, why = "done", None
        elif not routed(source, target):
            status, why = "abandoned", f"{source} is no longer routed to {target}"
        elif not completable(prog, swapper):
            status, why = "abandoned", f"the mark of {target} is past {prog['start']}"
        else:
            live[target] = attempt
            continue
        swapper.drop_staging(attempt)
        settled = {**prog, "status": status, "pending": None, **({"why": why} if why else {})}
        if guard is not None:
            guard()
        meta.update_json(identity, key, lambda _old, value=settled: value)
        log.info("re-snapshot of %s into %s: attempt %s settled as %s%s", source, target, attempt, status,
                 f" ({why})" if why else "")  # fmt: skip
    return live


def source_exists(connect: Callable[[], Any], source: str) -> bool:
    """Whether the source table ``schema.table`` exists now."""
    schema, _, table = source.partition(".")
    conn = connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (schema, table),
            )
            return cur.fetchone() is not None
    finally:
        conn.close()


def _done_chunk(prog: dict[str, Any], pending: dict[str, Any]) -> dict[str, Any]:
    return {
        **prog,
        "status": "swapping" if pending["final"] else "loading",
        "chunk": pending["chunk"],
        "last_key": pending["last_key"],
        "rows": int(prog.get("rows", 0)) + int(pending["rows"]),
        "pending": None,
    }


__all__ = [
    "ATTEMPT",
    "STAGING_INFIX",
    "ResnapshotResult",
    "TableResnapshot",
    "TableSwapper",
    "completable",
    "mark_key",
    "resnapshot_key",
    "settle",
    "source_exists",
    "source_of",
    "staging_parts",
    "unfinished",
]
