"""BinlogWatchTrigger: an event trigger for Airflow 3 asset watchers (event-driven scheduling).

::

    changes = Asset("binlog://shop", watchers=[AssetWatcher(
        name="shop_changes", trigger=BinlogWatchTrigger(destination="shop", tables=TABLES))])
    with DAG("load_on_change", schedule=[changes], max_active_runs=1): ...

It fires one :class:`~airflow.triggers.base.TriggerEvent` per new range of committed matching
changes (payload: ``from``/``to`` positions, ``after`` (where the range starts from), ``tables``,
``counts`` per table, ``changes``, ``transactions``, ``first``: the destination had no cursor yet)
and never again for that range: the watermark is kept in the destination's meta store
(:mod:`~..canal.watch`), so a triggerer restart goes on where it stopped. Every ``poll_interval``
seconds a bounded scan reads the binlog from the later of the destination's cursor and the watermark
(within one trigger run, from where the last scan ended) up to the head at the poll; nothing is
reported while a run of the load holds the destination, so a burst of commits during a load gives at
most one more range. With ``max_active_runs=1`` the scheduler also folds events that arrive while a
run is queued into its next run.

The trigger keeps one meta store client (one ZooKeeper session) for its lifetime, not one per poll.
A failed poll (source or ZooKeeper down) is logged and retried at the next one.

Announced once, also across a triggerer stop: the triggerer runs the trigger through Airflow 3.3's
shared stream in acknowledgement mode (a stream of its own:
:meth:`~BinlogWatchTrigger.shared_stream_key` is the trigger's whole configuration). A range is
written to the meta store as *pending* before its event leaves the trigger, and as reported (the
watermark moves) only in :meth:`WatchProducer.advance`, which the triggerer calls once the event is
stored in Airflow's database; until then no later range is scanned. A pending range is announced
again by the next poll (after a restart: by the first), so an event lost with a stopped or killed
triggerer (yielded, not stored) is announced after the restart, exactly once. The one window left is
a stop after Airflow stored the event and before the acknowledgement reached the trigger (one state
sync of the triggerer, about a second): the range is then announced a second time (at least once,
never skipped), unless the load has read its changes by then (the stored event's run, while the
triggerer was down: see :meth:`~..canal.watch.Watcher.poll`). Airflow 3.3 gives a trigger no way to
read the asset's stored events (database access is blocked in the triggerer's runner, and its
supervisor serves no asset event reads), so that case cannot be told from a lost event.
:meth:`~BinlogWatchTrigger.run` (a triggerer without shared streams) has no acknowledgement: it
confirms when the triggerer takes the event, so there a stop within the triggerer's sync interval
(about a second) after an event can lose its announcement.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent
from airflow.triggers.shared_stream import AdvanceItem, SharedStreamProducer

from airflow_provider_binlog.canal.positions.points import parse_point
from airflow_provider_binlog.canal.watch import Report, Watcher, tables_filter
from airflow_provider_binlog.faults import failpoint
from airflow_provider_binlog.hooks.binlog import BinlogHook

#: the constructor's arguments, all of which :meth:`BinlogWatchTrigger.serialize` lists
ARGUMENTS = (
    "destination", "name", "tables", "exclude", "shadow_tables", "start_from", "poll_interval",
    "mysql_conn_id", "zookeeper_conn_id", "meta_dir", "client_id", "server_id",
)  # fmt: skip

#: the shortest poll interval accepted (seconds): each poll is a dump from the watermark
MIN_POLL_INTERVAL = 1.0


class BinlogWatchTrigger(BaseEventTrigger):
    """Fire once per new range of committed row changes of a destination's tables.

    :param destination: the destination the load (:class:`~..operators.binlog_to_spark.BinlogToSparkOperator`)
        uses: its cursor is where changes start to count.
    :param tables: which tables count, as the operator's ``tables`` (its routing mapping, a list of
        names or globs, or a canal include string).
    :param exclude: as the operator's ``exclude``: tables that never count.
    :param shadow_tables: as the operator's.
    :param name: the watermark's name, unique among the watchers of one destination.
    :param start_from: where a destination without a cursor starts (as the operator's; it is pinned
        as the cursor, so the load starts there too).
    :param mysql_conn_id: the source connection.
    :param zookeeper_conn_id: the meta store connection (``None``: local file store in ``meta_dir``).
    :param meta_dir: file meta store directory (without ZooKeeper).
    :param client_id: canal client id.
    :param server_id: replica server id for the scans.
    :param poll_interval: seconds between two polls (at least 1).
    """

    def __init__(
        self,
        *,
        destination: str,
        name: str = "asset",
        tables: Mapping[str, str] | Sequence[str] | str | None = None,
        exclude: str | Sequence[str] | None = None,
        shadow_tables: bool = False,
        start_from: str | None = None,
        poll_interval: float = 30.0,
        mysql_conn_id: str = "mysql_default",
        zookeeper_conn_id: str | None = "zookeeper_default",
        meta_dir: str | None = None,
        client_id: int = 1001,
        server_id: int | None = None,
    ) -> None:
        super().__init__()
        if poll_interval < MIN_POLL_INTERVAL:
            raise ValueError(f"poll_interval must be at least {MIN_POLL_INTERVAL:g} s, not {poll_interval!r}")
        tables_filter(tables, exclude, shadow_tables)  # a bad filter fails when the DAG is parsed
        Watcher.check_name(name)
        self.destination, self.name = destination, name
        self.tables = dict(tables) if isinstance(tables, Mapping) else tables
        self.exclude, self.shadow_tables, self.start_from = exclude, shadow_tables, start_from
        self.poll_interval = float(poll_interval)
        self.mysql_conn_id, self.zookeeper_conn_id, self.meta_dir = mysql_conn_id, zookeeper_conn_id, meta_dir
        self.client_id, self.server_id = client_id, server_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The class path and exactly the constructor's arguments."""
        return f"{type(self).__module__}.{type(self).__qualname__}", {k: getattr(self, k) for k in ARGUMENTS}

    def _open(self) -> tuple[BinlogHook, Watcher]:
        hook = BinlogHook(self.mysql_conn_id, self.zookeeper_conn_id, self.meta_dir, self.server_id)
        try:
            start = parse_point(self.start_from) if self.start_from else None
            flt = tables_filter(self.tables, self.exclude, self.shadow_tables)
            label = f"watcher {self.name} of destination {self.destination}"
            instance = hook.instance(self.destination, flt, self.client_id, start, label=label)
            return hook, Watcher(instance, self.name)
        except BaseException:
            hook.close()
            raise

    def shared_stream_key(self) -> Hashable:
        """A stream of this trigger's own (its whole configuration): the triggerer then runs it in
        acknowledgement mode (:class:`WatchProducer`), and :meth:`filter_shared_stream` relays it."""
        classpath, kwargs = self.serialize()
        return classpath, json.dumps(kwargs, sort_keys=True, default=str)

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> WatchProducer:
        return WatchProducer(cls(**kwargs))

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        """One event per announced range (the stream's items are the payloads)."""
        async for payload in shared_stream:
            failpoint("watch_announce")  # pending in the meta store, the event not yet stored by Airflow
            yield TriggerEvent(payload)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Without the shared stream: a range is confirmed when the triggerer takes its event
        (see the module docstring)."""
        polls = _Polls(self)
        try:
            while True:
                report, version = await polls.next()
                failpoint("watch_announce")
                yield TriggerEvent(report.payload(self.destination, self.name))
                await polls.confirm(report, version)
        finally:
            polls.close()


class _Polls:
    """One trigger run's polls: its hook and watcher (one ZooKeeper session), opened lazily and
    reopened after a failed poll's next try."""

    def __init__(self, trigger: BinlogWatchTrigger) -> None:
        self.trigger = trigger
        self.hook: BinlogHook | None = None
        self.watcher: Watcher | None = None
        self.failing = False
        self.polled = False

    async def next(self) -> tuple[Report, Any]:
        """The next range announced (pending in the meta store) and the watermark's version then;
        polls every ``poll_interval`` seconds until there is one."""
        t = self.trigger
        while True:
            if self.polled:
                await asyncio.sleep(t.poll_interval)
            self.polled = True
            try:
                if self.watcher is None:
                    self.hook, self.watcher = await asyncio.to_thread(t._open)
                watcher = self.watcher
                assert watcher is not None
                report = await asyncio.to_thread(watcher.poll)
                version = None if report is None else await asyncio.to_thread(watcher.announce, report)
                if self.failing:
                    t.log.info("destination %s: watcher %s: polls work again", t.destination, t.name)
                self.failing = False
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                t.log.warning(
                    "destination %s: watcher %s: this poll failed, the next one in %g s tries again: %s",
                    t.destination, t.name, t.poll_interval, exc,
                )  # fmt: skip
                self.failing = True
                continue
            if report is not None and version is not None:
                payload = report.payload(t.destination, t.name)
                t.log.info(
                    "destination %s: watcher %s: %d change(s) in %d transaction(s) from %s to %s%s",
                    t.destination, t.name, payload["changes"], payload["transactions"], payload["from"],
                    payload["to"], " (pending: its storage never confirmed)" if report.again else "",
                )  # fmt: skip
                return report, version

    async def confirm(self, report: Report, version: Any) -> None:
        """Record the range as reported; when that fails it stays pending (announced again)."""
        t = self.trigger
        try:
            assert self.watcher is not None
            await asyncio.to_thread(self.watcher.confirm, report, version)
        except Exception as exc:
            t.log.warning(
                "destination %s: watcher %s: the range to %s stays pending (announced again at the next "
                "poll): recording it as reported failed: %s", t.destination, t.name, report.range.end, exc,
            )  # fmt: skip

    def close(self) -> None:
        if self.hook is not None:
            self.hook.close()
        self.hook = self.watcher = None


