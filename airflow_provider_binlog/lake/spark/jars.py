"""The jars an embedded Spark needs for Iceberg, found or built locally.

* The Iceberg Spark runtime (``iceberg-spark-runtime-3.5_2.12-*.jar``) comes from the installed
  ``snowpark-connect-deps-iceberg`` package.
* That runtime lacks Iceberg's relocated Jackson. We build it once: pyspark's own
  ``jackson-core``/``-databind``/``-annotations``/``-datatype-jsr310`` jars are merged into one jar
  (without ``META-INF/versions/*``, ``module-info.class`` and the manifest) and run through Debian's
  jarjar (``/usr/share/java/jarjar.jar``, package ``libjarjar-java``) with the rule
  ``rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1``.

* A JDBC catalog's driver: PostgreSQL's (``/usr/share/java/postgresql.jar``, Debian's
  ``libpostgresql-jdbc-java``) when installed; ``$BINLOG_CDC_JDBC_JARS`` (paths separated by
  ``:``) names others instead (empty: none). The driver must be on the Spark driver's class path
  (see :mod:`.session`): Iceberg's JDBC catalog opens its connections in the driver only.

The result lives in a cache directory: ``$BINLOG_CDC_CACHE`` if set, else
``$XDG_CACHE_HOME/airflow-provider-binlog`` (``~/.cache/airflow-provider-binlog``). Building is
idempotent: an existing jar is reused; a new one is written to a temporary name and renamed.

Users with Maven access can set ``spark.jars.packages`` instead
(``org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2``); then no local jar is added.

Command line::

    python -m airflow_provider_binlog.lake.spark.jars     # builds if needed, prints the jar paths

(``python -m airflow_provider_binlog.lake.spark.class_archive`` does this, then builds the driver's class
archive of :mod:`.class_archive`; ``dev.sh setup`` and the container image run that.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from airflow_provider_binlog.lake import settings
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.spark import local_fs_jar

JACKSON_VERSION = "2.15.2"
JACKSON_ARTIFACTS = ("jackson-core", "jackson-databind", "jackson-annotations", "jackson-datatype-jsr310")
JARJAR_RULE = "rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1\n"
JARJAR_DEFAULT = "/usr/share/java/jarjar.jar"
SHADED_JACKSON_NAME = f"iceberg-shaded-jackson-{JACKSON_VERSION}.jar"
ICEBERG_MAVEN_PACKAGE = "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"
CACHE_ENV = settings.env_name("cache")
JARJAR_ENV = settings.env_name("jarjar")
JDBC_JARS_ENV = settings.env_name("jdbc_jars")
JDBC_DRIVER_DEFAULT = "/usr/share/java/postgresql.jar"


def cache_dir() -> Path:
    """Return the directory where built jars are kept (not created here)."""
    override = settings.current().cache
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "airflow-provider-binlog"


def pyspark_jars_dir() -> Path:
    """Return ``pyspark/jars`` of the installed PySpark."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def iceberg_runtime_jar() -> Path:
    """Return the Iceberg Spark runtime jar (Scala 2.12) shipped by ``snowpark-connect-deps-iceberg``."""
    try:
        import snowpark_connect_deps_iceberg as pkg
    except ImportError as exc:
        raise LakeError(
            "the Iceberg runtime jar comes from the 'snowpark-connect-deps-iceberg' package, which is not "
            f"installed; install it or set spark.jars.packages={ICEBERG_MAVEN_PACKAGE}"
        ) from exc
    jars = sorted((Path(pkg.__file__).parent / "jars").glob("iceberg-spark-runtime-3.5_2.12-*.jar"))
    if not jars:
        raise LakeError(f"no iceberg-spark-runtime-3.5_2.12 jar inside {Path(pkg.__file__).parent}")
    return jars[-1]


