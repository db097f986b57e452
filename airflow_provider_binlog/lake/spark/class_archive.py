"""A class-data-sharing archive for the local Spark driver JVM, built once per machine.

A task's driver JVM spends most of its start and of its first statements loading, verifying and
linking some 20,000 classes (Spark, Catalyst, Iceberg, Parquet, Hadoop). Java 13 and later can
dump the classes a JVM loaded into an archive when it exits (``-XX:ArchiveClassesAtExit``) and map
them, already parsed and verified, into the next JVM (``-XX:SharedArchiveFile``). A session start
plus its first two commits then takes 0.6x the wall time and JVM CPU (``bench/spark_start.py``).

* **Built by** ``python -m airflow_provider_binlog.lake.spark.class_archive`` (``dev.sh setup``; the
  container image runs it too; it builds the jars of :mod:`.jars` first): a training run
  (:mod:`.training`) in a child process starts a local session with ``-XX:ArchiveClassesAtExit``,
  merges a few changes of every column type into a throwaway Iceberg table through
  :class:`..merge.ChangeMerger` (an insert and a MERGE written by the driver, a MERGE by Spark:
  the classes of both paths), reads it back, stops, and waits for its JVM to write the archive
  at exit; the file is then renamed into place (a killed build leaves no archive, at most a
  temporary file that the next build removes). This module imports neither the session nor the
  merge (the session imports it): the training run is a module of its own, run as a process.
* **Used by** :func:`..session.session_conf` for a local master when the user sets no
  ``spark.driver.extraJavaOptions`` and an archive for this machine's JVM and jars exists. Without
  one, Spark starts as it always did. ``BINLOG_CDC_CLASS_ARCHIVE=off`` turns it off.
* **Kept in** :func:`..jars.cache_dir` as ``spark-driver-<key>.jsa`` (about 160 MB). The key hashes
  what the JVM checks when it maps an archive: the ``java`` binary, and the name, size and mtime of
  every jar on the driver's class path (Spark's ``jars/``, from ``$SPARK_HOME`` when set, and the
  local jars of :mod:`.jars`: Iceberg's, the relocated Jackson, the JDBC drivers and the local
  file system of :mod:`.local_fs_jar`, which a local driver has on its class path for this reason;
  :func:`build` builds those jars first). Installing a JDBC driver (or naming others in
  ``$BINLOG_CDC_JDBC_JARS``) so gives a new key: the driver starts without an archive until the
  next build (``dev.sh setup`` installs the driver before building), never with a stale one. A new Java,
  PySpark or Iceberg gives a new key, so a stale archive is never handed to a JVM (which would
  refuse it with a warning and start slowly); building removes the archives of the same install's
  earlier jars (another virtual environment's archive stays). A user's
  own ``spark.driver.extraClassPath`` or ``spark.driver.extraJavaOptions`` leaves it unused.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from airflow_provider_binlog.lake import settings
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.spark import jars, jvm_command, local_fs_jar

ARCHIVE_ENV = settings.env_name("class_archive")
PREFIX = "spark-driver-"
SUFFIX = ".jsa"
FORMAT = "driver class path v1"
"""Part of the key: changes when what the training run loads, or how, changes."""


def enabled() -> bool:
    """Whether archives are used and built (``BINLOG_CDC_CLASS_ARCHIVE`` is not ``off``/``0``/``false``)."""
    return settings.current().class_archive


def _java() -> Path | None:
    found = jvm_command.java_binary(os.environ)
    if not found or not os.path.exists(found):
        return None
    return Path(os.path.realpath(found))


def _fingerprint(path: Path) -> str:
    st = path.stat()
    return f"{path.name}:{st.st_size}:{st.st_mtime_ns}"


def archive_key() -> str | None:
    """The key of this machine's archive (see the module docstring), ``<where>-<what>``: a hash of
    where the JVM and the jars are installed, then of their sizes and mtimes; ``None`` without a
    JVM or jars."""
    java = _java()
    if java is None:
        return None
    spark_home = os.environ.get("SPARK_HOME")  # spark-submit takes Spark's jars from there when set
    spark_jars = Path(spark_home) / "jars" if spark_home else jars.pyspark_jars_dir()
    try:
        classpath = sorted(spark_jars.glob("*.jar")) + jars.local_jars(build=False)
    except LakeError:
        return None
    where = [FORMAT, str(java), str(spark_jars), *(_where(p) for p in classpath if p.parent != spark_jars)]
    what = [_fingerprint(java), *(_fingerprint(p) for p in classpath)]
    return f"{_hash(where)}-{_hash(what)}"


def _where(jar: Path) -> str:
    """A local jar's place in the key: its path, but the local file system jar's without the hash of
    its sources (a new version changes the key's second part, so building drops the older archive)."""
    return str(jar.parent / local_fs_jar.PREFIX) if local_fs_jar.is_jar(jar) else str(jar)


def _hash(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def archive_path() -> Path | None:
    """The archive for this machine's JVM and jars, or ``None`` (no key)."""
    key = archive_key()
    return None if key is None else _path_for(key)


def _path_for(key: str) -> Path:
    return jars.cache_dir() / f"{PREFIX}{key}{SUFFIX}"


def existing_archive() -> Path | None:
    """The archive a local driver should map, if archives are on and it was built."""
    if not enabled():
        return None
    path = archive_path()
    return path if path is not None and path.is_file() else None


def build(force: bool = False, timeout: float = 600.0) -> Path | None:
    """Build this machine's archive unless it exists; return its path (``None`` when off or no JVM).

    :param force: rebuild even when it exists.
    :param timeout: seconds the training run may take.
    :raises LakeError: a jar could not be built, the training run failed or its JVM wrote no archive.
    """
    if not enabled():
        return None
    jars.local_jars()  # built first: the key and the training run's class path hold them all
    key = archive_key()
    if key is None:
        return None
    target = _path_for(key)
    if target.is_file() and not force:
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        for left in target.parent.glob(f".{PREFIX}*.tmp"):  # of a build killed over `timeout` ago
            if time.time() - left.stat().st_mtime > timeout:
                left.unlink(missing_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{PREFIX}", suffix=".tmp", dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise LakeError(f"cannot write the class archive into {target.parent}: {exc}") from None
    tmp = Path(tmp_name)
    tmp.unlink()  # the JVM creates it at exit
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "airflow_provider_binlog.lake.spark.training", str(tmp)],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if proc.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            tail = (proc.stdout + proc.stderr).strip()[-2000:]
            raise LakeError(f"the JVM class archive training run failed ({proc.returncode}): {tail}")
        os.replace(tmp, target)
    except subprocess.TimeoutExpired:
        raise LakeError(f"the JVM class archive training run took over {timeout:.0f} s") from None
    finally:
        tmp.unlink(missing_ok=True)
    where = key.split("-")[0]  # archives of this install's earlier jars (those of others stay)
    for old in target.parent.glob(f"{PREFIX}{where}-*{SUFFIX}"):
        if old != target:
            old.unlink(missing_ok=True)
    return target


def main(argv: list[str] | None = None) -> int:
    """Build the jars of :mod:`.jars` and this machine's archive if needed, and print every jar's
    path, one per line, then the archive's (a failed archive is a warning: Spark then starts
    without one)."""
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_binlog.lake.spark.class_archive")
    parser.add_argument("--force", action="store_true", help="rebuild the archive even when it exists")
    args = parser.parse_args(argv)
    try:
        for path in jars.local_jars():
            print(path)
    except LakeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    started = time.monotonic()
    try:
        archive = build(force=args.force)
    except LakeError as exc:
        print(f"warning: Spark's driver starts without a class archive (slower): {exc}", file=sys.stderr)
        return 0
    if archive is None:
        print("no class archive: turned off, or no java/jars found", file=sys.stderr)
    else:
        print(f"{archive} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
