"""Type mapping, identifiers, staging and session configuration: no Spark needed."""

from __future__ import annotations

import datetime
import decimal
import json
import os
import random
import zipfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_provider_binlog.binlog.columns import JSON_NULL, ColumnDef, InvalidDate
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.lake.ddl.ddl import new_table_properties
from airflow_provider_binlog.lake.errors import LakeError, TypeMappingError
from airflow_provider_binlog.lake.spark import class_archive, jars
from airflow_provider_binlog.lake.spark.session import ICEBERG_EXTENSIONS, local_cores, session_conf
from airflow_provider_binlog.lake.sql import parse_name, quote, quote_parts
from airflow_provider_binlog.lake.types import InvalidDateError, LakeColumn, TypeOptions, map_column, widening
from airflow_provider_binlog.lake.write.merge_sql import partition_field
from airflow_provider_binlog.lake.write.staging import StagingArea, to_arrow

UTF8, BIN = 45, 63
UTC = datetime.timezone.utc


@pytest.mark.parametrize(
    ("col", "sql"),
    [
        (ColumnDef("c", T.TINY), "int"),
        (ColumnDef("c", T.TINY, unsigned=True), "int"),
        (ColumnDef("c", T.SHORT, unsigned=True), "int"),
        (ColumnDef("c", T.INT24, unsigned=True), "int"),
        (ColumnDef("c", T.LONG), "int"),
        (ColumnDef("c", T.LONG, unsigned=True), "bigint"),
        (ColumnDef("c", T.LONGLONG), "bigint"),
        (ColumnDef("c", T.LONGLONG, unsigned=True), "decimal(20,0)"),
        (ColumnDef("c", T.NEWDECIMAL, precision=10, scale=2), "decimal(10,2)"),
        (ColumnDef("c", T.NEWDECIMAL, meta=(38 << 8) | 5), "decimal(38,5)"),
        (ColumnDef("c", T.FLOAT), "float"),
        (ColumnDef("c", T.DOUBLE), "double"),
        (ColumnDef("c", T.BIT, meta=(7 << 8) | 7), "bigint"),  # BIT(63)
        (ColumnDef("c", T.BIT, meta=8 << 8), "decimal(20,0)"),  # BIT(64)
        (ColumnDef("c", T.YEAR), "int"),
        (ColumnDef("c", T.DATE), "date"),
        (ColumnDef("c", T.TIME2), "bigint"),
        (ColumnDef("c", T.DATETIME2), "timestamp_ntz"),
        (ColumnDef("c", T.TIMESTAMP2), "timestamp"),
        (ColumnDef("c", T.VARCHAR, collation=UTF8), "string"),
        (ColumnDef("c", T.STRING, collation=BIN), "binary"),
        (ColumnDef("c", T.BLOB, collation=UTF8, charset="utf-8"), "string"),
        (ColumnDef("c", T.BLOB, collation=BIN), "binary"),
        (ColumnDef("c", T.ENUM), "string"),
        (ColumnDef("c", T.SET), "string"),
        (ColumnDef("c", T.JSON), "string"),
        (ColumnDef("c", T.GEOMETRY), "binary"),
        (ColumnDef("c", T.VECTOR), "array<float>"),
    ],
)
def test_mapping(col: ColumnDef, sql: str) -> None:
    assert map_column(col).sql == sql


def test_wide_decimal_is_an_error_or_a_string() -> None:
    col = ColumnDef("amount", T.NEWDECIMAL, precision=65, scale=30)
    with pytest.raises(TypeMappingError, match=r"'amount' of shop\.t: DECIMAL\(65,30\)"):
        map_column(col, table="shop.t")
    lt = map_column(col, TypeOptions(decimal_overflow="string"))
    assert lt.sql == "string"
    assert lt.convert is not None and lt.convert(decimal.Decimal("1.50")) == "1.50"


def test_unmapped_type_names_the_column() -> None:
    with pytest.raises(TypeMappingError, match=r"'x'.*TYPED_ARRAY"):
        map_column(ColumnDef("x", T.TYPED_ARRAY))


