"""BinlogToSparkOperator(snapshot=...): initial load of existing rows, then the binlog; purged cursor."""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any

import pytest
from airflow_harness import Shop, lake_verify, make_context, meta_manager

from airflow_provider_binlog.canal.snapshot import RUN_KEY
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _op(destination: str, ns: str, warehouse: str, **kw: Any) -> BinlogToSparkOperator:
    return BinlogToSparkOperator(
        task_id="load", destination=destination, tables={"shop.*": f"lake.{ns}.{{table}}"},
        warehouse=warehouse, spark_master="local[2]", stop_spark=False, snapshot_chunk_size=100, **kw,
    )  # fmt: skip


def _purge_to(mariadb: MariaDbServer, head: str) -> None:
    """PURGE BINARY LOGS TO ``head``; dump threads still on an older file (earlier tests of the
    session) make the server skip the purge with a warning, so they are killed first."""
    warnings: list[Any] = []
    for _ in range(40):
        for (pid,) in mariadb.execute(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'"
        ):
            with contextlib.suppress(Exception):
                mariadb.execute(f"KILL {int(pid)}")
        conn = mariadb.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"PURGE BINARY LOGS TO '{head}'")
                cur.execute("SHOW WARNINGS")
                warnings = list(cur.fetchall())
                cur.execute("SHOW BINARY LOGS")
                if cur.fetchall()[0][0] == head:
                    return
        finally:
            conn.close()
        time.sleep(0.25)
    raise AssertionError(f"could not purge the binlogs before {head}: {warnings}")


def test_snapshot_mode_is_checked() -> None:
    with pytest.raises(ValueError, match="snapshot must be one of"):
        BinlogToSparkOperator(task_id="x", destination="d", tables={"a.b": "lake.a.b"}, snapshot="always")


def test_initial_snapshot_then_binlog_and_purged_cursor(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    shop.changes(300)
    ns = f"snap_{uuid.uuid4().hex[:8]}"
    dest = f"snap-{ns}"
    tables = {"shop.orders": f"lake.{ns}.orders", "shop.customers": f"lake.{ns}.customers"}
    # no cursor and no start_from: the existing rows come from the snapshot, the rest from the binlog
    summary = _op(dest, ns, spark_warehouse, snapshot="initial").execute(make_context(run_id="r1"))
    assert summary["changes"] == 0
    assert all(d.equal for d in lake_verify(mariadb, spark, tables))
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        ident = next(iter(meta.subscriptions(dest)))
        assert meta.get_json(ident, RUN_KEY).value["status"] == "done"
        shop.changes(80)
        summary = _op(dest, ns, spark_warehouse, snapshot="initial").execute(make_context(run_id="r2"))
        assert summary["changes"] > 0
        assert all(d.equal for d in lake_verify(mariadb, spark, tables))

        # the cursor's binlog goes away: when_needed takes a new snapshot and carries on
        shop.changes(50)
        mariadb.execute("FLUSH BINARY LOGS")
        (head, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
        _purge_to(mariadb, head)
        summary = _op(dest, ns, spark_warehouse, snapshot="when_needed").execute(make_context(run_id="r3"))
        assert all(d.equal for d in lake_verify(mariadb, spark, tables))
        cursor = meta.get_cursor(ident).value
        assert cursor is not None and cursor.journal_name >= head
    finally:
        meta.client.stop()


def test_start_from_with_a_snapshot_is_refused_before_anything_moves(
    conns: dict[str, str], zookeeper: ZooKeeperServer, zk_chroot: str
) -> None:
    with pytest.raises(ValueError) as err:
        BinlogToSparkOperator(
            task_id="x", destination="d", tables={"a.b": "lake.a.b"}, snapshot="initial",
            start_from="mysql-bin.000001:4",
        )  # fmt: skip
    text = str(err.value)
    assert "start_from='mysql-bin.000001:4'" in text and "snapshot='initial'" in text
    assert "Remove start_from" in text and "snapshot='never'" in text
    BinlogToSparkOperator(
        task_id="x", destination="d", tables={"a.b": "lake.a.b"}, start_from="mysql-bin.000001:4"
    )
    # a template is checked once rendered, before the destination is touched
    dest = f"startfrom-{uuid.uuid4().hex[:8]}"
    op = _op(dest, "startfrom", "/nonexistent", snapshot="when_needed", start_from="{{ params.start }}")
    op.start_from = "2024-01-01T00:00:00"  # as rendered
    with pytest.raises(ValueError, match="snapshot='when_needed' both say where"):
        op.execute(make_context())
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        assert not list(meta.subscriptions(dest))
    finally:
        meta.client.stop()
