"""The local driver's class archive (``lake/spark/class_archive.py``): its key, when a session maps it, and a
real build whose archive a new local driver JVM maps (Spark's and Iceberg's classes come from it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_binlog.lake.spark import class_archive, jars
from airflow_provider_binlog.lake.spark.session import session_conf


def test_the_key_follows_the_jvm_and_every_jar_of_the_class_path(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = class_archive.archive_key()
    assert key is not None and class_archive.archive_key() == key
    jackson = cache / jars.SHADED_JACKSON_NAME
    os.utime(jackson, ns=(1, 1))  # a rebuilt jar
    moved = class_archive.archive_key()
    assert moved is not None and moved != key
    assert moved.split("-")[0] == key.split("-")[0]  # the same install: a build replaces its archive
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core.jar").write_bytes(b"x")
    monkeypatch.setenv("SPARK_HOME", str(home))  # another Spark's jars
    assert class_archive.archive_key() not in (None, key, moved)
    monkeypatch.delenv("SPARK_HOME")
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_bytes(b"#!")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))  # another JVM
    assert class_archive.archive_key() not in (None, key, moved)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    assert class_archive.archive_key() is None and class_archive.build() is None


def test_a_session_maps_the_archive_only_when_built_local_and_unconfigured(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def java_options(**kwargs: object) -> str:
        return session_conf(warehouse=str(cache / "wh"), **kwargs)["spark.driver.extraJavaOptions"]  # type: ignore[arg-type]

    assert "SharedArchiveFile" not in java_options()  # not built
    path = class_archive.archive_path()
    assert path is not None and path.parent == cache
    path.write_bytes(b"archive")
    assert f"-XX:SharedArchiveFile={path}" in java_options().split()
    assert "SharedArchiveFile" not in java_options(master="spark://h:7077")  # a cluster's driver
    assert "SharedArchiveFile" not in java_options(conf={"spark.driver.extraClassPath": "/opt/own.jar"})
    assert "SharedArchiveFile" not in java_options(conf={"spark.jars.packages": jars.ICEBERG_MAVEN_PACKAGE})
    assert java_options(conf={"spark.driver.extraJavaOptions": "-Xmx2g"}) == "-Xmx2g"  # the user's own
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, "off")
    assert "SharedArchiveFile" not in java_options() and class_archive.build() is None


def test_a_built_archive_is_mapped_by_a_new_local_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real thing: a training run writes the archive, a second build reuses it and drops the
    archive of an older key, and a fresh local session loads Spark's and Iceberg's classes from it."""
    real_jackson = jars.shaded_jackson_jar()
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copy2(real_jackson, cache / jars.SHADED_JACKSON_NAME)
    monkeypatch.setenv(jars.CACHE_ENV, str(cache))
    monkeypatch.delenv(class_archive.ARCHIVE_ENV, raising=False)
    jars.local_jars()  # as build() does first (the local file system's jar)
    key = class_archive.archive_key()
    assert key is not None
    where = key.split("-")[0]
    stale = cache / f"{class_archive.PREFIX}{where}-0123456789ab{class_archive.SUFFIX}"
    stale.write_bytes(b"an archive of this install's earlier jars")
    other = cache / f"{class_archive.PREFIX}0123456789ab-0123456789ab{class_archive.SUFFIX}"
    other.write_bytes(b"the archive of another virtual environment")

    path = class_archive.build()
    assert path is not None and path == class_archive.archive_path() and path.stat().st_size > 10 * 2**20
    assert not stale.exists() and other.exists()
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []  # no temp file left
    other.unlink()
    built = path.stat().st_mtime_ns
    assert class_archive.build() == path and path.stat().st_mtime_ns == built  # not built twice

    # every JVM the child starts (spark-submit's launcher, then the driver) logs its class loading
    log = tmp_path / "classes-%p.log"
    child = (
        "from airflow_provider_binlog.lake.spark.session import create_session\n"
        f"spark = create_session(master='local[1]', warehouse={str(tmp_path / 'wh')!r})\n"
        "spark.sql('CREATE TABLE lake.db.t (id BIGINT) USING iceberg')\n"
        "spark.sql('INSERT INTO lake.db.t VALUES (1)')\n"
        "assert spark.table('lake.db.t').count() == 1\n"
        "spark.stop()\n"
    )
    env = dict(os.environ, JAVA_TOOL_OPTIONS=f"-Xlog:class+load=info:file={log}")
    proc = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "warning][cds" not in proc.stdout + proc.stderr
    driver = max(tmp_path.glob("classes-*.log"), key=lambda p: p.stat().st_size)
    lines = driver.read_text().splitlines()
    shared = [line for line in lines if "source: shared objects file (top)" in line]
    assert len(shared) > len(lines) // 2, f"{len(shared)} of {len(lines)} classes from the archive"
    assert any(" org.apache.spark.sql.SparkSession " in line for line in shared)
    assert any(" org.apache.iceberg.spark.SparkCatalog " in line for line in shared)
