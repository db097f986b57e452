"""The levels of the driver JVM's stderr lines (:func:`airflow_provider_binlog.lake.jvm_log.levels`)."""

from __future__ import annotations

import logging

from airflow_provider_binlog.lake.jvm_log import levels

W, E, I = logging.WARNING, logging.ERROR, logging.INFO  # noqa: E741

STDERR = [
    (b"26/11/24 23:52:44 WARN NativeCodeLoader: Unable to load native-hadoop library\n", W),
    (b"26/11/24 23:52:45 INFO SparkContext: Running Spark version 3.5.9\n", I),
    (b"26/11/24 23:52:46 DEBUG Client: x\n", logging.DEBUG),
    (b"26/11/24 23:52:47 ERROR Executor: Exception in task 0.0\n", E),
    (b"java.lang.IllegalStateException: boom\n", E),  # the trace of the ERROR line
    (b"\tat org.apache.spark.Foo.bar(Foo.scala:1)\n", E),
    (b"Caused by: java.io.IOException: gone\n", E),
    (b"\t... 12 more\n", E),
    (b"26/11/24 23:52:48 WARN TaskSetManager: Lost task\n", W),
    (b"\tat org.apache.spark.Foo.bar(Foo.scala:1)\n", W),  # a warning's trace stays a warning
    (b"OpenJDK 64-Bit Server VM warning: Sharing is only supported for boot loader classes\n", W),
    (b"WARNING: Using incubator modules: jdk.incubator.vector\n", W),
    (b"Picked up JAVA_TOOL_OPTIONS: -Xlog:disable\n", W),
    (b"spark-class: line 71: /nonexistent/bin/java: No such file or directory\n", W),
    (b'Exception in thread "main" java.lang.NoClassDefFoundError: x\n', E),
    (b"26/11/24 23:52:49 FATAL Main: down\n", logging.CRITICAL),
    (b"caf\xc3\xa9 \xff\n", W),
]


def test_each_line_gets_its_level() -> None:
    got = list(levels(line for line, _ in STDERR))
    assert [level for level, _ in got] == [level for _, level in STDERR]
    assert got[0][1] == "26/11/24 23:52:44 WARN NativeCodeLoader: Unable to load native-hadoop library"
    assert got[-1][1] == "café \ufffd"
