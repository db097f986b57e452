"""The provider's metrics, sent through Airflow's ``Stats`` (StatsD, Datadog or OpenTelemetry, as the
``[metrics]`` section of the Airflow configuration says; nothing when metrics are off).

==================================================  =========  =============================================
``binlog_cdc.changes_read.{destination}.{table}``   counter    changes (row changes and statements) the run
                                                               read for the lake table, those it held already
                                                               included
``binlog_cdc.changes_merged.{destination}.{table}`` counter    row changes the run's commits applied to it:
                                                               ``inserted + updated + deleted + appended`` of
                                                               the summary's ``tables`` (as lineage's
                                                               ``rowCount``)
``binlog_cdc.commit_duration.{destination}.{table}`` timer     each Iceberg commit to the table (ms), conflict
                                                               retries included
``binlog_cdc.lag_start_seconds.{destination}``      gauge      age of the oldest transaction the run had to
                                                               read when it started (0: none)
``binlog_cdc.lag_end_seconds.{destination}``        gauge      the same after the run's last ack (what came
                                                               after its stop point)
``binlog_cdc.retention_headroom_seconds.{destination}``  gauge  seconds until the server may purge the binlog
                                                               file of the destination's cursor
``binlog_cdc.maintenance_duration.{table}``        timer      a maintenance run of the table that ran an
                                                               action (ms), its metadata read included
``binlog_cdc.maintenance_rewritten_files.{table}`` counter    data, delete and manifest files its
                                                               rewrites replaced
``binlog_cdc.maintenance_expired_snapshots.{table}`` counter  snapshots its expiry removed
==================================================  =========  =============================================

Counters are sent at the end of a run (also a failed one: what its returned commits applied), the
rest as measured (:mod:`..drain.observe`). Every metric is tagged ``destination`` (and ``table``: the
lake table's dotted name). In a name, each part is one segment: characters a StatsD name cannot hold,
``.`` included, become ``_``, and a part is cut to 60 characters (then ends with a hash of the whole
part), so ``lake.shop.orders`` is ``lake_shop_orders``. With OpenTelemetry (``[metrics] otel_on``,
whose names are short and constant) the names are the ones before ``{destination}``, the parts only
tags.

The headroom: seconds until the server may purge the binlog file of the cursor, as the operator's
run start and the sensor's first poke found it (:attr:`~..drain.source.Retention.metric_seconds`;
negative: past the retention; the whole retention while the cursor is in the file the server writes
now; not sent when the server purges nothing by age). Alert well before it reaches 0.

Airflow level (5): the core only returns the numbers or tells an observer (:class:`RunMetrics`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_binlog.drain.source import Retention

log = logging.getLogger(__name__)

HEADROOM = "binlog_cdc.retention_headroom_seconds"
CHANGES_READ = "binlog_cdc.changes_read"
CHANGES_MERGED = "binlog_cdc.changes_merged"
COMMIT_DURATION = "binlog_cdc.commit_duration"
MAINTENANCE_DURATION = "binlog_cdc.maintenance_duration"
MAINTENANCE_REWRITTEN = "binlog_cdc.maintenance_rewritten_files"
MAINTENANCE_EXPIRED = "binlog_cdc.maintenance_expired_snapshots"
LAG = {"start": "binlog_cdc.lag_start_seconds", "end": "binlog_cdc.lag_end_seconds"}
MERGED_COUNTS = ("inserted", "updated", "deleted", "appended")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_PART_MAX = 60


def name_part(value: str) -> str:
    """One segment of a stat name: characters a StatsD name cannot hold (``.`` included) as ``_``;
    longer than 60 characters: cut, with 8 hex digits of the whole value's hash at its end."""
    safe = _UNSAFE.sub("_", value) or "_"
    if len(safe) <= _PART_MAX:
        return safe
    digest = hashlib.sha1(value.encode()).hexdigest()[:8]
    return f"{safe[: _PART_MAX - 9]}_{digest}"


def stat_name(base: str, *parts: str) -> str:
    """``base`` with ``parts`` as segments (:func:`name_part`); ``base`` alone under OpenTelemetry."""
    if _otel():
        return base
    return ".".join([base, *(name_part(p) for p in parts)])


def headroom_name(destination: str) -> str:
    """The headroom gauge's name for ``destination`` (see :func:`stat_name`)."""
    return stat_name(HEADROOM, destination)


