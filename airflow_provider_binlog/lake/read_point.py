"""A named read point across a destination's lake tables: every table at one binlog position.

Iceberg has no multi-table commit, so while a run commits table after table a reader of the
current snapshots sees some tables after the run and others before it. At the end of every run,
after all its commits (and its maintenance), :func:`move_read_point` tags each lake table of the
destination ``D`` at the run's end position ``P`` (``file:pos``), in one metadata commit per table:

=========================================  ===========================================================
``binlog-cdc-read-D``                       :func:`read_tag`: moving, always the newest read point
``binlog-cdc-read-D@<file>:<pos>``          :func:`point_tag`: one per run (immutable); the newest
                                            ``keep`` of them stay (:data:`KEEP_ENV`, default
                                            :data:`DEFAULT_KEEP`), older ones are removed by the same
                                            commit that adds a new one
=========================================  ===========================================================

so ``SELECT ... VERSION AS OF 'binlog-cdc-read-D@mysql-bin.000042:1234'`` on every table reads the
source as it was at that position. The snapshot a table gets:

* a table the run committed to: its snapshot after the run's last commit (the destination's newest
  marked snapshot, or the current one when only maintenance's ``replace`` snapshots came after it:
  the same rows);
* a table the run did not touch: the same rule. It is consistent at ``P`` too: the run read every
  change of the destination from its start to ``P`` and none was routed to it, and everything
  before the start is in the table (the cursor moves only after the lake holds it);
* a table that does not exist yet (no change was ever routed to it): left out (``missing``).

``P`` is exclusive (every event before it is in: the end of the run's last ``COMMIT``, as each
table's last commit records it in ``binlog-cdc.end-position``). A run after which every table is at
the snapshot of the newest read point (no changes, or none routed) tags nothing: that point stays
the newest.

The read point does not move at all (the earlier ones stay, the run's summary says why) when a
table cannot be at ``P``: its mark is at or past ``P`` (a rerun of an earlier range, the tables
hold later changes), its tag diverged (rolled back), or it holds rows but no mark of ``D``.

**Reading it.** The moving tag is moved table after table, a few milliseconds each, so a reader
that reads it on every table in that moment can still meet two read points. :func:`read_point`
(and ``binlog-cdc read-point``) never does: it returns the newest position whose point tag every
table holds (during a move, the one before) and each table's snapshot id; read each table with
``VERSION AS OF <snapshot id>`` or ``VERSION AS OF '<point tag>'``. At an older recorded position
it takes the point tag, else the snapshot summaries (:mod:`.commits`): the newest snapshot of ``D``
whose mark is before the position, where the position is a run's recorded end (an interval run's
``binlog-cdc.interval-end``, a batch's ``binlog-cdc.end-position`` or a point tag of some table).

**Retention and maintenance.** The tags have no max-ref-age (maintenance stops expiring a table
whose ``binlog-cdc-`` ref has one); ``expire_snapshots`` keeps every tagged snapshot, so at most
``keep`` + 1 snapshots per table are held for readers, whatever the table's snapshot policy; the
retention is this module's own, applied at each move.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.snapshot.initial import SNAPSHOT_FILE_NUMBER
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.lake.commits import (
    DESTINATION,
    END_POSITION,
    MAX_DEPTH,
    ORDER_KEY,
    POSITION,
    MarkState,
    java_causes,
    load_iceberg_table,
)
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.sql import parse_name, quote_parts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

READ_TAG_PREFIX = "binlog-cdc-read-"
KEEP_ENV = "BINLOG_CDC_READ_POINTS"
"""Environment variable: how many per-run point tags each table keeps (0: no read point at all)."""
DEFAULT_KEEP = 3
INTERVAL_START = "binlog-cdc.interval-start"
INTERVAL_END = "binlog-cdc.interval-end"
REPLACE_DEPTH = 100  # maintenance snapshots looked through above a mark
ATTEMPTS = 4


def read_tag(destination: str) -> str:
    """The moving tag of ``destination``'s newest read point."""
    return READ_TAG_PREFIX + destination


def point_tag(destination: str, position: BinlogPosition | str) -> str:
    """The tag of ``destination``'s read point at ``position``."""
    return f"{read_tag(destination)}@{position}"


def keep_default() -> int:
    """Point tags kept per table: ``$BINLOG_CDC_READ_POINTS`` or :data:`DEFAULT_KEEP`."""
    text = os.environ.get(KEEP_ENV, "").strip()
    if not text:
        return DEFAULT_KEEP
    if not text.isdigit():
        raise ConfigurationError(f"{KEEP_ENV}={text!r}: a number of read points to keep (0: none)")
    return int(text)


class ReadPointError(LakeError):
    """No read point of a destination (or none at the position asked) can be given."""


