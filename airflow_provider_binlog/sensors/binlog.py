"""BinlogEventSensor: wait until matching row changes exist after a destination's cursor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout, AirflowSkipException

from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.positions.points import parse_point
from airflow_provider_binlog.canal.watch import tables_filter
from airflow_provider_binlog.drain.source import check_retention
from airflow_provider_binlog.hooks.binlog import BinlogHook
from airflow_provider_binlog.operators.metrics import emit_headroom
from airflow_provider_binlog.triggers.binlog import BinlogEventTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context


#: what a sensor's timeout does (:class:`BinlogEventSensor`'s ``on_timeout``)
ON_TIMEOUT = ("fail", "skip")


def _seconds(interval: Any) -> float:
    return float(interval.total_seconds() if isinstance(interval, timedelta) else interval)


class BinlogEventSensor(BaseSensorOperator):
    """Succeed when at least ``min_changes`` matching row changes were committed after the cursor
    of ``destination``. The cursor does not move, except that a destination without a cursor gets
    its start pinned as the cursor (:meth:`~..canal.instance.CanalInstance.pin_start`). A new
    destination that starts at the head (no ``start_from``) succeeds at that first poke (XCom
    ``{"count", "first": True}``): its first load runs at once, so its initial snapshot
    (``snapshot="initial"``) of the rows already there is not put off until a change arrives.

    With ``deferrable=True`` the wait happens in the triggerer: :class:`BinlogEventTrigger`
    follows the binlog live and fires as soon as the changes are committed.

    With ``canal_conn_id`` the changes are counted on a canal server instead
    (:meth:`~..hooks.canal.CanalHook.peek`: getWithoutAck from the destination's acked cursor, then
    rollback; nothing is acked). The peek takes the destination client's hold without waiting; while
    a run of the operator holds it (it is draining the destination), a poke counts nothing and
    returns not done, and the next poke tries again. The XCom is ``{"count", "position", "end"}``
    (the first change counted and the end of the transaction that reached the count). The deferred
    wait polls the same way every ``poke_interval`` seconds in the triggerer.

    :param destination: the destination whose cursor to count from.
    :param tables: which tables count: the same mapping the operator takes (its keys), a list of
        ``schema.table`` names or globs, or a canal include filter string (regexes).
    :param exclude: tables that never count, as the operator's ``exclude`` (globs or canal regexes
        on ``schema.table``, comma-separated or a list; canal's black list).
    :param shadow_tables: as the operator's: glob routes count tables named like shadow tables of
        gh-ost / pt-online-schema-change too.
    :param min_changes: row changes to wait for.
    :param start_from: where a destination without a cursor starts (as the operator's
        ``start_from``); the sensor pins it as the cursor so the next run starts there too.
    :param mysql_conn_id: the source connection.
    :param canal_conn_id: a ``canal`` connection: count on that canal server instead of the binlog
        (``mysql_conn_id``, ``zookeeper_conn_id``, ``meta_dir``, ``server_id``, ``start_from`` and
        ``retention_headroom`` do not apply: the server keeps the cursor). Give the operator's
        ``tables`` so that both subscribe with the same filter (a canal server restarts a
        destination whose filter changes).
    :param zookeeper_conn_id: the meta store connection (``None``: local file store).
    :param meta_dir: file meta store directory (without ZooKeeper).
    :param client_id: canal client id.
    :param server_id: replica server id for the dump.
    :param deferrable: wait in the triggerer instead of poking.
    :param retention_headroom: as the operator's: at the first poke (once per sensor run, before
        it defers), warn when the cursor's binlog file may be purged by the server's retention
        within this fraction of the retention; the headroom also goes to the
        ``binlog_cdc.retention_headroom_seconds`` gauge (:mod:`airflow_provider_binlog.operators.metrics`).
    :param on_timeout: what ``timeout`` seconds without ``min_changes`` changes do: ``fail`` (default,
        Airflow's ``AirflowSensorTimeout``) or ``skip``: an idle interval, the sensor is skipped (and
        with it the load downstream: the DAG run succeeds, nothing is red), saying so in the log.
        Unlike Airflow's ``soft_fail`` it skips the timeout only: a failure (credentials, a purged
        cursor, the trigger's error) still fails the task.
    """

    template_fields: Sequence[str] = ("destination", "tables", "start_from", "exclude")

    def __init__(
        self,
        *,
        destination: str,
        tables: Mapping[str, str] | Sequence[str] | str | None = None,
        exclude: str | Sequence[str] | None = None,
        shadow_tables: bool = False,
        min_changes: int = 1,
        start_from: Any = None,
        mysql_conn_id: str = "mysql_default",
        zookeeper_conn_id: str | None = "zookeeper_default",
        meta_dir: str | None = None,
        client_id: int = 1001,
        server_id: int | None = None,
        deferrable: bool = False,
        retention_headroom: float = 0.25,
        canal_conn_id: str | None = None,
        on_timeout: str = "fail",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", 30)
        super().__init__(**kwargs)
        if on_timeout not in ON_TIMEOUT:
            raise ValueError(f"on_timeout must be one of {', '.join(ON_TIMEOUT)}, not {on_timeout!r}")
        self.on_timeout = on_timeout
        if not 0 <= retention_headroom <= 1:
            raise ValueError(
                f"retention_headroom is a fraction of the retention (0..1), not {retention_headroom!r}"
            )
        self.destination = destination
        self.tables = tables
        self.exclude = exclude
        self.shadow_tables = shadow_tables
        self.min_changes = min_changes
        self.start_from = start_from
        self.mysql_conn_id = mysql_conn_id
        self.zookeeper_conn_id = zookeeper_conn_id
        self.meta_dir = meta_dir
        self.client_id = client_id
        self.server_id = server_id
        self.deferrable = deferrable
        self.retention_headroom = retention_headroom
        self.canal_conn_id = canal_conn_id
        self._retention_checked = False
        if canal_conn_id and start_from not in (None, ""):
            raise ValueError(
                f"destination {destination!r}: start_from does not apply with canal_conn_id (the canal "
                "server keeps the cursor and where it starts)"
            )

    def table_filter(self) -> TableFilter:
        return tables_filter(self.tables, self.exclude, self.shadow_tables)

    def _hook(self) -> BinlogHook:
        return BinlogHook(self.mysql_conn_id, self.zookeeper_conn_id, self.meta_dir, self.server_id)

    def _instance(self, hook: BinlogHook) -> Any:
        start = parse_point(self.start_from) if self.start_from not in (None, "") else None
        return hook.instance(self.destination, self.table_filter(), self.client_id, start)

    def _check_retention(self, context: Context, hook: BinlogHook, instance: Any, point: Any) -> None:
        """The run start's retention check (:func:`~..drain.source.check_retention`) and its gauge,
        once per sensor run: at the first poke of the first try (not again after a reschedule)."""
        if self._retention_checked or int(context.get("task_reschedule_count") or 0) > 0:
            return
        self._retention_checked = True
        if point.position is None:
            return  # a start by GTID alone: no file to check yet
        retention = check_retention(
            instance.client, hook.source_connection, self.destination, point.position.file,
            self.retention_headroom, lambda level, line: self.log.log(level, "%s", line),
        )  # fmt: skip
        emit_headroom(self.destination, retention)

    def _peek_canal(self, context: Context) -> PokeReturnValue:
        from airflow_provider_binlog.canalnet.peek import CanalPeekError
        from airflow_provider_binlog.hooks.canal import CanalHook

        assert self.canal_conn_id
        ti = context.get("ti")
        label = f"{ti.dag_id}/{ti.task_id}/{context.get('run_id')}/sensor" if ti else "sensor"
        hook = CanalHook(self.canal_conn_id)
        try:
            seen = hook.peek(self.destination, self.table_filter(), self.min_changes, self.client_id, label)
        except CanalPeekError as exc:
            raise AirflowException(str(exc)) from None
        finally:
            hook.close()
        if seen.held_by is not None:
            self.log.info(
                "destination %s: a run is reading it from the canal server (%s): not counted now",
                self.destination, seen.held_by,
            )  # fmt: skip
            return PokeReturnValue(is_done=False)
        self.log.info(
            "destination %s: %d matching change(s) after the canal server's cursor (waiting for %d)",
            self.destination, seen.count, self.min_changes,
        )  # fmt: skip
        return PokeReturnValue(is_done=seen.count >= self.min_changes, xcom_value=seen.as_dict())

    def poke(self, context: Context) -> PokeReturnValue:
        if self.canal_conn_id:
            return self._peek_canal(context)
        hook = self._hook()
        try:
            instance = self._instance(hook)
            # a destination starting at the head (no ``start_from``) without a cursor yet
            new = self.start_from in (None, "") and instance.meta.get_cursor(instance.identity).value is None
            point = instance.pin_start()
            new = new and instance.meta.get_cursor(instance.identity).value is not None
            self._check_retention(context, hook, instance, point)
            count = instance.peek(limit=self.min_changes)
        finally:
            hook.close()
        if new:
            # the destination's first run: nothing is loaded yet and the binlog from the head holds
            # none of the rows already in the tables (they reach the lake by the load's snapshot):
            # waiting for a change would leave them out of the lake until one comes
            self.log.info(
                "destination %s: no cursor yet, pinned the start %s; the first load runs now (%d "
                "matching change(s) after it)", self.destination, point, count,
            )  # fmt: skip
            return PokeReturnValue(is_done=True, xcom_value={"count": count, "first": True})
        self.log.info(
            "destination %s: %d matching change(s) after the cursor (waiting for %d)",
            self.destination, count, self.min_changes,
        )  # fmt: skip
        return PokeReturnValue(is_done=count >= self.min_changes, xcom_value={"count": count})

    def _timed_out(self, exc: AirflowSensorTimeout) -> NoReturn:
        """A wait that ran out: skipped with ``on_timeout="skip"`` (an idle interval), else raised."""
        if self.on_timeout != "skip":
            raise exc
        raise AirflowSkipException(
            f"destination {self.destination}: fewer than {self.min_changes} matching change(s) after the "
            f"cursor within {self.timeout:g} s: an idle interval, skipped (on_timeout='skip')"
        ) from exc

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """After the deferred wait: the trigger's timeout (Airflow resumes the task with a
        ``TaskDeferralTimeout``, which the base class turns into ``AirflowSensorTimeout``) goes
        through ``on_timeout``; a trigger's error fails as before."""
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except AirflowSensorTimeout as exc:
            self._timed_out(exc)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as exc:
                self._timed_out(exc)
        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        flt = self.table_filter()
        if self.canal_conn_id:
            self.defer(
                trigger=BinlogEventTrigger(
                    mysql_conn_id=self.mysql_conn_id, destination=self.destination, include=flt.include,
                    exclude=flt.exclude, min_changes=self.min_changes, canal_conn_id=self.canal_conn_id,
                    client_id=self.client_id, poll_interval=_seconds(self.poke_interval),
                ),
                method_name="execute_complete",
                timeout=timedelta(seconds=self.timeout) if self.timeout else None,
            )  # fmt: skip
        hook = self._hook()
        try:
            instance = self._instance(hook)
            point = instance.pin_start()
        finally:
            hook.close()
        self.defer(
            trigger=BinlogEventTrigger(
                mysql_conn_id=self.mysql_conn_id,
                destination=self.destination,
                include=flt.include,
                exclude=flt.exclude,
                min_changes=self.min_changes,
                start_position=str(point.position) if point.position else None,
                start_gtid=point.gtid,
                skip_through=list(point.skip_through) if point.skip_through else None,
                server_id=self.server_id,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "success":
            raise AirflowException(
                f"waiting for binlog changes of destination {self.destination} failed: {event.get('message')}"
            )
        self.log.info(
            "destination %s: %s matching change(s) committed, the first at %s",
            self.destination, event.get("count"), event.get("position"),
        )  # fmt: skip
        return event
