"""The session's Iceberg catalog loaded when the session starts, not at its first table.

Spark makes a catalog the first time a name uses it, and Iceberg's catalog initializes then: a JDBC
catalog creates its tables in the database. Two runs starting at once on a fresh JDBC catalog race
there (both see no table, one CREATE loses), and the loser's catalog is not made. Iceberg's name
resolution (``Spark3Util``, behind every table load outside ``spark.sql``) swallows that failure
and reads the catalog's name as a namespace of Spark's own catalog: the run failed with
``REQUIRES_SINGLE_PART_NAMESPACE`` instead of the catalog's error. Loaded here, a failure is
retried a few times (the winner's tables are there by then), and one that lasts is raised as a
:class:`~.errors.LakeError` that names the catalog and its cause. A catalog Spark made once stays
made for the session.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.errors import LakeError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ATTEMPTS = 5
PAUSE = 0.5  # seconds before the second attempt; each pause is this much longer than the last


def load_catalog(
    spark: SparkSession,
    catalog: str,
    attempts: int = ATTEMPTS,
    pause: float = PAUSE,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Make ``catalog`` now (a no-op once made), retrying a failure up to ``attempts`` times.

    :raises LakeError: the catalog cannot be made; the message names it and the JVM's cause (the
        exception's class and first line: a catalog's connection settings are not in it).
    """
    from py4j.protocol import Py4JJavaError

    manager: Any = spark._jsparkSession.sessionState().catalogManager()
    for attempt in range(1, attempts + 1):
        try:
            manager.catalog(catalog)
            return
        except Py4JJavaError as exc:
            if attempt == attempts:
                raise LakeError(
                    f"the Iceberg catalog {catalog!r} cannot be loaded ({attempts} attempts): "
                    f"{_cause(exc)}; check its spark.sql.catalog.{catalog}.* settings and that its "
                    "database or warehouse is reachable"
                ) from None
            sleep(pause * attempt)


def _cause(exc: Any) -> str:
    """The innermost JVM cause of ``exc``: its class and the first line of its message."""
    error = exc.java_exception
    while error.getCause() is not None:
        error = error.getCause()
    message = str(error.getMessage() or "").strip().splitlines()
    return f"{error.getClass().getName()}: {message[0][:300] if message else ''}"
