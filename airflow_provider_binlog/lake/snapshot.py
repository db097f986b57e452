"""The lake side of the initial snapshot (:mod:`airflow_provider_binlog.canal.snapshot.initial`).

Chunks are written under the destination's own name, so each chunk commit carries the mark
``(0, chunk, -1, last row)``: re-loading a committed chunk is skipped, and every binlog change
(file number >= 1) is applied after it. A chunk is one ``INSERT`` (chunk key ranges are disjoint
and the target starts empty, so no key is there yet; the driver writes it as a data file where the
table allows, :mod:`.file_append`); with soft deletes or metadata columns it goes
through the :class:`~.merge.ChangeMerger`'s ``MERGE`` instead. :meth:`reset` empties a
target and commits the mark ``(0, 0, -1, -1)`` so a re-snapshot after a purge starts from chunk 1
below any older binlog mark.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from airflow_provider_binlog.canal.change import OrderKey, RowChange
from airflow_provider_binlog.canal.snapshot.initial import SNAPSHOT_FILE_NUMBER
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.commits import CommittedMark
from airflow_provider_binlog.lake.ddl.ddl import lake_columns
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.native import file_append
from airflow_provider_binlog.lake.shards.shards import scope_sql
from airflow_provider_binlog.lake.sql import parse_name, quote_parts
from airflow_provider_binlog.lake.write.merge import ChangeMerger, TargetOptions, table_lock
from airflow_provider_binlog.lake.write.merge_sql import append_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def chunk_commits(spark: SparkSession, target: str, destination: str) -> list[int]:
    """The chunk numbers of ``destination``'s snapshot chunk commits in ``target``'s history, sorted
    (the reset commit left out): each chunk appears once unless it was loaded twice."""
    rows = spark.sql(
        f"SELECT summary['{commits.DESTINATION}'] AS d, summary['{commits.ORDER_KEY}'] AS k "
        f"FROM {quote_parts(parse_name(target))}.snapshots"
    ).collect()
    keys = [commits.parse_order_key(r.k) for r in rows if r.d == destination and r.k]
    return sorted(k.pos for k in keys if k.file_number == SNAPSHOT_FILE_NUMBER and k.pos > 0)


class LakeChunkLoader:
    """:class:`~airflow_provider_binlog.canal.snapshot.initial.ChunkLoader` writing to Iceberg.

    :param spark: the session.
    :param destination: the destination (written into every commit's mark).
    :param tables: source ``schema.table`` -> target name.
    :param options: target options (as for :class:`~.merge.ChangeMerger`).
    :param staging_root: Parquet staging directory.
    """

    def __init__(
        self,
        spark: SparkSession,
        destination: str,
        tables: Mapping[str, str],
        options: TargetOptions | Mapping[str, TargetOptions] | None = None,
        staging_root: str | None = None,
    ) -> None:
        self.spark = spark
        self.destination = destination
        self.tables = dict(tables)
        self.options = options
        self.staging_root = staging_root
        self.merger = self._new_merger()
        self.commits: dict[str, int] = {}
        shared = [
            t for t in set(self.merger.routes.values()) if list(self.merger.routes.values()).count(t) > 1
        ]
        if shared:  # one mark per destination and table: a second table's chunk n would look loaded
            sources = sorted(s for s, t in self.merger.routes.items() if t in shared)
            self.merger.close()
            raise LakeError(
                f"destination {destination}: a snapshot of several source tables into one lake table is not "
                f"supported ({', '.join(sources)} -> {self.merger.display(shared[0])}); snapshot each "
                "shard under a destination of its own, or read those tables from the binlog only "
                "(snapshot='never')"
            )
        from airflow_provider_binlog.lake.shards.shard_writers import check_merger

        try:  # a table another destination fills is refused before a reset could empty it
            check_merger(self.merger, self.merger.load_marks())
        except BaseException:
            self.merger.close()
            raise

    def _new_merger(self) -> ChangeMerger:
        # a chunk's keys are new to the table (or re-loaded): no insert/update counting join
        opts = self.options
        if isinstance(opts, TargetOptions):
            opts = replace(opts, count_changes=False)
        elif opts is not None:
            opts = {k: replace(v, count_changes=False) for k, v in opts.items()}
        else:
            opts = TargetOptions(count_changes=False)
        return ChangeMerger(
            self.spark, self.destination, self.tables, opts, self.staging_root, max_rows=1 << 62
        )

    def _target(self, source: str) -> str:
        return quote_parts(parse_name(self.tables[source]))

    def reset(self, source: str) -> None:
        target = self._target(source)
        if commits.load_iceberg_table(self.spark, target) is None:
            return
        props = commits.mark_properties(
            self.destination, OrderKey(SNAPSHOT_FILE_NUMBER, 0, -1, -1), None, None, None
        )
        opts = self.merger.options_for(target)
        where = ""
        if opts.shard_column:  # this shard's rows only
            schema, table = source.split(".", 1)
            where = " WHERE " + str(scope_sql(opts, schema, table, 1, "a reset", self.merger.display(target)))
        delete = f"DELETE FROM {target}{where}"
        commits.commit(self.spark, target, props, lambda: self.spark.sql(delete), "a reset")
        # the merger may have cached the old mark
        self.merger.close()
        self.merger = self._new_merger()

    def committed_chunk(self, source: str) -> int | None:
        mark = commits.read_mark(self.spark, self._target(source), self.destination)
        if mark is None or mark.order_key.file_number != SNAPSHOT_FILE_NUMBER:
            return None
        return mark.order_key.pos

    def load(self, source: str, changes: list[RowChange]) -> None:
        m = self.merger
        target = m.routes[source]
        opts = m.options_for(target)
        if opts.append_only or opts.soft_delete or opts.metadata_columns or opts.shard_column:
            for change in changes:
                m.add(change)
            for counts in m.finish().values():
                self.commits[source] = self.commits.get(source, 0) + counts.commits
            return
        with table_lock(target):
            self._append(target, opts, changes)

    def _append(self, target: str, opts: TargetOptions, changes: list[RowChange]) -> None:
        """Append a chunk with one INSERT: chunk ranges are disjoint and the target was reset, so
        no key of the chunk is in the table, unless the chunk itself is (its mark says so)."""
        m = self.merger
        mark = m.marks.get(target)
        fresh = [c for c in changes if mark is None or not mark.covers(c.order_key)]
        if not fresh:
            return
        schemas = {id(c.table_schema): c.table_schema for c in fresh if c.table_schema is not None}
        display = m.display(target)
        columns = lake_columns(schemas.values(), opts, display)
        m.target_tables.ensure(target, parse_name(target), display, columns, opts)
        names = [c.name for c in columns]
        rows = (tuple((c.after or {}).get(n) for n in names) for c in fresh)
        view, stage, staged = m.views.stage(columns, rows)
        last = fresh[-1]
        props = commits.mark_properties(self.destination, last.order_key, last.position, None, None)
        insert = append_sql(target, view, names)

        def apply() -> None:
            read = functools.partial(m.views.area.read, stage)
            if not file_append.append(self.spark, target, read, columns, props, staged):
                m.views.use(view)
                self.spark.sql(insert)

        try:
            commits.commit(self.spark, target, props, apply, f"snapshot rows to {last.position}")
        finally:
            m.views.drop(view, stage)
        m.marks.put(target, CommittedMark(last.order_key, last.position, None, None, -1))
        source = self._source(target)
        self.commits[source] = self.commits.get(source, 0) + 1

    def _source(self, target: str) -> str:
        return next(s for s, t in self.merger.routes.items() if t == target)

    def close(self) -> None:
        self.merger.close()
