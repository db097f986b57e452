"""Re-snapshot one table of a destination (Python API; the CLI and the drain call it).

::

    result = resnapshot(context.meta, context.identity, context.client, context.connect, spark,
                        "shop.orders", "lake.shop.orders", options=TargetOptions(),
                        guard=context.guard)          # a DestinationContext (.context)

The caller holds the destination's running node (the drain holds it for its run; the CLI takes it).
How and why it is exact: :mod:`..canal.snapshot.resnapshot`. In a run, :class:`~.loop.ChunkLoop` calls it
when the merger raises :class:`~..canal.sql.operations.ResnapshotNeeded`, then sets the merger's mark
for the target to the result's (:func:`~..lake.resnapshot.resnapshot_mark`).

**A table gone since its statement.** The drain asks for a re-snapshot at a position ``S`` after a
statement (``after``); by then a later statement may have renamed the table away or dropped it
(``RENAME TABLE a TO b`` then ``RENAME TABLE b TO c`` in one run: ``b`` is asked for, ``c`` holds its
rows). Then there is nothing to load: the lake table is left as it is (as a table renamed out of
the routes is), the result says ``gone``, and the run's mark at ``S`` skips the table's changes up to
``S``, the statement that removed it included; the name that holds its rows now is loaded by its
own statement's re-snapshot. The CLI (no ``after``) stops with the table's absence instead. An
unfinished attempt of an earlier (crashed) run for the table is abandoned then, its staging table
dropped.

**Leftovers.** A crashed attempt's staging table is not always taken up again by the same
re-snapshot (a crash after the swap leaves a mark that covers the statement, so it is not asked for
again; the table may be renamed away meanwhile): :func:`clean_leftovers`, at the start of each run,
settles every unfinished attempt the meta store records and drops the staging tables beside their
targets that are not the attempt still in progress.

**Errors.** A failure that is not one of ours (Spark's, Iceberg's) is raised as a
:class:`~..lake.errors.LakeStatementError` naming the table, its lake table and the ``file:pos`` of
the statement that asked for the re-snapshot (for :func:`clean_leftovers`: of every unfinished
attempt), with Spark's first line; Spark's error is its ``__cause__``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_binlog.binlog.client import ReplicationClient
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.filter import TableFilter
    from airflow_provider_binlog.canal.meta.base import MetaManager
    from airflow_provider_binlog.canal.meta.model import ClientIdentity
    from airflow_provider_binlog.canal.snapshot.resnapshot import ResnapshotResult
    from airflow_provider_binlog.lake.write.merge import TargetOptions

log = logging.getLogger(__name__)


def resnapshot(
    meta: MetaManager,
    identity: ClientIdentity,
    client: ReplicationClient,
    connect: Callable[[], Any],
    spark: Any,
    source: str,
    target: str,
    *,
    options: TargetOptions | None = None,
    chunk_size: int = 50_000,
    after: BinlogPosition | None = None,
    guard: Callable[[], None] | None = None,
    table_filter: TableFilter | None = None,
) -> ResnapshotResult:
    """Rebuild ``target`` from ``source`` at a consistent binlog position ``S`` (resuming an
    unfinished attempt), swapped in with one commit marked at ``S``; return what was done.

    :param meta: the destination's meta store; ``identity`` its client identity.
    :param client: replication client of the source; ``connect`` opens a plain connection to it.
    :param spark: the session.
    :param source: ``schema.table``; ``target`` its lake table.
    :param options: the target's options (key columns of a table without a primary key...).
    :param chunk_size: rows per chunk.
    :param after: ``S`` must lie after this position (the statement that asked for it).
    :param guard: called before every progress write (the running node's check).
    :param table_filter: the destination's filter: its column rules (``columns=``,
        ``exclude_columns=``) for ``source`` make the lake table hold the kept columns only, as its
        row changes do.
    """
    from airflow_provider_binlog.canal.online_copy import live_copy_attempts
    from airflow_provider_binlog.canal.snapshot.initial import column_projection
    from airflow_provider_binlog.canal.snapshot.resnapshot import (
        ResnapshotResult,
        TableResnapshot,
        source_exists,
    )
    from airflow_provider_binlog.lake.resnapshot import LakeResnapshot

    keep = live_copy_attempts(meta, identity)  # staging tables of copies in progress are no leftovers
    swapper = LakeResnapshot(spark, identity.destination, source, target, options, keep=keep)
    try:
        keys = options.key_columns if options is not None else ()
        job = TableResnapshot(
            meta, identity, client, connect, source, target, swapper, keys, chunk_size, after, guard,
            column_projection(table_filter),
        )  # fmt: skip
        if after is not None and not source_exists(connect, source):  # "A table gone since its statement"
            start = job.start_position()
            log.warning("re-snapshot of %s: the table no longer exists at %s; %s is left as it is", source,
                        start, target)  # fmt: skip
            job.abandon(f"{source} no longer exists at {start}")
            return ResnapshotResult(source, target, start, attempt="", gone=True)
        return job.run()
    except Exception as exc:
        if _ours(exc):
            raise
        where = f" asked for by the statement at {after}" if after is not None else ""
        raise _spark_error(
            exc,
            f"re-snapshot of {source} into {target}{where} failed",
            "nothing of it was swapped in and the cursor stays before the statement; the next run "
            "resumes the re-snapshot",
        ) from exc
    finally:
        swapper.close()


def _ours(exc: BaseException) -> bool:
    from airflow_provider_binlog.errors import BinlogCdcError

    return isinstance(exc, BinlogCdcError)


def _spark_error(exc: BaseException, what: str, then: str) -> Exception:
    """A :class:`~..lake.errors.LakeStatementError`: ``what``, Spark's first line, ``then``."""
    from airflow_provider_binlog.lake.errors import LakeStatementError

    java = getattr(exc, "java_exception", None)
    text = str(java.getMessage()) if java is not None else str(exc)
    first = (text.strip().splitlines() or [""])[0][:300]
    return LakeStatementError(f"{what}: {type(exc).__name__}: {first}; {then}")