def _jarjar() -> str:
    path = settings.current().jarjar
    path = JARJAR_DEFAULT if path is None else path
    if not os.path.exists(path):
        raise LakeError(
            f"jarjar not found at {path}: install Debian's libjarjar-java or set {JARJAR_ENV}; it is "
            "needed once to build Iceberg's relocated Jackson jar"
        )
    return path


def _merge_jackson(sources: list[Path], out: Path) -> None:
    seen: set[str] = set()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for src in sources:
            with zipfile.ZipFile(src) as zin:
                for info in zin.infolist():
                    name = info.filename
                    if (
                        name in seen
                        or name.startswith("META-INF/versions/")
                        or name.endswith("module-info.class")
                        or name == "META-INF/MANIFEST.MF"
                    ):
                        continue
                    seen.add(name)
                    dst.writestr(info, zin.read(info))


def shaded_jackson_jar(build: bool = True) -> Path:
    """Return the relocated Jackson jar, building it into :func:`cache_dir` if missing.

    :param build: when ``False`` and the jar is missing, raise instead of building.
    """
    target = cache_dir() / SHADED_JACKSON_NAME
    if target.exists():
        return target
    if not build:
        raise LakeError(f"{target} is missing; run: python -m airflow_provider_binlog.lake.spark.jars")
    jars_dir = pyspark_jars_dir()
    sources = [jars_dir / f"{name}-{JACKSON_VERSION}.jar" for name in JACKSON_ARTIFACTS]
    missing = [str(s) for s in sources if not s.exists()]
    if missing:
        raise LakeError(f"PySpark's Jackson jars not found: {', '.join(missing)}")
    jarjar = _jarjar()
    java = shutil.which("java")
    if java is None:
        raise LakeError("java is not on PATH; Spark needs a JDK 11 or 17")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        merged = Path(tmp) / "merged.jar"
        rules = Path(tmp) / "rules.txt"
        out = Path(tmp) / "out.jar"
        _merge_jackson(sources, merged)
        rules.write_text(JARJAR_RULE)
        proc = subprocess.run(
            [java, "-jar", jarjar, "process", str(rules), str(merged), str(out)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0 or not out.exists():
            raise LakeError(f"jarjar failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        os.replace(out, target)
    return target


def jdbc_driver_jars() -> list[Path]:
    """The JDBC driver jars of this machine: ``$BINLOG_CDC_JDBC_JARS`` when set (each must exist),
    else PostgreSQL's Debian jar when installed."""
    override = settings.current().jdbc_jars
    if override is None:
        return [Path(JDBC_DRIVER_DEFAULT)] if os.path.isfile(JDBC_DRIVER_DEFAULT) else []
    paths = [Path(p) for p in override.split(os.pathsep) if p.strip()]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise LakeError(f"{JDBC_JARS_ENV} names jars that do not exist: {', '.join(missing)}")
    return paths


def local_jars(build: bool = True) -> list[Path]:
    """Return the jars to put on ``spark.jars`` for an Iceberg session without Maven (the JDBC
    drivers of :func:`jdbc_driver_jars` included, and the local file system of :mod:`.local_fs_jar`
    when it is or can be built)."""
    found = [iceberg_runtime_jar(), shaded_jackson_jar(build=build), *jdbc_driver_jars()]
    forkless = local_fs(build=build)
    return found if forkless is None else [*found, forkless]


def local_fs(build: bool = True) -> Path | None:
    """The local file system's jar of :mod:`.local_fs_jar` in :func:`cache_dir`, built if missing
    and ``build``; ``None`` when there is none."""
    return local_fs_jar.jar(cache_dir(), pyspark_jars_dir(), build=build)


def main(argv: list[str] | None = None) -> int:
    """Build the relocated Jackson jar if needed and print every local jar path, one per line
    (``python -m airflow_provider_binlog.lake.spark.class_archive`` builds the driver's class archive too)."""
    del argv
    try:
        for path in local_jars():
            print(path)
    except LakeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
