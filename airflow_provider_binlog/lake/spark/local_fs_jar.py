"""A local file system for Hadoop that sets permissions without starting processes (issue #20).

Hadoop's ``file:`` file system, without Hadoop's native library (PySpark ships none), starts a
``chmod`` process for every file it creates and every directory it makes; its checksums double the
files. An Iceberg commit on a local warehouse (manifests, manifest list, metadata, version hint,
deletion vectors) so started about a dozen processes from the driver JVM: 1,042 ``chmod`` runs for
80 commits in ``bench/merge_wide.py`` under ``strace -f -e trace=execve``, 5 without. Creating a
file through Hadoop cost 15-23 ms, 5-6.5 ms without them (``bench/local_fs.py``).

``java/airflow_provider_binlog/hadoop/`` holds two small classes:

* ``ForklessRawLocalFileSystem``: Hadoop's ``RawLocalFileSystem`` with ``setPermission`` done
  through ``java.nio`` (a mode with the sticky bit, and a file system without POSIX permissions,
  go through Hadoop's own code);
* ``ForklessLocalFileSystem``: Hadoop's checksummed ``LocalFileSystem`` over it, the same files
  and ``.crc`` side files as before (a reader with Hadoop's own finds what it expects).

**Built** by :func:`jar` (through :func:`.jars.local_fs`) with the JDK's ``javac``
(``$JAVA_HOME/bin/javac``, else on ``PATH``, else beside ``java``) against PySpark's
``hadoop-client-api`` jar, into :func:`.jars.cache_dir` as ``binlog-cdc-local-fs-<hash>.jar`` (the
hash covers the sources and Hadoop's jar, so an upgrade builds anew), once, when
:func:`.jars.local_jars` is first asked (``dev.sh setup`` does it). A
machine with a JRE only, or a build that fails, gets ``None`` and a warning: Spark then uses
Hadoop's file system as before.

**Used** by :func:`.session.session_conf` for a local master (the driver is the only JVM):
``spark.hadoop.fs.file.impl`` names :data:`FILE_SYSTEM`. A cluster's executors would need the jar
on their class path before Hadoop loads the class, so a cluster keeps Hadoop's. ``conf`` setting
``spark.hadoop.fs.file.impl`` wins; ``BINLOG_CDC_LOCAL_FS=hadoop`` turns it off.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from airflow_provider_binlog.lake import settings

log = logging.getLogger(__name__)

FILE_SYSTEM = "airflow_provider_binlog.hadoop.ForklessLocalFileSystem"
"""The class ``spark.hadoop.fs.file.impl`` names."""
SETTING = "spark.hadoop.fs.file.impl"
ENV = settings.env_name("local_fs")
PREFIX = "binlog-cdc-local-fs-"
SOURCES = Path(__file__).parent / "java"
PACKAGE = "airflow_provider_binlog/hadoop"
"""The sources' folder under :data:`SOURCES` (the others are compiled in the JVM: :mod:`.jvm_helpers`)."""
BUILD_TIMEOUT = 120.0


def enabled() -> bool:
    """Whether a local driver should use the forkless file system (``$BINLOG_CDC_LOCAL_FS`` is not
    ``hadoop``)."""
    return settings.current().local_fs


def is_jar(path: Path) -> bool:
    """Whether ``path`` is a jar :func:`jar` builds (of any version of the sources)."""
    return path.name.startswith(PREFIX)


def _sources() -> list[Path]:
    return sorted((SOURCES / PACKAGE).rglob("*.java"))


def _hadoop_api(spark_jars: Path) -> Path | None:
    found = sorted(spark_jars.glob("hadoop-client-api-*.jar"))
    return found[-1] if found else None


def javac() -> str | None:
    """The JDK's compiler: ``$JAVA_HOME/bin/javac``, else ``javac`` on ``PATH``, else beside ``java``."""
    home = os.environ.get("JAVA_HOME")
    candidates = [os.path.join(home, "bin", "javac")] if home else []
    candidates.append(shutil.which("javac") or "")
    java = shutil.which("java")
    if java:
        candidates.append(os.path.join(os.path.dirname(os.path.realpath(java)), "javac"))
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def _jar_path(cache: Path, api: Path) -> Path:
    """Where the jar built against ``api`` (Hadoop's jar) from this install's sources goes."""
    digest = hashlib.sha256(api.name.encode())
    for src in _sources():
        digest.update(src.relative_to(SOURCES).as_posix().encode() + b"\0" + src.read_bytes())
    return cache / f"{PREFIX}{digest.hexdigest()[:12]}.jar"


def jar(cache: Path, spark_jars: Path, build: bool = True) -> Path | None:
    """This install's jar in ``cache``, built against ``spark_jars`` (PySpark's ``jars/``) if missing
    and ``build`` (:func:`.jars.local_fs` passes both); ``None`` when it cannot be (no Hadoop jar
    there, no JDK compiler, a failed build: logged) or is missing and not to be built."""
    api = _hadoop_api(spark_jars)
    if api is None:
        return None
    target = _jar_path(cache, api)
    if target.exists():
        return target
    if not build:
        return None
    compiler = javac()
    if compiler is None:
        log.warning(
            "no javac (a JDK) here: Spark's local file system starts a chmod process per file it "
            "writes (slower Iceberg commits); install a JDK to build %s",
            target.name,
        )
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        classes = Path(tmp) / "classes"
        cmd = [compiler, "--release", "8", "-nowarn", "-cp", str(api), "-d", str(classes)]
        try:
            proc = subprocess.run(
                [*cmd, *map(str, _sources())],
                capture_output=True,
                text=True,
                check=False,
                timeout=BUILD_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("building %s failed (%s): Spark keeps Hadoop's local file system", target.name, exc)
            return None
        if proc.returncode != 0:
            log.warning(
                "building %s failed (javac exit %d): Spark keeps Hadoop's local file system: %s",
                target.name,
                proc.returncode,
                proc.stderr.strip()[-2000:],
            )
            return None
        built = Path(tmp) / target.name
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as out:
            for path in sorted(classes.rglob("*.class")):
                out.write(path, path.relative_to(classes).as_posix())
        os.replace(built, target)
    return target
