"""BinlogEventTrigger: follow the binlog live and fire once matching row changes are committed.

Runs in the triggerer. The dump is blocking and runs in a worker thread (pymysql is synchronous);
heartbeats from the source wake it at least every ``heartbeat_period`` seconds, so a cancelled
trigger stops within that time.

With ``canal_conn_id`` it polls a canal server instead: every ``poll_interval`` seconds a bounded
peek (:meth:`~..hooks.canal.CanalHook.peek`: connect, getWithoutAck, rollback, under the destination
client's hold taken without waiting) in a worker thread; a peek that finds a run holding the
destination counts nothing and the next poll tries again.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.sdk import BaseHook
from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.committed import committed
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.hooks.binlog import replication_config


def follow(
    config: ReplicationConfig,
    include: str,
    min_changes: int,
    start_position: str | None,
    start_gtid: str | None,
    skip_through: Sequence[int] | None,
    stop: threading.Event,
    exclude: str = "",
) -> dict[str, Any] | None:
    """Read the binlog from the start until ``min_changes`` matching row changes are committed.

    :return: ``{"position": first matching row event, "count": n, "end": commit position}``, or
        ``None`` when ``stop`` was set first.
    """
    flt = TableFilter(include=include, exclude=exclude)
    client = ReplicationClient(config)
    start = BinlogPosition.parse(start_position) if start_position else None
    count = 0
    first: str | None = None
    with client.dump(
        start, gtid=None if start else start_gtid, blocking=True, include_heartbeats=True
    ) as stream:
        for txn in committed(stream, flt, skip_through, stop):
            count += txn.changes
            first = first or txn.first
            if count >= min_changes:
                return {"position": first, "count": count, "end": txn.end}
    return None


class BinlogEventTrigger(BaseTrigger):
    """Fire when at least ``min_changes`` row changes of matching tables were committed after the
    start point.

    :param mysql_conn_id: the source connection.
    :param destination: the destination (only reported back).
    :param include: canal include filter (regexes on ``schema.table``).
    :param min_changes: row changes to wait for.
    :param start_position: ``file:pos`` to read from (or ``None`` with ``start_gtid``).
    :param start_gtid: GTID set to read after.
    :param skip_through: order key prefix of the already consumed cursor event.
    :param server_id: replica server id to register with.
    :param exclude: canal black list (globs or regexes on ``schema.table``): tables that never count.
    :param canal_conn_id: a ``canal`` connection: poll that canal server instead of following the
        binlog (``mysql_conn_id`` and the start arguments are then not used).
    :param client_id: canal client id (with ``canal_conn_id``).
    :param poll_interval: seconds between two peeks (with ``canal_conn_id``).
    """

    def __init__(
        self,
        mysql_conn_id: str,
        destination: str,
        include: str,
        min_changes: int = 1,
        start_position: str | None = None,
        start_gtid: str | None = None,
        skip_through: Sequence[int] | None = None,
        server_id: int | None = None,
        exclude: str = "",
        canal_conn_id: str | None = None,
        client_id: int = 1001,
        poll_interval: float = 30.0,
    ) -> None:
        super().__init__()
        self.mysql_conn_id = mysql_conn_id
        self.destination = destination
        self.include = include
        self.min_changes = min_changes
        self.start_position = start_position
        self.start_gtid = start_gtid
        self.skip_through = list(skip_through) if skip_through else None
        self.server_id = server_id
        self.exclude = exclude
        self.canal_conn_id = canal_conn_id
        self.client_id = client_id
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "mysql_conn_id": self.mysql_conn_id,
                "destination": self.destination,
                "include": self.include,
                "min_changes": self.min_changes,
                "start_position": self.start_position,
                "start_gtid": self.start_gtid,
                "skip_through": self.skip_through,
                "server_id": self.server_id,
                "exclude": self.exclude,
                "canal_conn_id": self.canal_conn_id,
                "client_id": self.client_id,
                "poll_interval": self.poll_interval,
            },
        )

    async def _poll_canal(self) -> dict[str, Any]:
        """Peek every ``poll_interval`` seconds until the count is reached (see the module docstring)."""
        from airflow_provider_binlog.hooks.canal import CanalHook

        assert self.canal_conn_id
        conn = await BaseHook.aget_connection(self.canal_conn_id)
        flt = TableFilter(include=self.include, exclude=self.exclude)
        label = f"trigger of destination {self.destination}"
        stop = threading.Event()

        def once() -> Any:
            hook = CanalHook(self.canal_conn_id or "", connection=conn)
            try:
                return hook.peek(self.destination, flt, self.min_changes, self.client_id, label, stop=stop)
            finally:
                hook.close()

        try:
            while True:
                seen = await asyncio.to_thread(once)
                if seen.held_by is not None:
                    self.log.info("destination %s: a run is reading it (%s)", self.destination, seen.held_by)
                elif seen.count >= self.min_changes:
                    return dict(seen.as_dict())
                await asyncio.sleep(self.poll_interval)
        except asyncio.CancelledError:
            stop.set()  # the peek in the thread ends at its next GET (each bounded)
            raise

    async def run(self) -> AsyncIterator[TriggerEvent]:
        if self.canal_conn_id:
            try:
                seen = await self._poll_canal()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                yield TriggerEvent({"status": "error", "destination": self.destination, "message": str(exc)})
                return
            yield TriggerEvent({"status": "success", "destination": self.destination, **seen})
            return
        stop = threading.Event()
        try:
            conn = await BaseHook.aget_connection(self.mysql_conn_id)
            config = replication_config(conn, self.server_id)
            result = await asyncio.to_thread(
                follow, config, self.include, self.min_changes, self.start_position, self.start_gtid,
                self.skip_through, stop, self.exclude,
            )  # fmt: skip
        except asyncio.CancelledError:
            stop.set()
            raise
        except Exception as exc:
            yield TriggerEvent({"status": "error", "destination": self.destination, "message": str(exc)})
            return
        if result is None:
            yield TriggerEvent(
                {"status": "error", "destination": self.destination, "message": "the binlog stream ended"}
            )
            return
        yield TriggerEvent({"status": "success", "destination": self.destination, **result})