def _otel() -> bool:
    """Whether Airflow sends metrics to OpenTelemetry (``[metrics] otel_on``)."""
    try:
        from airflow.configuration import conf

        return conf.getboolean("metrics", "otel_on", fallback=False)
    except Exception:  # no readable configuration: the names with their parts
        return False


def _stats() -> Any:
    try:
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # an Airflow 3 without the task SDK's observability module
        from airflow.stats import Stats  # type: ignore[no-redef,attr-defined,unused-ignore]
    return Stats


def gauge(name: str, value: float, tags: dict[str, Any]) -> None:
    """Set a gauge through Airflow's ``Stats`` (tests may replace it)."""
    _stats().gauge(name, value, tags=tags)


def incr(name: str, count: int, tags: dict[str, Any]) -> None:
    """Add to a counter through Airflow's ``Stats``."""
    _stats().incr(name, count, tags=tags)


def timing(name: str, milliseconds: float, tags: dict[str, Any]) -> None:
    """Send a timing (ms) through Airflow's ``Stats``."""
    _stats().timing(name, milliseconds, tags=tags)


def _guarded(what: str, send: Any, *args: Any) -> bool:
    """Call ``send(*args)``; a metrics back end that fails is logged, never raised."""
    try:
        send(*args)
    except Exception as exc:
        log.warning("cannot send %s: %s: %s", what, type(exc).__name__, exc)
        return False
    return True


class RunMetrics:
    """A run's observer (:class:`~..drain.observe.RunObserver`) that sends the metrics above.

    :param destination: the run's destination (a name part and the ``destination`` tag).
    """

    def __init__(self, destination: str) -> None:
        self.destination = destination

    def _tags(self, table: str | None = None) -> dict[str, Any]:
        return {"destination": self.destination} if table is None else {
            "destination": self.destination, "table": table}  # fmt: skip

    def lag(self, when: str, seconds: float) -> None:
        name = stat_name(LAG[when], self.destination)
        _guarded(name, gauge, name, round(seconds, 3), self._tags())

    def commit(self, table: str, seconds: float) -> None:
        name = stat_name(COMMIT_DURATION, self.destination, table)
        _guarded(name, timing, name, seconds * 1000.0, self._tags(table))

    def tables(self, read: Mapping[str, int], merged: Mapping[str, Mapping[str, int]]) -> None:
        for table, n in read.items():
            name = stat_name(CHANGES_READ, self.destination, table)
            _guarded(name, incr, name, int(n), self._tags(table))
        for table, counts in merged.items():
            name = stat_name(CHANGES_MERGED, self.destination, table)
            total = sum(int(counts.get(k, 0)) for k in MERGED_COUNTS)
            _guarded(name, incr, name, total, self._tags(table))


def emit_headroom(destination: str, retention: Retention | None) -> float | None:
    """Send the retention headroom gauge of ``destination``; return the value sent (``None``:
    nothing known, nothing sent). A metrics back end that fails is logged, never raised."""
    value = retention.metric_seconds if retention is not None else None
    if value is None:
        return None
    if not _guarded(HEADROOM, gauge, headroom_name(destination), value, {"destination": destination}):
        return None
    return value


def emit_maintenance(summary: Mapping[str, Any]) -> None:
    """Send the maintenance metrics of a :func:`~..lake.maintenance.maintain` summary (tagged
    ``table``) for the tables where an action ran (a healthy table's metadata read sends nothing);
    a metrics back end that fails is logged, never raised."""
    for table, done in (summary.get("tables") or {}).items():
        if not done.get("ran"):
            continue
        tags = {"table": table}
        name = stat_name(MAINTENANCE_DURATION, table)
        _guarded(name, timing, name, float(done.get("seconds") or 0) * 1000.0, tags)
        rewritten = sum(
            int((done.get(action) or {}).get(key) or 0)
            for action, key in (
                ("rewrite_data_files", "rewritten_data_files"),
                ("rewrite_data_files", "removed_delete_files"),
                ("rewrite_position_delete_files", "rewritten_delete_files"),
                ("rewrite_manifests", "rewritten_manifests"),
            )
        )
        name = stat_name(MAINTENANCE_REWRITTEN, table)
        _guarded(name, incr, name, rewritten, tags)
        expired = int((done.get("expire_snapshots") or {}).get("snapshots_expired") or 0)
        name = stat_name(MAINTENANCE_EXPIRED, table)
        _guarded(name, incr, name, expired, tags)
