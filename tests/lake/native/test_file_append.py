"""Inserts written as a data file by the driver and committed through Iceberg's API
(``lake/native/file_append.py``), against real local Spark + Iceberg: pieces of new keys and append-only
chunks of every type read back as the model says and as Spark's own write of the same rows, with
the same column metrics; the tables Spark must write are refused; a commit Iceberg refuses leaves
no file behind, one that may have landed keeps it; a location the driver cannot write is left to
Spark; the driver's inserts make no temp view."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.native import file_append, new_keys
from airflow_provider_binlog.lake.write.merge import ChangeMerger, TargetOptions

from ..model import SourceTable, all_type_columns, read_table
from ..write.test_merge import _end

pytestmark = pytest.mark.spark


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The data files the driver committed (the real functions run)."""
    files: list[str] = []
    real = file_append.commit_overwrite

    def spy(table: Any, file: Any, *args: Any) -> None:
        real(table, file, *args)
        files.append(str(file.location()))

    monkeypatch.setattr(file_append, "commit_overwrite", spy)
    return files


def _metrics(spark: Any, target: str, locations: list[str] | None = None) -> list[tuple[Any, ...]]:
    """The column metrics of the table's data files (of ``locations`` only, when given), by field
    id, newest file last: record count, value and null counts, lower and upper bounds."""
    rows = spark.sql(
        f"SELECT file_path, record_count, value_counts, null_value_counts, lower_bounds, upper_bounds "
        f"FROM {target}.data_files"
    ).collect()
    out = []
    for r in rows:
        if locations is not None and r[0] not in locations:
            continue
        out.append(
            (
                r[1],
                *(
                    sorted((k, bytes(v) if isinstance(v, bytearray) else v) for k, v in m.items())
                    for m in r[2:]
                ),
            )
        )
    return out


@pytest.mark.parametrize(
    "options",
    [TargetOptions(), TargetOptions(soft_delete=True, metadata_columns=True, count_changes=True)],
    ids=["default", "soft-delete-meta-counted"],
)
def test_every_type_reads_back_as_spark_writes_it(
    spark: Any, written: list[str], monkeypatch: pytest.MonkeyPatch, options: TargetOptions
) -> None:
    """Random rows of every primitive type, inserted in three chunks of new keys: the driver's
    files hold what the model holds, value for value, and what Spark's write of the same rows
    holds, with equal metrics per column (the bounds Iceberg prunes files by)."""
    columns = [c for c in all_type_columns() if c.cdef.name != "vec"]  # a list: Spark writes it
    targets = {}
    for mode in ("off", "on"):
        monkeypatch.setenv(file_append.FILE_APPEND_ENV, mode)
        src = SourceTable("db", "every", columns, random.Random(7))
        target = f"lake.t{uuid.uuid4().hex[:8]}.every"
        before = len(written)
        with ChangeMerger(spark, "dest", {"db.every": target}, options) as merger:
            for n in (20, 150, 90):
                batch = [src.insert() for _ in range(n)]
                counts = merger.merge(batch, _end(batch))[target]
                assert counts.commits == 1
        # every chunk: the first one's table had no snapshot (no row), the others' keys are new
        assert len(written) - before == (3 if mode == "on" else 0)
        names = [c.cdef.name for c in src.all_columns]
        where = "WHERE _cdc_deleted = false" if options.soft_delete else ""
        assert read_table(spark, target, names, where) == src.expected()
        targets[mode] = target
    by_spark, by_driver = targets["off"], targets["on"]
    key = "id, _cdc_op, _cdc_ts, _cdc_position, _cdc_deleted" if options.soft_delete else "id"
    assert (
        spark.sql(f"SELECT * FROM {by_driver} ORDER BY {key}").collect()
        == spark.sql(f"SELECT * FROM {by_spark} ORDER BY {key}").collect()
    )
    # the same rows in the same chunks: file for file, the same metrics
    assert sorted(_metrics(spark, by_driver)) == sorted(_metrics(spark, by_spark))
    assert len(_metrics(spark, by_driver, written)) == 3
    # dictionary pages for the strings and binaries only (Layout.dictionary)
    meta = pq.ParquetFile(written[-1].removeprefix("file:")).metadata
    chunks = [meta.row_group(0).column(i) for i in range(meta.num_columns)]
    paged = {c.path_in_schema for c in chunks if c.has_dictionary_page}
    strings = {c.path_in_schema for c in chunks if c.physical_type == "BYTE_ARRAY"}
    assert paged and paged <= strings, (paged, strings)


