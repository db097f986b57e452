"""Routing robustness through BinlogToSparkOperator against real MariaDB, ZooKeeper and Spark +
Iceberg: source tables named ``z.w``, ``x`;drop`` and ``a b`` land in one lake table each; two
sources that once collided (``db.`z.w``` and ``other.w`` routed into ``lake.ns.z``) stay apart;
``exclude=`` drops a table; ``columns=`` loads the selected columns only; a table whose name cannot
be a lake table (``a/b``) stops the run at its ``file:pos`` with the ``exclude=`` fix, the cursor
before it, and excluding it lets the rest through. After every successful run each lake table equals
its source value by value (projected for ``columns=``).
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

import pytest
from airflow_harness import make_context, meta_manager

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.lake.sql import parse_name, quote_parts
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator
from airflow_provider_binlog.sensors.binlog import BinlogEventSensor

pytestmark = [pytest.mark.integration, pytest.mark.spark]

WEIRD = ("z.w", "x`;drop", "a b")
REFUSED = "a/b"


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _source_rows(conn: Any, schema: str, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(map(_q, columns))} FROM {_q(schema)}.{_q(table)} ORDER BY id")
        return [tuple(r) for r in cur.fetchall()]


def _lake(spark: Any, target: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    frame = spark.table(quote_parts(parse_name(target)))
    return frame.columns, [tuple(r) for r in frame.orderBy("id").collect()]


def _write(conn: Any, schema: str, table: str, start: int, columns: tuple[str, ...] = ("v",)) -> None:
    """Inserts, an update and a delete on one table (each statement its own transaction)."""
    name = f"{_q(schema)}.{_q(table)}"
    with conn.cursor() as cur:
        for i in range(start, start + 5):
            values = ", ".join(["%s"] * (len(columns) + 1))
            cur.execute(
                f"INSERT INTO {name} (id, {', '.join(map(_q, columns))}) VALUES ({values})",
                (i, *(f"{table}-{c}-{i}" for c in columns)),
            )
        cur.execute(
            f"UPDATE {name} SET {_q(columns[-1])} = CONCAT({_q(columns[-1])}, '!') WHERE id = %s", (start,)
        )
        cur.execute(f"DELETE FROM {name} WHERE id = %s", (start + 1,))


def test_weird_names_collisions_exclude_columns_and_a_refused_table(
    conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    tag = uuid.uuid4().hex[:8]
    db, other, ns = f"rr_{tag}", f"rr_{tag}_o", f"rr_{tag}"
    dest = f"routing-{tag}"
    (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    start = f"{file}:{pos}"
    conn = mariadb.connect()
    conn.autocommit(True)
    tables = {f"{db}.*": f"lake.{ns}.{{table}}", f"{other}.*": f"lake.{ns}.z.{{table}}"}
    columns = f"{db}.cols:id/b"
    exclude: list[str] = [f"{db}.tmp_*"]

    def run(try_number: int, exclude: list[str]) -> dict[str, Any]:
        op = BinlogToSparkOperator(
            task_id="load", destination=dest, tables=tables, columns=columns, exclude=exclude,
            start_from=start, warehouse=spark_warehouse, spark_master="local[2]", stop_spark=False,
        )  # fmt: skip
        return op.execute(make_context(try_number=try_number, run_id=f"run{try_number}"))

    expected = {
        (db, "z.w"): f"lake.{ns}.`z.w`",
        (db, "x`;drop"): f"lake.{ns}.`x``;drop`",
        (db, "a b"): f"lake.{ns}.`a b`",
        (other, "w"): f"lake.{ns}.z.w",
        (db, "cols"): f"lake.{ns}.cols",
    }

    def assert_lake_equals_source() -> None:
        for (schema, table), target in expected.items():
            cols = ["id", "b"] if table == "cols" else ["id", "v"]
            lake_cols, lake_rows = _lake(spark, target)
            assert lake_cols == cols, (target, lake_cols)
            source = _source_rows(conn, schema, table, cols)
            assert source and lake_rows == source, (target, lake_rows, source)
        assert not spark.sql(f"SHOW TABLES IN lake.{ns} LIKE 'tmp*'").collect()

    meta = meta_manager(zookeeper, zk_chroot)
    try:
        with conn.cursor() as cur:
            for schema in (db, other):
                cur.execute(f"CREATE DATABASE {_q(schema)}")
            for table in (*WEIRD, "tmp_1"):
                cur.execute(f"CREATE TABLE {_q(db)}.{_q(table)} (id INT PRIMARY KEY, v VARCHAR(40))")
            cur.execute(f"CREATE TABLE {_q(other)}.w (id INT PRIMARY KEY, v VARCHAR(40))")
            cur.execute(
                f"CREATE TABLE {_q(db)}.cols (id INT PRIMARY KEY, a VARCHAR(40), b VARCHAR(40), c INT)"
            )
        for table in (*WEIRD, "tmp_1"):
            _write(conn, db, table, 1)
        _write(conn, other, "w", 1)
        _write(conn, db, "cols", 1, ("a", "b"))

        summary = run(1, exclude)
        assert set(summary["tables"]) == set(expected.values()), summary["tables"]
        assert_lake_equals_source()
        # the parts reached Iceberg as single identifiers: no namespace rr_x.z holds a table w from db
        names = {tuple(r) for r in spark.sql(f"SHOW TABLES IN lake.{ns}").select("tableName").collect()}
        assert {("z.w",), ("x`;drop",), ("a b",), ("cols",)} <= names, names

        # a table whose name cannot be a lake table: the run stops at its row change, cursor before it
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {_q(db)}.{_q(REFUSED)} (id INT PRIMARY KEY, v VARCHAR(40))")
        _write(conn, db, "z.w", 10)
        _write(conn, db, REFUSED, 1)
        _write(conn, db, "a b", 10)
        _write(conn, db, "cols", 10, ("a", "b"))
        with pytest.raises(Exception) as failed:
            run(2, exclude)
        message = str(failed.value)
        assert f"{db}.`a/b` cannot become a lake table" in message, message
        assert f"exclude=['{db}.`a/b`']" in message, message
        at = re.search(r"a row change of it at (\S+:\d+)", message)
        assert at is not None, message
        cursor = meta.get_cursor(ClientIdentity(dest, 1001)).value
        assert cursor is not None and cursor.binlog_position is not None
        assert cursor.binlog_position <= BinlogPosition.parse(at.group(1)), (cursor, message)

        # the fix the message names: exclude it; the other tables go on, nothing lost
        summary = run(3, [*exclude, f"{db}.`a/b`"])
        assert_lake_equals_source()
        names = {r.tableName for r in spark.sql(f"SHOW TABLES IN lake.{ns}").collect()}
        assert names == {"z.w", "x`;drop", "a b", "cols"}, names
        spaces = {r[0] for r in spark.sql(f"SHOW NAMESPACES IN lake.{ns}").collect()}
        assert spaces == {f"{ns}.z"}, spaces  # only the route into lake.ns.z made one
    finally:
        meta.client.stop()
        meta.client.close()
        with conn.cursor() as cur:
            for schema in (db, other):
                cur.execute(f"DROP DATABASE IF EXISTS {_q(schema)}")
        conn.close()


def test_columns_without_the_key_fail_before_anything_is_merged(
    conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
) -> None:  # fmt: skip
    tag = uuid.uuid4().hex[:8]
    db = f"rc_{tag}"
    (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {db}")
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT, b INT)")
            cur.execute(f"INSERT INTO {db}.t VALUES (1, 2, 3)")
        op = BinlogToSparkOperator(
            task_id="load", destination=f"rc-{tag}", tables={f"{db}.*": f"lake.{db}.{{table}}"},
            columns=f"{db}.t:a/b", start_from=f"{file}:{pos}", warehouse=spark_warehouse,
            spark_master="local[2]", stop_spark=False,
        )  # fmt: skip
        with pytest.raises(Exception, match=rf"{db}\.t leave out its primary-key column\(s\) id at \S+:\d+"):
            op.execute(make_context())
        assert not spark.sql("SHOW NAMESPACES IN lake").where(f"namespace = '{db}'").collect()
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()


def test_a_table_named_like_a_shadow_table_is_never_left_out_silently(
    conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A real table ``_audit_old`` (no ``audit`` beside it) and a parked-looking ``_t_del`` under a glob
    route: the run leaves them out and warns once each, naming the table and the ways to load it; each
    way, as the warning writes it, then loads it (the exact route, ``shadow_tables=True``, both with
    ``snapshot='when_needed'`` for the rows written before), and ``exclude=`` silences it."""
    tag = uuid.uuid4().hex[:8]
    db = ns = f"rs_{tag}"
    dest = f"shadow-{tag}"
    (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    conn = mariadb.connect()
    conn.autocommit(True)
    glob = {f"{db}.*": f"lake.{ns}.{{table}}"}
    task_log = logging.getLogger("tests.airflow.routing")  # the task log goes to structlog's sink
    monkeypatch.setattr(BinlogToSparkOperator, "log", property(lambda self: task_log))

    def run(n: int, **kw: Any) -> list[str]:
        caplog.clear()
        op = BinlogToSparkOperator(
            task_id="load", destination=dest, warehouse=spark_warehouse, spark_master="local[2]",
            stop_spark=False, **{"tables": glob, **kw},
        )  # fmt: skip
        with caplog.at_level(logging.INFO, logger=task_log.name):
            op.execute(make_context(run_id=f"run{n}"))
        return [
            r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "looks like a shadow table" in r.getMessage()
        ]  # fmt: skip

    def assert_lake(tables: set[str]) -> None:
        names = {r.tableName for r in spark.sql(f"SHOW TABLES IN lake.{ns}").collect()}
        assert names == tables, names
        for table in tables:
            lake_cols, lake_rows = _lake(spark, f"lake.{ns}.{table}")
            assert lake_rows == _source_rows(conn, db, table, lake_cols), table

    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {_q(db)}")
            for table in ("t", "_audit_old", "_t_del"):
                cur.execute(f"CREATE TABLE {_q(db)}.{_q(table)} (id INT PRIMARY KEY, v VARCHAR(40))")
        for table in ("t", "_audit_old", "_t_del"):
            _write(conn, db, table, 1)

        warned = run(1, start_from=f"{file}:{pos}")
        assert len(warned) == 2, warned
        audit, parked = sorted(warned, key=lambda w: "_t_del" in w)
        assert f"source table {db}._audit_old gets no lake table" in audit and "a table of its own" in audit
        assert f"source table {db}._t_del gets no lake table" in parked and f"{db}.t exists" in parked
        route = f"{{'{db}._audit_old': 'lake.{ns}._audit_old'}}"
        assert "shadow_tables=True on the operator and the sensor" in audit, audit
        assert f"the exact route {route}" in audit and "snapshot='when_needed'" in audit, audit
        assert f"exclude=['{db}._t_del']" in parked, parked
        assert_lake({"t"})

        # the exact route (as the warning writes it) with snapshot='when_needed'; exclude= silences _t_del
        _write(conn, db, "_audit_old", 10)
        exact = {**glob, f"{db}._audit_old": f"lake.{ns}._audit_old"}
        assert run(2, tables=exact, snapshot="when_needed", exclude=[f"{db}._t_del"]) == []
        assert_lake({"t", "_audit_old"})

        # shadow_tables=True with snapshot='when_needed': the parked-looking table too; later changes follow
        _write(conn, db, "_t_del", 10)
        assert run(3, shadow_tables=True, snapshot="when_needed") == []
        assert_lake({"t", "_audit_old", "_t_del"})
        # the sensor takes the same parameter: only with it do the changes of _audit_old count
        _write(conn, db, "_audit_old", 20)
        for shadow_tables, counted in ((False, 0), (True, 1)):
            sensor = BinlogEventSensor(
                task_id="wait", destination=dest, tables=glob, shadow_tables=shadow_tables, min_changes=1
            )
            assert sensor.poke(make_context(task_id="wait")).xcom_value == {"count": counted}
        for table in ("t", "_t_del"):
            _write(conn, db, table, 20)
        assert run(4, shadow_tables=True, snapshot="when_needed") == []
        assert_lake({"t", "_audit_old", "_t_del"})
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {_q(db)}")
        conn.close()