@dataclass(frozen=True)
class ReadPoint:
    """Every table of a destination at one binlog position.

    :param destination: whose.
    :param position: the binlog position (``file:pos``) every snapshot holds the source at.
    :param snapshots: lake table (as given) -> its snapshot id at ``position``.
    :param tag: the point tag naming it on every table (``None``: found from snapshot summaries on
        some table, see ``sources``).
    :param sources: table -> ``tag`` or ``summary`` (how its snapshot was found).
    :param missing: tables that do not exist.
    """

    destination: str
    position: BinlogPosition
    snapshots: dict[str, int]
    tag: str | None
    sources: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON form (snapshot ids as strings of their digits: a JSON number loses some)."""
        return {
            "destination": self.destination,
            "position": str(self.position),
            "tag": self.tag,
            "moving_tag": read_tag(self.destination),
            "tables": {t: str(s) for t, s in self.snapshots.items()},
            "sources": self.sources,
            "missing": self.missing,
        }


def _points(table: Any, destination: str) -> tuple[dict[BinlogPosition, int], int | None]:
    """The table's point tags of ``destination`` (position -> snapshot id) and its moving tag's snapshot."""
    prefix = read_tag(destination) + "@"
    points: dict[BinlogPosition, int] = {}
    moving: int | None = None
    refs = table.refs()
    for name in list(refs.keySet()):
        name = str(name)
        ref = refs.get(name)
        if not ref.isTag():
            continue
        if name == read_tag(destination):
            moving = int(ref.snapshotId())
        elif name.startswith(prefix):
            try:
                points[BinlogPosition.parse(name[len(prefix) :])] = int(ref.snapshotId())
            except ConfigurationError:
                continue  # not one of ours after all
    return points, moving


def _map(fn: Callable[[str], Any], items: Iterable[str]) -> list[Any]:
    return [fn(item) for item in items]


def _plan(spark: SparkSession, destination: str, name: str, end: BinlogPosition) -> _Planned | str | None:
    """Where ``name`` is tagged at ``end``, why it cannot be (a string), or ``None``: nothing to tag."""
    table = load_iceberg_table(spark, quote_parts(parse_name(name)))
    if table is None:
        return None
    state = MarkState.read(spark, table, destination)  # refreshes the table
    mark = state.mark
    if state.state == "diverged":
        return f"{name}: its mark tag is no ancestor of its current snapshot (rolled back)"
    if mark is None:
        current = table.currentSnapshot()
        if state.rows:
            return f"{name}: holds rows but no mark of destination {destination!r}"
        if current is None:
            return None  # created, never committed to: nothing to tag
        return _Planned(name, table, int(current.snapshotId()))
    if _ahead(mark, end):
        return f"{name}: holds changes up to {mark.position}, at or past {end}"
    return _Planned(name, table, _chosen_snapshot(table, mark.snapshot_id))


def _ahead(mark: Any, end: BinlogPosition) -> bool:
    """The mark holds changes at or past ``end``: a binlog entry's event starts at or after it, or a
    snapshot's chunk was read after it (a snapshot mark's position is its last chunk's high
    watermark: the rows as of then)."""
    if mark.position is None:
        return False
    if mark.order_key.file_number == SNAPSHOT_FILE_NUMBER:
        return end < mark.position
    return not mark.position < end


def _chosen_snapshot(table: Any, mark_snapshot: int) -> int:
    """The current snapshot when only ``replace`` snapshots (maintenance: the same rows) lie between
    it and the mark's, else the mark's."""
    snap = table.currentSnapshot()
    depth = 0
    while snap is not None and depth < REPLACE_DEPTH:
        if int(snap.snapshotId()) == mark_snapshot:
            current = table.currentSnapshot()
            return int(current.snapshotId())
        if str(snap.operation()) != "replace":
            return mark_snapshot
        parent = snap.parentId()
        snap = table.snapshot(parent) if parent is not None else None
        depth += 1
    return mark_snapshot


@dataclass
class _Planned:
    name: str  # as given
    table: Any
    snapshot: int


def move_read_point(
    spark: SparkSession,
    destination: str,
    tables: Iterable[str],
    end: BinlogPosition,
    keep: int | None = None,
    map_: Callable[[Callable[[str], Any], Iterable[str]], list[Any]] | None = None,
) -> dict[str, Any]:
    """Tag every table of ``destination`` at the run's end ``end`` (see the module docstring);
    return what was done (the run summary's ``read_point``): ``tag``, ``point_tag``, ``position``,
    ``tables`` (table -> snapshot id, a string: the read point the lake is at after the run),
    ``missing``, ``moved``; ``unchanged`` when every table is at the snapshot of the newest read point
    already (nothing tagged: that point stays the newest, ``position`` and ``point_tag`` name it);
    when there is no read point its ``reason`` (``blocked``: a table cannot be at ``end``; ``off``:
    ``keep`` is 0).

    :param end: the run's end, exclusive: every event before it is in (the end position of the last
        batch, which the last commits record as ``binlog-cdc.end-position``; the cursor of a run that
        took none). Nothing is changed unless every existing table can be at ``end``.

    :param tables: the destination's lake tables (dotted or quoted names).
    :param keep: point tags kept per table (``None``: :func:`keep_default`; 0: do nothing).
    :param map_: ``map_(fn, names)``: the tables are read through it (a run passes its merger's
        :meth:`~.runner.TargetRunner.map`: several at once); the tags are moved one table after another.
    """
    keep = keep_default() if keep is None else keep
    started = time.monotonic()
    out: dict[str, Any] = {
        "tag": read_tag(destination),
        "point_tag": point_tag(destination, end),
        "position": str(end),
        "moved": False,
    }
    if keep <= 0:
        out["reason"] = f"read points are off ({KEEP_ENV}=0)"
        out["off"] = True
        return out
    names = list(tables)
    planned: list[_Planned] = []
    missing: list[str] = []
    blocked: list[str] = []
    for name, found in zip(
        names, (map_ or _map)(lambda n: _plan(spark, destination, n, end), names), strict=True
    ):
        if found is None:
            missing.append(name)
        elif isinstance(found, str):
            blocked.append(found)
        else:
            planned.append(found)
    out["missing"] = missing
    if blocked:
        out["reason"] = "; ".join(blocked)
        out["blocked"] = True
        return out
    if not planned:
        out["reason"] = "no lake table exists yet"
        return out
    held = [_points(item.table, destination)[0] for item in planned]
    common = set.intersection(*(set(p) for p in held))
    newest = max(common, key=BinlogPosition.sort_key) if common else None
    if newest is not None and all(p[newest] == item.snapshot for p, item in zip(held, planned, strict=True)):
        # the lake is as at the newest read point (a run that changed no table): it stays the newest
        out.update(position=str(newest), point_tag=point_tag(destination, newest), unchanged=True)
    else:
        for item in planned:
            _tag(item.table, destination, end, item.snapshot, keep)
        out["moved"] = True
    out["tables"] = {item.name: str(item.snapshot) for item in planned}
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


def _tag(table: Any, destination: str, end: BinlogPosition, snapshot: int, keep: int) -> None:
    """One metadata commit: the point tag at ``end`` and the moving tag on ``snapshot``, the point
    tags beyond the newest ``keep`` removed (nothing written when all is so already)."""
    moving_name, point_name = read_tag(destination), point_tag(destination, end)
    attempt = 0
    while True:
        attempt += 1
        points, moving = _points(table, destination)
        manage = table.manageSnapshots()
        changed = False
        if end not in points:
            manage = manage.createTag(point_name, snapshot)
            changed = True
        elif points[end] != snapshot:
            manage = manage.replaceTag(point_name, snapshot)
            changed = True
        if moving is None:
            manage = manage.createTag(moving_name, snapshot)
            changed = True
        elif moving != snapshot:
            manage = manage.replaceTag(moving_name, snapshot)
            changed = True
        newest = sorted({*points, end}, key=BinlogPosition.sort_key, reverse=True)
        for old in newest[keep:]:
            if old in points:
                manage = manage.removeTag(point_tag(destination, old))
                changed = True
        if not changed:
            return
        try:
            manage.commit()
            return
        except Exception as exc:
            if "org.apache.iceberg.exceptions.CommitFailedException" not in java_causes(exc):
                raise
            if attempt >= ATTEMPTS:
                raise
            table.refresh()


def read_point(
    spark: SparkSession,
    destination: str,
    tables: Iterable[str],
    position: BinlogPosition | None = None,
    max_depth: int = MAX_DEPTH,
) -> ReadPoint:
    """Each table's snapshot id at ``destination``'s newest read point, or at ``position`` (see the
    module docstring).

    :param tables: the destination's lake tables (dotted or quoted names).
    :raises ReadPointError: no read point common to the tables, or none at ``position``, naming the
        tables and what each holds.
    """
    loaded: dict[str, Any] = {}
    missing: list[str] = []
    for name in tables:
        table = load_iceberg_table(spark, quote_parts(parse_name(name)))
        if table is None:
            missing.append(name)
        else:
            table.refresh()
            loaded[name] = table
    if not loaded:
        raise ReadPointError(
            f"destination {destination!r}: none of the tables {missing} exists (where the session's "
            "catalog looks); check the catalog settings (--warehouse, --conf) and the table names"
        )
    points = {name: _points(table, destination)[0] for name, table in loaded.items()}
    if position is None:
        common = set.intersection(*(set(p) for p in points.values()))
        if not common:
            held = {
                n: [str(p) for p in sorted(found, key=BinlogPosition.sort_key)] for n, found in points.items()
            }
            raise ReadPointError(
                f"destination {destination!r}: no read point ({point_tag(destination, '<file>:<pos>')}) "
                f"is on every table (point tags per table: {held}); a run of the destination's load "
                "tags them all at its end: run it, then ask again"
            )
        found = max(common, key=BinlogPosition.sort_key)
        return ReadPoint(
            destination, found, {n: points[n][found] for n in loaded}, point_tag(destination, found),
            dict.fromkeys(loaded, "tag"), missing,
        )  # fmt: skip
    if all(position in p for p in points.values()):
        return ReadPoint(
            destination, position, {n: points[n][position] for n in loaded}, point_tag(destination, position),
            dict.fromkeys(loaded, "tag"), missing,
        )  # fmt: skip
    histories = {name: _history(table, destination, max_depth) for name, table in loaded.items()}
    recorded = any(position in p for p in points.values()) or any(
        position in (s.end, s.interval_end) for history in histories.values() for s in history
    )
    if not recorded:
        ends = {p for found in points.values() for p in found}
        ends |= {e for history in histories.values() for s in history for e in (s.end, s.interval_end) if e}
        newest = [str(e) for e in sorted(ends, key=BinlogPosition.sort_key, reverse=True)[:5]]
        raise ReadPointError(
            f"destination {destination!r}: {position} is no recorded end of a run on these tables (no point "
            "tag, no interval or batch end there in the snapshots kept); ask for a position a run ended "
            f"at: its summary's `end`, one of the point tags (SELECT name FROM <table>.refs), or one of "
            f"the newest recorded ends {newest}"
        )
    snapshots: dict[str, int] = {}
    sources: dict[str, str] = {}
    for name in loaded:
        if position in points[name]:
            snapshots[name], sources[name] = points[name][position], "tag"
            continue
        snapshots[name] = _at(name, destination, histories[name], position)
        sources[name] = "summary"
    return ReadPoint(destination, position, snapshots, None, sources, missing)


@dataclass(frozen=True)
class _Summary:
    snapshot: int
    position: BinlogPosition | None  # the mark's (last entry's event)
    end: BinlogPosition | None
    interval_start: BinlogPosition | None
    interval_end: BinlogPosition | None
    snapshot_mark: bool = False  # a table snapshot's (its position: the rows as of then)

    def before(self, position: BinlogPosition) -> bool:
        """Holds nothing at or after ``position``."""
        if self.position is None:
            return False
        return self.position <= position if self.snapshot_mark else self.position < position


def _parsed(summary: Mapping[str, str], key: str) -> BinlogPosition | None:
    text = summary.get(key)
    if not text:
        return None
    try:
        return BinlogPosition.parse(text)
    except ConfigurationError:
        return None


def _history(table: Any, destination: str, max_depth: int) -> list[_Summary]:
    """The destination's marked snapshots in the current ancestry, newest first, then a ``None``
    snapshot id entry (-1) when the walk ended at an expired or missing parent."""
    found: list[_Summary] = []
    snap = table.currentSnapshot()
    depth = 0
    while snap is not None and depth < max_depth:
        summary = snap.summary()
        if summary.get(DESTINATION) == destination and summary.get(ORDER_KEY):
            found.append(
                _Summary(
                    int(snap.snapshotId()),
                    _parsed(summary, POSITION),
                    _parsed(summary, END_POSITION),
                    _parsed(summary, INTERVAL_START),
                    _parsed(summary, INTERVAL_END),
                    str(summary.get(ORDER_KEY)).split(":", 1)[0] == str(SNAPSHOT_FILE_NUMBER),
                )
            )
        parent = snap.parentId()
        snap = table.snapshot(parent) if parent is not None else None
        if parent is not None and snap is None:
            found.append(_Summary(-1, None, None, None, None))  # expired below here
        depth += 1
    return found


def _at(name: str, destination: str, history: list[_Summary], position: BinlogPosition) -> int:
    """The newest snapshot of ``destination`` whose mark is before ``position`` (see the module docstring)."""
    later: _Summary | None = None
    for item in history:
        if item.snapshot < 0:
            break
        if item.before(position):
            if later is not None and later.interval_start is not None and later.interval_start < position:
                raise ReadPointError(
                    f"{name}: the commit of snapshot {later.snapshot} spans {position} (its run started at "
                    f"{later.interval_start}): the table has no snapshot at that position; ask for a "
                    "position a run ended at"
                )
            return item.snapshot
        later = item
    raise ReadPointError(
        f"{name}: no snapshot of destination {destination!r} before {position} is kept (expired by "
        "maintenance, or the table was first loaded after it); the read points kept are its point tags "
        "(SELECT name, snapshot_id FROM <table>.refs)"
    )
