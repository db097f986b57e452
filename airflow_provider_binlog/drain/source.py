"""What a run asks the source before it drains: where to stop, and which tables its routes match."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.routing import Routes

_SYSTEM_SCHEMAS = "('mysql', 'sys', 'information_schema', 'performance_schema')"


def stop_point(client: Any, stop_at: Any) -> BinlogPosition:
    """The position a run drains to: ``head`` (or ``None``) is the server's head now; ``file:pos``,
    ``gtid:SET`` and timestamps as :func:`~..canal.points.resolve_stop` reads them.

    :param client: a :class:`~..binlog.client.ReplicationClient` of the source.
    :param stop_at: the stop point (a task's ``data_interval_end`` already substituted).
    """
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.points import parse_point, resolve_stop

    start = None
    if stop_at not in (None, "head") and parse_point(stop_at).gtid is not None:
        # a GTID stop is searched from the oldest binlog the server still has
        files = client.binlog_files()
        start = BinlogPosition(files[0][0], 4) if files else None
    return resolve_stop(client, stop_at, start)


def known_routes(connect: Callable[[], Any], routes: Routes) -> dict[str, str]:
    """Source -> target for every existing source table a route matches (glob routes resolved
    against ``information_schema``), so reconciliation and the marks loaded up front see every
    target.

    :param connect: opens a plain autocommit connection to the source (closed here).
    :param routes: the run's routes.
    """
    known: dict[str, str] = {}
    conn = connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                f"WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN {_SYSTEM_SCHEMAS}"
            )
            for schema, table in cur.fetchall():
                target = routes.target_for(str(schema), str(table))
                if target is not None:
                    known[f"{schema}.{table}"] = target
    finally:
        conn.close()
    return known
