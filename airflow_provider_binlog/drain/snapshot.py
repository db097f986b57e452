"""A run's snapshot step (``snapshot="initial"`` or ``"when_needed"``): which tables need one, then
:class:`~..canal.snapshot.Snapshot` into the lake.

Runs under the destination's running node (every progress write checks it) and before the stop
point is fixed, so the binlog drain that follows reaches past the snapshot's start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_binlog.canal.instance import CanalInstance
    from airflow_provider_binlog.lake.merge import TargetOptions

SNAPSHOT_MODES = ("never", "initial", "when_needed")

Report = Callable[[int, str], None]


def key_columns(options: TargetOptions | Mapping[str, TargetOptions] | None, target: str) -> tuple[str, ...]:
    """The key columns ``options`` name for ``target`` (``()``: the table's primary key)."""
    from airflow_provider_binlog.lake.merge import TargetOptions
    from airflow_provider_binlog.lake.sql import parse_name

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
    from airflow_provider_binlog.lake.merge import TargetOptions
    from airflow_provider_binlog.lake.sql import parse_name

    if options is None or isinstance(options, TargetOptions):
        return options
    for name, value in options.items():
        if parse_name(name) == parse_name(target):
            return value
    return None


def initial_snapshot(
    instance: CanalInstance,
    connect: Callable[[], Any],
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

    :param instance: the destination's instance, its running node held.
    :param connect: opens a plain connection to the source.
    :param known: source -> target of every existing table the routes match.
    :param mode: ``initial`` or ``when_needed`` (see the operator's ``snapshot``).
    :param chunk_size: rows per snapshot chunk.
    :param target_options: the run's target options (key columns of tables without a primary key).
        The instance's column rules (``columns=``, ``exclude_columns=``) select what is read and loaded.
    :param spark: starts the SparkSession.
    :param report: ``report(level, line)`` for the task log.
    """
    from airflow_provider_binlog.canal.errors import StartPositionError
    from airflow_provider_binlog.canal.snapshot import RUN_KEY, Snapshot, column_projection, table_key
    from airflow_provider_binlog.canal.start import check_available
    from airflow_provider_binlog.lake import commits
    from airflow_provider_binlog.lake.snapshot import LakeChunkLoader
    from airflow_provider_binlog.lake.sql import parse_name, quote_parts

    destination = instance.config.destination
    meta, ident, client = instance.meta, instance.identity, instance.client
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
    elif mode == "when_needed" or record is None:  # tables never snapshotted and never loaded
        # with "initial", a cursor without a snapshot record says nothing about the lake: a sensor
        # pins the head as the cursor before any load, so only the lake's marks tell what was loaded
        session = spark()
        todo = {
            s: t for s, t in known.items()
            if meta.get_json(ident, table_key(s)).value is None
            and commits.read_mark(session, quote_parts(parse_name(t)), destination) is None
        }  # fmt: skip
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
            set_cursor="if_absent", guard=instance.running.check if instance.running else None,
            project=column_projection(instance.config.filter),
        ).run()  # fmt: skip
    finally:
        loader.close()
    report(logging.INFO, f"destination {destination}: snapshot done: {result.as_dict()}")
    return session
