"""``lake/spark/local_fs_jar.py``: the forkless local file system's jar is built with the JDK's compiler
into the cache, named in a local driver's settings only, and absent (with a warning) where it
cannot be built. Builds run ``javac`` for real; no Spark."""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

import pytest

from airflow_provider_binlog.lake.spark import class_archive, jars, local_fs_jar
from airflow_provider_binlog.lake.spark.session import session_conf

pytestmark = pytest.mark.skipif(local_fs_jar.javac() is None, reason="needs a JDK's javac")


def test_the_jar_is_built_once_with_both_classes(cache: Path) -> None:
    assert jars.local_fs(build=False) is None  # not built yet, and not to be
    built = jars.local_fs()
    assert built is not None and built.parent == cache and built.name.startswith(local_fs_jar.PREFIX)
    with zipfile.ZipFile(built) as jar:
        names = set(jar.namelist())
    assert {
        "airflow_provider_binlog/hadoop/ForklessLocalFileSystem.class",
        "airflow_provider_binlog/hadoop/ForklessRawLocalFileSystem.class",
    } <= names
    mtime = built.stat().st_mtime_ns
    assert jars.local_fs() == built and built.stat().st_mtime_ns == mtime  # kept, not rebuilt
    assert built in jars.local_jars()
    assert [p.name for p in cache.iterdir() if p.suffix == ".jar"].count(built.name) == 1


def test_other_sources_give_another_jar_and_archive_key_in_the_same_place(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = jars.local_fs()
    first_key = class_archive.archive_key()
    sources = tmp_path / "java"
    sources.mkdir()
    for src in local_fs_jar.SOURCES.rglob("*.java"):
        dst = sources / src.relative_to(local_fs_jar.SOURCES)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(src.read_text() + "\n// changed\n")
    monkeypatch.setattr(local_fs_jar, "SOURCES", sources)
    second = jars.local_fs()
    assert second is not None and second != first and first is not None and first.exists()
    second_key = class_archive.archive_key()
    assert first_key is not None and second_key is not None and second_key != first_key
    # the same place (building the new archive drops the older one), another content
    assert second_key.split("-")[0] == first_key.split("-")[0]


def test_a_local_driver_names_the_file_system_a_cluster_does_not(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = jars.local_fs()
    assert built is not None
    local = session_conf(master="local[2]", warehouse="/tmp/wh")
    assert local[local_fs_jar.SETTING] == local_fs_jar.FILE_SYSTEM
    assert str(built) in local["spark.driver.extraClassPath"].split(":")
    cluster = session_conf(master="spark://h:7077", warehouse="/tmp/wh")
    assert local_fs_jar.SETTING not in cluster  # executors load Hadoop's classes before spark.jars
    own = "org.apache.hadoop.fs.LocalFileSystem"
    assert session_conf(master="local[2]", conf={local_fs_jar.SETTING: own})[local_fs_jar.SETTING] == own
    with_maven = session_conf(master="local[2]", conf={"spark.jars.packages": jars.ICEBERG_MAVEN_PACKAGE})
    assert local_fs_jar.SETTING not in with_maven  # the jar is not on that class path
    monkeypatch.setenv(local_fs_jar.ENV, "hadoop")
    assert local_fs_jar.SETTING not in session_conf(master="local[2]", warehouse="/tmp/wh")


def test_the_archive_key_covers_the_jar(cache: Path) -> None:
    without = class_archive.archive_key()
    assert jars.local_fs() is not None
    assert class_archive.archive_key() not in (None, without)


def test_without_javac_spark_keeps_hadoop_s_file_system(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(local_fs_jar, "javac", lambda: None)
    with caplog.at_level(logging.WARNING, logger=local_fs_jar.__name__):
        assert jars.local_fs() is None
    assert "no javac" in caplog.text
    conf = session_conf(master="local[2]", warehouse="/tmp/wh")
    assert local_fs_jar.SETTING not in conf
    class_path = conf["spark.driver.extraClassPath"].split(":")
    assert not any(Path(p).name.startswith(local_fs_jar.PREFIX) for p in class_path)


def test_a_failed_build_is_a_warning_and_no_jar(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "java" / "airflow_provider_binlog" / "hadoop"
    broken.mkdir(parents=True)
    (broken / "ForklessLocalFileSystem.java").write_text("package airflow_provider_binlog.hadoop;\nclass {")
    monkeypatch.setattr(local_fs_jar, "SOURCES", tmp_path / "java")
    with caplog.at_level(logging.WARNING, logger=local_fs_jar.__name__):
        assert jars.local_fs() is None
    assert "javac exit" in caplog.text and "ForklessLocalFileSystem.java" in caplog.text
    assert not [p for p in cache.iterdir() if p.name.startswith(local_fs_jar.PREFIX)]  # nothing half-built