def test_converters() -> None:
    def conv(col: ColumnDef, value: object, options: TypeOptions | None = None) -> object:
        lt = map_column(col, options)
        return value if lt.convert is None else lt.convert(value)

    assert conv(ColumnDef("c", T.TIME2), datetime.timedelta(hours=-838, microseconds=-1)) == -(
        838 * 3600 * 10**6 + 1
    )
    assert conv(ColumnDef("c", T.JSON), JSON_NULL) == "null"
    assert (
        conv(ColumnDef("c", T.JSON), {"a": [1, decimal.Decimal("2.50"), None, True]})
        == '{"a": [1, 2.50, null, true]}'
    )
    for doc, text in [
        ({"a": "é\n", "b": [1.5, -2, None, False]}, '{"a": "é\\n", "b": [1.5, -2, null, false]}'),
        ({"t": datetime.date(2024, 1, 2)}, '{"t": "2024-01-02"}'),  # a date: the Python writer
        ([float("nan"), JSON_NULL, b"x"], '[nan, null, "x"]'),
        ("top", '"top"'),
    ]:
        assert conv(ColumnDef("c", T.JSON), doc) == text
    assert conv(ColumnDef("c", T.GEOMETRY), b"\x01\x00\x00\x00WKB") == b"WKB"
    assert (
        conv(ColumnDef("c", T.GEOMETRY), b"\x01\x00\x00\x00WKB", TypeOptions(geometry="mysql"))
        == b"\x01\x00\x00\x00WKB"
    )
    assert conv(ColumnDef("c", T.ENUM), 2) == "2"


def test_widening() -> None:
    assert widening("int", "bigint") == "widen"
    assert widening("float", "double") == "widen"
    assert widening("decimal(10,2)", "decimal(12,2)") == "widen"
    assert widening("bigint", "int") == "narrower"
    assert widening("decimal(10,2)", "decimal(12,3)") == "incompatible"
    assert widening("bigint", "decimal(20,0)") == "incompatible"
    assert widening("string", "string") == "same"


def test_identifiers() -> None:
    assert quote("a`b") == "`a``b`"
    assert quote_parts(("lake", "x; DROP", "t")) == "`lake`.`x; DROP`.`t`"
    assert parse_name("lake.shop.orders") == ("lake", "shop", "orders")
    assert parse_name("lake.db.`a.b``c`") == ("lake", "db", "a.b`c")
    assert parse_name(quote_parts(("l", "we`ird", "x; DROP"))) == ("l", "we`ird", "x; DROP")
    for bad in ("lake..t", "lake.`t", "a`b.c", "lake.`t`x"):
        with pytest.raises(ConfigurationError):
            parse_name(bad)


def test_partition_fields_are_quoted() -> None:
    assert partition_field("id") == "`id`"
    assert partition_field("days(`created at`)") == "days(`created at`)"
    assert partition_field("bucket(16, `a``b`)") == "bucket(16, `a``b`)"
    for bad in ("bucket(x, id)", "drop table(id)", "dot.ted"):
        with pytest.raises(LakeError):
            partition_field(bad)


def test_new_table_properties_defaults_and_overrides() -> None:
    mor = {f"write.{k}.mode": "merge-on-read" for k in ("merge", "update", "delete")}
    # bounded metadata by default (lake/maintenance: old metadata versions deleted after commit)
    bounded = {
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "5",
    }
    assert new_table_properties("merge-on-read", None) == {"format-version": "3", **bounded, **mor}
    assert new_table_properties(None, None) == {"format-version": "3", **bounded}
    # what earlier versions created
    assert new_table_properties("merge-on-read", {"format-version": "2"}) == {
        "format-version": "2",
        **bounded,
        **mor,
    }
    own = new_table_properties("copy-on-write", {"write.delete.mode": "merge-on-read", "x": "y"})
    assert own["write.merge.mode"] == "copy-on-write" and own["write.delete.mode"] == "merge-on-read"
    assert own["x"] == "y"


def test_staging_writes_typed_parquet_in_chunks(tmp_path: Path) -> None:
    cols = [
        LakeColumn("id", map_column(ColumnDef("id", T.LONGLONG, unsigned=True))),
        LakeColumn("ts", map_column(ColumnDef("ts", T.TIMESTAMP2))),
        LakeColumn("dt", map_column(ColumnDef("dt", T.DATETIME2))),
        LakeColumn("vec", map_column(ColumnDef("vec", T.VECTOR))),
    ]
    utc = datetime.timezone.utc
    rows = [
        (2**64 - 1 - i, datetime.datetime(2020, 1, 1, tzinfo=utc), datetime.datetime(1, 1, 1), [1.5])
        for i in range(10)
    ]
    rows.append((None, None, None, None))
    area = StagingArea(str(tmp_path))
    uri, n = area.write("x", cols, iter(rows), chunk_rows=3)
    assert n == 11 and uri.startswith("file://")
    table = pq.read_table(uri[len("file://") :])
    assert table.num_rows == 11 and str(table.schema.field("id").type) == "decimal128(20, 0)"
    assert str(table.schema.field("ts").type) == "timestamp[us, tz=UTC]"
    assert table.column("dt")[0].as_py() == datetime.datetime(1, 1, 1)
    with pytest.raises(LakeError, match="'id'"):
        to_arrow(cols[:1], [(10**21,)])
    area.close()
    assert not any(tmp_path.iterdir())


