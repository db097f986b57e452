"""Several sources into one lake table with a shard column, against real local Spark + Iceberg: the
randomized model check (overlapping keys, key changes, TRUNCATE of one shard, ADD COLUMN), ADD
COLUMN with a default on one shard and later on the other, DROP/RENAME COLUMN and DROP TABLE of one
shard, the re-snapshot swap of one shard, and the writers' table properties."""

from __future__ import annotations

import random
import re
import uuid
from typing import Any

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Entry, Op
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.shards import shards
from airflow_provider_binlog.lake.shards.shard_swap import shard_swap
from airflow_provider_binlog.lake.shards.shard_writers import check_merger, check_writers
from airflow_provider_binlog.lake.snapshot import LakeChunkLoader
from airflow_provider_binlog.lake.sql import quote_parts
from airflow_provider_binlog.lake.write.merge import ChangeMerger, TargetOptions

from ..model import SourceTable, all_type_columns

pytestmark = pytest.mark.spark

SHARD = TargetOptions(shard_column="_shard", shard_value="{table}")
UTF8 = 45


def _ns() -> str:
    return f"s{uuid.uuid4().hex[:8]}"


def _lake(spark: Any, target: str, columns: list[str]) -> dict[tuple[str, int], dict[str, Any]]:
    rows = spark.sql(f"SELECT `_shard`, {', '.join(f'`{c}`' for c in columns)} FROM {target}").collect()
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for r in rows:
        values = {
            c: (bytes(v) if isinstance(v, bytearray) else v) for c, v in zip(columns, r[1:], strict=True)
        }
        key = (r[0], values["id"])
        assert key not in out, f"duplicate key {key}"
        out[key] = values
    return out


def _expected(sources: list[SourceTable], columns: list[str]) -> dict[tuple[str, int], dict[str, Any]]:
    out = {}
    for src in sources:
        for key, row in src.expected().items():
            out[(src.table, key)] = {c: row.get(c) for c in columns}
    return out


@pytest.mark.parametrize("seed", [11, 12])
def test_model_check_two_shards_one_table(spark: Any, seed: int) -> None:
    """Random changes of two source tables with overlapping keys (both count ids from 1), merged in
    random batches into one table keyed by (id, _shard): the lake is the union of both, value by value;
    a TRUNCATE of one shard leaves the other's rows."""
    rng = random.Random(seed)
    cols = [c for c in all_type_columns() if c.cdef.name in ("int", "dec", "vc", "d")]
    clock = [4]
    a = SourceTable("db", "a", list(cols), rng, clock=clock)
    b = SourceTable("db", "b", list(cols), rng, clock=clock)
    target = f"lake.{_ns()}.orders"
    names = ["id", *(c.cdef.name for c in cols)]
    with ChangeMerger(spark, "dest", {"db.a": target, "db.b": target}, SHARD, max_rows=1000) as merger:
        for round_no in range(4):
            batch: list[Entry] = []
            for _ in range(120):
                src = a if rng.random() < 0.5 else b
                weights = (40, 25, 8, 12, 1 if round_no == 2 else 0, 0)
                entry = src.random_op(weights)
                if entry is not None:
                    batch.append(entry)
            merger.merge(batch, batch[-1].end_position)
            assert _lake(spark, target, names) == _expected([a, b], names)
    assert {k[0] for k in _lake(spark, target, names)} <= {"a", "b"}
    overlapping = set(a.rows) & set(b.rows)
    assert overlapping, "the test needs keys both shards hold"


def _schema(table: str, extra: tuple[ColumnDef, ...] = ()) -> TableSchema:
    return TableSchema("db", table, (ColumnDef("id", T.LONG), ColumnDef("v", T.LONG), *extra), ("id",))


class Shard:
    """One source table emitting row changes and DDL entries on a shared clock."""

    def __init__(self, table: str, clock: list[int]) -> None:
        self.src = SourceTable("db", table, [], random.Random(0), clock=clock)
        self.table = table
        self.schema = _schema(table)

    def _ddl(self, sql: str, new: TableSchema | None, kind: DdlKind = DdlKind.DDL) -> DdlEntry:
        pos, end, key, ts = self.src._where()
        before = self.schema
        if new is not None:
            self.schema = new
        return DdlEntry(
            "dest", "db", self.table, kind, sql, pos, end, None, ts, key, new, previous_schema=before
        )

    def upsert(self, key: int, v: int, **more: Any) -> Entry:
        self.src._schema = self.schema
        return self.src._change(Op.INSERT, None, {"id": key, "v": v, **more})

    def add_column(self, default: int) -> DdlEntry:
        extra = (*self.schema.columns[2:], ColumnDef("c", T.LONG))
        return self._ddl(
            f"ALTER TABLE {self.table} ADD COLUMN c INT NOT NULL DEFAULT {default}",
            _schema(self.table, extra),
        )


