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

Airflow 3.3's shared streams (one poll for several triggers) and their acknowledgement channel
(advance the broker after the trigger event is stored) are not used: every watcher has its own
watermark and filter, so there is no broker offset to share, and the ack channel's restart rule
(redeliver what was not advanced) would report a range again after a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_provider_binlog.canal.positions.points import parse_point
from airflow_provider_binlog.canal.watch import Watcher, tables_filter
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

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook: BinlogHook | None = None
        watcher: Watcher | None = None
        failing = False
        try:
            while True:
                try:
                    if watcher is None:
                        hook, watcher = await asyncio.to_thread(self._open)
                    assert watcher is not None
                    report = await asyncio.to_thread(watcher.poll)
                    if report is not None and await asyncio.to_thread(watcher.commit, report):
                        payload = report.payload(self.destination, self.name)
                        self.log.info(
                            "destination %s: watcher %s: %d change(s) in %d transaction(s) from %s to %s",
                            self.destination, self.name, payload["changes"], payload["transactions"],
                            payload["from"], payload["to"],
                        )  # fmt: skip
                        yield TriggerEvent(payload)
                    if failing:
                        self.log.info(
                            "destination %s: watcher %s: polls work again", self.destination, self.name
                        )
                    failing = False
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.log.warning(
                        "destination %s: watcher %s: this poll failed, the next one in %g s tries again: %s",
                        self.destination, self.name, self.poll_interval, exc,
                    )  # fmt: skip
                    failing = True
                await asyncio.sleep(self.poll_interval)
        finally:
            if hook is not None:
                hook.close()
