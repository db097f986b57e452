"""Where staged Parquet goes and how it is cleaned (:mod:`airflow_provider_binlog.lake.write.staging`).

The filesystem parts need no Spark; the root a session resolves is checked on the harness's local
session (its settings restored after each test).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.types import LakeColumn, map_column
from airflow_provider_binlog.lake.write.staging import (
    STAGING_CONF,
    STAGING_FOLDER,
    StagingArea,
    clean_orphans,
    destination_folder,
    local_root,
    staging_root,
)

COLS = [LakeColumn("id", map_column(ColumnDef("id", T.LONG)))]


def test_an_area_lives_in_its_destination_folder_and_goes_with_close(tmp_path: Path) -> None:
    area = StagingArea(str(tmp_path), "shop/eu 1")
    folder = tmp_path / "shop%2Feu%201"  # one path segment whatever the name holds
    (name,) = (p.name for p in folder.iterdir())
    assert Path(area.base) == folder / name
    created_ms = int(name.split("-")[0])
    assert abs(created_ms / 1000 - time.time()) < 60
    uri, n = area.write("piece", COLS, [(1,), (2,)])
    assert n == 2 and uri == f"file://{folder / name / 'piece'}"
    area.remove("piece")
    assert not (folder / name / "piece").exists()
    area.close()
    assert not any(folder.iterdir())


def test_a_file_uri_root_is_the_local_filesystem(tmp_path: Path) -> None:
    area = StagingArea(f"file://{tmp_path}/stage", "d")
    uri, _ = area.write("p", COLS, [(1,)])
    assert uri.startswith(f"file://{tmp_path}/stage/d/")
    assert Path(uri[len("file://") :], "part-0.parquet").exists()
    area.close()


def test_clean_orphans_removes_only_older_areas_of_its_own_destination(tmp_path: Path) -> None:
    root = str(tmp_path)
    killed = StagingArea(root, "shop")  # a run killed before it could close its area
    killed.write("p", COLS, [(1,)])
    other = StagingArea(root, "other")  # another destination's live run
    foreign = Path(destination_folder(root, "shop")) / "not-ours"  # a name of no area
    foreign.mkdir()
    time.sleep(0.01)
    started = time.time()
    time.sleep(0.01)
    live = StagingArea(root, "shop")  # made by the run that cleans
    removed = clean_orphans(root, "shop", started)
    assert removed == [killed.base]
    left = {p.name for p in Path(destination_folder(root, "shop")).iterdir()}
    assert left == {"not-ours", Path(live.base).name}
    assert Path(other.base).exists()
    assert clean_orphans(root, "nobody", time.time()) == []  # no folder: nothing to do
    live.close()
    other.close()


@pytest.fixture
def session(spark: Any) -> Iterator[Any]:
    """The harness's session with its staging setting and a test catalog's settings restored after."""
    before = spark.conf.get(STAGING_CONF, None)
    try:
        yield spark
    finally:
        if before is None:
            spark.conf.unset(STAGING_CONF)
        else:
            spark.conf.set(STAGING_CONF, before)
        spark.conf.unset("spark.sql.catalog.stagetest.warehouse")


@pytest.mark.spark
def test_the_session_decides_the_root(session: Any, tmp_path: Path) -> None:
    warehouse = session.conf.get("spark.sql.catalog.lake.warehouse")
    assert staging_root(session) == f"{warehouse.rstrip('/')}/{STAGING_FOLDER}"
    session.conf.set("spark.sql.catalog.stagetest.warehouse", "s3://bucket/wh/")
    assert staging_root(session, "stagetest") == f"s3://bucket/wh/{STAGING_FOLDER}"
    # a catalog with no warehouse (e.g. REST) on a local master: the driver's temp directory
    assert staging_root(session, "nowarehouse") == local_root()
    session.conf.set(STAGING_CONF, str(tmp_path))
    assert staging_root(session) == str(tmp_path)
    area = StagingArea.for_session(session, "d", targets=["lake.db.t"])
    assert area.base.startswith(f"{tmp_path}/d/")
    area.close()
    session.conf.set(STAGING_CONF, "local")
    assert staging_root(session) == local_root()


def test_a_cluster_without_a_shared_root_is_refused() -> None:
    class Conf:
        def get(self, key: str, default: Any = None) -> Any:
            return default

    class Session:
        conf = Conf()
        sparkContext = type("Ctx", (), {"master": "spark://h:7077"})()

    with pytest.raises(LakeError, match="staging_uri"):
        staging_root(Session())  # type: ignore[arg-type]


@pytest.mark.spark
def test_the_declared_schema_is_what_spark_infers_for_every_lake_type(session: Any, tmp_path: Path) -> None:
    """The staged view reads with :func:`spark_schema` instead of inferring it from the footer: for
    every lake type (and names that need quoting) both give the same schema and the same values."""
    import datetime
    from decimal import Decimal

    from airflow_provider_binlog.lake import types
    from airflow_provider_binlog.lake.options import META_COLUMNS
    from airflow_provider_binlog.lake.write.staging import spark_schema

    kinds = {n: t for n, t in vars(types).items() if isinstance(t, types.LakeType)}
    kinds["DEC"] = types.decimal_type(12, 3)
    kinds["WIDE_DEC"] = types.decimal_type(38, 10)
    cols = [LakeColumn(f"c {name.lower()}", t) for name, t in sorted(kinds.items())]
    cols += [LakeColumn("odd `name`", types.STRING), *META_COLUMNS]
    at = datetime.datetime(1582, 10, 4, 23, 59, 59, 999999)
    values = {
        "INT": -7, "BIGINT": -(2**40), "UBIGINT": 2**64 - 1, "FLOAT": 1.5, "DOUBLE": -2.25,
        "DATE": datetime.date(1, 1, 1), "TIME": datetime.timedelta(hours=-838), "DATETIME": at,
        "TIMESTAMP": at.replace(year=2038, tzinfo=datetime.timezone.utc), "STRING": "é",
        "BINARY": b"\x00\xff", "JSON": {"a": [1]}, "VECTOR": [1.5, -2.0], "BOOLEAN": True,
        "DEC": Decimal("-123.456"), "WIDE_DEC": Decimal("1234567890.0123456789"),
    }  # fmt: skip
    row = [values.get(c.name[2:].upper(), "meta") for c in cols]
    row[cols.index(META_COLUMNS[1])] = values["TIMESTAMP"]
    area = StagingArea(str(tmp_path), "d")
    uri, count = area.write("schema", cols, [row, [None] * len(cols)])
    reader = session.read.option("datetimeRebaseMode", "CORRECTED")  # as StagedViews.stage reads
    inferred = reader.parquet(uri)
    declared = reader.schema(spark_schema(cols)).parquet(uri)
    assert count == 2
    assert declared.schema == inferred.schema
    assert [c.name for c in declared.schema] == [c.name for c in cols]
    assert sorted(map(repr, declared.collect())) == sorted(map(repr, inferred.collect()))
    area.close()
