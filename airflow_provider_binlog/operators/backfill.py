"""Planning a backfill: intervals -> one operator run each (``dags/example_binlog_backfill.py``).

Each interval is ``(start, end)``: ``start`` a ``start_from`` (``file:pos``, ``gtid:SET``, an ISO
timestamp, a recorded end) and ``end`` a ``stop_at`` (an ISO timestamp ends the interval
reproducibly, :mod:`..drain.interval`). Consecutive timestamp intervals tile the binlog exactly: a
start at T is the first transaction committed at or after T, the same rule that ends the interval
before it at T.

Every run has its own destination (``backfill-<run id>-<interval>``), so no live cursor moves and
runs do not wait for each other. Targets may name the interval: ``{interval}`` in a target (e.g.
``lake.shop_bf_{interval}.{table}``) gives each interval its own tables, and the runs go in
parallel. Intervals whose targets are the same tables would overwrite each other's keys in
whatever order they finished, so they become one run from the first start to the last end when
they are contiguous (each starts where the one before ends), and are refused otherwise.

No Airflow import here (the DAG calls :func:`plan_backfill` in a task; tests call it directly).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

INTERVAL = "{interval}"


def expand_range(start: str, end: str, every: float) -> list[tuple[str, str]]:
    """``[start, end)`` cut into intervals of ``every`` seconds (the last one ends at ``end``).

    :param start: ISO timestamp with zone.
    :param end: ISO timestamp with zone, after ``start``.
    """
    a, b = _instant(start), _instant(end)
    if a is None or b is None or b <= a or every <= 0:
        raise ValueError(
            f"a range needs two ISO timestamps with zone, from before to, and every > 0: {start!r}, {end!r}"
        )
    out = []
    step = dt.timedelta(seconds=every)
    while a < b:
        nxt = min(a + step, b)
        out.append((a.isoformat(), nxt.isoformat()))
        a = nxt
    return out


def _instant(text: Any) -> dt.datetime | None:
    if isinstance(text, dt.datetime):
        return text if text.tzinfo is not None else None
    try:
        value = dt.datetime.fromisoformat(str(text).strip().removeprefix("ts:").replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo is not None else None


def label(point: Any) -> str:
    """A name part for an interval's start: ``20261121t100000`` for a timestamp, the point's word
    characters otherwise (``mysql_bin_000003_4``)."""
    when = _instant(point)
    if when is not None:
        return when.astimezone(dt.timezone.utc).strftime("%Y%m%dt%H%M%S")
    if isinstance(point, Mapping):
        point = (
            point.get("position")
            or point.get("gtid")
            or point.get("end")
            or json.dumps(point, sort_keys=True)
        )
    return re.sub(r"\W+", "_", str(point)).strip("_").lower()[:48] or "start"


def recorded_point(value: Any) -> Any:
    """A point as a param gives it: a recorded run's summary (or an interval end) typed into a
    string field as JSON (``{"end": "mysql-bin.000003:9120", ...}``) becomes that dict; anything
    else is returned as it is (``parse_point`` reads it).

    :raises ValueError: a string that starts with ``{`` but is no JSON object.
    """
    if not isinstance(value, str) or not value.strip().startswith("{"):
        return value
    try:
        found = json.loads(value)
    except ValueError as exc:
        raise ValueError(
            f"start {value[:80]!r} looks like a recorded run's summary but is no valid JSON ({exc}): "
            "paste the run's XCom return_value as it is, or give its end (file:pos)"
        ) from None
    if not isinstance(found, Mapping):
        raise ValueError(f"start {value[:80]!r}: a recorded run's summary is a JSON object")
    return found


def _same(a: Any, b: Any) -> bool:
    ta, tb = _instant(a), _instant(b)
    if ta is not None and tb is not None:
        return ta == tb
    return bool(a == b)


def _pairs(intervals: Sequence[Any]) -> list[tuple[Any, Any]]:
    pairs = []
    for item in intervals:
        if isinstance(item, Mapping):
            pairs.append(
                (item.get("start") or item.get("start_from"), item.get("end") or item.get("stop_at"))
            )
        elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2:
            pairs.append((item[0], item[1]))
        else:
            raise ValueError(f"an interval is [start, end] or {{'start': ..., 'end': ...}}, not {item!r}")
    for start, end in pairs:
        if start in (None, "") or end in (None, ""):
            raise ValueError(f"interval {start!r} .. {end!r}: both ends are needed")
    return pairs


def plan_backfill(
    run_id: str,
    targets: Mapping[str, str],
    intervals: Sequence[Any] | None = None,
    *,
    start_from: Any = None,
    stop_at: Any = None,
    data_interval: tuple[Any, Any] | None = None,
) -> list[dict[str, Any]]:
    """The operator runs of one backfill DAG run, as ``expand_kwargs`` takes them:
    ``{"destination", "tables", "start_from", "stop_at"}`` each.

    :param run_id: the DAG run's id (part of every destination).
    :param targets: source -> target routes; ``{interval}`` in a target is the interval's label.
    :param intervals: ``[start, end]`` pairs (or dicts), in binlog order.
    :param start_from: with ``stop_at``, one interval (when ``intervals`` is empty); a recorded
        run's summary as a dict or as its JSON text (:func:`recorded_point`).
    :param data_interval: the DAG run's data interval (Airflow's backfill of a date range), used
        when neither is given.
    :raises ValueError: no interval, or intervals sharing targets that are not contiguous.
    """
    start_from = recorded_point(start_from)
    if intervals:
        pairs = [(recorded_point(start), end) for start, end in _pairs(intervals)]
        single = False
    elif start_from not in (None, ""):
        pairs, single = [(start_from, stop_at if stop_at not in (None, "") else "head")], True
    elif data_interval is not None and data_interval[0] is not None and data_interval[0] != data_interval[1]:
        pairs, single = [(data_interval[0], data_interval[1])], False
    else:
        raise ValueError(
            "nothing to backfill: give intervals, start_from (and stop_at), or run for a data interval"
        )
    groups: dict[str, list[tuple[Any, Any, dict[str, str]]]] = {}
    for start, end in pairs:
        name = label(start)
        tables = {s: t.replace(INTERVAL, name) for s, t in targets.items()}
        groups.setdefault(json.dumps(tables, sort_keys=True), []).append((start, end, tables))
    runs = []
    for members in groups.values():
        for before, after in itertools.pairwise(members):
            if not _same(before[1], after[0]):
                raise ValueError(
                    f"intervals {before[0]} .. {before[1]} and {after[0]} .. {after[1]} write the same "
                    f"tables {sorted(after[2].values())} but are not contiguous: give each interval its own "
                    f"targets with {INTERVAL} (e.g. lake.shop_bf_{INTERVAL}.{{table}}), or close the gap"
                )
        start, end, tables = members[0][0], members[-1][1], members[0][2]
        destination = f"backfill-{run_id}" if single else f"backfill-{run_id}-{label(start)}"
        runs.append({"destination": destination, "tables": tables, "start_from": start, "stop_at": end})
    return runs
