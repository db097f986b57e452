"""SparkSession factory: embedded Iceberg by default, anything else through plain Spark configuration.

Defaults (each one is overridden by the same key in ``conf``):

===========================================  ==================================================
``spark.master``                             ``local[*]`` (or the ``master`` argument)
``spark.jars``                               the Iceberg runtime jar, the relocated Jackson jar
                                             and the JDBC drivers found (see :mod:`.jars`); left
                                             out when ``conf`` sets
                                             ``spark.jars.packages``; for a local master they go
                                             on ``spark.driver.extraClassPath`` instead (the
                                             driver is the executor; the class archive covers
                                             classes of the class path only)
``spark.sql.extensions``                     ``IcebergSparkSessionExtensions``
``spark.sql.catalog.<catalog>``              ``org.apache.iceberg.spark.SparkCatalog``, type
                                             ``hadoop``, on ``warehouse`` (only when ``conf`` says
                                             nothing about that catalog)
``spark.sql.session.timeZone``               ``UTC``
``spark.ui.showConsoleProgress``             ``false``
``spark.driver.extraJavaOptions``            a log4j2 file that keeps the driver log to warnings;
                                             for a local master also ``-XX:TieredStopAtLevel=1``
                                             (only the quick JIT: a task's JVM lives minutes, and
                                             the optimizing JIT cost about 40% of its CPU) with
                                             ``-XX:ReservedCodeCacheSize=240m`` (the quick JIT's
                                             48 MB filled in a run over 200 tables, then the JIT
                                             stopped: 18% more JVM CPU), and
                                             ``-XX:+UseParallelGC`` (the throughput collector:
                                             about 7% less JVM CPU than G1 for session start and
                                             5 MERGEs; ``bench/merge_variants.py --jit``);
                                             and ``-XX:SharedArchiveFile`` when the class
                                             archive of :mod:`.class_archive` was built and
                                             ``conf`` sets no ``spark.driver.extraClassPath``
                                             nor ``spark.jars.packages``
                                             (0.6x the JVM CPU of a start and first MERGEs)
``spark.sql.iceberg.vectorization.enabled``  ``false``: Iceberg 1.10's vectorized Parquet reader
                                             leaks the direct memory of every batch whose rows
                                             carry row lineage, which a MERGE into a
                                             format-version 3 table reads (apache/iceberg#17241,
                                             fixed by #17296 after 1.11.0): about 12 MB per MERGE
                                             over 400k rows, until the driver (or an executor)
                                             fails with ``OutOfMemoryError: Cannot reserve ...
                                             direct buffer memory`` (a 10M-change drain did,
                                             in its 26th chunk). Row-by-row reads keep it
                                             flat; a MERGE Spark runs costs about 20% more (100k
                                             keys into 400k rows: 1.85 against 1.5 s), a 3M-change
                                             drain was not slower (36.8k against 34.9k
                                             changes/s). Set ``true`` with an Iceberg runtime
                                             that holds the fix
``spark.ui.enabled``                         ``false`` for a local master
``spark.sql.shuffle.partitions``             the cores of a local master (``local[2]``: 2):
                                             one task per core, fewer and larger data files;
                                             ``bench/end_to_end.py``, 2 cores: 8 partitions
                                             54-58k changes/s (JVM 16.8-18.2 CPU-s), 4: 59.7k
                                             (15.9), 2: 62.6k (15.1)
``spark.hadoop.fs.file.impl``                for a local master, the local file system of
                                             :mod:`.local_fs_jar` when its jar was built: it sets
                                             permissions without a ``chmod`` process per file
                                             (an Iceberg commit started about a dozen)
``spark.sql.adaptive.enabled``               ``false`` for a local master: with one shuffle
                                             partition per core there is nothing to coalesce,
                                             and re-planning each stage cost a MERGE's driver
                                             CPU (a 100-change run 3.7-4.3 s against 4.5-5.0 s;
                                             1M mixed changes: the same throughput)
===========================================  ==================================================

A cluster (standalone, YARN, Kubernetes) is a different ``master`` plus whatever that cluster needs
in ``conf``; a REST/Hive/Glue catalog is ``spark.sql.catalog.<catalog>.*`` in ``conf``. The default
warehouse is ``$BINLOG_CDC_WAREHOUSE`` or ``~/.local/share/airflow-provider-binlog/warehouse``.

Catalogs
--------
* **Hadoop** (the default): metadata files in the warehouse, the current version found by listing
  them; one machine, one writer at a time per table (object stores cannot rename atomically).
* **JDBC** (:func:`jdbc_catalog_conf`; tested on PostgreSQL 15): Iceberg's ``JdbcCatalog`` keeps
  each table's current metadata location in a row of ``iceberg_tables`` and swaps it with a
  compare-and-set ``UPDATE``, so writers on any number of machines may commit to one table. Needs
  the JDBC driver on the Spark driver's class path (:func:`.jars.jdbc_driver_jars`: Debian's
  ``libpostgresql-jdbc-java``; with ``spark.jars.packages``, add ``org.postgresql:postgresql``),
  ``jdbc.schema-version=V1`` (else views are refused; the catalog creates its tables at the first
  start, which needs a role allowed to create tables in the database), and a ``warehouse`` that
  every executor and the driver reach (the data and metadata files live there). The password is a
  Spark setting (``...jdbc.password``), which Spark redacts in its UI and event log
  (``spark.redaction.regex``); :class:`~..operators.binlog_to_spark.BinlogToSparkOperator` takes
  it from an Airflow connection at run time (``catalog_conn_id``).
* **REST**: ``type=rest`` and ``uri=http(s)://...``. The Iceberg runtime jar from
  ``snowpark-connect-deps-iceberg`` references Iceberg's relocated Apache HTTP client 5
  (``org.apache.iceberg.shaded.org.apache.hc.client5``/``hc.core5``) without holding it, so a REST
  catalog fails at its first request with ``NoClassDefFoundError``; use the runtime jar from Maven
  (``spark.jars.packages=org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2``, which holds
  it) or add ``httpclient5``/``httpcore5``/``httpcore5-h2`` relocated by the rule ``rule
  org.apache.hc.** org.apache.iceberg.shaded.org.apache.hc.@1`` (as :mod:`.jars` does for Jackson).
  Untested here: no REST catalog server installs from PyPI or Debian.

Every catalog that allows concurrent writers gets them: :func:`.commits.commit` retries a commit that
lost a race, its mark checked again first.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake import settings
from airflow_provider_binlog.lake.spark import class_archive, jars, jvm_log, local_fs_jar
from airflow_provider_binlog.lake.spark.catalog_load import load_catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
JDBC_CATALOG_IMPL = "org.apache.iceberg.jdbc.JdbcCatalog"
VECTORIZATION = "spark.sql.iceberg.vectorization.enabled"
WAREHOUSE_ENV = settings.env_name("warehouse")
DEFAULT_APP_NAME = "airflow-provider-binlog"


def default_warehouse() -> str:
    """Return the local warehouse directory used when neither argument nor conf names one."""
    override = settings.current().warehouse
    if override:
        return override
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return str(Path(base) / "airflow-provider-binlog" / "warehouse")


_QUIET_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""


def quiet_log_config() -> Path:
    """Write (once) and return a log4j2 configuration that keeps Spark's driver log to warnings."""
    path = jars.cache_dir() / "log4j2-quiet.properties"
    if not path.exists() or path.read_text() != _QUIET_LOG4J2:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_QUIET_LOG4J2)
        os.replace(tmp, path)
    return path