def test_add_column_with_default_on_one_shard_then_the_other(spark: Any) -> None:
    """ADD COLUMN c DEFAULT 5 on shard a fills a's rows only (b's rows stay NULL: b has no c); b's rows
    merged meanwhile keep NULL; b's own ADD COLUMN c DEFAULT 7 later fills b's rows with 7, not a's."""
    clock = [4]
    a, b = Shard("a", clock), Shard("b", clock)
    target = f"lake.{_ns()}.t"
    routes = {"db.a": target, "db.b": target}
    with ChangeMerger(spark, "dest", routes, SHARD) as merger:
        first = [a.upsert(1, 10), b.upsert(1, 20), a.upsert(2, 11), b.upsert(3, 21)]
        merger.merge(first, first[-1].end_position)
        step = [a.add_column(5), a.upsert(4, 12, c=9), b.upsert(5, 22)]
        merger.merge(step, step[-1].end_position)
        lake = {(r[0], r[1]): r[2] for r in spark.sql(f"SELECT _shard, id, c FROM {target}").collect()}
        assert lake == {("a", 1): 5, ("a", 2): 5, ("a", 4): 9, ("b", 1): None, ("b", 3): None, ("b", 5): None}
        later = [b.add_column(7), b.upsert(6, 23, c=8)]
        merger.merge(later, later[-1].end_position)
    lake = {(r[0], r[1]): r[2] for r in spark.sql(f"SELECT _shard, id, c FROM {target}").collect()}
    assert lake == {
        ("a", 1): 5, ("a", 2): 5, ("a", 4): 9,
        ("b", 1): 7, ("b", 3): 7, ("b", 5): 7, ("b", 6): 8,
    }  # fmt: skip


def test_truncate_drop_rename_of_one_shard(spark: Any) -> None:
    """TRUNCATE of shard a in a chunk after its own and b's changes: b's rows stay (also those folded
    in the same chunk); RENAME COLUMN on b moves b's values only; DROP COLUMN on a NULLs a's values only;
    DROP TABLE b deletes b's rows and keeps the table."""
    clock = [4]
    a, b = Shard("a", clock), Shard("b", clock)
    target = f"lake.{_ns()}.t"
    routes = {"db.a": target, "db.b": target}
    with ChangeMerger(spark, "dest", routes, SHARD) as merger:
        chunk = [a.upsert(1, 10), b.upsert(1, 20), a.upsert(2, 11)]
        chunk.append(a._ddl("TRUNCATE TABLE a", a.schema, DdlKind.TRUNCATE))
        chunk += [b.upsert(2, 21), a.upsert(3, 12)]
        merger.merge(chunk, chunk[-1].end_position)
        rows = {(r[0], r[1]): r[2] for r in spark.sql(f"SELECT _shard, id, v FROM {target}").collect()}
        assert rows == {("a", 3): 12, ("b", 1): 20, ("b", 2): 21}
        renamed = TableSchema("db", "b", (ColumnDef("id", T.LONG), ColumnDef("w", T.LONG)), ("id",))
        dropped = TableSchema("db", "a", (ColumnDef("id", T.LONG),), ("id",))
        step = [
            b._ddl("ALTER TABLE b RENAME COLUMN v TO w", renamed),
            a._ddl("ALTER TABLE a DROP COLUMN v", dropped),
        ]
        merger.merge(step, step[-1].end_position)
        got = {
            (r[0], r[1]): (r[2], r[3]) for r in spark.sql(f"SELECT _shard, id, v, w FROM {target}").collect()
        }
        assert got == {("a", 3): (None, None), ("b", 1): (None, 20), ("b", 2): (None, 21)}
        drop = [b._ddl("DROP TABLE b", None)]
        merger.merge(drop, drop[-1].end_position)
    assert [tuple(r) for r in spark.sql(f"SELECT _shard, id FROM {target}").collect()] == [("a", 3)]