def test_staging_takes_native_values_as_they_are_and_converts_the_rest() -> None:
    cols = [
        LakeColumn("i", map_column(ColumnDef("i", T.LONG))),
        LakeColumn("s", map_column(ColumnDef("s", T.VARCHAR, charset="utf8mb4"))),
        LakeColumn("d", map_column(ColumnDef("d", T.NEWDECIMAL, precision=5, scale=2))),
    ]
    native = [(1, "a", decimal.Decimal("1.50")), (None, None, None)]
    assert to_arrow(cols, native).to_pylist() == [
        {"i": 1, "s": "a", "d": decimal.Decimal("1.50")},
        {"i": None, "s": None, "d": None},
    ]
    # values pyarrow refuses go through the converters: bool -> int, bad UTF-8 replaced, int -> str
    odd = [(True, b"\xffok", decimal.Decimal("2")), (2, 7, None)]
    assert to_arrow(cols, odd).to_pylist() == [
        {"i": 1, "s": "\ufffdok", "d": decimal.Decimal("2.00")},
        {"i": 2, "s": "7", "d": None},
    ]


def test_session_conf_defaults_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / jars.SHADED_JACKSON_NAME).write_bytes(b"")  # pretend it is built
    conf = session_conf(warehouse=str(tmp_path / "wh"))
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.lake.type"] == "hadoop"
    assert conf["spark.sql.catalog.lake.warehouse"] == str(tmp_path / "wh")
    java = conf["spark.driver.extraJavaOptions"].split()
    assert "-XX:TieredStopAtLevel=1" in java and "-XX:+UseParallelGC" in java
    assert "-XX:ReservedCodeCacheSize=240m" in java  # the quick JIT's 48 MB fill up over many tables
    # a local driver is its own executor: the jars go on its class path (where the class archive
    # covers them); a cluster gets them through spark.jars
    assert "spark.jars" not in conf
    classpath = conf["spark.driver.extraClassPath"].split(os.pathsep)
    assert "iceberg-spark-runtime-3.5_2.12" in classpath[0]
    assert classpath[1].endswith(jars.SHADED_JACKSON_NAME)
    conf = session_conf(master="spark://h:7077", conf={"spark.jars": "/opt/x.jar"})
    assert conf["spark.jars"].split(",")[0] == "/opt/x.jar"
    assert "iceberg-spark-runtime-3.5_2.12" in conf["spark.jars"]
    assert "spark.driver.extraClassPath" not in conf
    # one shuffle partition per local core (one task each, fewer and larger data files)
    assert session_conf()["spark.sql.shuffle.partitions"] == str(os.cpu_count())
    assert session_conf(master="local[3]")["spark.sql.shuffle.partitions"] == "3"
    assert session_conf(master="local")["spark.sql.shuffle.partitions"] == "1"
    assert local_cores("local[2, 4]") == 2 and local_cores("local[*]") == os.cpu_count()
    # no adaptive re-planning on a local master (nothing to coalesce); a user's setting wins
    assert session_conf()["spark.sql.adaptive.enabled"] == "false"
    assert session_conf(conf={"spark.sql.adaptive.enabled": "true"})["spark.sql.adaptive.enabled"] == "true"
    # row-by-row Iceberg reads on every master (1.10's vectorized reads leak a v3 MERGE's direct
    # memory); a user's setting wins
    vectorization = "spark.sql.iceberg.vectorization.enabled"
    assert session_conf()[vectorization] == session_conf(master="yarn")[vectorization] == "false"
    assert session_conf(conf={vectorization: "true"})[vectorization] == "true"
    # a property of the default catalog alone keeps the default catalog
    conf = session_conf(conf={"spark.sql.catalog.lake.cache-enabled": "false"})
    assert conf["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.lake.type"] == "hadoop"
    assert conf["spark.sql.catalog.lake.cache-enabled"] == "false"
    # Maven users: no local jars; a REST catalog through plain conf; extensions appended to the user's
    conf = session_conf(
        master="spark://h:7077",
        catalog="cat",
        conf={
            "spark.jars.packages": jars.ICEBERG_MAVEN_PACKAGE,
            "spark.sql.catalog.cat": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.cat.type": "rest",
            "spark.sql.extensions": "com.example.Ext",
        },
    )
    assert "spark.jars" not in conf and conf["spark.master"] == "spark://h:7077"
    assert conf["spark.sql.catalog.cat.type"] == "rest" and "spark.sql.catalog.cat.warehouse" not in conf
    assert conf["spark.sql.extensions"] == f"com.example.Ext,{ICEBERG_EXTENSIONS}"
    assert "spark.ui.enabled" not in conf and "spark.sql.adaptive.enabled" not in conf
    assert "TieredStopAtLevel" not in conf["spark.driver.extraJavaOptions"]  # a cluster's driver
    assert "UseParallelGC" not in conf["spark.driver.extraJavaOptions"]


