"""The merge against real local Spark + Iceberg: a randomized model check and the exactly-once cases."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Entry, Op, OrderKey, RowChange
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.errors import LakeError, MissingKeyError, SchemaEvolutionError
from airflow_provider_binlog.lake.spark.table_facts import table_facts
from airflow_provider_binlog.lake.sql import name_text, quote_parts
from airflow_provider_binlog.lake.write.merge import (
    DELETED_COLUMN,
    OP_COLUMN,
    ChangeMerger,
    TargetOptions,
    committed_marks,
    merge_batch,
)

from ..model import SourceTable, all_type_columns, read_table

pytestmark = pytest.mark.spark


def _ns() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


def _batches(entries: list[Entry], rng: random.Random, n: int) -> list[list[Entry]]:
    cuts = sorted(rng.sample(range(1, len(entries)), min(n - 1, len(entries) - 1)))
    out, prev = [], 0
    for c in [*cuts, len(entries)]:
        out.append(entries[prev:c])
        prev = c
    return [b for b in out if b]


def _end(batch: list[Entry]) -> BinlogPosition:
    return batch[-1].end_position


def _assert_equal(spark: Any, target: str, src: SourceTable, where: str = "") -> None:
    expected = src.expected()
    columns = [c.cdef.name for c in src.all_columns]
    actual = read_table(spark, target, columns, where)
    assert sorted(actual) == sorted(expected)
    for key, row in expected.items():
        for col in columns:
            assert actual[key][col] == row[col], (key, col, actual[key][col], row[col])


@pytest.mark.parametrize(
    ("seed", "options", "max_rows"),
    [
        (1, TargetOptions(write_mode="copy-on-write", count_changes=True), 1000),
        (
            2,
            TargetOptions(
                write_mode="merge-on-read",
                metadata_columns=True,
                partition_by=("bucket(4, id)",),
                count_changes=False,
            ),
            30,
        ),
        (3, TargetOptions(soft_delete=True, metadata_columns=True, count_changes=False), 1000),
        # the format of tables created by earlier versions
        (4, TargetOptions(table_properties={"format-version": "2"}), 1000),
    ],
    ids=["cow", "mor-partitioned-meta-chunked", "soft-delete", "mor-v2"],
)
def test_model_check(spark: Any, seed: int, options: TargetOptions, max_rows: int) -> None:
    """Random inserts, updates (with key changes), deletes, truncates and ADD COLUMN, merged in random
    batch splits, leave the Iceberg table equal to the model, every type, value for value."""
    rng = random.Random(seed)
    src = SourceTable("shop", "orders", all_type_columns(), rng)
    target = f"lake.{_ns()}.orders"
    merger = ChangeMerger(spark, "dest", {"shop.orders": target}, options, max_rows=max_rows)
    where = f"WHERE {DELETED_COLUMN} = false" if options.soft_delete else ""
    for _round in range(2):
        n = rng.randint(25, 45)
        forced = {rng.randrange(5, n): src.truncate, rng.randrange(n): src.add_column,
                  rng.randrange(n): lambda: src.update(change_key=True)}  # fmt: skip
        entries = [e for e in (forced.get(i, src.random_op)() for i in range(n)) if e is not None]
        for batch in _batches(entries, rng, 2):
            merger.merge(batch, _end(batch))
            if rng.random() < 0.5:  # a retry after a crash between commit and ack: no change
                again = merge_batch(spark, "dest", {"shop.orders": target}, batch, _end(batch), options)
                assert again[target].commits == 0 and again[target].skipped == len(batch)
        _assert_equal(spark, target, src, where)
    if options.metadata_columns:
        ops = {r[0] for r in spark.sql(f"SELECT DISTINCT {OP_COLUMN} FROM {target}").collect()}
        assert ops <= {"insert", "update", "delete", "truncate"}
    merger.close()


def _simple_table(
    name: str = "t", cols: tuple[ColumnDef, ...] | None = None, pk: tuple[str, ...] = ("id",)
) -> TableSchema:
    cols = cols or (ColumnDef("id", T.LONG), ColumnDef("v", T.VARCHAR, collation=45, charset="utf-8"))
    return TableSchema("db", name, cols, pk)


def _row(
    schema: TableSchema,
    op: Op,
    n: int,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    file_no: int = 1,
) -> RowChange:
    pos = BinlogPosition(f"mysql-bin.{file_no:06d}", 100 + n * 10)
    return RowChange(
        "dest",
        schema.schema,
        schema.table,
        op,
        before,
        after,
        schema.primary_key,
        pos,
        BinlogPosition(pos.file, pos.pos + 10),
        f"0-1-{n}",
        1_700_000_000 + n,
        OrderKey(file_no, pos.pos, -1, 0),
        schema,
    )


def test_reapplying_a_committed_batch_is_a_no_op(spark: Any) -> None:
    schema = _simple_table()
    target = f"lake.{_ns()}.t"
    batch: list[Entry] = [_row(schema, Op.INSERT, i, None, {"id": i, "v": f"x{i}"}) for i in range(5)]
    batch.append(_row(schema, Op.UPDATE, 5, {"id": 1, "v": "x1"}, {"id": 1, "v": "y"}))
    batch.append(_row(schema, Op.DELETE, 6, {"id": 2, "v": "x2"}, None))
    first = merge_batch(spark, "dest", {"db.t": target}, batch, _end(batch))
    # as the source reported them: 5 inserts, 1 update, 1 delete (in one commit)
    assert (first[target].inserted, first[target].updated, first[target].deleted) == (5, 1, 1)
    assert first[target].upserted == 4 and first[target].commits == 1
    snap = commits.read_mark(spark, target, "dest")
    assert snap is not None and snap.end_position == _end(batch) and snap.order_key == batch[-1].order_key
    again = merge_batch(spark, "dest", {"db.t": target}, batch, _end(batch))
    assert again[target].commits == 0 and again[target].skipped == len(batch)
    assert commits.read_mark(spark, target, "dest") == snap
    rows = {r[0]: r[1] for r in spark.table(target).collect()}
    assert rows == {0: "x0", 1: "y", 3: "x3", 4: "x4"}
    # another destination's mark is separate
    assert commits.read_mark(spark, target, "other") is None


def test_a_merge_bounded_to_its_key_range_matches_the_same_rows(spark: Any) -> None:
    """A piece's MERGE bounds the table's keys to the staged keys' range (so Iceberg skips data
    files outside it): updates and deletes inside it still find their rows, keys above the table's
    are inserted, rows outside it stay."""
    schema = _simple_table()
    target = f"lake.{_ns()}.t"
    tables = {"db.t": target}
    n = 0
    for lo in (1, 101, 201):  # three commits: three data files with disjoint key bounds
        batch: list[Entry] = [
            _row(schema, Op.INSERT, n + i, None, {"id": k, "v": f"x{k}"})
            for i, k in enumerate(range(lo, lo + 100))
        ]
        n += 100
        merge_batch(spark, "dest", tables, batch, _end(batch))
    batch = [
        _row(schema, Op.UPDATE, n, {"id": 150, "v": "x150"}, {"id": 150, "v": "new"}),
        _row(schema, Op.DELETE, n + 1, {"id": 160, "v": "x160"}, None),
        _row(schema, Op.INSERT, n + 2, None, {"id": 400, "v": "y400"}),
        _row(schema, Op.UPDATE, n + 3, {"id": 120, "v": "x120"}, {"id": 121, "v": "moved"}),
    ]  # a key change 120 -> 121: a delete of 120 and an upsert of 121 (which replaces x121)
    merge_batch(spark, "dest", tables, batch, _end(batch))
    rows = {r[0]: r[1] for r in spark.table(target).collect()}
    expected = {k: f"x{k}" for k in range(1, 301) if k not in (120, 160)}
    expected.update({150: "new", 121: "moved", 400: "y400"})
    assert rows == expected
    # only new keys above the table's: inserted, nothing matched
    batch = [_row(schema, Op.INSERT, n + 4 + i, None, {"id": k, "v": "z"}) for i, k in enumerate((500, 501))]
    counts = merge_batch(spark, "dest", tables, batch, _end(batch))
    assert counts[target].inserted == 2 and spark.table(target).count() == len(expected) + 2


def test_marks_loaded_up_front_skip_what_the_lake_holds(spark: Any) -> None:
    """``load_marks`` (the operator calls it in the commit thread while the parser reads) reads the
    mark of every routed target, existing or not, and folding then skips what the lake holds."""
    schema, other = _simple_table(), _simple_table("u")
    ns = _ns()
    target, missing = f"lake.{ns}.t", f"lake.{ns}.u"
    batch: list[Entry] = [_row(schema, Op.INSERT, i, None, {"id": i, "v": f"x{i}"}) for i in range(4)]
    merge_batch(spark, "dest", {"db.t": target}, batch, _end(batch))
    more = [_row(schema, Op.UPDATE, 10, {"id": 0, "v": "x0"}, {"id": 0, "v": "new"})]
    more.append(_row(other, Op.INSERT, 11, None, {"id": 7, "v": "u7"}))
    with ChangeMerger(spark, "dest", {"db.t": target, "db.u": missing}) as merger:
        properties = merger.load_marks()
        loaded = merger.marks.known  # what the first fold of each target would otherwise wait for
        t, u = quote_parts(("lake", ns, "t")), quote_parts(("lake", ns, "u"))
        assert loaded == {t: commits.read_mark(spark, target, "dest"), u: None}
        assert loaded[t] is not None
        # the table's properties, read in the same call (the writers' check of the run's start)
        assert properties == {t: table_facts(spark, commits.load_iceberg_table(spark, t)).properties, u: None}
        assert properties[t] is not None and properties[t]["write.merge.mode"] == "merge-on-read"
        merger.add_many([*batch, *more])  # the 4 inserts again (an attempt that crashed before its ack)
        counts = merger.commit(merger.take(), _end(more))
    assert counts[target].skipped == 4 and counts[target].updated == 1 and counts[target].inserted == 0
    assert counts[missing].inserted == 1
    assert {r[0]: r[1] for r in spark.table(target).collect()} == {0: "new", 1: "x1", 2: "x2", 3: "x3"}
    assert [tuple(r) for r in spark.table(missing).collect()] == [(7, "u7")]


def test_deletes_are_deletion_vectors_committed_with_the_mark(spark: Any) -> None:
    """A default table is v3: a MERGE's deletes are deletion vectors, in the commit carrying the mark."""
    schema = _simple_table()
    target = f"lake.{_ns()}.t"
    first: list[Entry] = [_row(schema, Op.INSERT, i, None, {"id": i, "v": f"x{i}"}) for i in range(6)]
    merge_batch(spark, "dest", {"db.t": target}, first, _end(first))
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {target}").collect()}
    assert props["format-version"] == "3" and props["write.merge.mode"] == "merge-on-read"
    for round_ in range(2):  # the second MERGE replaces the first one's vector of the same data file
        batch: list[Entry] = [
            _row(schema, Op.UPDATE, 10 * round_ + 10, {"id": round_, "v": "?"}, {"id": round_, "v": "y"}),
            _row(schema, Op.DELETE, 10 * round_ + 11, {"id": 4 + round_, "v": "?"}, None),
        ]
        merge_batch(spark, "dest", {"db.t": target}, batch, _end(batch))
        summary = spark.sql(
            f"SELECT summary FROM {target}.snapshots ORDER BY committed_at DESC LIMIT 1"
        ).collect()[0][0]
        assert summary[commits.ORDER_KEY] == commits.format_order_key(batch[-1].order_key)
        assert int(summary.get("added-dvs", 0)) >= 1 and summary.get("added-records") == "1", summary
    assert {r[0]: r[1] for r in spark.table(target).collect()} == {0: "y", 1: "y", 2: "x2", 3: "x3"}
    deletes = spark.sql(f"SELECT file_format, record_count FROM {target}.delete_files").collect()
    assert {r[0] for r in deletes} == {"PUFFIN"}  # vectors, not position delete files
    assert sum(r[1] for r in deletes) == 4  # the first load's ids 0, 1, 4 and 5, each once