def test_resnapshot_swap_replaces_one_shard_only(spark: Any) -> None:
    """The swap of shard b: b's rows are exactly the staging table's, a's untouched, in one commit;
    a staging column the target lacks is added."""
    clock = [4]
    a, b = Shard("a", clock), Shard("b", clock)
    ns = _ns()
    target = f"lake.{ns}.t"
    with ChangeMerger(spark, "dest", {"db.a": target, "db.b": target}, SHARD) as merger:
        rows = [a.upsert(1, 10), a.upsert(2, 11), b.upsert(1, 20), b.upsert(2, 21)]
        merger.merge(rows, rows[-1].end_position)
    staging = f"lake.{ns}.t__staging"
    spark.sql(f"CREATE TABLE {staging} (id INT, v BIGINT, n STRING, _shard STRING) USING iceberg")
    spark.sql(f"INSERT INTO {staging} VALUES (2, 99, 'x', 'b'), (7, 70, NULL, 'b')")
    before = spark.sql(f"SELECT count(*) FROM {target}.snapshots").collect()[0][0]
    opts = shards.bind(SHARD, "dest")
    shard_swap(spark, quote_parts(("lake", ns, "t")), quote_parts(("lake", ns, "t__staging")), "db.b", opts)
    got = {(r[0], r[1]): (r[2], r[3]) for r in spark.sql(f"SELECT _shard, id, v, n FROM {target}").collect()}
    assert got == {("a", 1): (10, None), ("a", 2): (11, None), ("b", 2): (99, "x"), ("b", 7): (70, None)}
    assert spark.sql(f"SELECT count(*) FROM {target}.snapshots").collect()[0][0] == before + 1


def test_writers_recorded_and_a_second_destination_checked(spark: Any) -> None:
    """A table created with a shard column records it and its writer; a second destination without
    it, or with the same shard values, is refused naming both; with its own values it is recorded
    too. A table without a shard column that one destination fills refuses a second one, naming both."""
    clock = [4]
    a = Shard("a", clock)
    ns = _ns()
    target, plain = f"lake.{ns}.t", f"lake.{ns}.plain"
    quoted, quoted_plain = quote_parts(("lake", ns, "t")), quote_parts(("lake", ns, "plain"))
    opts = TargetOptions(shard_column="_shard", shard_value="{destination}")
    with ChangeMerger(spark, "one", {"db.a": target}, opts) as merger:
        rows = [a.upsert(1, 10)]
        merger.merge(rows, rows[-1].end_position)
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {target}").collect()}
    assert props[shards.SHARD_COLUMN_PROPERTY] == "_shard" and props[shards.WRITER_PREFIX + "one"] == "one"
    check_writers(spark, quoted, target, "one", shards.bind(opts, "one"))  # itself: fine
    with pytest.raises(
        LakeError, match=r"destination two: .* has the shard column '_shard' \(writers: one\)"
    ):
        check_writers(spark, quoted, target, "two", TargetOptions())
    clash = TargetOptions(shard_column="_shard", shard_value="one")
    with pytest.raises(LakeError, match="destinations two and one write the same shard values"):
        check_writers(spark, quoted, target, "two", shards.bind(clash, "two"))
    check_writers(spark, quoted, target, "two", shards.bind(opts, "two"))
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {target}").collect()}
    assert props[shards.WRITER_PREFIX + "two"] == "two"

    with ChangeMerger(spark, "one", {"db.a": plain}) as merger:
        rows = [a.upsert(2, 10)]
        merger.merge(rows, rows[-1].end_position)
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {plain}").collect()}
    assert props[shards.WRITER_PREFIX + "one"] == ""  # recorded at creation
    check_writers(spark, quoted_plain, plain, "one", TargetOptions())
    with pytest.raises(LakeError, match="destinations two and one both write into the lake table"):
        check_writers(spark, quoted_plain, plain, "two", TargetOptions())
    with pytest.raises(LakeError, match="has no shard column"):
        check_writers(spark, quoted_plain, plain, "two", shards.bind(opts, "two"))
    check_writers(spark, quoted_plain, plain, "two", TargetOptions(unique_keys=True))


def test_a_merger_start_checks_the_writers_from_the_properties_read_with_the_marks(spark: Any) -> None:
    """A run's start (``check_merger`` over ``load_marks``' properties): a second destination
    without a shard column is refused naming the table, before anything is recorded in any table;
    with its own shard values it is recorded as a writer of the existing table, and a target with
    no table yet is left to its creation."""
    clock = [4]
    a = Shard("a", clock)
    ns = _ns()
    target, fresh = f"lake.{ns}.t", f"lake.{ns}.fresh"
    opts = TargetOptions(shard_column="_shard", shard_value="{destination}")
    with ChangeMerger(spark, "one", {"db.a": target}, opts) as merger:
        rows = [a.upsert(1, 10)]
        merger.merge(rows, rows[-1].end_position)

    def writers() -> dict[str, str]:
        props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {target}").collect()}
        return {k: v for k, v in props.items() if k.startswith(shards.WRITER_PREFIX)}

    with ChangeMerger(spark, "two", {"db.a": target, "db.b": fresh}) as merger:
        properties = merger.load_marks()
        assert properties[quote_parts(("lake", ns, "fresh"))] is None
        assert properties[quote_parts(("lake", ns, "t"))][shards.SHARD_COLUMN_PROPERTY] == "_shard"
        refused = rf"destination two: the lake table {target} has the shard column"
        with pytest.raises(LakeError, match=refused):
            check_merger(merger, properties)
    assert writers() == {shards.WRITER_PREFIX + "one": "one"}
    with ChangeMerger(spark, "two", {"db.a": target, "db.b": fresh}, opts) as merger:
        check_merger(merger, merger.load_marks())
    assert writers() == {shards.WRITER_PREFIX + "one": "one", shards.WRITER_PREFIX + "two": "two"}


