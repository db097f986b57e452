"""Re-snapshot one table of a destination (Python API; the CLI and the drain call it).

::

    result = resnapshot(instance.meta, instance.identity, instance.client, connect, spark,
                        "shop.orders", "lake.shop.orders", options=TargetOptions(),
                        guard=instance.running.check)

The caller holds the destination's running node (the drain holds it for its run; the CLI takes it).
How and why it is exact: :mod:`..canal.resnapshot`. In a run, :class:`~.loop.ChunkLoop` calls it
when the merger raises :class:`~..canal.operations.ResnapshotNeeded`, then sets the merger's mark
for the target to the result's (:func:`~..lake.resnapshot.resnapshot_mark`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_binlog.binlog.client import ReplicationClient
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.meta.base import MetaManager
    from airflow_provider_binlog.canal.meta.model import ClientIdentity
    from airflow_provider_binlog.canal.resnapshot import ResnapshotResult
    from airflow_provider_binlog.lake.merge import TargetOptions


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
    """
    from airflow_provider_binlog.canal.resnapshot import TableResnapshot
    from airflow_provider_binlog.lake.resnapshot import LakeResnapshot

    swapper = LakeResnapshot(spark, identity.destination, source, target, options)
    try:
        keys = options.key_columns if options is not None else ()
        return TableResnapshot(
            meta, identity, client, connect, source, target, swapper, keys, chunk_size, after, guard
        ).run()
    finally:
        swapper.close()
