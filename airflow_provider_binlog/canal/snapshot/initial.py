"""Initial snapshot: read existing rows in primary-key chunks, consistent with the binlog, resumable.

Approach (the low/high watermark of Flink CDC and Debezium's incremental snapshots), per table::

    start S = the binlog position of a consistent snapshot, before the first chunk  (stored once)
    for each chunk n = 1, 2, ...:
        START TRANSACTION WITH CONSISTENT SNAPSHOT; low_n = its binlog position
        SELECT cols FROM t WHERE key > last_key ORDER BY key LIMIT chunk_size; COMMIT   (no lock)
        high_n = head position
        reconcile: for every row change of t in the binlog [low_n, high_n) whose key lies in the
            chunk's range (last_key, max key read] (unbounded for the last chunk), the binlog wins:
            a deleted key is dropped, an inserted/updated key takes the after image (an update
            that changes the key drops the old key) -> the chunk equals t's range at high_n
        load the chunk into the lake as INSERT changes with order keys (0, n, -1, row index)
        progress: chunk n done, last_key = max key read

No global lock is taken on MariaDB; each SELECT is a consistent read of one chunk in a
transaction of its own. Why ``S`` and ``low_n`` must come from the consistent snapshot and not from
``SHOW MASTER STATUS`` (a transaction can be in the binlog before it is visible in InnoDB), and what
MySQL does instead, is in :mod:`.position`.

**Values.** SELECT results are converted to the decoder's value contract
(:mod:`~airflow_provider_binlog.binlog.columns`) by one converter per column built from the
table's :class:`~airflow_provider_binlog.binlog.columns.ColumnDef` (:mod:`.values`;
session ``time_zone`` is ``+00:00``): TIMESTAMP becomes aware UTC, zero dates ``None``, FLOAT
the float32 value, BIT an ``int``, JSON (MySQL's binary JSON) parsed, SET the comma-joined
labels. So a snapshot row and
the binlog image of the same row are equal value for value (see the tests).

**Order keys and hand-over (no gap, no double).** Snapshot rows carry order keys in binlog file
number 0, ``(0, chunk, -1, row)``: below every real binlog change (file numbers start at 1).
Hence in the lake merge (:mod:`~airflow_provider_binlog.lake.write.merge`):

* a table's committed mark after a snapshot chunk is ``(0, n, -1, last row)``; it covers exactly
  the chunks loaded so far, so re-loading chunk ``n`` after a crash between the Iceberg commit and
  the progress write is skipped by the merge (idempotent), and the progress record learns it was
  committed by reading that mark (:meth:`ChunkLoader.committed_chunk`);
* it covers no binlog change, so every binlog change read after the snapshot is applied and
  overrides the snapshot row of its key.

When every table is done, the destination's cursor is set to ``S`` (``included``: the event at
``S`` is still to be read) unless it already has an earlier one. Why that is exact:

* *No gap*: every chunk was read after the snapshot that fixed ``S`` saw exactly the
  transactions before ``S`` (:mod:`.position`), and read views only grow, so a change
  before ``S`` is in the rows read; a change at or after ``S`` is read from the binlog.
  A key's lake value after the binlog run is the image of its last change in ``[S, stop]``, or, if
  it had none there, the snapshot value, which then equals the source value (the row did not
  change between ``S`` and the read, nor after it).
* *No double*: binlog changes before ``S`` are never read; changes after ``S`` that a chunk
  already reflects are applied again, but with full row images an upsert or delete of a key sets
  the same final value whatever came before, and the merge's own order-key mark guarantees each
  binlog change is applied once across retries. The chunks themselves are applied once (marks
  and progress, above).

The watermark reconciliation makes every chunk equal to its key range at ``high_n`` (not at
some unknown instant of the SELECT), so the lake during and right after the snapshot holds rows
that really existed together, ranges never mix states from before and after a change of the
same key, and a row deleted while its chunk was being read is not loaded.

A table added to the filter later (``when_needed``) is snapshotted the same way while the cursor
stays where it is (it is earlier than that table's ``S``, so the argument above holds). A cursor
whose binlog was purged needs a fresh snapshot of every table, which resets the lake tables first.

Progress lives in the meta store, under the destination's provider records::

    snapshot/_run                    {"start": "file:pos", "status": "running"|"done", "tables": [...]}
    snapshot/{schema.table}          {"status": "running"|"done", "chunk": n, "last_key": [...],
                                      "rows": N, "loads": [1, 2, ...], "pending": {...}|null,
                                      "start": "file:pos"}

``start`` is the table's ``S``: its lake rows hold every change before it, so a binlog replay from an
earlier cursor skips the table's entries before ``S`` (its row changes and its DDL alike:
:func:`airflow_provider_binlog.drain.snapshot.snapshot_start_marks`). Records written before it was
kept have none (the ``_run`` record's ``start`` then stands for the tables it lists).

``pending`` is written before a chunk's lake commit; ``loads`` lists each chunk number once, when
its commit is known to be in the lake. One process at a time: the operator and the CLI hold the
destination's ``running`` node (:mod:`.ha`) from before :meth:`Snapshot.run` to the end of the run,
and every progress and cursor write first checks it (``guard``), so a worker whose ZooKeeper
session was lost stops before writing anything more.

**Column rules** (``columns=`` / ``exclude_columns=``, :mod:`.filter`): with a projection
(:func:`column_projection`) the reader selects the kept columns only and projects the binlog images
it reconciles, so the chunks carry the same projected schema as the table's row changes and the
lake table is made of exactly those columns.

Limits: key columns must be unique and NOT NULL; the chunk range test during reconciliation
compares keys in Python (exact for numeric and temporal keys; for string keys under a
case-insensitive collation a change may be missed in the reconciliation, which the binlog replay
from ``S`` corrects); row images must be FULL with ``binlog_row_metadata=FULL``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_provider_binlog.binlog.client import ReplicationClient
from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.binlog.rows import RowsEvent
from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.meta.base import MetaManager
from airflow_provider_binlog.canal.meta.model import ClientIdentity, LogPosition
from airflow_provider_binlog.canal.positions.start import side_client
from airflow_provider_binlog.canal.snapshot.position import (
    consistent_read,
    consistent_start,
    head,
    snapshot_status,
)
from airflow_provider_binlog.canal.snapshot.values import (
    TEMPORAL,
    SnapshotError,
    converter,
    converters,
    decode_key,
    encode_key,
    quote,
    stamp_invalid,
    table_key,
    table_schema,
)
from airflow_provider_binlog.faults import failpoint

log = logging.getLogger(__name__)

RUN_KEY = "snapshot/_run"
SNAPSHOT_FILE_NUMBER = 0

Projection = Callable[[TableSchema], TableSchema]
"""A table's full schema -> the schema its lake table is made of (the kept columns, in table order)."""