def test_a_second_destination_is_refused_from_the_creators_first_commit_on(spark: Any) -> None:
    """Destination one creates a table without a shard column with its first commit; a second
    destination's run start is refused at once (before one's second run), naming the table, both
    destinations and the remedies, nothing of it written; a run of two that started before the
    table existed is refused at its creation. Each remedy the message names then lets two in."""
    clock = [4]
    a = Shard("a", clock)
    ns = _ns()
    target = f"lake.{ns}.t"

    def lake() -> dict[int, int]:
        return {r[0]: r[1] for r in spark.sql(f"SELECT id, v FROM {target}").collect()}

    with ChangeMerger(spark, "two", {"db.a": target}) as late:  # started before the table existed
        assert late.load_marks()[quote_parts(("lake", ns, "t"))] is None
        with ChangeMerger(spark, "one", {"db.a": target}) as merger:
            rows = [a.upsert(1, 10)]
            merger.merge(rows, rows[-1].end_position)
        rows = [a.upsert(1, 99)]
        with pytest.raises(LakeError, match=f"two and one both write into the lake table lake.{ns}.t"):
            late.merge(rows, rows[-1].end_position)
    with ChangeMerger(spark, "two", {"db.a": target}) as merger, pytest.raises(LakeError) as refused:
        check_merger(merger, merger.load_marks())
    text = str(refused.value)
    assert f"destinations two and one both write into the lake table {target}" in text, text
    with pytest.raises(LakeError, match="two and one both write"):  # a snapshot, before any reset
        LakeChunkLoader(spark, "two", {"db.a": target})
    assert 'shard_column="_shard"' in text and "unique_keys=True" in text, text
    assert lake() == {1: 10}
    # remedy: unique_keys=True when the keys are unique across the destinations
    with ChangeMerger(spark, "two", {"db.a": target}, TargetOptions(unique_keys=True)) as merger:
        check_merger(merger, merger.load_marks())
        rows = [a.upsert(2, 20)]
        merger.merge(rows, rows[-1].end_position)
    assert lake() == {1: 10, 2: 20}

    # remedy: the table was handed over to two, so one's writer line goes (the statement as named)
    def unset_statement(text: str) -> str:
        found = re.search(r"ALTER TABLE \S+ UNSET TBLPROPERTIES \([^)]*\)", text)
        assert found is not None, text
        return found.group(0)

    assert unset_statement(text) == f"ALTER TABLE {target} UNSET TBLPROPERTIES ('binlog-cdc.writer.one')"
    spark.sql(unset_statement(text))
    with ChangeMerger(spark, "three", {"db.a": target}) as merger, pytest.raises(LakeError) as refused:
        check_merger(merger, merger.load_marks())
    assert "destinations three and two both write" in str(refused.value)
    spark.sql(unset_statement(str(refused.value)))
    with ChangeMerger(spark, "three", {"db.a": target}) as merger:
        check_merger(merger, merger.load_marks())
        rows = [a.upsert(3, 30)]
        merger.merge(rows, rows[-1].end_position)
    assert lake() == {1: 10, 2: 20, 3: 30}