def local_cores(master: str) -> int:
    """The cores a ``local``, ``local[N]``, ``local[*]`` or ``local[N,F]`` master runs tasks on."""
    found = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", master.strip())
    if found is None or found.group(1) is None:
        return 1
    return os.cpu_count() or 1 if found.group(1) == "*" else max(1, int(found.group(1)))


def driver_java_options(local: bool) -> str:
    """The driver JVM options this module sets when the user sets none (the class archive aside)."""
    java = f"-Dlog4j2.configurationFile=file:{quiet_log_config()}"
    return java + (
        " -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseParallelGC" if local else ""
    )


def _append(existing: str | None, extra: str, sep: str = ",") -> str:
    parts = [p for p in (existing or "").split(sep) if p.strip()]
    if extra not in parts:
        parts.append(extra)
    return sep.join(parts)


def jdbc_catalog_conf(
    uri: str,
    user: str,
    password: str,
    warehouse: str,
    catalog: str = "lake",
    properties: dict[str, str] | None = None,
) -> dict[str, str]:
    """The Spark settings of an Iceberg JDBC catalog named ``catalog`` (pass them as ``conf``).

    :param uri: ``jdbc:postgresql://host:5432/database`` (no credentials in it).
    :param user: the database role.
    :param password: its password (a Spark setting Spark redacts; never log the result).
    :param warehouse: where table data and metadata go (reachable by the driver and every executor).
    :param properties: more catalog properties (``cache-enabled``, ``io-impl``...), without the prefix.
    """
    if not uri.startswith("jdbc:"):
        raise ValueError(f"a JDBC catalog's uri starts with 'jdbc:', not {uri.split(':', 1)[0]!r}")
    prefix = f"spark.sql.catalog.{catalog}"
    out = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        prefix + ".catalog-impl": JDBC_CATALOG_IMPL,
        prefix + ".uri": uri,
        prefix + ".jdbc.user": user,
        prefix + ".jdbc.password": password,
        prefix + ".jdbc.schema-version": "V1",
        prefix + ".warehouse": warehouse,
    }
    out.update({f"{prefix}.{k}": v for k, v in (properties or {}).items()})
    return out


