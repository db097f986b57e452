"""Log lines of the libraries underneath that tell a task log's reader nothing, moved to DEBUG.

A task log is read by people: each line should say something to them. These libraries log their
own plumbing at INFO and WARNING; :func:`install` (idempotent, called where the provider makes a
ZooKeeper client or starts Spark) adds a filter to their loggers that turns those records into
DEBUG records: logged as DEBUG where the logger is set to DEBUG, dropped otherwise.

* ``kazoo.client``: connecting, connected, closing, session closed (INFO; the provider opens and
  closes sessions as it needs them). During an outage kazoo warns at every retry ("Connection
  dropped", "Connection time-out", "Transition to CONNECTING": dozens per outage); the first of
  them stays a WARNING, the repeats go to DEBUG until the client is connected again, and that
  reconnection is one INFO line saying how many were folded. Warnings that need action stay:
  "Failed connecting to Zookeeper within the connection retry policy", "Session has expired",
  AUTH_FAILED.
* ``py4j.clientserver``, ``py4j.java_gateway``: py4j's INFO notes (a connection closed, "Error while
  receiving." with a ``ConnectionResetError`` traceback when the JVM goes away as the task ends) and
  its "Exception occurred while shutting down connection".
* the Spark driver's stderr (:mod:`.lake.jvm_log`, :func:`routine_jvm_record`): records that need
  no action, with their stack traces: Spark's "Truncated the string representation of a plan" and
  Iceberg's "Error reading version hint file" (``FileNotFoundException ... version-hint.text``,
  after a killed run: Iceberg then finds the newest metadata file by listing and goes on).
"""

from __future__ import annotations

import logging
import re
import threading

KAZOO = "kazoo.client"
PY4J = ("py4j.clientserver", "py4j.java_gateway")

_KAZOO_RETRY = ("Connection dropped: ", "Connection time-out: ", "Transition to CONNECTING")
_KAZOO_CONNECTED = "Zookeeper connection established"
_PY4J_SHUTDOWN = "Exception occurred while shutting down connection"
_JVM_ROUTINE = re.compile(
    r" (WARN|INFO) (SparkStringUtils|StringUtils|Utils): Truncated the string representation of a plan"
    r"| (WARN|INFO) HadoopTableOperations: Error reading version hint file"
)


def routine_jvm_record(first_line: str) -> bool:
    """Whether a log4j record of the Spark driver (its first line) needs no action (module docstring)."""
    return _JVM_ROUTINE.search(first_line) is not None


def _demote(record: logging.LogRecord) -> bool:
    """Make ``record`` a DEBUG record; ``False`` (drop it) when its logger does not log DEBUG."""
    if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
        return False
    record.levelno, record.levelname = logging.DEBUG, "DEBUG"
    return True


class KazooNoise(logging.Filter):
    """The filter of ``kazoo.client`` (see the module docstring); one per process, shared by its
    clients (they log to the one logger)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self.outage = False  # a retry warning was let through; the client is not connected again yet
        self.folded = 0  # retry warnings since then, at DEBUG

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        with self._lock:
            if record.levelno == logging.WARNING and message.startswith(_KAZOO_RETRY):
                if not self.outage:
                    self.outage, self.folded = True, 0
                    return True
                self.folded += 1
                return _demote(record)
            if record.levelno == logging.INFO and message.startswith(_KAZOO_CONNECTED) and self.outage:
                folded = f"after {self.folded} more connection warnings, at DEBUG"
                record.msg = f"{record.getMessage()} again ({folded})"
                record.args = ()
                self.outage = False
                return True
        if record.levelno == logging.INFO:
            return _demote(record)
        return True


class Py4jNoise(logging.Filter):
    """The filter of py4j's loggers (see the module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or str(record.msg).startswith(_PY4J_SHUTDOWN):
            return _demote(record)
        return True


_installed: list[bool] = []
_install_lock = threading.Lock()


def install() -> None:
    """Add the filters to the libraries' loggers, once per process."""
    with _install_lock:
        if _installed:
            return
        logging.getLogger(KAZOO).addFilter(KazooNoise())
        for name in PY4J:
            logging.getLogger(name).addFilter(Py4jNoise())
        _installed.append(True)
