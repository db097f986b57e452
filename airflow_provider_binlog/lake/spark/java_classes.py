"""JVM classes and static members reached from Python in one py4j call each, not one per dotted name.

``spark._jvm.org.apache.iceberg.util.JsonUtil`` asks the JVM about each name in turn (is ``org`` a
class? ``org.apache``? ...): five round trips, and for each package a ``ClassNotFoundException``
the JVM builds and throws. On this machine that is 2.2 ms and 1.7 JVM CPU-ms, against 0.2 ms for
a call on a class already resolved (``bench/merge_wide.py`` counts a commit's py4j calls). The
per-table steps of a commit (load the table, make the session active, build the files' metadata)
reached such paths a dozen times per table.

Classes and static members are resolved once per JVM (per py4j client: a new JVM, a new client)
and kept for the process. A static field read here is read once: use it for constants only
(enum values, ``MetadataColumns`` fields).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_CACHE: dict[tuple[int, str, str], tuple[Any, Any]] = {}
_LOCK = threading.Lock()


def _client(spark: SparkSession) -> Any:
    jvm: Any = spark._jvm
    return jvm._gateway_client


def _cached(client: Any, name: str, member: str, make: Any) -> Any:
    key = (id(client), name, member)
    found = _CACHE.get(key)
    if found is None or found[0] is not client:  # the client is kept with it: its id is not reused
        value = make()
        with _LOCK:
            _CACHE[key] = found = (client, value)
    return found[1]


def java_class(spark: SparkSession, name: str) -> Any:
    """The JVM class ``name`` (fully qualified; ``Outer$Inner`` for a nested one) as py4j's
    ``JavaClass``: call it to construct, read a member for a static method or field."""
    from py4j.java_gateway import JavaClass

    client = _client(spark)
    return _cached(client, name, "", lambda: JavaClass(name, client))


def java_static(spark: SparkSession, name: str, member: str) -> Any:
    """The static method ``member`` of class ``name`` (call it: one py4j call), or the value of its
    static field ``member`` as first read (a constant)."""
    client = _client(spark)
    return _cached(client, name, member, lambda: getattr(java_class(spark, name), member))


def java_private_static(spark: SparkSession, name: str, field: str) -> Any:
    """The value of the non-public static field ``field`` of class ``name`` (loaded by the calling
    thread's context class loader, where Spark's added jars are), read by reflection once per JVM:
    a constant, or a holder such as a ``ThreadLocal`` (six calls to the JVM the first time)."""

    def read() -> Any:
        loader = java_static(spark, "java.lang.Thread", "currentThread")().getContextClassLoader()
        cls = java_static(spark, "java.lang.Class", "forName")(name, True, loader)
        member = cls.getDeclaredField(field)
        member.setAccessible(True)
        return member.get(None)

    return _cached(_client(spark), name, "\0" + field, read)


def per_jvm(spark: SparkSession, name: str, make: Callable[[], Any]) -> Any:
    """What ``make()`` returned the first time it was asked for ``name`` in this JVM (a JVM object
    built once, such as a compiled helper)."""
    return _cached(_client(spark), name, "\0made", make)