def _unfinished(meta: MetaManager, identity: ClientIdentity) -> str:
    """The unfinished re-snapshot attempts the meta store records, for an error message."""
    from airflow_provider_binlog.canal.snapshot.resnapshot import PREFIX, source_of, unfinished

    found = []
    for name in meta.list_keys(identity, PREFIX):
        key = f"{PREFIX}/{name}"
        prog = meta.get_json(identity, key).value
        if prog is not None and unfinished(prog):
            found.append(
                f"{source_of(key, prog)} into {prog.get('target')} (attempt {prog.get('attempt')} "
                f"at {prog.get('start') or 'a position not fixed yet'})"
            )
    return "; ".join(found) or "none recorded"


def clean_leftovers(
    meta: MetaManager,
    identity: ClientIdentity,
    spark: Any,
    target_for: Callable[[str, str], str | None],
    guard: Callable[[], None] | None = None,
) -> list[str]:
    """Settle the destination's unfinished re-snapshot attempts and drop the staging tables left
    beside their targets by killed attempts (:func:`~..canal.snapshot.resnapshot.settle`), then settle the
    lake copies of online schema-change tools (:func:`~..canal.online_copy.settle_copies`: the staging
    tables of copies that ended are dropped, those in progress kept); return the staging tables
    dropped as leftovers (names as text).

    Nothing is read from the lake unless the meta store records an unfinished attempt; then one
    catalog listing per namespace of those targets. The staging table of an attempt still in
    progress (the next re-snapshot of its table resumes it) is kept.

    :param target_for: ``(schema, table) -> target`` of the destination's routes (``None``:
        unrouted); an attempt whose source no longer routes to its target is abandoned.
    :param guard: called before every progress write (the running node's check).
    """
    from airflow_provider_binlog.canal.online_copy import settle_copies
    from airflow_provider_binlog.canal.snapshot.resnapshot import settle
    from airflow_provider_binlog.lake.resnapshot import LakeResnapshot, namespace_tables
    from airflow_provider_binlog.lake.sql import name_text, parse_name

    swappers: dict[tuple[str, str], LakeResnapshot] = {}

    def swapper_for(source: str, target: str) -> LakeResnapshot:
        if (source, target) not in swappers:
            swappers[source, target] = LakeResnapshot(spark, identity.destination, source, target)
        return swappers[source, target]

    def routed(source: str, target: str) -> bool:
        now = target_for(*source.split(".", 1))
        return now is not None and parse_name(now) == parse_name(target)

    def drop_copy(source: str, target: str, attempt: str) -> None:
        swapper_for(source, target).drop_staging(attempt)

    try:
        live = settle(meta, identity, swapper_for, routed, guard)
        found = meta.get_cursor(identity).value
        cursor = getattr(found, "binlog_position", None)
        copying = settle_copies(meta, identity, target_for, drop_copy, guard, cursor)
        dropped: list[str] = []
        listed: dict[tuple[str, ...], list[str]] = {}
        for target, attempt in sorted(live.items()):
            swapper = next(s for (_src, tgt), s in swappers.items() if tgt == target)
            namespace = swapper.parts[:-1]
            if namespace not in listed:
                listed[namespace] = namespace_tables(spark, namespace)
            for other in swapper.leftovers(listed[namespace]):
                if other != attempt and other not in copying:
                    swapper.drop_staging(other)
                    dropped.append(name_text(swapper.staging_parts(other)))
        if dropped:
            log.info("destination %s: dropped re-snapshot staging tables of killed attempts: %s",
                     identity.destination, ", ".join(dropped))  # fmt: skip
        return dropped
    except Exception as exc:
        if _ours(exc):
            raise
        raise _spark_error(
            exc,
            f"destination {identity.destination}: settling the unfinished re-snapshots "
            f"({_unfinished(meta, identity)}) failed",
            "the run stopped before reading the binlog; the cursor is where it was",
        ) from exc
    finally:
        for swapper in swappers.values():
            swapper.close()


__all__ = ["clean_leftovers", "resnapshot"]