def test_a_key_lookup_prunes_the_drivers_files(spark: Any, written: list[str]) -> None:
    """Iceberg plans a key lookup on the files' bounds: the driver's files are pruned like Spark's."""
    src = SourceTable(
        "db", "t", [c for c in all_type_columns() if c.cdef.name in ("vc", "d")], random.Random(1)
    )
    target = f"lake.t{uuid.uuid4().hex[:8]}.t"
    with ChangeMerger(spark, "dest", {"db.t": target}) as merger:
        for n in (10, 10, 10, 10):
            batch = [src.insert() for _ in range(n)]
            merger.merge(batch, _end(batch))
    assert len(written) == 4
    scanned = spark.sql(f"SELECT * FROM {target} WHERE id = 25").collect()
    assert [r["id"] for r in scanned] == [25]
    table = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, target)
    expressions = spark._jvm.org.apache.iceberg.expressions.Expressions
    tasks = table.newScan().filter(expressions.equal("id", 25)).planFiles()
    try:
        found = tasks.iterator()
        planned = []
        while found.hasNext():
            planned.append(str(found.next().file().location()))
    finally:
        tasks.close()
    assert planned == [written[2]]  # keys 21..30: the third file the driver wrote, no other


def _table(
    spark: Any, ddl: str = "", props: str = "", columns: str = "id bigint, v string"
) -> tuple[str, Any]:
    target = f"lake.t{uuid.uuid4().hex[:8]}.t"
    spark.sql(f"CREATE TABLE {target} ({columns}) USING iceberg {ddl} TBLPROPERTIES ('a'='b'{props})")
    table = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, target)
    return target, table


_COLUMNS = [("ID", pa.int64()), ("v", pa.string())]


def test_the_layout_of_a_plain_table(spark: Any) -> None:
    _, table = _table(spark)
    shape = file_append.layout(spark, table, _COLUMNS)
    assert shape is not None
    assert [(f.name, f.metadata) for f in shape.schema] == [
        ("id", {b"PARQUET:field_id": b"1"}),
        ("v", {b"PARQUET:field_id": b"2"}),
    ]
    assert shape.sources == ("ID", "v") and shape.codec == "zstd" and shape.level is None
    assert shape.dictionary == ("v",)  # strings only


@pytest.mark.parametrize(
    ("ddl", "props", "columns"),
    [
        ("PARTITIONED BY (bucket(4, id))", "", _COLUMNS),
        ("", ", 'write.format.default'='orc'", _COLUMNS),
        ("", ", 'write.parquet.compression-codec'='lz4'", _COLUMNS),
        ("", "", [("id", pa.int32()), ("v", pa.string())]),  # the table's column is a long
        ("", "", [("id", pa.int64())]),  # a column of the table not written
        ("", "", [*_COLUMNS, ("w", pa.string())]),  # a column the table does not have
        ("", "", [("id", pa.int64()), ("v", pa.list_(pa.float32()))]),
    ],
    ids=["partitioned", "orc", "lz4", "narrower-type", "column-missing", "extra-column", "nested"],
)
def test_what_spark_must_write_is_refused(
    spark: Any, ddl: str, props: str, columns: list[tuple[str, pa.DataType]]
) -> None:
    _, table = _table(spark, ddl, props)
    assert file_append.layout(spark, table, columns) is None


