"""The levels of the driver JVM's stderr lines (:func:`airflow_provider_binlog.lake.spark.jvm_log.levels`)."""

from __future__ import annotations

import io
import logging

import pytest

from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.errors import LakeStatementError
from airflow_provider_binlog.lake.spark import jvm_log
from airflow_provider_binlog.lake.spark.jvm_log import levels

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


OOM = b"java.lang.OutOfMemoryError: Cannot reserve 4194304 bytes of direct buffer memory (allocated: 9)\n"


def test_the_first_error_that_stops_the_jvm_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jvm_log, "_fatal", [])
    jvm_log._pump(io.BytesIO(b"".join(line for line, _ in STDERR)))
    assert jvm_log.fatal() is None  # errors a task recovers from are not kept
    lines = [
        b"26/11/28 22:41:47 ERROR Executor: Exception in task 4.0 in stage 208.0 (TID 685)\n",
        OOM,
        b"\tat java.base/java.nio.Bits.reserveMemory(Bits.java:178)\n",
        b"26/11/28 22:41:47 ERROR SparkUncaughtExceptionHandler: Uncaught exception in thread x\n",
        b"java.lang.OutOfMemoryError: Java heap space\n",
    ]
    jvm_log._pump(io.BytesIO(b"".join(lines)))
    assert jvm_log.fatal() == OOM.decode().strip()


def test_a_commit_failing_after_the_jvm_stopped_names_why(monkeypatch: pytest.MonkeyPatch) -> None:
    def statement() -> None:
        raise RuntimeError("Job 53 cancelled because SparkContext was shut down")

    monkeypatch.setattr(jvm_log, "_fatal", [])
    with pytest.raises(LakeStatementError) as plain:
        commits.commit(None, "`lake`.`db`.`t`", {}, statement, "f.000001:4 to f.000001:9", attach=False)  # type: ignore[arg-type]
    assert str(plain.value).endswith("the cursor stays before these changes")
    monkeypatch.setattr(jvm_log, "_fatal", [OOM.decode().strip()])
    with pytest.raises(LakeStatementError) as named:
        commits.commit(None, "`lake`.`db`.`t`", {}, statement, "f.000001:4 to f.000001:9", attach=False)  # type: ignore[arg-type]
    message = str(named.value)
    assert message.startswith("commit to `lake`.`db`.`t` (changes f.000001:4 to f.000001:9) failed in Spark")
    assert "stopped on java.lang.OutOfMemoryError: Cannot reserve 4194304 bytes of direct buffer" in message
    assert "-XX:MaxDirectMemorySize" in message and "run the task again" in message


ROUTINE = [  # records a task recovers from or that need nothing of the user: DEBUG, stack trace too
    b"26/12/01 21:10:03 WARN SparkStringUtils: Truncated the string representation of a plan since it "
    b"was too large. This behavior can be adjusted by setting 'spark.sql.debug.maxToStringFields'.\n",
    b"26/12/01 21:10:04 WARN HadoopTableOperations: Error reading version hint file "
    b"/wh/shop/orders/metadata/version-hint.text\n",
    b"java.io.FileNotFoundException: File /wh/shop/orders/metadata/version-hint.text does not exist\n",
    b"\tat org.apache.hadoop.fs.RawLocalFileSystem.deprecatedGetFileStatus(RawLocalFileSystem.java:779)\n",
    b"\tat org.apache.iceberg.hadoop.HadoopTableOperations.findVersion(HadoopTableOperations.java:318)\n",
]
NEEDS_ACTION = b"26/12/01 21:10:05 WARN NativeCodeLoader: Unable to load native-hadoop library\n"


def test_routine_jvm_records_go_to_debug_with_their_stack_trace(caplog: pytest.LogCaptureFixture) -> None:
    """After a killed run Iceberg warns that version-hint.text is missing (with the exception on a line
    of its own and a stack trace), then lists the metadata and goes on: no line of it is a warning or
    an error in the task log, and the exception's line belongs to its WARN record (not an ERROR line
    of its own); Spark's plan-truncation note too. A warning that needs action stays."""
    got = list(levels(ROUTINE[1:3]))
    assert [level for level, _ in got] == [W, W]  # the exception line continues the WARN record
    caplog.set_level(logging.INFO, logger="airflow_provider_binlog.spark")
    jvm_log._pump(io.BytesIO(b"".join([*ROUTINE, NEEDS_ACTION])))
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "airflow_provider_binlog.spark"]
    assert said == [(W, NEEDS_ACTION.decode().strip())], said
    caplog.clear()
    caplog.set_level(logging.DEBUG, logger="airflow_provider_binlog.spark")
    jvm_log._pump(io.BytesIO(b"".join(ROUTINE)))  # still there at DEBUG
    debug = [r for r in caplog.records if r.name == "airflow_provider_binlog.spark"]
    assert [r.levelno for r in debug] == [logging.DEBUG] * len(ROUTINE)
    assert "version-hint.text does not exist" in debug[2].getMessage()
