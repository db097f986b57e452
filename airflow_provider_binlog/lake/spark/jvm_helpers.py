"""Small Java helpers compiled in the driver's JVM when first needed (issue #20).

Through py4j each call and each object a call hands back (dropped later) is a round trip to the
JVM: about 100 CPU-microseconds, half of them the JVM's. Steps that are a chain of calls into
Iceberg per table are cheaper as one call to a helper that makes the chain in the JVM:

* ``DriverDelta`` (:func:`driver_delta`): a merge by the driver (:mod:`.position_delta`) plans a
  table's files, builds its data file's metadata from the file's footer, a ``DeleteFile`` per
  deletion vector and a row delta with the checks of Spark's MERGE, and reads a table's facts
  (:mod:`.table_facts`): about 85 round trips per table and commit before, now five
  (``bench/merge_wide.py`` counts them);
* ``MarkReader`` (:func:`mark_reader`): the newest snapshot a destination committed to a table
  (:func:`.commits.mark_of`), read per table at a run's start: about ten round trips per table
  (more when other writers committed since), now one; and the moves of the destination's mark tag
  (:func:`.commits.move_tag`, :func:`.commits.commit_tagged`), one each.

The sources are kept in this package (``java/airflow_provider_binlog/iceberg/``). **Compiled by
Janino**, the compiler Spark itself uses for its generated code and ships on every driver's class
path, once per JVM (tens of milliseconds, on the thread that first asks), with the class loader of
Iceberg's table classes as its parent: a local driver and a cluster's driver alike, whichever way
Iceberg's runtime jar was added, with no build step and no jar to ship. Janino compiles plain
Java: the sources have no lambdas, no try-with-resources, no static interface methods, and cast
where Java would infer a generic type.
"""

from __future__ import annotations

import threading
from importlib import resources
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.spark.java_classes import java_class, per_jvm

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PACKAGE = "airflow_provider_binlog.iceberg"
SOURCES = "java/airflow_provider_binlog/iceberg"

_COMPILING = threading.Lock()  # threads asking at once compile a helper once


def source(name: str) -> str:
    """The Java source of helper class ``name``, as shipped in this package."""
    return (resources.files(__package__) / SOURCES / f"{name}.java").read_text(encoding="utf-8")


def helper(spark: SparkSession, table: Any, name: str) -> Any:
    """An instance of helper class ``name`` in the JVM (compiled on the first call in a JVM);
    ``table`` is a JVM Iceberg ``Table``, whose class loader the helper's classes are loaded
    under.

    Kept for the JVM, across its sessions: a JVM loads Iceberg's jar once, when it starts (the
    driver's class path, or ``spark.jars`` set up by the launcher), and py4j finds a method by its
    class's name, so a second class of the same name would be given the first one's methods
    (``object is not an instance of declaring class``)."""
    with _COMPILING:
        return per_jvm(spark, f"{PACKAGE}.{name}", lambda: _compile(spark, table, name))


def driver_delta(spark: SparkSession, table: Any) -> Any:
    """The JVM's ``DriverDelta``: the JVM side of a merge by the driver (see the module docstring)."""
    return helper(spark, table, "DriverDelta")


def mark_reader(spark: SparkSession, table: Any) -> Any:
    """The JVM's ``MarkReader``: a destination's newest mark in a table and its tag (see the module
    docstring)."""
    return helper(spark, table, "MarkReader")


def _compile(spark: SparkSession, table: Any, name: str) -> Any:
    compiler = java_class(spark, "org.codehaus.janino.SimpleCompiler")()
    compiler.setParentClassLoader(table.getClass().getClassLoader())
    compiler.cook(source(name))
    return compiler.getClassLoader().loadClass(f"{PACKAGE}.{name}").newInstance()