def column_projection(flt: TableFilter | None) -> Projection | None:
    """The projection of ``flt``'s column rules (:meth:`.filter.TableFilter.table_schema`) for the
    tables that have some; ``None`` when it has none (every table keeps all its columns)."""
    if flt is None or not (flt.columns or flt.exclude_columns):
        return None

    def project(ts: TableSchema) -> TableSchema:
        return flt.table_schema(ts) if flt.has_column_rules(ts.schema, ts.table) else ts

    return project


# ---------------------------------------------------------------------------- chunks


@dataclass
class Chunk:
    """One chunk of a table, consistent with the binlog at ``high``.

    :param number: 1-based chunk number within the table.
    :param rows: the rows (decoder value contract) keyed by their key values.
    :param last_key: the largest key read by the SELECT (raw, for the next chunk's WHERE); ``None``
        when the SELECT read nothing.
    :param final: the SELECT read fewer rows than asked: the table ends here.
    :param low: head position before the SELECT.
    :param high: head position after it.
    :param reconciled: binlog row changes applied to the chunk.
    """

    number: int
    rows: dict[tuple[Any, ...], dict[str, Any]]
    last_key: tuple[Any, ...] | None
    final: bool
    low: BinlogPosition
    high: BinlogPosition
    reconciled: int = 0