def jdbc_uri(host: str, port: int | None, database: str, scheme: str = "postgresql") -> str:
    """``jdbc:postgresql://host:port/database`` (port 5432 when ``None``)."""
    if not host or not database:
        raise ValueError("a JDBC catalog needs a host and a database")
    return f"jdbc:{scheme}://{host}:{port or 5432}/{database}"


def session_conf(
    master: str | None = None,
    warehouse: str | None = None,
    catalog: str = "lake",
    conf: dict[str, str] | None = None,
) -> dict[str, str]:
    """Return the full Spark configuration :func:`create_session` would use (no Spark started).

    :param master: Spark master URL; ``conf["spark.master"]`` or ``local[*]`` when ``None``.
    :param warehouse: warehouse location of the default Hadoop catalog.
    :param catalog: name of the Iceberg catalog to configure.
    :param conf: any Spark settings; they win over the defaults.
    """
    user = dict(conf or {})
    master = master or user.get("spark.master") or "local[*]"
    out: dict[str, str] = {
        "spark.master": master,
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        VECTORIZATION: "false",  # Iceberg 1.10 leaks a v3 MERGE's direct memory (module docstring)
    }
    if master.startswith("local"):
        out["spark.ui.enabled"] = "false"
        out["spark.sql.shuffle.partitions"] = str(local_cores(master))
        out["spark.sql.adaptive.enabled"] = "false"
    prefix = f"spark.sql.catalog.{catalog}"
    # the default Hadoop catalog unless the user brings a catalog class or type of their own; other
    # catalog properties alone (``cache-enabled``...) tune the default one
    own = {prefix, prefix + ".type", prefix + ".catalog-impl"} & user.keys()
    if not own:
        out[prefix] = "org.apache.iceberg.spark.SparkCatalog"
        out[prefix + ".type"] = "hadoop"
        out[prefix + ".warehouse"] = warehouse or default_warehouse()
    elif warehouse is not None:
        out[prefix + ".warehouse"] = warehouse
    if "spark.sql.extensions" in user:
        user["spark.sql.extensions"] = _append(user["spark.sql.extensions"], ICEBERG_EXTENSIONS)
    in_driver = master == "local" or master.startswith("local[")  # tasks run in the driver's JVM
    # the class archive holds the classes of the class path it was built with: exactly ours
    archive_fits = False
    if not user.get("spark.jars.packages"):
        # a driver that is its own executor gets the jars on its class path, loaded (and archived,
        # see .class_archive) by the application class loader like Spark's own
        key, sep = ("spark.driver.extraClassPath", os.pathsep) if in_driver else ("spark.jars", ",")
        merged = user.pop(key, None)
        archive_fits = in_driver and not merged
        for path in jars.local_jars():
            merged = _append(merged, str(path), sep)
            if in_driver and local_fs_jar.is_jar(path) and local_fs_jar.enabled():
                out[local_fs_jar.SETTING] = local_fs_jar.FILE_SYSTEM  # no chmod process per file
        out[key] = merged or ""
    if "spark.driver.extraJavaOptions" not in user:
        java = driver_java_options(master.startswith("local"))
        archive = class_archive.existing_archive() if archive_fits else None
        if archive is not None:
            java += f" -XX:SharedArchiveFile={archive}"
        out["spark.driver.extraJavaOptions"] = java
    out.update(user)
    out["spark.master"] = master
    return out


