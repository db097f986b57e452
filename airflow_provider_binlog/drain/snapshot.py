"""A run's snapshot step (``snapshot="initial"`` or ``"when_needed"``): which tables need one, then
:class:`~..canal.snapshot.initial.Snapshot` into the lake.

``when_needed`` snapshots the tables never snapshotted nor loaded, and those snapshotted once whose
lake table no longer exists (dropped by hand: a stop's remedy); the cursor stays where it is, so
the binlog after it is applied over the new snapshot (exact with full row images, see
:mod:`~..canal.snapshot.initial`). A snapshotted table that was empty has no lake table until its first
change, so such a table is read again (one empty chunk) by each ``when_needed`` run until then.

Runs under the destination's running node (every progress write checks it) and before the stop
point is fixed, so the binlog drain that follows reaches past the snapshot's start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_binlog.drain.context import DestinationContext
    from airflow_provider_binlog.lake.write.merge import TargetOptions

SNAPSHOT_MODES = ("never", "initial", "when_needed")

Report = Callable[[int, str], None]


def key_columns(options: TargetOptions | Mapping[str, TargetOptions] | None, target: str) -> tuple[str, ...]:
    """The key columns ``options`` name for ``target`` (``()``: the table's primary key)."""
    from airflow_provider_binlog.lake.sql import parse_name
    from airflow_provider_binlog.lake.write.merge import TargetOptions

    if isinstance(options, TargetOptions):
        return options.key_columns
    for name, value in (options or {}).items():
        if parse_name(name) == parse_name(target):
            return value.key_columns
    return ()


def target_options_for(
    options: TargetOptions | Mapping[str, TargetOptions] | None, target: str
) -> TargetOptions | None:
    """The options ``options`` give ``target`` (``None``: the defaults)."""
    from airflow_provider_binlog.lake.sql import parse_name
    from airflow_provider_binlog.lake.write.merge import TargetOptions

    if options is None or isinstance(options, TargetOptions):
        return options
    for name, value in options.items():
        if parse_name(name) == parse_name(target):
            return value
    return None


def initial_snapshot(
    context: DestinationContext,
    known: Mapping[str, str],
    *,
    mode: str,
    chunk_size: int,
    target_options: TargetOptions | Mapping[str, TargetOptions] | None,
    spark: Callable[[], Any],
    report: Report,
) -> Any:
    """Snapshot (or resume the snapshot of) the tables that need one; return the SparkSession it
    opened, or ``None`` when nothing needed a snapshot.

    :param context: the destination's context (:mod:`.context`), its running node held.
    :param known: source -> target of every existing table the routes match.
    :param mode: ``initial`` or ``when_needed`` (see the operator's ``snapshot``).
    :param chunk_size: rows per snapshot chunk.
    :param target_options: the run's target options (key columns of tables without a primary key).
        The instance's column rules (``columns=``, ``exclude_columns=``) select what is read and loaded.
    :param spark: starts the SparkSession.
    :param report: ``report(level, line)`` for the task log.
    """
    from airflow_provider_binlog.canal.errors import StartPositionError
    from airflow_provider_binlog.canal.positions.start import check_available
    from airflow_provider_binlog.canal.snapshot.initial import RUN_KEY, Snapshot, column_projection, table_key
    from airflow_provider_binlog.lake import commits
    from airflow_provider_binlog.lake.snapshot import LakeChunkLoader
    from airflow_provider_binlog.lake.sql import parse_name, quote_parts

    destination, connect = context.destination, context.connect
    meta, ident, client = context.meta, context.identity, context.client
    meta.subscribe(ident)
    cursor = meta.get_cursor(ident).value
    if cursor is not None and cursor.binlog_position is not None and mode == "when_needed":
        try:
            check_available(client, cursor.binlog_position, "stored cursor")
        except StartPositionError as exc:
            report(logging.WARNING, f"destination {destination}: {exc}; taking a new snapshot of every table")
            for name in meta.list_keys(ident, "snapshot"):
                meta.delete_value(ident, f"snapshot/{name}")
            meta.delete_cursor(ident)
            cursor = None
    record = meta.get_json(ident, RUN_KEY).value
    session = None
    if record is not None and record.get("status") == "running":
        todo = {s: t for s, t in known.items() if s in record.get("tables", [])}  # resume
    elif cursor is None and record is None:
        todo = dict(known)
    elif mode == "when_needed" or record is None:
        # tables never snapshotted and never loaded; with "when_needed" also those whose lake table is
        # gone. With "initial", a cursor without a snapshot record says nothing about the lake: a
        # sensor pins the head as the cursor before any load, so only the lake's marks tell what was loaded
        session = spark()
        todo = {}
        for s, t in known.items():
            name = quote_parts(parse_name(t))
            if meta.get_json(ident, table_key(s)).value is None:
                if commits.read_mark(session, name, destination) is None:
                    todo[s] = t
            elif mode == "when_needed" and commits.load_iceberg_table(session, name) is None:
                # snapshotted once, and its lake table is gone (dropped by hand, as a stop's remedy
                # says): the binlog after the cursor no longer holds its rows, a new snapshot does
                report(logging.WARNING, f"destination {destination}: lake table {t} of {s} does not exist: "
                       "taking a new snapshot of it")  # fmt: skip
                meta.delete_value(ident, table_key(s))
                todo[s] = t
        if todo and mode == "initial":
            report(
                logging.INFO,
                f"destination {destination}: the cursor {cursor} was not left by a snapshot or a load of "
                f"{', '.join(sorted(todo))} (a sensor pins the start before the first load): snapshotting "
                "them; the binlog continues from the cursor",
            )
    else:
        todo = {}
    if not todo:
        return session
    session = session or spark()
    loader = LakeChunkLoader(session, destination, todo, target_options)
    try:
        result = Snapshot(
            meta, ident, client, connect,
            {s: key_columns(target_options, t) for s, t in todo.items()}, loader, chunk_size,
            set_cursor="if_absent", guard=context.guard,
            project=column_projection(context.filter),
        ).run()  # fmt: skip
    finally:
        loader.close()
    report(logging.INFO, f"destination {destination}: snapshot done: {result.as_dict()}")
    return session


def snapshot_start_marks(
    meta: Any, ident: Any, known: Mapping[str, str], mark_of: Callable[[str], Any]
) -> dict[str, Any]:
    """The marks at ``S`` of the targets a snapshot loaded from ``S`` and nothing has committed to since.

    A table snapshotted while the cursor stays earlier (``when_needed``: a table never loaded, or
    its lake table dropped) holds every change before its snapshot's start ``S``; the replay from
    the cursor must not apply them again: row changes would be re-applied (convergent, but under a
    schema the table may no longer have) and DDL actions (a CREATE's restart, a TRUNCATE, a column
    change) would act on rows that already hold their effect. So such a target's mark, while it is
    still a snapshot chunk's (``(0, chunk, -1, row)``, no binlog commit after it), is taken to be
    the mark at ``S`` (:func:`~..canal.snapshot.resnapshot.mark_key`, as a re-snapshot leaves it), the
    earliest ``S`` of its sources; a target with a source that has no snapshot start is left as it is.

    :param known: source -> target of the routed existing tables.
    :param mark_of: the target's committed mark (as the merger loaded it).
    :return: target -> the mark to use.
    """
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.snapshot.initial import RUN_KEY, SNAPSHOT_FILE_NUMBER, table_key
    from airflow_provider_binlog.lake.resnapshot import resnapshot_mark

    by_target: dict[str, list[str]] = {}
    for source, target in known.items():
        by_target.setdefault(target, []).append(source)
    waiting = {}  # only targets whose mark is still a snapshot chunk's read the meta store
    for target, sources in by_target.items():
        mark = mark_of(target)
        if mark is not None and mark.order_key.file_number == SNAPSHOT_FILE_NUMBER:
            waiting[target] = sources
    if not waiting:
        return {}
    recorded = set(meta.list_keys(ident, "snapshot"))
    run = meta.get_json(ident, RUN_KEY).value or {}
    out: dict[str, Any] = {}
    for target, sources in waiting.items():
        found: list[BinlogPosition] = []
        for source in sources:
            text = None
            if table_key(source).partition("/")[2] in recorded:
                record = meta.get_json(ident, table_key(source)).value or {}
                if record.get("status") == "done":  # records written before "start": the run's
                    listed = source in run.get("tables", ())
                    text = record.get("start") or (run.get("start") if listed else None)
            if not text:
                break
            found.append(BinlogPosition.parse(text))
        else:
            out[target] = resnapshot_mark(min(found))
    return out