class ChunkReader:
    """Reads one table in key chunks with low/high watermarks (see the module docstring).

    :param client: replication client of the source (head positions, window dumps).
    :param connect: returns a pymysql connection able to SELECT the table.
    :param ts: the table's columns (:func:`table_schema`).
    :param key_columns: the chunk key (the primary key unless given).
    :param chunk_size: rows per SELECT.
    :param project: the column rules' projection (:func:`column_projection`): only the kept columns
        are selected, and the reconciled binlog images are projected on them; ``self.ts`` is the
        projected schema.
    """

    def __init__(
        self,
        client: ReplicationClient,
        connect: Callable[[], Any],
        ts: TableSchema,
        key_columns: Sequence[str] | None = None,
        chunk_size: int = 50_000,
        project: Projection | None = None,
    ) -> None:
        full = self._full = ts
        ts = project(ts) if project is not None else ts
        self._kept: frozenset[str] | None = frozenset(ts.column_names) if ts is not full else None
        self.client = client
        self.connect = connect
        self.ts = ts
        self.keys = tuple(key_columns or ts.primary_key)
        if not self.keys:
            raise SnapshotError(
                f"table {ts.qualified_name} has no primary key: configure key columns for its snapshot"
            )
        names = ts.column_names
        missing = [k for k in self.keys if k not in names]
        if missing:
            raise SnapshotError(f"key column(s) {missing} are not columns of {ts.qualified_name}")
        self.chunk_size = chunk_size
        self.names = names
        self.convs = converters(ts)
        self.temporal = tuple(i for i, c in enumerate(ts.columns) if c.type in TEMPORAL)
        self.key_idx = tuple(names.index(k) for k in self.keys)
        self._scanner = side_client(client)
        self._conn: Any = None
        self._exact = False

    def _cursor(self) -> Any:
        if self._conn is None:
            self._conn = self.connect()
            self._conn.autocommit(True)  # every chunk a transaction of its own, no long read view
            with self._conn.cursor() as cur:
                cur.execute("SET SESSION time_zone = '+00:00'")
                self._exact = snapshot_status(cur) is not None
        return self._conn.cursor()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _head(self, cur: Any) -> BinlogPosition:
        """The head position, on the chunk connection (a new connection per watermark costs more
        than the SELECT of a small chunk)."""
        pos = head(cur)
        if pos is None:
            return self.client.head_position()  # raises "binary logging is off"
        return pos

    def _low(self, cur: Any) -> BinlogPosition:
        """The low watermark; where the server reports it (MariaDB), the chunk's SELECT then reads
        exactly the state at it (see :mod:`.position`)."""
        if self._exact:
            pos = consistent_read(cur)
            if pos is not None:
                return pos
        return self._head(cur)

    def _select(self, after: tuple[Any, ...] | None) -> tuple[str, list[Any]]:
        cols = ", ".join(quote(n) for n in self.names)
        sql = f"SELECT {cols} FROM {quote(self.ts.schema)}.{quote(self.ts.table)}"
        args: list[Any] = []
        if after is not None:
            # (k1, k2) > (a, b) spelt out so every server uses the key's index for the range
            ors = []
            for i in range(len(self.keys)):
                eqs = [f"{quote(k)} = %s" for k in self.keys[:i]]
                ors.append("(" + " AND ".join([*eqs, f"{quote(self.keys[i])} > %s"]) + ")")
                args += [*after[:i], after[i]]
            sql += " WHERE " + " OR ".join(ors)
        sql += " ORDER BY " + ", ".join(quote(k) for k in self.keys) + f" LIMIT {int(self.chunk_size)}"
        return sql, args

    def read(self, number: int, after: tuple[Any, ...] | None) -> Chunk:
        """Read chunk ``number``: the rows with key > ``after`` (raw key values)."""
        sql, args = self._select(after)
        with self._cursor() as cur:
            low = self._low(cur)
            cur.execute(sql, args)
            raw = cur.fetchall()
            if self._exact:
                cur.execute("COMMIT")
            high = self._head(cur)
        convs, key_idx, names = self.convs, self.key_idx, self.names
        rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        converted = [[None if v is None else f(v) for f, v in zip(convs, r, strict=True)] for r in raw]
        if self.temporal:  # an invalid date names where the snapshot read it
            stamp_invalid(converted, self.temporal, f"{high} (the snapshot's read point)")
        for values in converted:
            rows[tuple(values[i] for i in key_idx)] = dict(zip(names, values, strict=True))
        last_raw = tuple(raw[-1][i] for i in key_idx) if raw else None
        final = len(raw) < self.chunk_size
        chunk = Chunk(number, rows, last_raw, final, low, high)
        if high > low:
            lower = self._converted(after)
            upper = None if final else self._converted(last_raw)
            chunk.reconciled = self._reconcile(chunk, lower, upper)
        return chunk

    def _converted(self, raw: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        if raw is None:
            return None
        return tuple(None if v is None else self.convs[i](v) for i, v in zip(self.key_idx, raw, strict=True))

    def changes(self, low: BinlogPosition, high: BinlogPosition) -> Iterator[tuple[Any, Any]]:
        """``(before, after)`` images of this table's row changes in the binlog ``[low, high)``."""
        schema, table = self.ts.schema, self.ts.table
        with self._scanner.dump(low, stop_at=high) as stream:
            full = self._full
            if any(c.plugin_type is not None for c in full.columns):
                # the table's schema names MariaDB's UUID/INET columns: their images hold text too
                ctx = stream.parser.ctx
                ctx.schema_resolver = lambda tm: full if (tm.schema, tm.table) == (schema, table) else None
            for event in stream:
                body = event.body
                if not isinstance(body, RowsEvent) or body.table_map is None:
                    continue
                tm = body.table_map
                if tm.schema != schema or tm.table != table:
                    continue
                yield from body.images()

    def _reconcile(self, chunk: Chunk, lower: tuple[Any, ...] | None, upper: tuple[Any, ...] | None) -> int:
        keys = self.keys

        def key_of(image: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
            if image is None:
                return None
            k = tuple(image.get(c) for c in keys)
            if any(v is None for v in k):
                return None
            try:
                if lower is not None and not k > lower:
                    return None
                if upper is not None and not k <= upper:
                    return None
            except TypeError:
                return None
            return k

        n = 0
        rows = chunk.rows
        for before, after in self.changes(chunk.low, chunk.high):
            old, new = key_of(before), key_of(after)
            if old is not None:
                rows.pop(old, None)
                n += 1
            if new is not None and after is not None:
                kept = self._kept
                rows[new] = dict(after) if kept is None else {c: v for c, v in after.items() if c in kept}
                n += 1 if old is None else 0
        return n


def chunk_changes(
    destination: str, ts: TableSchema, keys: Sequence[str], chunk: Chunk, timestamp: int | None = None
) -> list[RowChange]:
    """The chunk's rows as INSERT changes with the snapshot order keys ``(0, chunk, -1, i)``."""
    ts_now = int(time.time()) if timestamp is None else timestamp
    order = sorted(chunk.rows) if _sortable(chunk.rows) else list(chunk.rows)
    out = []
    for i, k in enumerate(order):
        out.append(
            RowChange(
                destination,
                ts.schema,
                ts.table,
                Op.INSERT,
                None,
                chunk.rows[k],
                tuple(keys),
                chunk.high,
                chunk.high,
                None,
                ts_now,
                OrderKey(SNAPSHOT_FILE_NUMBER, chunk.number, -1, i),
                ts,
            )
        )
    return out


def _sortable(rows: Mapping[tuple[Any, ...], Any]) -> bool:
    try:
        sorted(rows)
        return True
    except TypeError:
        return False


# ---------------------------------------------------------------------------- the driver


class ChunkLoader(Protocol):
    """Where chunks go (the lake side implements it; see ``lake.snapshot``)."""

    def reset(self, source: str) -> None:
        """Empty the target of ``source`` and set its mark below every snapshot chunk."""

    def committed_chunk(self, source: str) -> int | None:
        """The last snapshot chunk number the target of ``source`` holds (``None``: none)."""

    def load(self, source: str, changes: list[RowChange]) -> None:
        """Commit one chunk's changes to the target of ``source`` (skipping what its mark covers)."""


@dataclass
class TableResult:
    source: str
    rows: int = 0
    chunks: int = 0
    reconciled: int = 0
    skipped: bool = False
    seconds: float = 0.0


@dataclass
class SnapshotResult:
    start: BinlogPosition | None
    cursor_set: bool
    tables: dict[str, TableResult] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "start": str(self.start) if self.start else None,
            "cursor_set": self.cursor_set,
            "tables": {k: vars(v) for k, v in self.tables.items()},
        }


class Snapshot:
    """Snapshot a destination's tables into a :class:`ChunkLoader`, resumably.

    :param meta: the destination's meta store (progress records, cursor).
    :param identity: the destination's client identity.
    :param client: replication client of the source.
    :param connect: returns a pymysql connection to the source (SELECT, information_schema).
    :param tables: ``schema.table`` -> key columns (``None`` / empty: the primary key).
    :param loader: where chunks are written.
    :param chunk_size: rows per chunk.
    :param set_cursor: when done, set the destination's cursor to the snapshot start ``S``:
        ``"if_absent"`` (only when it has none), ``"always"`` (a purged cursor), ``"never"``.
    :param guard: called before every progress or cursor write; raises when this process is no
        longer the destination's one consumer (:meth:`~.ha.RunningNode.check`: held before
        :meth:`run` and through it, so two workers never snapshot one destination at once).
    :param project: the destination's column rules (:func:`column_projection`); the tables are read
        and loaded with the kept columns only.
    """

    def __init__(
        self,
        meta: MetaManager,
        identity: ClientIdentity,
        client: ReplicationClient,
        connect: Callable[[], Any],
        tables: Mapping[str, Sequence[str] | None],
        loader: ChunkLoader,
        chunk_size: int = 50_000,
        set_cursor: str = "if_absent",
        guard: Callable[[], None] | None = None,
        project: Projection | None = None,
    ) -> None:
        self.meta = meta
        self.identity = identity
        self.client = client
        self.connect = connect
        self.tables = dict(tables)
        self.loader = loader
        self.chunk_size = chunk_size
        self.set_cursor = set_cursor
        self.guard = guard
        self.project = project

    # -- records ----------------------------------------------------------------------------------

    def run_record(self) -> dict[str, Any] | None:
        value: dict[str, Any] | None = self.meta.get_json(self.identity, RUN_KEY).value
        return value

    def progress(self, source: str) -> dict[str, Any] | None:
        value: dict[str, Any] | None = self.meta.get_json(self.identity, table_key(source)).value
        return value

    def forget(self) -> None:
        """Drop every snapshot record of the destination (a new snapshot starts from scratch)."""
        for name in self.meta.list_keys(self.identity, "snapshot"):
            self.meta.delete_value(self.identity, f"snapshot/{name}")

    def _put(self, key: str, value: dict[str, Any]) -> None:
        if self.guard is not None:
            self.guard()
        self.meta.update_json(self.identity, key, lambda _old: value)

    # -- run --------------------------------------------------------------------------------------

    def run(self) -> SnapshotResult:
        """Snapshot every table not done yet, then hand over (set the cursor to ``S``)."""
        self.meta.subscribe(self.identity)
        record = self.run_record()
        if record is None or record.get("status") == "done":
            src = self.client.config
            start = consistent_start(self.connect, f"{src.user}@{src.address}")
            record = {"start": str(start), "status": "running", "tables": sorted(self.tables)}
            self._put(RUN_KEY, record)
        else:
            start = BinlogPosition.parse(record["start"])
            record["tables"] = sorted(set(record.get("tables", [])) | set(self.tables))
            self._put(RUN_KEY, record)
        log.info("snapshot of %s: start %s, tables %s", self.identity.destination, start, sorted(self.tables))
        result = SnapshotResult(start, False)
        for source in sorted(self.tables):
            result.tables[source] = self._table(source, start)
        cursor, version = self.meta.get_cursor(self.identity)
        if self.set_cursor == "always" or (self.set_cursor == "if_absent" and cursor is None):
            if self.guard is not None:
                self.guard()
            src = self.client.config
            pos = LogPosition(start.file, start.pos, None, None, None, True, -1, src.host, src.port)
            self.meta.set_cursor(self.identity, pos, version)
            result.cursor_set = True
            log.info("snapshot of %s: cursor set to %s", self.identity.destination, start)
        record["status"] = "done"
        self._put(RUN_KEY, record)
        return result

    def _table(self, source: str, start: BinlogPosition | None = None) -> TableResult:
        res = TableResult(source)
        t0 = time.monotonic()
        key = table_key(source)
        prog = self.progress(source)
        if prog is not None and prog.get("status") == "done":
            res.skipped = True
            return res
        schema, _, table = source.partition(".")
        reader = ChunkReader(
            self.client, self.connect, table_schema(self.connect, schema, table), self.tables.get(source),
            self.chunk_size, self.project,
        )  # fmt: skip
        ts = reader.ts
        if prog is None:
            self.loader.reset(source)
            prog = {"status": "running", "chunk": 0, "last_key": None, "rows": 0, "loads": []}
            prog["pending"] = None
            prog["start"] = str(start) if start is not None else None
            self._put(key, prog)
        pending = prog.get("pending")
        if pending is not None:
            committed = self.loader.committed_chunk(source)
            if committed is not None and committed >= pending["chunk"]:
                log.info("snapshot of %s: chunk %d was committed before the stop", source, pending["chunk"])
                prog = self._done_chunk(prog, pending)
                self._put(key, prog)
            else:
                prog["pending"] = None
        try:
            while prog["status"] != "done":
                n = int(prog["chunk"]) + 1
                chunk = reader.read(n, decode_key(prog["last_key"]))
                res.reconciled += chunk.reconciled
                pending = {
                    "chunk": n,
                    "last_key": prog["last_key"] if chunk.last_key is None else encode_key(chunk.last_key),
                    "rows": len(chunk.rows),
                    "final": chunk.final,
                    "low": str(chunk.low),
                    "high": str(chunk.high),
                }
                prog["pending"] = pending
                self._put(key, prog)
                failpoint("snapshot_before_load")
                if chunk.rows:
                    self.loader.load(source, chunk_changes(self.identity.destination, ts, reader.keys, chunk))
                failpoint("snapshot_after_load")
                prog = self._done_chunk(prog, pending)
                self._put(key, prog)
                res.chunks += 1
                res.rows += len(chunk.rows)
                log.info(
                    "snapshot of %s: chunk %d, %d rows (%d reconciled), %s..%s",
                    source, n, len(chunk.rows), chunk.reconciled, chunk.low, chunk.high,
                )  # fmt: skip
        finally:
            reader.close()
        res.seconds = round(time.monotonic() - t0, 3)
        return res

    @staticmethod
    def _done_chunk(prog: dict[str, Any], pending: dict[str, Any]) -> dict[str, Any]:
        loads = list(prog.get("loads", []))
        if pending["rows"]:
            loads.append(pending["chunk"])
        return {
            "status": "done" if pending["final"] else "running",
            "chunk": pending["chunk"],
            "last_key": pending["last_key"],
            "rows": int(prog.get("rows", 0)) + int(pending["rows"]),
            "loads": loads,
            "pending": None,
            **({"start": prog["start"]} if "start" in prog else {}),
        }


__all__ = [
    "Chunk",
    "ChunkLoader",
    "ChunkReader",
    "Snapshot",
    "SnapshotError",
    "SnapshotResult",
    "chunk_changes",
    "column_projection",
    "converter",
    "table_schema",
]