def test_a_sorted_table_a_required_column_and_off_are_refused(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, table = _table(spark)
    spark.sql(f"ALTER TABLE {target} WRITE ORDERED BY v")
    table.refresh()
    assert file_append.layout(spark, table, _COLUMNS) is None
    _, table = _table(spark, columns="id bigint NOT NULL, v string")
    assert file_append.layout(spark, table, _COLUMNS) is None
    _, table = _table(spark, props=", 'write.parquet.compression-codec'='snappy', "
                      "'write.parquet.compression-level'='3'")  # fmt: skip
    shape = file_append.layout(spark, table, _COLUMNS)
    assert shape is not None and shape.codec == "snappy" and shape.level == 3
    monkeypatch.setenv(file_append.FILE_APPEND_ENV, "off")
    assert file_append.layout(spark, table, _COLUMNS) is None


def _data_files(table: Any) -> set[str]:
    folder = file_append.filesystem_of(str(table.location()))[1] + "/data"
    return (
        {name for name in os.listdir(folder) if name.endswith(".parquet")} if os.path.isdir(folder) else set()
    )


def _staged(rows: list[tuple[int, str, str]]) -> Iterator[pa.Table]:
    yield pa.table(
        {"id": [r[0] for r in rows], "v": [r[1] for r in rows], "_cdc_action": [r[2] for r in rows]},
        schema=pa.schema([("id", pa.int64()), ("v", pa.string()), ("_cdc_action", pa.string())]),
    )


def test_a_refused_commit_leaves_no_file(spark: Any) -> None:
    """A writer committed a key of the range after the checked snapshot: the driver's commit is
    refused (as Spark's overwrite would be), and its file is deleted."""
    from py4j.protocol import Py4JJavaError

    from airflow_provider_binlog.lake.types import BIGINT, STRING, LakeColumn

    target, table = _table(spark)
    spark.sql(f"INSERT INTO {target} VALUES (1, 'a')")
    table.refresh()
    checked = int(table.currentSnapshot().snapshotId())
    spark.sql(f"INSERT INTO {target} VALUES (15, 'other')")
    table.refresh()
    before = _data_files(table)
    rows = [(10, "x", "U"), (11, "y", "D"), (20, "z", "U")]
    with pytest.raises(Py4JJavaError, match="ValidationException"):
        new_keys.insert_file(
            spark, commits.load_iceberg_table(spark, target), target,
            lambda: _staged(rows), [LakeColumn("id", BIGINT), LakeColumn("v", STRING)],
            {"id": (10, 20)}, checked, {"k": "v"}, soft_delete=False, expected=2,
        )  # fmt: skip
    assert _data_files(table) == before
    assert sorted(tuple(r) for r in spark.table(target).collect()) == [(1, "a"), (15, "other")]
    # from the current snapshot it lands: the upserts only, the summary holds the properties
    table.refresh()
    current = int(table.currentSnapshot().snapshotId())
    assert new_keys.insert_file(
        spark, commits.load_iceberg_table(spark, target), target,
        lambda: _staged(rows), [LakeColumn("id", BIGINT), LakeColumn("v", STRING)],
        {"id": (16, 20)}, current, {"k": "v"}, soft_delete=False, expected=2,
    )  # fmt: skip
    table.refresh()
    assert table.currentSnapshot().summary().get("k") == "v"
    assert sorted(tuple(r) for r in spark.table(target).collect()) == [
        (1, "a"),
        (10, "x"),
        (15, "other"),
        (20, "z"),
    ]


def test_a_row_count_that_differs_commits_nothing(spark: Any) -> None:
    from airflow_provider_binlog.lake.errors import LakeError
    from airflow_provider_binlog.lake.types import BIGINT, STRING, LakeColumn

    target, table = _table(spark)
    spark.sql(f"INSERT INTO {target} VALUES (1, 'a')")
    table.refresh()
    snapshot = int(table.currentSnapshot().snapshotId())
    before = _data_files(table)
    with pytest.raises(LakeError, match="1 staged rows written, 2 expected; nothing was committed"):
        new_keys.insert_file(
            spark, commits.load_iceberg_table(spark, target), target,
            lambda: _staged([(10, "x", "U")]),
            [LakeColumn("id", BIGINT), LakeColumn("v", STRING)],
            {"id": (10, 20)}, snapshot, {}, soft_delete=False, expected=2,
        )  # fmt: skip
    table.refresh()
    assert int(table.currentSnapshot().snapshotId()) == snapshot and _data_files(table) == before


class _Io:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    def deleteFile(self, location: str) -> None:
        self.deleted.append(location)


class _Table:
    def __init__(self) -> None:
        self._io = _Io()

    def io(self) -> _Io:
        return self._io


class _JavaClass:
    def __init__(self, name: str) -> None:
        self.name = name

    def getName(self) -> str:
        return self.name


class _JavaError:
    def __init__(self, name: str, cause: _JavaError | None = None) -> None:
        self.cls, self.cause = _JavaClass(name), cause

    def getClass(self) -> _JavaClass:
        return self.cls

    def getCause(self) -> _JavaError | None:
        return self.cause


class _Raised(Exception):
    def __init__(self, java: _JavaError) -> None:
        super().__init__("raised")
        self.java_exception = java


def test_only_a_refused_commit_is_known_not_to_have_landed() -> None:
    """Pure: Iceberg's refusals (anywhere in the cause chain) are; an unknown commit state, another
    Java error or a Python error (a lost JVM connection) are not: their file is kept."""
    validation = "org.apache.iceberg.exceptions.ValidationException"
    unknown = "org.apache.iceberg.exceptions.CommitStateUnknownException"
    assert file_append.refused(_Raised(_JavaError(validation)))
    assert file_append.refused(
        _Raised(
            _JavaError(
                "java.lang.RuntimeException",
                _JavaError("org.apache.iceberg.exceptions.CommitFailedException"),
            )
        )
    )
    assert not file_append.refused(_Raised(_JavaError("java.lang.RuntimeException", _JavaError(unknown))))
    assert not file_append.refused(_Raised(_JavaError(unknown, _JavaError(validation))))
    assert not file_append.refused(_Raised(_JavaError("java.io.IOException")))
    assert not file_append.refused(ConnectionError("Answer from Java side is empty"))
    table = _Table()
    file_append.discard(table, "f1")
    assert table.io().deleted == ["f1"]


def test_a_file_under_the_table_location_opens_through_its_filesystem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The table location's filesystem is resolved once and serves the files under it; a file
    elsewhere (also one whose name only starts like the location) is resolved on its own."""
    resolved: list[str] = []
    real = file_append.filesystem_of

    def counted(location: str) -> Any:
        resolved.append(location)
        return real(location)

    monkeypatch.setattr(file_append, "filesystem_of", counted)
    monkeypatch.setattr(file_append, "_filesystems", {})

    class Table:
        def location(self) -> str:
            return "file:/tmp/w/db/t/"

    for name in ("a", "b"):
        fs, path = file_append.file_in(Table(), f"file:/tmp/w/db/t/data/{name}.parquet")
        assert path == f"/tmp/w/db/t/data/{name}.parquet" and fs.type_name == "local"
    assert resolved == ["file:/tmp/w/db/t"]
    for other in ("file:///tmp/w/db/t/data/c.parquet", "file:/tmp/w/db/t2/d.parquet"):
        assert file_append.file_in(Table(), other)[1] == real(other)[1]
    assert resolved[1:] == ["file:///tmp/w/db/t/data/c.parquet", "file:/tmp/w/db/t2/d.parquet"]


def test_iceberg_types_of_the_staged_arrow_types() -> None:
    assert file_append.iceberg_type(pa.int32()) == "int"
    assert file_append.iceberg_type(pa.int64()) == "long"
    assert file_append.iceberg_type(pa.decimal128(20, 0)) == "decimal(20, 0)"
    assert file_append.iceberg_type(pa.timestamp("us", tz="UTC")) == "timestamptz"
    assert file_append.iceberg_type(pa.timestamp("us")) == "timestamp"
    assert file_append.iceberg_type(pa.timestamp("ns")) is None
    assert file_append.iceberg_type(pa.list_(pa.float32())) is None
    assert file_append.iceberg_type(pa.int16()) is None
    assert file_append.filesystem_of("file:/tmp/a/b.parquet")[1] == "/tmp/a/b.parquet"
    assert file_append.filesystem_of("file:///tmp/a/b.parquet")[1] == "/tmp/a/b.parquet"


def test_an_append_only_target_written_by_the_driver_equals_spark_s(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random inserts, updates and deletes of every primitive type into an append-only target, in
    three chunks: the driver appends each chunk as a data file (with its mark), and the table is
    Spark's own append of the same changes, row for row, with the same metrics."""
    appended: list[bool] = []
    real = file_append.append

    def spy(*args: Any) -> bool:
        appended.append(real(*args))
        return appended[-1]

    monkeypatch.setattr(file_append, "append", spy)
    columns = [c for c in all_type_columns() if c.cdef.name != "vec"]
    targets = {}
    for mode in ("off", "on"):
        monkeypatch.setenv(file_append.FILE_APPEND_ENV, mode)
        del appended[:]
        src = SourceTable("db", "log", columns, random.Random(11))
        target = f"lake.t{uuid.uuid4().hex[:8]}.log"
        with ChangeMerger(spark, "dest", {"db.log": target}, TargetOptions(append_only=True)) as merger:
            for n in (30, 60, 45):
                batch = [e for e in (src.random_op((40, 30, 0, 20, 0, 0)) for _ in range(n)) if e is not None]
                counts = merger.merge(batch, _end(batch))[target]
                assert counts.appended == len(batch) and counts.commits == 1
        assert appended == [mode == "on"] * 3
        mark = commits.read_mark(spark, target, "dest")
        assert mark is not None and mark.order_key == batch[-1].order_key
        targets[mode] = target
    order = "_cdc_position, _cdc_op"
    rows = [spark.sql(f"SELECT * FROM {targets[m]} ORDER BY {order}").collect() for m in ("off", "on")]
    assert rows[0] == rows[1] and len(rows[0]) > 100
    assert sorted(_metrics(spark, targets["on"])) == sorted(_metrics(spark, targets["off"]))


def test_a_location_the_driver_cannot_write_is_left_to_spark(
    spark: Any, unwritable_location: Callable[[], list[int]], caplog: pytest.LogCaptureFixture
) -> None:
    """pyarrow fails to create the file (here: the location is read-only to it): a warning
    names the table and the way out, Spark writes the insert, and the driver does not try that
    table's location again in this process."""
    tried = unwritable_location()
    columns = [c for c in all_type_columns() if c.cdef.name == "vc"]
    src = SourceTable("db", "t", columns, random.Random(2))
    target = f"lake.t{uuid.uuid4().hex[:8]}.t"
    with (
        caplog.at_level("WARNING", logger=file_append.__name__),
        ChangeMerger(spark, "dest", {"db.t": target}) as merger,
    ):
        for _ in range(2):
            batch = [src.insert() for _ in range(5)]
            assert merger.merge(batch, _end(batch))[target].commits == 1
    assert tried == [1]  # the second chunk went to Spark without trying
    assert "the driver cannot create files in" in caplog.text and "BINLOG_CDC_FILE_APPEND=off" in caplog.text
    assert target.split(".", 1)[1] in caplog.text.replace("`", "")
    assert read_table(spark, target, ["id", "vc"]) == src.expected()


def test_an_insert_the_driver_writes_makes_no_view(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A staged piece's view is made when a statement first reads it: never for an insert or a
    MERGE the driver writes, once for Spark's MERGE; none is left after the merger closed."""
    from airflow_provider_binlog.lake.native import position_delta
    from airflow_provider_binlog.lake.write.staging import StagedViews

    made: list[str] = []
    real = StagedViews.use

    def use(self: StagedViews, view: str) -> str:
        made.append(view)
        return real(self, view)

    monkeypatch.setattr(StagedViews, "use", use)
    columns = [c for c in all_type_columns() if c.cdef.name == "vc"]
    src = SourceTable("db", "t", columns, random.Random(5))
    target = f"lake.t{uuid.uuid4().hex[:8]}.t"
    with ChangeMerger(spark, "dest", {"db.t": target}) as merger:
        for _ in range(2):
            batch = [src.insert() for _ in range(5)]
            merger.merge(batch, _end(batch))
        assert made == []
        batch = [e for e in (src.update() for _ in range(3)) if e is not None]
        merger.merge(batch, _end(batch))
        assert made == []  # the driver's own MERGE
        monkeypatch.setenv(position_delta.POSITION_DELTA_ENV, "off")
        batch = [e for e in (src.update() for _ in range(3)) if e is not None]
        merger.merge(batch, _end(batch))
        assert len(made) == 1
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("binlog_cdc_stage_")]
    assert read_table(spark, target, ["id", "vc"]) == src.expected()


def test_a_commit_that_fails_after_it_landed_keeps_its_file(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit landed and then the call failed (as when the connection to the JVM breaks): the
    file is not deleted, and the table reads the committed rows."""
    from airflow_provider_binlog.lake.types import BIGINT, STRING, LakeColumn

    target, table = _table(spark)
    spark.sql(f"INSERT INTO {target} VALUES (1, 'a')")
    table.refresh()
    snapshot = int(table.currentSnapshot().snapshotId())
    real = file_append.commit_overwrite

    def landed_then_lost(*args: Any) -> None:
        real(*args)
        raise ConnectionError("Answer from Java side is empty")

    monkeypatch.setattr(file_append, "commit_overwrite", landed_then_lost)
    with pytest.raises(ConnectionError):
        new_keys.insert_file(
            spark, commits.load_iceberg_table(spark, target), target,
            lambda: _staged([(10, "x", "U"), (20, "z", "U")]),
            [LakeColumn("id", BIGINT), LakeColumn("v", STRING)],
            {"id": (10, 20)}, snapshot, {}, soft_delete=False, expected=2,
        )  # fmt: skip
    spark.catalog.refreshTable(target)
    assert sorted(tuple(r) for r in spark.table(target).collect()) == [(1, "a"), (10, "x"), (20, "z")]


@pytest.mark.parametrize("catalog", ["lake", "resolving"])
def test_a_data_file_s_metrics_equal_iceberg_s_file_metrics(spark: Any, catalog: str, tmp_path: Any) -> None:
    """A data file's metrics (``data_file``, in the JVM helper of ``lake/spark/jvm_helpers.py``) read with
    the file IO's Hadoop configuration (``HadoopFileIO``: the lake catalog) or by ``fileMetrics``
    itself (any other file IO: a catalog with ``ResolvingFileIO``) equal ``fileMetrics``'s, for
    nulls, NaN, long strings a bound truncates and per-column modes; the file is the one given."""
    if catalog != "lake":
        prefix = f"spark.sql.catalog.{catalog}"
        spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set(prefix + ".type", "hadoop")
        spark.conf.set(prefix + ".warehouse", str(tmp_path / "warehouse"))
        spark.conf.set(prefix + ".io-impl", "org.apache.iceberg.io.ResolvingFileIO")
    target = f"{catalog}.m{uuid.uuid4().hex[:8]}.t"
    spark.sql(
        f"CREATE TABLE {target} (id bigint, s string, d double, dec decimal(12, 3), ts timestamp, b binary) "
        "USING iceberg TBLPROPERTIES ('format-version'='3', 'write.metadata.metrics.column.s'='full', "
        "'write.metadata.metrics.column.b'='counts')"
    )
    spark.sql(
        f"INSERT INTO {target} VALUES "
        f"(1, '{'x' * 40}', double('NaN'), 1.5, timestamp'2026-01-01 00:00:00', X'00ff'), "
        "(2, NULL, -0.0, NULL, NULL, NULL), (3, 'é', 2.5, -7.125, timestamp'1969-12-31 23:59:59', X'')"
    )
    table = commits.load_iceberg_table(spark, target)
    assert table is not None
    want_io = "HadoopFileIO" if catalog == "lake" else "ResolvingFileIO"
    assert str(table.io().getClass().getSimpleName()) == want_io
    config = spark._jvm.org.apache.iceberg.MetricsConfig.forTable(table)
    locations = [r[0] for r in spark.sql(f"SELECT file_path FROM {target}.data_files").collect()]
    assert locations
    for location in locations:
        source = table.io().newInputFile(location)
        ours = file_append.data_file(spark, table, location)
        theirs = spark._jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(source, config)
        assert str(ours.location()).removeprefix("file:") == location.removeprefix("file:")
        assert str(ours.format()) == "PARQUET"
        assert int(ours.fileSizeInBytes()) == int(source.getLength())
        assert int(ours.recordCount()) == int(theirs.recordCount()) > 0
        for part in (
            "columnSizes",
            "valueCounts",
            "nullValueCounts",
            "nanValueCounts",
            "lowerBounds",
            "upperBounds",
        ):
            mine, iceberg = getattr(ours, part)(), getattr(theirs, part)()
            assert (mine is None) == (iceberg is None), part
            assert mine is None or mine.equals(iceberg), part
        assert theirs.lowerBounds().size() > 0