@pytest.mark.parametrize("count_changes", [True, False])
def test_counts_insert_update_delete(spark: Any, count_changes: bool) -> None:
    schema = _simple_table()
    target = f"lake.{_ns()}.t"
    opts = TargetOptions(count_changes=count_changes)
    merge_batch(
        spark,
        "dest",
        {"db.t": target},
        [_row(schema, Op.INSERT, i, None, {"id": i, "v": "a"}) for i in range(3)],
        options=opts,
    )
    batch: list[Entry] = [
        _row(schema, Op.UPDATE, 10, {"id": 0, "v": "a"}, {"id": 0, "v": "b"}),
        _row(schema, Op.UPDATE, 11, {"id": 1, "v": "a"}, {"id": 7, "v": "k"}),  # key change
        _row(schema, Op.DELETE, 12, {"id": 2, "v": "a"}, None),
        _row(schema, Op.INSERT, 13, None, {"id": 9, "v": "n"}),
        _row(schema, Op.DELETE, 14, {"id": 42, "v": "?"}, None),  # not in the table
    ]
    counts = merge_batch(spark, "dest", {"db.t": target}, batch, _end(batch), options=opts)[target]
    # the lake's effect (ids 9 and 7 new, 0 overwritten, 1 and 2 removed) or the source's report
    expected = (2, 1, 2) if count_changes else (1, 2, 2)
    assert (counts.inserted, counts.updated, counts.deleted) == expected
    assert counts.upserted == 3
    assert {r[0]: r[1] for r in spark.table(target).collect()} == {0: "b", 7: "k", 9: "n"}


