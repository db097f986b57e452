"""The forkless local file system (``lake/spark/java/.../ForklessRawLocalFileSystem.java``) in the test
session's driver: it is the driver's ``file:`` file system, and every file, checksum and directory
it writes gets the bytes and mode Hadoop's own ``LocalFileSystem`` gives, for plain modes (set in
the JVM) and for modes with a sticky bit (Hadoop's code)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.lake.spark import local_fs_jar


@pytest.fixture(autouse=True)
def _forkless(spark: Any) -> None:
    if spark.conf.get(local_fs_jar.SETTING, None) != local_fs_jar.FILE_SYSTEM:
        pytest.skip("no javac here: the session kept Hadoop's file system")


def _file_systems(spark: Any) -> tuple[Any, Any]:
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    uri = jvm.java.net.URI("file:///")
    ours = jvm.org.apache.hadoop.fs.FileSystem.get(uri, conf)
    hadoop = jvm.org.apache.hadoop.fs.LocalFileSystem()
    hadoop.initialize(uri, conf)
    return ours, hadoop


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_driver_s_local_file_system_is_the_forkless_one(spark: Any) -> None:
    ours, hadoop = _file_systems(spark)
    assert ours.getClass().getName() == local_fs_jar.FILE_SYSTEM
    assert ours.getRawFileSystem().getClass().getName().endswith(".ForklessRawLocalFileSystem")
    assert hadoop.getRawFileSystem().getClass().getName() == "org.apache.hadoop.fs.RawLocalFileSystem"


def test_files_checksums_and_directories_match_hadoop_s(spark: Any, tmp_path: Path) -> None:
    jvm = spark._jvm
    ours, hadoop = _file_systems(spark)
    made: dict[str, Path] = {}
    for name, fs in (("ours", ours), ("hadoop", hadoop)):
        root = tmp_path / name
        data = jvm.org.apache.hadoop.fs.Path(f"file://{root}/a/b/data.bin")  # parents made on the way
        out = fs.create(data, False)
        out.write(bytearray(b"0123456789" * 1000))
        out.close()
        made[name] = root
    for rel in ("a", "a/b", "a/b/data.bin", "a/b/.data.bin.crc"):
        assert (made["ours"] / rel).exists(), rel
        assert _mode(made["ours"] / rel) == _mode(made["hadoop"] / rel), rel
        if (made["ours"] / rel).is_file():
            assert (made["ours"] / rel).read_bytes() == (made["hadoop"] / rel).read_bytes(), rel
    permission = jvm.org.apache.hadoop.fs.permission.FsPermission
    for mode in (0o600, 0o750, 0o644, 0o000, 0o1777):
        for name, fs in (("ours", ours), ("hadoop", hadoop)):
            target = made[name] / "a" / "b"
            fs.setPermission(jvm.org.apache.hadoop.fs.Path(f"file://{target}"), permission(mode))
        assert _mode(made["ours"] / "a" / "b") == _mode(made["hadoop"] / "a" / "b") == mode, oct(mode)
        for name in made:
            os.chmod(made[name] / "a" / "b", 0o755)
    missing = jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}/missing")
    with pytest.raises(Exception, match=r"NoSuchFile|No such file"):
        ours.setPermission(missing, permission(0o600))
