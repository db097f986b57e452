"""BinlogToSparkOperator(snapshot=...): initial load of existing rows, then the binlog; purged cursor."""

from __future__ import annotations

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
        mariadb.purge_binlogs_to(head)
        summary = _op(dest, ns, spark_warehouse, snapshot="when_needed").execute(make_context(run_id="r3"))
        assert all(d.equal for d in lake_verify(mariadb, spark, tables))
        cursor = meta.get_cursor(ident).value
        assert cursor is not None and cursor.journal_name >= head
    finally:
        meta.client.stop()
