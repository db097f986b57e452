"""The Spark driver JVM's stderr, logged line by line at the level each line states.

pyspark starts the driver JVM (``spark-submit``) with this process's stderr. Airflow's task runner
(the task SDK's supervisor) reads a task's stderr and logs every line of it as ERROR (``task.stderr``),
so Spark's and log4j's warnings and the JVM's own notes would read as errors in the task log.
:func:`launch` starts the JVM as pyspark does (its ``launch_gateway`` with the session's settings),
only with stderr on a pipe, which a daemon thread reads into the logger ``airflow_provider_binlog.spark``:

* a log4j line (``yy/MM/dd HH:mm:ss LEVEL logger: message``, Spark's layout and the one of
  :mod:`.session`) at its level (``WARN`` as WARNING, ``FATAL`` as CRITICAL);
* its continuation lines (an indented stack trace, ``Caused by:``) at the same level;
* records that need no action (:func:`..quiet.routine_jvm_record`) at DEBUG, their continuations too;
* other lines by what they say: an exception or error without ``warning`` in the line
  (``Exception in thread "main" ...``) as ERROR, the rest as WARNING (``OpenJDK 64-Bit Server VM
  warning: ...``, ``spark-class: ... No such file or directory`` of a JVM that does not start).

The JVM's stdout is left alone (the task runner logs it as INFO). One JVM serves every later session
of the process, so this applies once, to the first; a gateway pyspark was given
(``PYSPARK_GATEWAY_PORT``) is not ours to start.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import IO, Any

from airflow_provider_binlog.lake.spark import jvm_command
from airflow_provider_binlog.quiet import install, routine_jvm_record

log = logging.getLogger("airflow_provider_binlog.spark")

_HEADER = re.compile(rb"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
_LEVELS = {
    b"TRACE": logging.DEBUG,
    b"DEBUG": logging.DEBUG,
    b"INFO": logging.INFO,
    b"WARN": logging.WARNING,
    b"ERROR": logging.ERROR,
    b"FATAL": logging.CRITICAL,
}
_CONTINUED = re.compile(rb"^(\s|Caused by:|Suppressed:|\.\.\. \d+ more)")
_WARNING = re.compile(rb"(?i)\bwarn(ing)?\b")
_ERROR = re.compile(rb"\b(Exception|Error)\b|^\S+(Exception|Error)\b")
_THROWABLE = re.compile(rb"^[\w$.]+(Exception|Error|Throwable)(: |$)")  # a logged record's exception


def records(lines: Iterable[bytes]) -> Iterable[tuple[int, str, bool]]:
    """``(level, text, starts)`` of each line of the JVM's stderr (see the module docstring);
    ``starts``: the line begins a record (a log4j header or a line of its own), else it continues
    the one before (its stack trace: indented lines, ``Caused by:``, and the exception's own line,
    ``java.io.FileNotFoundException: ...``, right after a log4j header)."""
    current, in_record = logging.INFO, False
    for raw in lines:
        line = raw.rstrip(b"\r\n")
        header = _HEADER.match(line)
        starts = True
        if header is not None:
            current, in_record = _LEVELS[header.group(1)], True
        elif line and (_CONTINUED.match(line) or (in_record and _THROWABLE.match(line))):
            starts = False
        else:
            current = logging.ERROR if _ERROR.search(line) and not _WARNING.search(line) else logging.WARNING
            in_record = False
        yield current, line.decode("utf-8", errors="replace"), starts


def levels(lines: Iterable[bytes]) -> Iterable[tuple[int, str]]:
    """``(level, text)`` of each line of the JVM's stderr (see the module docstring)."""
    for level, text, _starts in records(lines):
        yield level, text


_FATAL = re.compile(r"\bjava\.lang\.OutOfMemoryError\b.*")
_fatal: list[str] = []
"""The first ``OutOfMemoryError`` line of the stderr of the JVM :func:`launch` started last."""


def fatal() -> str | None:
    """The first ``java.lang.OutOfMemoryError`` the driver JVM this process started last reported
    on its stderr, if any: Spark stops the JVM on it, so every later call fails without saying why
    (``SparkContext was shut down``, a refused connection)."""
    return _fatal[0] if _fatal else None


def _pump(stream: IO[bytes]) -> None:
    """Log the lines of ``stream`` until it ends (the JVM exited)."""
    routine = False
    with stream:
        for level, text, starts in records(iter(stream.readline, b"")):
            if starts:  # a record that needs no action goes to DEBUG with its stack trace (..quiet)
                routine = routine_jvm_record(text)
            log.log(logging.DEBUG if routine else level, "%s", text)
            if not _fatal and (found := _FATAL.search(text)) is not None:
                _fatal.append(found.group(0))


def _gateway(conf: Any, settings: Mapping[str, str], stderr: int) -> Any:
    """pyspark's gateway to a driver started from its kept command (:mod:`.jvm_command`: spark-submit's
    launcher skipped) when there is one, else, or when that start fails, through ``spark-submit``."""
    from pyspark.java_gateway import launch_gateway

    script = jvm_command.driver_script(settings)
    if script is not None:
        try:
            return launch_gateway(conf, popen_kwargs={"stderr": stderr, "executable": script})
        except Exception as exc:
            jvm_command.forget(script)
            log.warning(
                "the Spark driver did not start from its kept command (%s: %s); starting it through "
                "spark-submit",
                type(exc).__name__,
                exc,
            )
    return launch_gateway(conf, popen_kwargs={"stderr": stderr})


def launch(settings: Mapping[str, str]) -> bool:
    """Start the driver JVM with its stderr logged (see the module docstring), unless pyspark has one
    already; return whether this call started it.

    :param settings: the Spark settings the JVM starts with (``spark-submit --conf``), as
        ``SparkSession.builder`` would pass them (``spark.app.name`` included).
    """
    install()  # py4j's notes at DEBUG (..quiet)
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return False
    from pyspark import SparkConf, SparkContext

    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return False
        conf = SparkConf()
        for key, value in settings.items():
            conf.set(key, value)
        _fatal.clear()  # a new JVM: what stopped an earlier one is not its story
        # read from before the start: why a JVM that does not come up failed is logged too
        read_end, write_end = os.pipe()
        reader = os.fdopen(read_end, "rb")
        threading.Thread(target=_pump, args=(reader,), name="spark-jvm-stderr", daemon=True).start()
        try:
            gateway = _gateway(conf, settings, write_end)
        finally:
            os.close(write_end)  # the JVM holds the only writer: the reader ends when it exits
        SparkContext._ensure_initialized(gateway=gateway)
    return True
