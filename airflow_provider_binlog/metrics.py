"""The provider's metrics, sent through Airflow's ``Stats`` (StatsD, Datadog or OpenTelemetry, as the
``[metrics]`` section of the Airflow configuration says; nothing when metrics are off).

``binlog_cdc.retention_headroom_seconds.{destination}`` (gauge, also tagged ``destination``): seconds
until the server may purge the binlog file of the destination's cursor, as the operator's run start
and the sensor's first poke found it (:attr:`~.drain.source.Retention.metric_seconds`; negative:
past the retention; the whole retention while the cursor is in the file the server writes now;
not sent when the server purges nothing by age). Alert well before it reaches 0.

Airflow level (5): the core only returns the number.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_binlog.drain.source import Retention

log = logging.getLogger(__name__)

HEADROOM = "binlog_cdc.retention_headroom_seconds"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def headroom_name(destination: str) -> str:
    """The gauge's name for ``destination`` (characters a stat name cannot hold, ``.`` included, as
    ``_``, so the destination stays one segment)."""
    return f"{HEADROOM}.{_UNSAFE.sub('_', destination)}"


def gauge(name: str, value: float, tags: dict[str, Any]) -> None:
    """Set a gauge through Airflow's ``Stats`` (the one place that calls it; tests may replace it)."""
    try:
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # an Airflow 3 without the task SDK's observability module
        from airflow.stats import Stats  # type: ignore[no-redef,attr-defined,unused-ignore]
    Stats.gauge(name, value, tags=tags)


def emit_headroom(destination: str, retention: Retention | None) -> float | None:
    """Send the retention headroom gauge of ``destination``; return the value sent (``None``:
    nothing known, nothing sent). A metrics back end that fails is logged, never raised."""
    value = retention.metric_seconds if retention is not None else None
    if value is None:
        return None
    try:
        gauge(headroom_name(destination), value, {"destination": destination})
    except Exception as exc:
        log.warning("cannot send %s: %s: %s", HEADROOM, type(exc).__name__, exc)
        return None
    return value
