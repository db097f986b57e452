"""A run that starts in archived binlog files (:mod:`..canal.positions.archive`) and continues on the server.

:func:`attach_archive` puts an :class:`~..canal.positions.archive.ArchiveClient` in front of the instance's
client before it subscribes, so the start, the stop search, the reader and its reconnects read the
archive where the server no longer has a file. A start in the archive is checked for gaps before
anything is read.

Schema: a TABLE_MAP written long ago must be decoded with the columns its table had then. A
destination that starts in the archive has no schema history from that time, so the run is told
where column names come from (``archive_schema``) and says which it uses:

* ``binlog``: the binlog's own names (``binlog_row_metadata=FULL`` on the server that wrote the
  archive); ``information_schema`` is not read, so today's columns never stand in for old ones;
* ``information_schema``: today's tables as the history's bootstrap, also for the archive's
  positions; right only when the tables did not change since (a changed column count or type is
  detected when decoding, a same-typed rename is not). DDL in the archive moves the history on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.positions.archive import ArchiveClient, BinlogArchive
from airflow_provider_binlog.errors import ConfigurationError

ARCHIVE_SCHEMAS = ("binlog", "information_schema")


def attach_archive(
    instance: Any, uri: str, schema: str | None, report: Callable[[int, str], None]
) -> ArchiveClient:
    """Read ``instance``'s binlog from the archive at ``uri`` where the server no longer has it.

    :param instance: a :class:`~..canal.instance.CanalInstance`, not yet subscribed.
    :param uri: the archive (a directory or a ``pyarrow.fs`` URI).
    :param schema: ``binlog``, ``information_schema`` or ``None`` (refused when the run starts in
        the archive).
    :raises ConfigurationError: a start in the archive without ``schema``.
    :raises ~..canal.positions.archive.ArchiveGapError: a file between the start and the server is missing.
    """
    if schema is not None and schema not in ARCHIVE_SCHEMAS:
        raise ConfigurationError(
            f"archive_schema must be one of {', '.join(ARCHIVE_SCHEMAS)}, not {schema!r}"
        )
    client = ArchiveClient(instance.client, BinlogArchive(uri))
    instance.client = client
    destination = instance.config.destination
    cursor, _ = instance.meta.get_cursor(instance.identity)
    spec = instance.config.start
    start = cursor.binlog_position if cursor is not None else None
    if start is None and spec is not None and spec.position is not None:
        start = BinlogPosition.parse(spec.position)
    archived = start is not None and start.file not in [n for n, _ in client.client.binlog_files()]
    if archived:
        assert start is not None
        plan = client.plan(start)  # a gap fails here, before anything is read
        if schema is None and cursor is None:
            raise ConfigurationError(
                f"destination {destination}: the start {start} is in the binlog archive, before any "
                "schema this destination knows: say where column names come from with "
                "archive_schema='binlog' (the binlog's own names: binlog_row_metadata=FULL) or "
                "archive_schema='information_schema' (today's tables, right only when they did not "
                "change since)"
            )
        handover = f", then the server from {plan.live}" if plan.live is not None else ""
        report(
            logging.INFO,
            f"destination {destination}: reading {len(plan.archived)} archived binlog file(s) from "
            f"{uri} ({plan.archived[0]} .. {plan.archived[-1]}){handover}",
        )
    if schema == "binlog" and instance.history is not None:
        instance.history.connect = None
    if archived or schema is not None:
        which = {
            "binlog": "the binlog's own column names (binlog_row_metadata=FULL), not information_schema",
            "information_schema": "today's information_schema as the schema of the archive's positions",
            None: "the schema history this destination already holds",
        }[schema]
        report(logging.INFO, f"destination {destination}: schema for archived positions: {which}")
    return client
