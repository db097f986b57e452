"""Fixtures shared by the lake tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_binlog.lake.native import file_append
from airflow_provider_binlog.lake.spark import class_archive, jars, local_fs_jar


class _ReadOnly(LocalFileSystem):
    """The local filesystem, read-only: as with credentials that may read a bucket, not write it."""

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        raise PermissionError(f"read-only: {path}")

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        raise PermissionError(f"read-only: {path}")

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if "r" not in mode:
            raise PermissionError(f"read-only: {path}")
        return super()._open(path, mode, *args, **kwargs)


@pytest.fixture
def unwritable_location(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[int]]:
    """Call it to make every table location the driver writes read-only to pyarrow (it reads the
    files there, and cannot create one); the process's caches of filesystems and unwritable
    locations start empty again. The call returns a list that gets one item per call of
    :func:`.file_append.write_file` (the real one) from then on."""
    from pyarrow import fs as pafs

    def block() -> list[int]:
        real = file_append.filesystem_of
        read_only = pafs.PyFileSystem(pafs.FSSpecHandler(_ReadOnly()))

        def read_only_at(location: str) -> tuple[Any, str, str]:
            _, path, prefix = real(location)
            return read_only, path, prefix

        monkeypatch.setattr(file_append, "filesystem_of", read_only_at)
        monkeypatch.setattr(file_append, "_filesystems", {})
        monkeypatch.setattr(file_append, "_unwritable", set())
        tried: list[int] = []
        real_write = file_append.write_file

        def write_file(*args: Any) -> Any:
            tried.append(1)
            return real_write(*args)

        monkeypatch.setattr(file_append, "write_file", write_file)
        return tried

    return block


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory of :mod:`.jars` holding only a stand-in of the relocated Jackson jar;
    the class archive on, no ``$SPARK_HOME``, no local file system switch."""
    path = tmp_path / "cache"
    path.mkdir()
    (path / jars.SHADED_JACKSON_NAME).write_bytes(b"jar")
    monkeypatch.setenv(jars.CACHE_ENV, str(path))
    monkeypatch.delenv(class_archive.ARCHIVE_ENV, raising=False)
    monkeypatch.delenv(local_fs_jar.ENV, raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    return path