def test_shaded_jackson_jar_is_built_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, "off")  # jars.main builds no archive; be sure
    if not Path(jars.JARJAR_DEFAULT).exists():
        pytest.skip("libjarjar-java is not installed")
    with pytest.raises(LakeError, match=r"python -m airflow_provider_binlog\.lake\.spark\.jars"):
        jars.shaded_jackson_jar(build=False)
    assert jars.main([]) == 0
    jar = jars.shaded_jackson_jar()
    mtime = jar.stat().st_mtime_ns
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
    assert "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder.class" in names
    assert not any(n.startswith("com/fasterxml/") or n.startswith("META-INF/versions/") for n in names)
    assert jars.shaded_jackson_jar().stat().st_mtime_ns == mtime
    local_fs = jars.local_fs(build=False)  # built beside it when a JDK is here
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [jars.SHADED_JACKSON_NAME, *([local_fs.name] if local_fs else [])]
    )


def test_json_text_writes_what_the_python_writer_writes() -> None:
    """The C encoder's text equals the Python writer's for random documents (with the values it
    refuses mixed in, so that both paths are taken)."""
    from airflow_provider_binlog.lake.types import _json_into, _json_text

    rng = random.Random(7)
    scalars: list[Any] = [
        "", "plain", "é ünï \u2028 \x00 \" \\ \t", 0, -1, 2**70, 1.5, -0.0, 1e300, 1e-7, True, False, None,
    ]  # fmt: skip
    refused: list[Any] = [
        decimal.Decimal("2.50"),
        datetime.date(2024, 1, 2),
        b"\xff",
        float("inf"),
        JSON_NULL,
    ]

    def document(depth: int) -> Any:
        roll = rng.random()
        if depth == 0 or roll < 0.4:
            return rng.choice(refused) if rng.random() < 0.03 else rng.choice(scalars)
        if roll < 0.7:
            return {
                rng.choice(["a", "b", "ключ", 'q"uote']): document(depth - 1)
                for _ in range(rng.randint(0, 4))
            }
        return [document(depth - 1) for _ in range(rng.randint(0, 4))]

    encoded = 0
    for _ in range(2000):
        doc = document(4)
        parts: list[str] = []
        _json_into(doc, parts)
        assert _json_text(doc) == "".join(parts), doc
        try:
            json.dumps(doc, allow_nan=False)
            encoded += 1
        except (TypeError, ValueError):
            pass
    assert 0 < encoded < 2000  # both paths were taken


def test_invalid_dates_stop_naming_table_column_value_and_position_or_become_null() -> None:
    """A date no date type holds (:class:`InvalidDate`, from either path) stops by default, naming
    the lake table, the column, the value, its ``file:pos`` and the option; ``zero_dates="null"``
    writes NULL. Valid dates of the same columns are untouched."""
    cols = [ColumnDef("d", T.DATE), ColumnDef("dt", T.DATETIME2, fsp=0), ColumnDef("ts", T.TIMESTAMP2)]
    good = (
        datetime.date(2024, 1, 2),
        datetime.datetime(2024, 1, 2, 3),
        datetime.datetime(2024, 1, 2, tzinfo=UTC),
    )
    for i, col in enumerate(cols):
        bad = InvalidDate("0000-00-00" if i == 0 else "0000-00-00 00:00:00", "mysql-bin.000002:777")
        lake = [LakeColumn(col.name, map_column(col, None, "lake.db.t"))]
        with pytest.raises(InvalidDateError) as err:
            to_arrow(lake, [(good[i],), (bad,), (None,)])
        msg = str(err.value)
        for part in (
            "lake.db.t",
            repr(col.name),
            repr(bad.text),
            "mysql-bin.000002:777",
            "zero_dates='null'",
        ):
            assert part in msg, (part, msg)
        lake = [LakeColumn(col.name, map_column(col, TypeOptions(zero_dates="null"), "lake.db.t"))]
        assert to_arrow(lake, [(good[i],), (bad,), (None,)]).column(0).to_pylist() == [good[i], None, None]
    with pytest.raises(TypeMappingError):
        TypeOptions(zero_dates="string")  # type: ignore[arg-type]
    lake = [LakeColumn("d", map_column(cols[0], None, "lake.db.t"))]
    with pytest.raises(LakeError, match="does not fit date") as other:
        to_arrow(lake, [("not a date",)])  # any other bad value: the staging error as before
    assert not isinstance(other.value, InvalidDateError)
