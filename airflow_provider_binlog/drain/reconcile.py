"""What the lake holds of the batches an earlier attempt took but never acked.

An attempt that died between a Spark commit and its acks leaves canal marks (batch id -> position
range) in the meta store; :meth:`~..canal.instance.CanalInstance.subscribe` reads them as
``stale_marks`` and rolls the batches back, so this attempt reads them again from the cursor. The
lake's exactly-once marks (per table and destination, the last change each table holds) decide
what happens to them: a table holding a batch skips its changes, the others apply them. This
module only says which (the merger does the skipping); a line per batch goes to the task log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StaleBatch:
    """One batch of an earlier attempt and the targets that already hold it.

    :param batch_id: its id.
    :param start: the binlog position of its first entry (``None`` when unknown).
    :param end: the binlog position of its last entry (``None`` when unknown).
    :param holders: the targets whose newest commit reaches its last entry, sorted.
    """

    batch_id: int
    start: Any
    end: Any
    holders: tuple[str, ...]

    def describe(self) -> str:
        if self.holders:
            return (
                f"batch {self.batch_id} ({self.start}..{self.end}) of an earlier attempt is already "
                f"committed to {', '.join(self.holders)}: its changes are skipped there (changes of any "
                "other table in it are applied again), then it is acked"
            )
        return (
            f"batch {self.batch_id} ({self.start}..{self.end}) of an earlier attempt was not committed: "
            "rolled back, it is applied again from the cursor"
        )


def reconcile(stale_marks: Mapping[int, Any], lake_marks: Mapping[str, Any]) -> list[StaleBatch]:
    """The stale batches in id order, each with the targets that hold it.

    A table holds a batch when its newest commit reaches the batch's last entry: the commit
    completing a chunk records the chunk's end (just past the last event), the others the position
    of the last row event they applied.

    :param stale_marks: batch id -> :class:`~..canal.meta.model.PositionRange` (the earlier
        attempt's canal marks).
    :param lake_marks: target -> its exactly-once mark (``end_position``, ``position``) or ``None``.
    """
    out = []
    for batch_id, rng in sorted(stale_marks.items()):
        end = rng.end.binlog_position if rng.end is not None else None
        start = rng.start.binlog_position if rng.start is not None else None
        holders = tuple(sorted(t for t, m in lake_marks.items() if end and _holds(m, end)))
        out.append(StaleBatch(batch_id, start, end, holders))
    return out


def _holds(mark: Any, end: Any) -> bool:
    if not mark:
        return False
    return bool((mark.end_position and mark.end_position > end) or (mark.position and mark.position >= end))


def chunks_said(loop: Any) -> str:
    """The done line's part on chunks: how many wrote to the lake, and how many the lake held
    already (an earlier attempt's commit, acked by this one)."""
    held = loop.chunks - loop.commits
    said = f"{loop.commits} chunks committed"
    return said + (f", {held} already in the lake (acked now)" if held else "")


def snapshot_ids(
    merger: Any, tables: Sequence[str], destination: str, report: Callable[[int, str], None]
) -> dict[str, str]:
    """Lake table -> its Iceberg snapshot id after the run's last commit to it (the newest snapshot
    that names this destination), each as a string of its digits (a 64-bit id as a JSON number
    loses digits wherever JSON numbers are doubles: the Airflow UI, JavaScript). Read for both
    sources' summaries (``snapshots``); several tables at once (lake/write/runner.py:
    TargetRunner.map). A failure is reported and leaves them out: the run is committed and acked,
    it does not fail for this."""
    if merger is None or not tables:
        return {}
    found: dict[str, str] = {}
    try:
        for marks in merger.runner.map(merger.committed, dict.fromkeys(tables)):
            for name, mark in marks.items():
                if mark is not None and mark.snapshot_id >= 0:
                    found[name] = str(mark.snapshot_id)
    except Exception as exc:
        report(
            logging.WARNING,
            f"destination {destination}: cannot read the snapshot ids of {list(tables)}: "
            f"{type(exc).__name__}: {exc}",
        )
    return found
