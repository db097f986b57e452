"""The driver's own MERGE (``lake/native/position_delta.py``) against real local Spark + Iceberg: random
chunks of inserts, updates, key changes and deletes leave the table, counts and marks Spark's
MERGE leaves, value for value; deletion vectors read back as Spark wrote them and Spark reads the
driver's; a writer within the range after the plan makes the commit conflict and the retry
merge it again; a commit Iceberg refuses leaves no file; the tables Spark must merge are left to
it."""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyroaring import BitMap64

from airflow_provider_binlog.binlog.columns import ColumnDef
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.canal.change import Entry, Op
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.native import content_files, file_append, new_keys, position_delta
from airflow_provider_binlog.lake.spark.java_classes import java_static
from airflow_provider_binlog.lake.write.merge import TargetOptions, merge_batch

from ..write.test_merge import _end, _row, _simple_table

pytestmark = pytest.mark.spark


def _target() -> str:
    return f"lake.p{uuid.uuid4().hex[:8]}.t"


@pytest.fixture
def deltas(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The targets the driver committed a row delta to (the real function runs)."""
    done: list[str] = []
    real = position_delta.commit_delta

    def spy(spark: Any, table: Any, *args: Any) -> None:
        real(spark, table, *args)
        done.append(str(table.name()))

    monkeypatch.setattr(position_delta, "commit_delta", spy)
    monkeypatch.setenv(commits.RETRY_ENV, "attempts=3,wait=0,max_wait=0")
    return done


@pytest.fixture(autouse=True)
def _new_keys_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(new_keys.NEW_KEYS_ENV, "on")
    yield


def _contents(spark: Any, target: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.table(target).collect())


def _random_chunks(seed: int, chunks: int = 6, size: int = 300) -> list[list[Entry]]:
    """Random chunks over keys 1..400: inserts of absent keys, updates (some change the key),
    deletes, several changes of one key in a chunk; the source as a dict decides what is valid."""
    rng = random.Random(seed)
    schema = _simple_table()
    source: dict[int, str] = {}
    out, n = [], 0
    for _ in range(chunks):
        batch: list[Entry] = []
        for _ in range(size):
            n += 1
            key = rng.randint(1, 400)
            if key not in source:
                source[key] = f"i{n}"
                batch.append(_row(schema, Op.INSERT, n, None, {"id": key, "v": source[key]}))
            elif rng.random() < 0.3:
                batch.append(_row(schema, Op.DELETE, n, {"id": key, "v": source.pop(key)}, None))
            else:
                new = key
                if rng.random() < 0.1:  # a key change to an absent key
                    new = rng.randint(401, 600)
                    if new in source:
                        new = key
                before = {"id": key, "v": source.pop(key)}
                source[new] = f"u{n}"
                batch.append(_row(schema, Op.UPDATE, n, before, {"id": new, "v": source[new]}))
        out.append(batch)
    return out


@pytest.mark.parametrize(
    "options",
    [TargetOptions(), TargetOptions(metadata_columns=True, count_changes=True)],
    ids=["default", "meta-counted"],
)
@pytest.mark.parametrize("seed", [3, 11])
def test_random_chunks_leave_the_table_sparks_merge_leaves(
    spark: Any, deltas: list[str], monkeypatch: pytest.MonkeyPatch, options: TargetOptions, seed: int
) -> None:
    chunks = _random_chunks(seed)
    by_driver, by_spark = _target(), _target()
    results: dict[str, list[Any]] = {by_driver: [], by_spark: []}
    for target, env in ((by_spark, "off"), (by_driver, "on")):
        monkeypatch.setenv(position_delta.POSITION_DELTA_ENV, env)
        for batch in chunks:
            counts = merge_batch(spark, "dest", {"db.t": target}, batch, _end(batch), options)
            results[target].append(counts[target].as_dict())
    # the first chunk makes the table (an insert); every later one is a MERGE, all by the driver
    assert len(deltas) == len(chunks) - 1
    assert results[by_driver] == results[by_spark]
    assert _contents(spark, by_driver) == _contents(spark, by_spark)
    model: dict[int, str] = {}
    for batch in chunks:
        for e in batch:
            if e.before:
                model.pop(e.before["id"], None)
            if e.after:
                model[e.after["id"]] = e.after["v"]
    assert {r[0]: r[1] for r in _contents(spark, by_driver)} == model
    mark, other = commits.read_mark(spark, by_driver, "dest"), commits.read_mark(spark, by_spark, "dest")
    assert mark is not None and other is not None
    assert dataclasses.replace(other, snapshot_id=mark.snapshot_id) == mark
    # row lineage as Spark's MERGE keeps it: the same commits give the same sequence numbers, and
    # a row of the first chunk (the same insert in both tables) keeps its id through its updates
    lineage = {
        t: {
            r[0]: (r[1], r[2])
            for r in spark.sql(f"SELECT id, _row_id, _last_updated_sequence_number FROM {t}").collect()
        }
        for t in (by_driver, by_spark)
    }
    snapshots = f"SELECT summary['added-records'] FROM {by_spark}.snapshots ORDER BY committed_at LIMIT 1"
    first = int(spark.sql(snapshots).collect()[0][0])  # the first chunk's rows: ids 0 .. first - 1
    assert {k: v[1] for k, v in lineage[by_driver].items()} == {k: v[1] for k, v in lineage[by_spark].items()}
    kept = {k: v[0] for k, v in lineage[by_spark].items() if v[0] < first}
    assert kept and kept == {k: lineage[by_driver][k][0] for k in kept}
    assert len({v[0] for v in lineage[by_driver].values()}) == len(lineage[by_driver])
    # the lineage columns have metrics, as in Spark's files
    metrics = {
        t: {k for r in spark.sql(f"SELECT value_counts FROM {t}.data_files").collect() for k in r[0]}
        for t in (by_driver, by_spark)
    }
    assert metrics[by_driver] == metrics[by_spark] and position_delta.ROW_ID in metrics[by_driver]
    # the driver's deletion vectors replace the files' earlier ones: one live vector per file
    files = spark.sql(f"SELECT referenced_data_file FROM {by_driver}.delete_files").collect()
    assert len(files) == len({r[0] for r in files}) > 0


def test_deletion_vectors_read_as_spark_wrote_them(spark: Any) -> None:
    """Spark's deletion vectors, planned through the tasks' JSON (``content_files.scan``): every
    file and vector the JVM's getters name, and the positions Spark deleted."""
    target = _target()
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {target.rsplit('.', 1)[0]}")
    spark.sql(
        f"CREATE TABLE {target} (id bigint, v string) USING iceberg TBLPROPERTIES ('format-version' = '3', "
        "'write.delete.mode' = 'merge-on-read')"
    )
    for lo in (0, 700):  # two data files
        spark.sql(f"INSERT INTO {target} SELECT id, CAST(id AS STRING) FROM range({lo}, {lo + 700})")
    spark.sql(f"DELETE FROM {target} WHERE id % 7 = 3")
    spark.sql(f"INSERT INTO {target} VALUES (5000, 'no deletes')")
    table = commits.load_iceberg_table(spark, target)
    snapshot = int(table.currentSnapshot().snapshotId())
    everything = java_static(spark, "org.apache.iceberg.expressions.Expressions", "alwaysTrue")()
    root = file_append.table_root(table)
    with_vectors = 0
    tasks, planned_files = content_files.scan(spark, table, snapshot, everything, 10**9)
    assert int(tasks.size()) == len(planned_files)
    for i, planned in enumerate(planned_files):
        task = tasks.get(i)
        data = task.file()
        first = data.firstRowId()
        assert planned.location == str(data.location()) and planned.parquet
        assert planned.records == int(data.recordCount())
        assert planned.first_row_id == (None if first is None else int(first))
        deletes = [task.deletes().get(j) for j in range(int(task.deletes().size()))]
        assert planned.vectors == tuple(
            content_files.Vector(str(d.location()), int(d.contentOffset()), int(d.contentSizeInBytes()))
            for d in deletes
        )
        ids = [r[0] for r in spark.read.parquet(planned.location).select("id").collect()]
        deleted: list[int] = []
        for vector, d in zip(planned.vectors, deletes, strict=True):
            assert str(d.referencedDataFile()) == planned.location
            positions = position_delta.read_dv(root, vector)
            assert len(positions) == int(d.recordCount()) > 0
            deleted.extend(positions)
            with_vectors += 1
        assert sorted(deleted) == [i for i, key in enumerate(ids) if key % 7 == 3 and key < 5000]
    files = spark.sql(f"SELECT count(*) FROM {target}.data_files").collect()[0][0]
    vectors = spark.sql(f"SELECT count(*) FROM {target}.delete_files").collect()[0][0]
    assert len(planned_files) == files >= 3 and with_vectors == vectors >= 2
    assert any(planned.vectors == () for planned in planned_files)  # the last insert's
    # a budget of rows stops the list at the first task past it (the tasks come in any order)
    _, first = content_files.scan(spark, table, snapshot, everything, 1)
    assert 1 <= len(first) < len(planned_files) and all(p in planned_files for p in first)
    assert sum(p.records for p in first[:-1]) <= 1 < sum(p.records for p in first)


def test_a_blob_that_is_not_a_deletion_vector_is_refused() -> None:
    good = position_delta.dv_blob(BitMap64([0, 5, 1 << 33]))
    assert list(position_delta.parse_dv(good, "f@4")) == [0, 5, 1 << 33]
    bad_crc = good[:-1] + bytes([good[-1] ^ 1])
    bad_magic = good[:4] + b"\0" + good[5:]
    framing = "length or magic"
    cases = ((bad_crc, "checksum"), (bad_magic, framing), (good[:-3], framing), (b"", "short"))
    for blob, what in cases:
        with pytest.raises(LakeError, match=rf"deletion vector at f@4: .*{what}"):
            position_delta.parse_dv(blob, "f@4")


def test_positions_pass_between_arrow_and_bitmaps_unchanged() -> None:
    values = pa.array([0, 3, 5, 1 << 40, 7], pa.int64())
    for part in (values, values.slice(1, 3), values.slice(4), values.slice(2, 0)):
        assert sorted(position_delta.bitmap_of(part)) == sorted(part.to_pylist())
    assert position_delta.arrow_of(BitMap64([9, 1, 1 << 33])).to_pylist() == [1, 9, 1 << 33]
    assert position_delta.arrow_of(BitMap64()).to_pylist() == []


@pytest.mark.parametrize(
    "keys",
    [
        pa.array([5, None, 2**64 - 1, 0], pa.uint64()),
        pa.array(["b", "a", None, "é"], pa.string()),
        pa.array([3, -1, 7, 9], pa.int8()),
    ],
    ids=["uint64", "string", "int8"],
)
def test_staged_keys_join_every_parts_chunks_in_order(keys: pa.Array) -> None:
    # parts as the staging area reads them: tables, some of several chunks, one empty
    first = pa.Table.from_batches(
        [pa.record_batch([keys.slice(0, 1)], ["k"]), pa.record_batch([keys.slice(1, 2)], ["k"])]
    )
    empty = pa.table({"k": keys.slice(0, 0)})
    last = pa.table({"k": keys.slice(3)})
    assert first.column(0).num_chunks == 2

    joined = position_delta.staged_keys(iter([first, empty, last]))

    assert isinstance(joined, pa.Array)
    assert joined.type == keys.type
    assert joined.to_pylist() == keys.to_pylist()
    with pytest.raises(ValueError, match="no staged part"):
        position_delta.staged_keys(iter([]))


def test_a_writer_within_the_range_after_the_plan_makes_the_delta_conflict(
    spark: Any, deltas: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer updates key 5 after the driver planned the piece: the row delta is refused
    (the row's file changed after the planned snapshot), its files are deleted, and the retry
    plans anew; the staged row is what the table holds for key 5."""
    schema = _simple_table()
    target = _target()
    tables = {"db.t": target}
    first = [_row(schema, Op.INSERT, i, None, {"id": i, "v": f"x{i}"}) for i in range(1, 11)]
    merge_batch(spark, "dest", tables, first, _end(first))
    real, planned = position_delta.plan, []

    def plan_then_write(*args: Any) -> Any:
        found = real(*args)
        if not planned:  # from another thread: not with this commit's properties (thread-local)
            update = f"UPDATE {target} SET v = 'other' WHERE id = 5"
            other = threading.Thread(target=spark.sql, args=(update,))
            other.start()
            other.join()
        planned.append(found)
        return found

    monkeypatch.setattr(position_delta, "plan", plan_then_write)
    second = [
        _row(schema, Op.UPDATE, 20, {"id": 5, "v": "x5"}, {"id": 5, "v": "mine"}),
        _row(schema, Op.DELETE, 21, {"id": 6, "v": "x6"}, None),
    ]
    merge_batch(spark, "dest", tables, second, _end(second))
    assert len(planned) == 2 and len(deltas) == 1  # refused once, then committed
    rows = dict(tuple(r) for r in spark.table(target).collect())
    assert rows[5] == "mine" and 6 not in rows and len(rows) == 9
    table = commits.load_iceberg_table(spark, target)
    data = table.location().replace("file:", "") + "/data"
    referenced = {
        r[0].replace("file:", "")
        for q in ("data_files", "delete_files")
        for r in spark.sql(f"SELECT file_path FROM {target}.all_{q}").collect()
    }
    orphans = [f for f in os.listdir(data) if f.startswith("binlog-cdc-") and f"{data}/{f}" not in referenced]
    assert orphans == []


def test_a_key_the_table_holds_twice_is_left_to_spark(spark: Any, deltas: list[str]) -> None:
    """The MERGE updates both rows of a key the table holds twice; the driver would keep one."""
    schema = _simple_table()
    target = _target()
    tables = {"db.t": target}
    first = [_row(schema, Op.INSERT, i, None, {"id": i, "v": f"x{i}"}) for i in range(1, 4)]
    merge_batch(spark, "dest", tables, first, _end(first))
    spark.sql(f"INSERT INTO {target} VALUES (2, 'twin')")
    second = [_row(schema, Op.UPDATE, 10, {"id": 2, "v": "x2"}, {"id": 2, "v": "new"})]
    merge_batch(spark, "dest", tables, second, _end(second))
    assert deltas == []
    rows = sorted(tuple(r) for r in spark.table(target).collect())
    assert rows == [(1, "x1"), (2, "new"), (2, "new"), (3, "x3")]


@pytest.mark.parametrize("kind", ["copy-on-write", "soft-delete", "composite-key", "double-key"])
def test_tables_spark_must_merge_are_left_to_it(spark: Any, deltas: list[str], kind: str) -> None:
    schema = _simple_table()
    if kind == "composite-key":
        schema = _simple_table(pk=("id", "v"))
    elif kind == "double-key":
        schema = _simple_table(cols=(ColumnDef("id", T.DOUBLE), ColumnDef("v", T.VARCHAR, charset="utf-8")))
    options = {
        "copy-on-write": TargetOptions(write_mode="copy-on-write"),
        "soft-delete": TargetOptions(soft_delete=True),
        "composite-key": TargetOptions(),
        "double-key": TargetOptions(),
    }[kind]
    target = _target()
    tables = {"db.t": target}
    first = [_row(schema, Op.INSERT, i, None, {"id": i, "v": f"x{i}"}) for i in range(1, 6)]
    merge_batch(spark, "dest", tables, first, _end(first), options)
    second = [_row(schema, Op.DELETE, 10, {"id": 3, "v": "x3"}, None)]
    merge_batch(spark, "dest", tables, second, _end(second), options)
    assert deltas == []
    rows = {r[0] for r in spark.table(target).collect() if len(r) == 2 or r[2] is not True}
    assert rows == {1, 2, 4, 5}


def test_a_location_the_driver_cannot_write_is_left_to_spark(
    spark: Any,
    deltas: list[str],
    unwritable_location: Callable[[], list[int]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """pyarrow cannot create the data file: a warning names the table and the way out, Spark
    merges the piece, and the driver does not try that table's location again in this process."""
    schema = _simple_table()
    target = _target()
    tables = {"db.t": target}
    first = [_row(schema, Op.INSERT, i, None, {"id": i, "v": f"x{i}"}) for i in range(1, 6)]
    merge_batch(spark, "dest", tables, first, _end(first))
    tried = unwritable_location()
    with caplog.at_level("WARNING", logger=file_append.__name__):
        for n, value in ((10, "y"), (20, "z")):
            batch = [_row(schema, Op.UPDATE, n, {"id": 2, "v": "x2"}, {"id": 2, "v": value})]
            merge_batch(spark, "dest", tables, batch, _end(batch))
    assert tried == [1] and deltas == []  # the second piece went to Spark without trying
    assert "the driver cannot create files in" in caplog.text and "BINLOG_CDC_FILE_APPEND=off" in caplog.text
    assert dict(tuple(r) for r in spark.table(target).collect()) == {
        1: "x1",
        2: "z",
        3: "x3",
        4: "x4",
        5: "x5",
    }


def test_a_vectors_file_the_driver_cannot_write_leaves_the_piece_to_spark_and_no_file(
    spark: Any, deltas: list[str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The piece's data file is written, then its deletion vectors' Puffin file cannot be created:
    the data file is deleted, a warning names the table, and Spark merges the piece."""
    schema = _simple_table()
    target = _target()
    tables = {"db.t": target}
    first = [_row(schema, Op.INSERT, i, None, {"id": i, "v": f"x{i}"}) for i in range(1, 6)]
    merge_batch(spark, "dest", tables, first, _end(first))
    written: list[str] = []
    real_write = file_append.write_file

    def write_file(*args: Any) -> Any:
        location, count = real_write(*args)
        written.append(location)
        return location, count

    def refuse(table: Any, location: str, content: bytes) -> None:
        raise file_append.Unwritable(f"PermissionError: {location}")

    monkeypatch.setattr(file_append, "write_file", write_file)
    monkeypatch.setattr(file_append, "write_bytes", refuse)
    monkeypatch.setattr(file_append, "_unwritable", set())
    second = [
        _row(schema, Op.UPDATE, 10, {"id": 2, "v": "x2"}, {"id": 2, "v": "new"}),
        _row(schema, Op.DELETE, 11, {"id": 4, "v": "x4"}, None),
    ]
    with caplog.at_level("WARNING", logger=file_append.__name__):
        merge_batch(spark, "dest", tables, second, _end(second))
    assert len(written) == 1 and deltas == []
    assert not os.path.exists(written[0].replace("file:", "")), "the data file was left behind"
    assert "the driver cannot create files in" in caplog.text
    assert dict(tuple(r) for r in spark.table(target).collect()) == {1: "x1", 2: "new", 3: "x3", 5: "x5"}


def test_a_piece_over_more_planned_rows_than_the_limit_is_left_to_spark(
    spark: Any, deltas: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Key 20's file holds 20 rows: with a limit of 19 Spark merges its update (into a new file of
    one row), then with a limit of 21 the driver merges the next one (the two files, 21 rows)."""
    schema = _simple_table()
    target = _target()
    tables = {"db.t": target}
    first = [_row(schema, Op.INSERT, i, None, {"id": i, "v": f"x{i}"}) for i in range(1, 21)]
    merge_batch(spark, "dest", tables, first, _end(first))
    before = "x20"
    for n, (limit, value) in enumerate((("19", "spark"), ("21", "driver"))):
        monkeypatch.setenv(position_delta.MAX_ROWS_ENV, limit)
        batch = [_row(schema, Op.UPDATE, 30 + n, {"id": 20, "v": before}, {"id": 20, "v": value})]
        merge_batch(spark, "dest", tables, batch, _end(batch))
        assert len(deltas) == n
        before = value
    rows = dict(tuple(r) for r in spark.table(target).collect())
    assert rows[20] == "driver" and len(rows) == 20