def test_append_only_and_soft_delete_targets_carry_the_shard(spark: Any) -> None:
    """An append-only log gets each change's shard value; with soft deletes a delete and a TRUNCATE
    of one shard mark that shard's rows only."""
    clock = [4]
    a, b = Shard("a", clock), Shard("b", clock)
    ns = _ns()
    log, soft = f"lake.{ns}.log", f"lake.{ns}.soft"
    opts = TargetOptions(shard_column="_shard", shard_value="{table}", append_only=True)
    with ChangeMerger(spark, "dest", {"db.a": log, "db.b": log}, opts) as merger:
        rows = [a.upsert(1, 10), b.upsert(1, 20)]
        merger.merge(rows, rows[-1].end_position)
    got = sorted(tuple(r) for r in spark.sql(f"SELECT _shard, id, v, _cdc_op FROM {log}").collect())
    assert got == [("a", 1, 10, "insert"), ("b", 1, 20, "insert")]
    opts = TargetOptions(shard_column="_shard", shard_value="{table}", soft_delete=True)
    with ChangeMerger(spark, "dest", {"db.a": soft, "db.b": soft}, opts) as merger:
        rows = [a.upsert(1, 10), a.upsert(2, 11), b.upsert(1, 20), b.upsert(2, 21)]
        rows.append(b._ddl("TRUNCATE TABLE b", b.schema, DdlKind.TRUNCATE))
        merger.merge(rows, rows[-1].end_position)
    got = sorted(tuple(r) for r in spark.sql(f"SELECT _shard, id, _cdc_deleted FROM {soft}").collect())
    assert got == [("a", 1, False), ("a", 2, False), ("b", 1, True), ("b", 2, True)]


def test_partition_delete_of_one_shard(spark: Any) -> None:
    """A TRUNCATE PARTITION of shard a (rows with v < 15) deletes a's rows in the partition only."""
    from airflow_provider_binlog.canal.sql import partitions
    from airflow_provider_binlog.lake.commits import mark_properties
    from airflow_provider_binlog.lake.ddl.ddl import TargetTables
    from airflow_provider_binlog.lake.shards.shard_actions import ScopedActions
    from airflow_provider_binlog.lake.shards.shards import scope_sql

    clock = [4]
    a, b = Shard("a", clock), Shard("b", clock)
    ns = _ns()
    target = f"lake.{ns}.t"
    with ChangeMerger(spark, "dest", {"db.a": target, "db.b": target}, SHARD) as merger:
        rows = [a.upsert(1, 10), a.upsert(2, 20), b.upsert(1, 10), b.upsert(2, 20)]
        merger.merge(rows, rows[-1].end_position)
    delete = partitions.DeleteRows((ColumnDef("v", T.LONG),), partitions.Less(0, 15), ("p0",), "db.a")
    opts = shards.bind(SHARD, "dest")
    scope = scope_sql(opts, "db", "a", 2, "TRUNCATE PARTITION", target)
    entry = a._ddl("ALTER TABLE a TRUNCATE PARTITION p0", a.schema)
    props = mark_properties("dest", entry.order_key, entry.position, None, None)
    quoted = quote_parts(("lake", ns, "t"))
    ScopedActions(spark, TargetTables(spark)).run_scoped(quoted, [delete], opts, props, scope, None)
    got = sorted((r[0], r[1]) for r in spark.sql(f"SELECT _shard, id FROM {target}").collect())
    assert got == [("a", 2), ("b", 1), ("b", 2)]
    with pytest.raises(LakeError, match="no shard"):
        ScopedActions(spark, TargetTables(spark)).run_scoped(quoted, [delete], opts, props, None, "no shard")


def test_rename_within_the_target_relabels_the_shard(spark: Any) -> None:
    """RENAME TABLE a TO c, both routed to the target with shard value {table}: a's rows become c's
    (later changes of c update them, no duplicates); a swap of a and b stops the run."""
    clock = [4]
    a, b = Shard("a", clock), Shard("b", clock)
    ns = _ns()
    target = f"lake.{ns}.t"
    routes = {"db.a": target, "db.b": target, "db.c": target}
    with ChangeMerger(spark, "dest", routes, SHARD) as merger:
        rows = [a.upsert(1, 10), a.upsert(2, 11), b.upsert(1, 20)]
        merger.merge(rows, rows[-1].end_position)
        c = Shard("c", clock)
        step: list[Entry] = [a._ddl("RENAME TABLE a TO c", None), c._ddl("RENAME TABLE a TO c", c.schema)]
        from airflow_provider_binlog.canal.change import Op

        c.src._schema = c.schema
        step.append(c.src._change(Op.UPDATE, {"id": 1, "v": 10}, {"id": 1, "v": 99}))
        merger.merge(step, step[-1].end_position)
        got = {(r[0], r[1]): r[2] for r in spark.sql(f"SELECT _shard, id, v FROM {target}").collect()}
        assert got == {("c", 1): 99, ("c", 2): 11, ("b", 1): 20}
        swap = [b._ddl("RENAME TABLE b TO x, c TO b, x TO c", b.schema)]
        with pytest.raises(LakeError, match="swaps the names"):
            merger.merge(swap, swap[-1].end_position)
