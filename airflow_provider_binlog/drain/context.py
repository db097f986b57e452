"""A destination's context, built once per run: what every step of a run reads of its destination.

::

    fields = run_fields(routes, settings, target_options)          # InstanceConfig fields of a run
    instance = wiring.instance(InstanceConfig("shop", source, routes.filter(), **fields), label)
    context = DestinationContext.of(instance, routes, connect, target_options)
    context.meta, context.identity, context.client   # the meta store, the client, the replication client
    context.guard                                    # the running node's check (None without ZooKeeper)
    context.filter, context.target_for               # which tables are read, where each goes

The run's fields of the instance (store capacity, reconnect bound, the before images' key columns)
are set when the instance is built (:func:`run_fields`); an instance built without them (a test's,
a tool's) gets them in :meth:`DestinationContext.of`, before it is subscribed. The snapshot, the
re-snapshots, the staging cleanup, the online copies and the loop then read this one object
(Debezium's MySQL task context is the model) instead of taking the instance apart each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypedDict

from airflow_provider_binlog.drain.before_images import key_columns_only
from airflow_provider_binlog.drain.loop import Limits

if TYPE_CHECKING:
    from airflow_provider_binlog.canal.filter import TableFilter
    from airflow_provider_binlog.canal.instance import CanalInstance
    from airflow_provider_binlog.canal.meta.base import MetaManager
    from airflow_provider_binlog.canal.meta.model import ClientIdentity
    from airflow_provider_binlog.canal.routing import Routes
    from airflow_provider_binlog.lake.write.merge import TargetOptions


class StoreCapacity(TypedDict):
    """The store's capacity fields of :class:`~..canal.instance.InstanceConfig`."""

    max_entries: int
    max_bytes: int


class RunFields(StoreCapacity):
    """The :class:`~..canal.instance.InstanceConfig` fields a run sets (:func:`run_fields`)."""

    reconnect_timeout: float | None
    reconnect_attempts: int | None
    before_columns: Any


def store_capacity(limits: Limits) -> StoreCapacity:
    """The store's capacity for these limits (:class:`~..canal.instance.InstanceConfig` fields):
    a quarter of a commit's rows and bytes on top of a batch. All of it reads ahead only while
    Spark starts; then the loop bounds it to :func:`~.loop.read_ahead`."""
    return StoreCapacity(
        max_entries=limits.max_rows_per_commit // 4 + limits.batch_size,
        max_bytes=limits.max_bytes_per_commit // 4 + 64 * 1024 * 1024,
    )


def run_fields(
    routes: Routes, settings: Any, target_options: TargetOptions | Mapping[str, TargetOptions] | None
) -> RunFields:
    """The instance fields of a run with ``settings`` (a :class:`~.run.RunSettings`): the store's
    capacity (:func:`store_capacity`), the run's reconnect bound (the reader reads it at start), and
    of the before images the key columns alone (:mod:`.before_images`)."""
    return RunFields(
        **store_capacity(settings.limits),
        reconnect_timeout=settings.reconnect_timeout,
        reconnect_attempts=settings.reconnect_attempts,
        before_columns=key_columns_only(routes.target_for, target_options),
    )


@dataclass(frozen=True)
class DestinationContext:
    """One destination's run context (see the module docstring).

    :param instance: the destination's instance (not yet subscribed), its run fields set.
    :param routes: source tables -> targets.
    :param connect: opens a plain connection to the source (``information_schema``, snapshots).
    :param target_options: :class:`~..lake.write.merge.TargetOptions` for all targets or per target.
    """

    instance: CanalInstance
    routes: Routes
    connect: Callable[[], Any]
    target_options: TargetOptions | Mapping[str, TargetOptions] | None = None

    @classmethod
    def of(
        cls,
        instance: CanalInstance,
        routes: Routes,
        connect: Callable[[], Any],
        target_options: TargetOptions | Mapping[str, TargetOptions] | None,
        settings: Any,
    ) -> DestinationContext:
        """The context of ``instance``; its run fields (:func:`run_fields`) set when it was built
        without them (the instance is not subscribed yet: its reader reads them at start)."""
        config = instance.config
        if (
            config.before_columns is None
            or config.reconnect_timeout != settings.reconnect_timeout
            or config.reconnect_attempts != settings.reconnect_attempts
        ):
            fields = run_fields(routes, settings, target_options)
            instance.config = replace(
                config, reconnect_timeout=fields["reconnect_timeout"],
                reconnect_attempts=fields["reconnect_attempts"], before_columns=fields["before_columns"],
            )  # fmt: skip
        return cls(instance, routes, connect, target_options)

    @property
    def destination(self) -> str:
        return self.instance.config.destination

    @property
    def meta(self) -> MetaManager:
        return self.instance.meta

    @property
    def identity(self) -> ClientIdentity:
        return self.instance.identity

    @property
    def client(self) -> Any:
        """The replication client (reads positions, the head, the binlog index)."""
        return self.instance.client

    @property
    def guard(self) -> Callable[[], Any] | None:
        """The running node's check (every progress write calls it); ``None`` without ZooKeeper."""
        running = self.instance.running
        return running.check if running is not None else None

    @property
    def filter(self) -> TableFilter:
        return self.instance.config.filter

    def target_for(self, schema: str, table: str) -> str | None:
        return self.routes.target_for(schema, table)
