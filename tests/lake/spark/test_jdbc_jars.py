"""The JDBC driver jar on the Spark driver's class path (``lake/spark/jars.py``), the class archive keyed on
it (``lake/spark/class_archive.py``), and the JDBC catalog settings (``lake/spark/session.py``): no Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.spark import class_archive, jars
from airflow_provider_binlog.lake.spark.session import jdbc_catalog_conf, jdbc_uri, session_conf


def test_a_jdbc_driver_is_on_the_class_path_and_in_the_archive_key(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = tmp_path / "driver.jar"
    driver.write_bytes(b"driver")
    monkeypatch.setenv(jars.JDBC_JARS_ENV, "")
    assert jars.jdbc_driver_jars() == []
    without = class_archive.archive_key()
    monkeypatch.setenv(jars.JDBC_JARS_ENV, str(driver))
    assert jars.jdbc_driver_jars() == [driver] and driver in jars.local_jars()
    with_driver = class_archive.archive_key()
    assert without is not None and with_driver is not None and with_driver != without
    # a local driver gets it on its class path (where the archive was built from), a cluster's in spark.jars
    local = session_conf(master="local[2]", warehouse=str(tmp_path / "wh"))
    assert str(driver) in local["spark.driver.extraClassPath"].split(":")
    cluster = session_conf(master="spark://h:7077", warehouse=str(tmp_path / "wh"))
    assert str(driver) in cluster["spark.jars"].split(",")
    path = class_archive.archive_path()
    assert path is not None
    path.write_bytes(b"archive")
    assert f"-XX:SharedArchiveFile={path}" in session_conf(master="local[2]")["spark.driver.extraJavaOptions"]
    driver.write_bytes(b"a newer driver")  # another size: another key, the archive is not handed out
    assert class_archive.archive_key() != with_driver and class_archive.existing_archive() is None
    monkeypatch.setenv(jars.JDBC_JARS_ENV, str(tmp_path / "missing.jar"))
    with pytest.raises(LakeError, match=r"missing\.jar"):
        jars.jdbc_driver_jars()
    assert class_archive.archive_key() is None  # a wrong setting: no archive rather than a wrong one


def test_jdbc_catalog_settings() -> None:
    conf = jdbc_catalog_conf(jdbc_uri("db.example", None, "iceberg"), "cdc", "s3cret", "s3://b/wh", "lake",
                             {"cache-enabled": "false"})  # fmt: skip
    assert conf == {
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        "spark.sql.catalog.lake.uri": "jdbc:postgresql://db.example:5432/iceberg",
        "spark.sql.catalog.lake.jdbc.user": "cdc",
        "spark.sql.catalog.lake.jdbc.password": "s3cret",
        "spark.sql.catalog.lake.jdbc.schema-version": "V1",
        "spark.sql.catalog.lake.warehouse": "s3://b/wh",
        "spark.sql.catalog.lake.cache-enabled": "false",
    }
    full = session_conf(master="local[1]", warehouse="/elsewhere", conf=conf)
    assert full["spark.sql.catalog.lake.catalog-impl"] == "org.apache.iceberg.jdbc.JdbcCatalog"
    assert full["spark.sql.catalog.lake.warehouse"] == "s3://b/wh"  # the catalog's own wins
    assert "spark.sql.catalog.lake.type" not in full  # no Hadoop default on top
    with pytest.raises(ValueError, match="starts with 'jdbc:'"):
        jdbc_catalog_conf("postgresql://h/db", "u", "p", "/wh")
    with pytest.raises(ValueError, match="host and a database"):
        jdbc_uri("h", 5432, "")
