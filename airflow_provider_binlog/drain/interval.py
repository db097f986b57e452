"""A run's stop point and, for an interval run, both of its ends.

A ``stop_at`` that is a timestamp (the operator's ``data_interval_end`` is one) is an interval's
end: :func:`~..canal.positions.interval.interval_stop` fixes it reproducibly (the run stops before the
first transaction committed at or after it, waiting bounded while the server has not reached
it). Other stop points (``head``, ``file:pos``, ``gtid:SET``) are :func:`.source.stop_point`'s.

The interval's ends go to the summary's ``interval``::

    {"until": "2026-11-21T12:00:00+00:00",           # the instant the interval ends
     "start": {"position": "mysql-bin.000003:1234",  # after the last transaction before the start
               "gtid": "0-11-40", "time": "2026-11-21T11:00:00+00:00"},
     "end":   {"position": ..., "gtid": ..., "time": ...},   # after the last transaction applied
     "stop": "mysql-bin.000003:9876", "reason": "...", "waited_seconds": 0.0, "reached": true}

and to every Iceberg commit of the run as snapshot properties (:func:`properties`, names in
:mod:`..lake.commits`). ``start_from`` takes ``interval["end"]`` (or the whole summary) to
continue, ``interval["start"]`` to run the same interval again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.positions.interval import CommitPoint, IntervalStop, interval_stop, iso
from airflow_provider_binlog.drain.source import stop_point


@dataclass(frozen=True)
class StopPlan:
    """Where a run stops; :attr:`interval` for a timestamp stop."""

    stop: BinlogPosition
    interval: IntervalStop | None = None


@dataclass(frozen=True)
class IntervalSettings:
    """How an interval run waits for the server to reach the interval's end (the operator's
    ``stop_wait``, ``stop_poll``, ``on_unreached``; see :func:`~..canal.positions.interval.interval_stop`)."""

    wait: float = 300.0
    poll: float = 5.0
    settle: float = 2.0
    on_unreached: str = "fail"


def stop_epoch(stop_at: Any) -> float | None:
    """The instant of a timestamp ``stop_at`` (an aware ``datetime``, an ISO string with zone, a
    pendulum ``DateTime``); ``None`` for the other stop points."""
    if stop_at is None or stop_at == "head" or isinstance(stop_at, BinlogPosition):
        return None
    if isinstance(stop_at, dt.datetime):
        from airflow_provider_binlog.canal.positions.start import StartSpec

        return StartSpec(timestamp=stop_at).epoch
    if isinstance(stop_at, str):
        from airflow_provider_binlog.canal.positions.points import parse_point

        return parse_point(stop_at).epoch
    return None


def plan_stop(
    client: Any,
    stop_at: Any,
    settings: IntervalSettings | None = None,
    report: Callable[[int, str], None] | None = None,
) -> StopPlan:
    """The run's stop point (see the module docstring)."""
    when = stop_epoch(stop_at)
    if when is None:
        return StopPlan(stop_point(client, stop_at))
    s = settings or IntervalSettings()
    found = interval_stop(
        client, when, wait=s.wait, poll=s.poll, settle=s.settle, on_unreached=s.on_unreached, report=report
    )
    return StopPlan(found.stop, found)


def start_point(client: Any, point: Any) -> CommitPoint:
    """The interval's start for the run's :class:`~..canal.positions.start.StartPoint`: a stored cursor (the
    ack event, already consumed) starts after its transaction; a position at a transaction's start
    is one; a GTID start has its GTID set only."""
    from airflow_provider_binlog.canal.positions.interval import commit_point_at

    if point.position is None:
        return CommitPoint(None, point.gtid)
    return commit_point_at(client, point.position, after_event=point.skip_through is not None)


def interval_ends(start: CommitPoint, found: IntervalStop) -> tuple[CommitPoint, BinlogPosition]:
    """(the interval's end, the reader's stop): the end is after the last transaction before the
    interval's end instant, or the start when that is later (nothing to apply); so is the stop."""
    end = found.end
    stop = found.stop
    if start.position is not None:
        if end is None or end.position is None or end.position < start.position:
            end = start
        if stop < start.position:
            stop = start.position
    return end or start, stop


def summary(
    start: CommitPoint, end: CommitPoint, stop: BinlogPosition, found: IntervalStop
) -> dict[str, Any]:
    """The summary's ``interval`` entry."""
    return {
        "until": iso(found.when),
        "start": start.as_dict(),
        "end": end.as_dict(),
        "stop": str(stop),
        "reason": found.reason,
        "waited_seconds": round(found.waited, 1),
        "reached": found.reached,
    }


def properties(start: CommitPoint, end: CommitPoint, found: IntervalStop) -> dict[str, str]:
    """The snapshot properties every commit of an interval run carries (see :mod:`..lake.commits`)."""
    from airflow_provider_binlog.lake import commits

    props = {commits.PREFIX + "interval-until": iso(found.when)}
    for name, point in (("interval-start", start), ("interval-end", end)):
        for key, value in point.as_dict().items():
            if value is not None:
                suffix = "" if key == "position" else "-" + key
                props[commits.PREFIX + name + suffix] = str(value)
    return props
