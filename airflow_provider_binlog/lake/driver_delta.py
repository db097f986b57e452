"""The JVM side of a merge by the driver, compiled in the driver's JVM when first needed (issue #20).

A merge by the driver (:mod:`.position_delta`) plans a table's files, builds its data file's
metadata from the file's footer, builds a ``DeleteFile`` per deletion vector and commits a row
delta with the checks of Spark's MERGE. Through py4j each builder step and each object it hands
back is a round trip (about 100 CPU-microseconds, half of it in the JVM): those steps cost about 60
round trips per table and commit, most of a small table's merge (``bench/merge_wide.py`` counts
them). ``java/airflow_provider_binlog/iceberg/DriverDelta.java`` does them in the JVM, called a
few times per commit.

**Compiled by Janino**, the compiler Spark itself uses for its generated code and ships on every
driver's class path, from the source kept in this package, once per JVM (a few hundred
milliseconds, on the thread that first merges), with the class loader of Iceberg's table classes
as its parent: a local driver and a cluster's driver alike, whichever way Iceberg's runtime jar
was added, with no build step and no jar to ship. Janino compiles plain Java: the source has no
lambdas, no try-with-resources and casts where Java would infer a generic type.
"""

from __future__ import annotations

import threading
from importlib import resources
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.java_classes import java_class, per_jvm

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CLASS = "airflow_provider_binlog.iceberg.DriverDelta"
SOURCE = "java/airflow_provider_binlog/iceberg/DriverDelta.java"

_COMPILING = threading.Lock()  # merge threads asking at once compile it once


def source() -> str:
    """The helper's Java source, as shipped in this package."""
    return (resources.files(__package__) / SOURCE).read_text(encoding="utf-8")


def helper(spark: SparkSession, table: Any) -> Any:
    """The JVM's ``DriverDelta`` (compiled on the first call in a JVM); ``table`` is a JVM Iceberg
    ``Table``, whose class loader the helper's classes are loaded under."""
    with _COMPILING:
        return per_jvm(spark, CLASS, lambda: _compile(spark, table))


def _compile(spark: SparkSession, table: Any) -> Any:
    compiler = java_class(spark, "org.codehaus.janino.SimpleCompiler")()
    compiler.setParentClassLoader(table.getClass().getClassLoader())
    compiler.cook(source())
    return compiler.getClassLoader().loadClass(CLASS).newInstance()