class WatchProducer(SharedStreamProducer):
    """The acknowledgement-mode stream of one :class:`BinlogWatchTrigger`: announces a range
    (pending), yields its payload, and records it as reported in :meth:`advance`, which the
    triggerer calls once the event is stored; the next poll waits for that."""

    def __init__(self, trigger: BinlogWatchTrigger) -> None:
        self.trigger = trigger
        self.polls = _Polls(trigger)
        self.advanced = asyncio.Event()

    async def open_stream(self) -> AsyncIterator[tuple[Any, Any]]:
        t = self.trigger
        while True:
            report, version = await self.polls.next()
            self.advanced.clear()
            yield report.payload(t.destination, t.name), (report, version)
            await self.advanced.wait()

    async def advance(self, batch: Sequence[AdvanceItem]) -> None:
        t = self.trigger
        try:
            for item in batch:
                report, version = item.broker_payload
                if item.outcome.is_clean:
                    failpoint("watch_confirm")  # Airflow stored the event, the watermark not yet moved
                    await self.polls.confirm(report, version)
                else:
                    t.log.warning(
                        "destination %s: watcher %s: the event of the range to %s was not stored by Airflow "
                        "(%s): it is announced again", t.destination, t.name, report.range.end, item.outcome,
                    )  # fmt: skip
        finally:
            self.advanced.set()

    async def aclose(self) -> None:
        self.polls.close()