_ACTIVE = threading.local()
"""Per Python thread: the JVM session :func:`activate` last made active on its JVM thread."""


def activate(spark: SparkSession) -> None:
    """Make ``spark`` the active session of the calling thread's JVM thread.

    ``getOrCreate`` returns a session made on another thread without making it this thread's active
    one, and the JVM thread py4j pins to a new Python thread has none; JVM calls outside
    ``spark.sql`` (Iceberg's ``Spark3Util``, the commit marks) resolve catalogs through the active
    session and would not see our catalog there (``REQUIRES_SINGLE_PART_NAMESPACE``).

    A thread that already made this session active is not asked again (py4j pins one JVM thread to
    each Python thread; nothing of this product makes another session active there): a call per
    table load and per pool task was five round trips per table and commit.
    """
    from airflow_provider_binlog.lake.spark.java_classes import java_static

    session = spark._jsparkSession
    if getattr(_ACTIVE, "session", None) is session:
        return
    java_static(spark, "org.apache.spark.sql.SparkSession", "setActiveSession")(session)
    _ACTIVE.session = session


def has_active_session() -> bool:
    """Whether this process already runs a SparkSession (so a caller knows whether to stop its own)."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is not None


def create_session(
    app_name: str = DEFAULT_APP_NAME,
    master: str | None = None,
    warehouse: str | None = None,
    catalog: str = "lake",
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """Create (or return the running) SparkSession with Iceberg ready in catalog ``catalog``.

    One JVM holds one SparkContext: when a session is already running, its static settings stay
    and only runtime settings from ``conf`` are applied.

    :param app_name: Spark application name.
    :param master: Spark master URL (``local[*]``, ``spark://host:7077``, ``yarn``, ``k8s://...``).
    :param warehouse: warehouse of the default Hadoop catalog (a path or URI).
    :param catalog: Iceberg catalog name used in table names (``lake.db.table``).
    :param conf: plain Spark configuration, applied last.
    """
    from pyspark.sql import SparkSession

    settings = session_conf(master=master, warehouse=warehouse, catalog=catalog, conf=conf)
    warehouse_dir = settings.get(f"spark.sql.catalog.{catalog}.warehouse", "")
    if warehouse_dir and "://" not in warehouse_dir:
        Path(warehouse_dir).mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    jvm_log.launch({"spark.app.name": app_name, **settings})  # its stderr logged at each line's level
    spark = builder.getOrCreate()
    activate(spark)
    spark.sparkContext.setLogLevel(settings.get("spark.log.level", "WARN"))
    load_catalog(spark, catalog)  # a fresh JDBC catalog's first load races other runs' (see there)
    return spark


def stop_session(spark: SparkSession) -> None:
    """Stop ``spark`` without waiting on PySpark's accumulator server.

    ``SparkContext.stop`` stops the JVM's context (tens of milliseconds), then shuts down the Python
    side's accumulator server, whose ``serve_forever`` looks for the request every 0.5 s: a stop
    waited up to half a second for it (0.41 s of a 4-s run). The server only receives accumulator
    updates from Python workers, which the drain never starts; it is taken out of the context before
    the stop and shut down by a daemon thread, so a later session of this process (its own server)
    never waits on it either.
    """
    _ACTIVE.session = None  # Spark's stop clears this thread's active session
    context: Any = spark.sparkContext
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        context._accumulatorServer = None
    try:
        spark.stop()
    finally:
        if server is not None:
            threading.Thread(target=server.shutdown, name="binlog-cdc-accumulators", daemon=True).start()