def test_crash_between_two_tables_completes_on_retry(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the first table committed before a crash: the retry skips it and applies the second."""
    ns = _ns()
    a, b = _simple_table("a"), _simple_table("b")
    tables = {"db.a": f"lake.{ns}.a", "db.b": f"lake.{ns}.b"}
    batch: list[Entry] = []
    for i in range(6):
        schema = a if i % 2 == 0 else b
        batch.append(_row(schema, Op.INSERT, i, None, {"id": i, "v": f"v{i}"}))

    class Crash(Exception):
        pass

    with ChangeMerger(spark, "dest", tables) as m, pytest.raises(Crash):
        run = m.runner._run  # runs one target's statements (the targets run side by side)

        def crashing(target: str, steps: list[Any]) -> None:
            if target.endswith("`b`"):
                raise Crash
            run(target, steps)

        monkeypatch.setattr(m.runner, "_run", crashing)
        m.merge(batch, _end(batch))
    assert spark.table(tables["db.a"]).count() == 3
    # b was staged before a committed: the crash left no staged view behind
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("binlog_cdc_stage_")]
    snapshots_a = spark.sql(f"SELECT count(*) FROM {tables['db.a']}.snapshots").collect()[0][0]
    marks = committed_marks(spark, tables.values(), "dest")
    assert marks[tables["db.a"]] is not None and marks[tables["db.b"]] is None

    counts = merge_batch(spark, "dest", tables, batch, _end(batch))
    assert counts[tables["db.a"]].skipped == 3 and counts[tables["db.a"]].commits == 0
    assert counts[tables["db.b"]].inserted == 3
    assert spark.sql(f"SELECT count(*) FROM {tables['db.a']}.snapshots").collect()[0][0] == snapshots_a
    assert sorted(r[0] for r in spark.table(tables["db.b"]).collect()) == [1, 3, 5]


def test_chunked_commits_resume_inside_a_batch(spark: Any) -> None:
    schema = _simple_table()
    target = f"lake.{_ns()}.t"
    batch: list[Entry] = [_row(schema, Op.INSERT, i, None, {"id": i, "v": "a"}) for i in range(10)]
    with ChangeMerger(spark, "dest", {"db.t": target}, max_rows=4) as m:
        for e in batch[:9]:
            m.add(e)  # two chunks of 4 committed, one entry still buffered: "crash" now
    mark = commits.read_mark(spark, target, "dest")
    assert mark is not None and mark.order_key == batch[7].order_key and mark.end_position is None
    counts = merge_batch(spark, "dest", {"db.t": target}, batch, _end(batch))[target]
    assert counts.skipped == 8 and counts.inserted == 2
    assert spark.table(target).count() == 10


def test_odd_identifiers_are_quoted(spark: Any) -> None:
    cols = (
        ColumnDef("id`x", T.LONG),
        ColumnDef("sp ace", T.LONG),
        ColumnDef("dot.ted", T.LONG),
        ColumnDef("select", T.LONG),
    )
    ns = _ns()
    for table in ("a`b", "x; DROP", "we.ird"):
        schema = TableSchema("db", table, cols, ("id`x",))
        target = quote_parts(("lake", ns, table))
        rows = [{"id`x": i, "sp ace": i * 2, "dot.ted": i * 3, "select": i * 4} for i in range(3)]
        batch: list[Entry] = [_row(schema, Op.INSERT, i, None, r) for i, r in enumerate(rows)]
        batch.append(_row(schema, Op.UPDATE, 5, rows[0], {**rows[0], "id`x": 10}))
        batch.append(_row(schema, Op.DELETE, 6, rows[1], None))
        counts = merge_batch(
            spark,
            "dest",
            {f"db.{table}": target},
            batch,
            _end(batch),
            options=TargetOptions(partition_by=("bucket(2, `sp ace`)",)),
        )
        # counts are keyed by the name as one reads it back: a part holding a dot or backtick quoted
        assert counts[name_text(("lake", ns, table))].commits == 1
        got = sorted(tuple(r) for r in spark.table(target).collect())
        assert got == [(2, 4, 6, 8), (10, 0, 0, 0)]
    assert spark.sql(f"SHOW TABLES IN lake.{ns}").count() == 3


def test_table_without_key_needs_key_columns_or_append_only(spark: Any) -> None:
    schema = _simple_table("nokey", pk=())
    ns = _ns()
    batch: list[Entry] = [_row(schema, Op.INSERT, i, None, {"id": i, "v": "a"}) for i in range(3)]
    batch.append(_row(schema, Op.DELETE, 4, {"id": 1, "v": "a"}, None))
    with pytest.raises(MissingKeyError, match=r"db\.nokey"):
        merge_batch(spark, "dest", {"db.nokey": f"lake.{ns}.k"}, batch)
    merge_batch(
        spark, "dest", {"db.nokey": f"lake.{ns}.k"}, batch, options=TargetOptions(key_columns=("id",))
    )
    assert sorted(r[0] for r in spark.table(f"lake.{ns}.k").collect()) == [0, 2]
    counts = merge_batch(
        spark, "dest", {"db.nokey": f"lake.{ns}.log"}, batch, options=TargetOptions(append_only=True)
    )
    assert counts[f"lake.{ns}.log"].appended == 4
    log = spark.sql(f"SELECT id, {OP_COLUMN} FROM lake.{ns}.log ORDER BY _cdc_position").collect()
    assert [tuple(r) for r in log] == [(0, "insert"), (1, "insert"), (2, "insert"), (1, "delete")]
    again = merge_batch(
        spark, "dest", {"db.nokey": f"lake.{ns}.log"}, batch, options=TargetOptions(append_only=True)
    )
    assert again[f"lake.{ns}.log"].appended == 0 and spark.table(f"lake.{ns}.log").count() == 4


def test_type_widening_and_incompatible_change(spark: Any) -> None:
    target = f"lake.{_ns()}.w"
    v1 = _simple_table(
        "w",
        (
            ColumnDef("id", T.LONG),
            ColumnDef("n", T.LONG),
            ColumnDef("f", T.FLOAT),
            ColumnDef("d", T.NEWDECIMAL, precision=5, scale=2),
        ),
    )
    merge_batch(
        spark, "dest", {"db.w": target}, [_row(v1, Op.INSERT, 1, None, {"id": 1, "n": 1, "f": 1.5, "d": 1})]
    )
    v2 = _simple_table(
        "w",
        (
            ColumnDef("id", T.LONG),
            ColumnDef("n", T.LONGLONG),
            ColumnDef("f", T.DOUBLE),
            ColumnDef("d", T.NEWDECIMAL, precision=10, scale=2),
        ),
    )
    merge_batch(
        spark,
        "dest",
        {"db.w": target},
        [_row(v2, Op.INSERT, 2, None, {"id": 2, "n": 2**40, "f": 0.1, "d": 12345678})],
    )
    types = {f.name: f.dataType.simpleString() for f in spark.table(target).schema.fields}
    assert types == {"id": "int", "n": "bigint", "f": "double", "d": "decimal(10,2)"}
    v3 = _simple_table(
        "w",
        (
            ColumnDef("id", T.LONG),
            ColumnDef("n", T.VARCHAR, collation=45, charset="utf-8"),
            ColumnDef("f", T.DOUBLE),
            ColumnDef("d", T.NEWDECIMAL, precision=10, scale=2),
        ),
    )
    with pytest.raises(SchemaEvolutionError, match=r"'n'.*bigint.*string"):
        merge_batch(
            spark,
            "dest",
            {"db.w": target},
            [_row(v3, Op.INSERT, 3, None, {"id": 3, "n": "x", "f": 0.0, "d": 0})],
        )


def test_a_chunk_holds_one_image_per_key(spark: Any) -> None:
    """40 changes to two keys hold two images: max_rows=3 is not reached, one MERGE applies them."""
    schema = _simple_table()
    target = f"lake.{_ns()}.t"
    batch: list[Entry] = [_row(schema, Op.INSERT, n, None, {"id": n, "v": "a"}) for n in (0, 1)]
    batch += [
        _row(schema, Op.UPDATE, n, {"id": n % 2, "v": "x"}, {"id": n % 2, "v": f"v{n}"}) for n in range(2, 40)
    ]
    with ChangeMerger(spark, "dest", {"db.t": target}, max_rows=3) as m:
        assert m.add_many(batch) == 40
        assert m.held == 2
        assert commits.read_mark(spark, target, "dest") is None  # nothing committed yet
        counts = m.finish(_end(batch))[target]
    assert (counts.commits, counts.inserted, counts.updated, counts.upserted) == (1, 2, 38, 2)
    assert {r[0]: r[1] for r in spark.table(target).collect()} == {0: "v38", 1: "v39"}


def test_changes_out_of_commit_order_are_refused(spark: Any) -> None:
    schema = _simple_table()
    target = f"lake.{_ns()}.t"
    first, second = (_row(schema, Op.INSERT, n, None, {"id": n, "v": "a"}) for n in (1, 2))
    with ChangeMerger(spark, "dest", {"db.t": target}) as m:
        m.add_many([second])
        with pytest.raises(
            LakeError, match=r"commit order: mysql-bin\.000001:110 came after mysql-bin\.000001:120"
        ):
            m.add_many([first])


def test_the_column_types_read_from_iceberg_are_the_ones_spark_reads(spark: Any) -> None:
    """:func:`.ddl.spark_types` (the schema check before each chunk) gives what ``spark.table``'s
    schema gives, for every lake type and the option columns, and a missing table raises Spark's
    own error."""
    from pyspark.errors import AnalysisException

    from airflow_provider_binlog.lake.ddl import ddl

    src = SourceTable("db", "t", all_type_columns(), random.Random(5))
    target = f"lake.{_ns()}.t"
    batch = [src.insert() for _ in range(3)]
    options = TargetOptions(metadata_columns=True, soft_delete=True)
    merge_batch(spark, "dest", {"db.t": target}, batch, _end(batch), options=options)
    fields = spark.table(target).schema.fields
    assert ddl.spark_types(spark, target) == {f.name.lower(): f.dataType.simpleString() for f in fields}
    assert len(fields) > len(all_type_columns())  # the option columns are there too
    with pytest.raises(AnalysisException):
        ddl.spark_types(spark, f"lake.{_ns()}.absent")
