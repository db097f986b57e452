"""XA transactions and statement-format DML through BinlogToSparkOperator into Iceberg.

An XA transaction prepared at a run's stop point is not in the lake after that run and is there
exactly once after the run following its XA COMMIT; a rolled-back one never is. A statement-format
UPDATE of a routed table fails the run with a :class:`SourceOperationError` (class ``statement_dml``)
and leaves the cursor where it was (the remedies: ``tests/airflow/test_operator_statement_dml.py``).
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pymysql
import pytest
from airflow_harness import Shop, lake_verify, make_context, meta_manager

from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.sql.operations import SourceOperationError
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TABLES = ("customers", "products", "orders")


def _operator(destination: str, namespace: str, warehouse: str, start_from: str) -> BinlogToSparkOperator:
    return BinlogToSparkOperator(
        task_id="load", destination=destination, tables={"shop.*": f"lake.{namespace}.{{table}}"},
        warehouse=warehouse, spark_master="local[2]", stop_spark=False, start_from=start_from,
    )  # fmt: skip


def _assert_equal(mariadb: MariaDbServer, spark: Any, namespace: str) -> None:
    diffs = lake_verify(mariadb, spark, {f"shop.{t}": f"lake.{namespace}.{t}" for t in TABLES})
    assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)


def _xa(mariadb: MariaDbServer, xid: str, *statements: str) -> Any:
    conn = mariadb.connect("shop")
    conn.autocommit(True)
    with conn.cursor() as cur:
        cur.execute(f"XA START '{xid}'")
        for stmt in statements:
            cur.execute(stmt)
        cur.execute(f"XA END '{xid}'")
        cur.execute(f"XA PREPARE '{xid}'")
    return conn


def test_xa_and_statement_format_dml_through_the_operator(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    ns = f"xa_{uuid.uuid4().hex[:8]}"
    dest = f"xa-{ns}"
    shop.changes(80)
    (cid,) = mariadb.execute("SELECT MAX(id) FROM shop.customers")[0]
    new_id = 3_000_000_000  # far above the ids shop.changes writes
    kept = _xa(mariadb, "kept", f"INSERT INTO customers (id, name) VALUES ({new_id}, 'xa')",
               f"UPDATE customers SET name = 'xa-updated' WHERE id = {int(cid)}")  # fmt: skip
    dropped = _xa(mariadb, "dropped", f"INSERT INTO customers (id, name) VALUES ({new_id + 1}, 'gone')")
    conns_open = [kept, dropped]
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        shop.changes(40)  # committed while both are prepared
        with dropped.cursor() as cur:
            cur.execute("XA ROLLBACK 'dropped'")
        first = _operator(dest, ns, spark_warehouse, shop.start_from).execute(make_context())
        assert first["changes"] > 0
        _assert_equal(mariadb, spark, ns)  # the source shows no prepared row, nor does the lake
        assert not mariadb.execute(f"SELECT 1 FROM shop.customers WHERE id = {new_id}")

        with kept.cursor() as cur:
            cur.execute("XA COMMIT 'kept'")
        shop.changes(20)
        _operator(dest, ns, spark_warehouse, shop.start_from).execute(make_context(run_id="second"))
        _assert_equal(mariadb, spark, ns)
        rows = spark.sql(f"SELECT id, name FROM lake.{ns}.customers WHERE name IN ('xa', 'gone')").collect()
        assert [(r[0], r[1]) for r in rows] == [(new_id, "xa")]  # the committed one only, once

        ident = ClientIdentity(dest, 1001)
        cursor_before, _ = meta.get_cursor(ident)
        stmt_conn = mariadb.connect("shop")
        conns_open.append(stmt_conn)
        with stmt_conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute("UPDATE products SET title = CONCAT(title, '!')")
            stmt_conn.commit()
        shop.changes(10)
        with pytest.raises(SourceOperationError) as failed:
            _operator(dest, ns, spark_warehouse, shop.start_from).execute(make_context(run_id="third"))
        err = failed.value
        assert err.table == "shop.products" and "UPDATE products SET title" in str(err)
        assert str(err.position) in str(err) and "binlog_format=ROW" in str(err)
        assert 'on_schema_change={"statement_dml": "resnapshot"}' in str(err)
        cursor_after, _ = meta.get_cursor(ident)
        assert cursor_before is not None and cursor_after is not None
        assert cursor_after.binlog_position == cursor_before.binlog_position  # nothing moved past it
        assert cursor_after.binlog_position is not None
        assert cursor_after.binlog_position < err.position
    finally:
        for conn in conns_open:
            with contextlib.suppress(pymysql.err.MySQLError), conn.cursor() as cur:
                cur.execute("XA ROLLBACK 'kept'")
            conn.close()
        meta.client.stop()
        meta.client.close()


def test_xa_prepared_before_an_initial_snapshot_reaches_the_lake_once_at_its_commit(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
) -> None:  # fmt: skip
    """A new destination whose snapshot starts while XA transactions are prepared (their rows are
    logged at XA PREPARE, before the snapshot's position): the committed one's rows reach the lake
    once, at the run after its XA COMMIT; the rolled-back one's never."""
    ns = f"xas_{uuid.uuid4().hex[:8]}"
    dest = f"xas-{ns}"
    shop.changes(40)
    (cid,) = mariadb.execute("SELECT MAX(id) FROM shop.customers")[0]
    new_id = 3_100_000_000
    kept = _xa(mariadb, "snap-kept", f"INSERT INTO customers (id, name) VALUES ({new_id}, 'xa')",
               f"UPDATE customers SET name = 'xa-updated' WHERE id = {int(cid)}")  # fmt: skip
    dropped = _xa(mariadb, "snap-dropped", f"INSERT INTO customers (id, name) VALUES ({new_id + 1}, 'gone')")
    conns_open = [(kept, "snap-kept"), (dropped, "snap-dropped")]

    def load(run_id: str) -> dict[str, Any]:
        op = BinlogToSparkOperator(
            task_id="load", destination=dest, tables={"shop.*": f"lake.{ns}.{{table}}"},
            warehouse=spark_warehouse, spark_master="local[2]", stop_spark=False, snapshot="initial",
        )  # fmt: skip
        return op.execute(make_context(run_id=run_id))  # type: ignore[no-any-return]

    try:
        shop.changes(20)
        load("first")  # the snapshot: neither prepared transaction is visible
        _assert_equal(mariadb, spark, ns)
        with kept.cursor() as cur:
            cur.execute("XA COMMIT 'snap-kept'")
        with dropped.cursor() as cur:
            cur.execute("XA ROLLBACK 'snap-dropped'")
        shop.changes(10)
        assert load("second")["changes"] > 0
        _assert_equal(mariadb, spark, ns)
        load("third")  # nothing read twice
        _assert_equal(mariadb, spark, ns)
        rows = spark.sql(f"SELECT id, name FROM lake.{ns}.customers WHERE name IN ('xa', 'gone')").collect()
        assert [(r[0], r[1]) for r in rows] == [(new_id, "xa")]  # the committed one only, once
    finally:
        for conn, xid in conns_open:
            with contextlib.suppress(pymysql.err.MySQLError), conn.cursor() as cur:
                cur.execute(f"XA ROLLBACK '{xid}'")
            conn.close()
