"""Column types through BinlogToSparkOperator: the snapshot path and the binlog path agree, and a
ZEROFILL integer made a string keeps the source's padding. Real MariaDB (FULL and MINIMAL row
metadata for the types), ZooKeeper, Spark + Iceberg.

* Type by type (a table per type), the same values are written twice: rows that exist before the
  first run come through the snapshot (``snapshot="initial"``), the same values under other keys
  after it through the binlog. The two lake values are equal, and equal to the source's text
  (rendered from the lake type, :data:`TYPES`). Zero and partial dates are NULL on both paths
  under ``TypeOptions(zero_dates="null")`` (chosen for the whole run): asserted as such.
* Invalid dates under the default (``zero_dates="error"``): the snapshot stops, then the binlog
  stops, then an ``ADD COLUMN ... DATE NOT NULL`` (its zero date default), each naming lake table,
  column, value and ``file:pos``; the option the message names
  then loads them (NULL) and the lake equals the source.
* A lake table dropped by hand (the remedy a type-change stop names) is loaded again, whole, by
  ``snapshot="when_needed"``, the binlog after the cursor applied over it.
* ``INT(5) ZEROFILL`` -> ``VARCHAR``: the server rewrites the rows to ``'00007'`` without row
  events; the lake re-snapshots the table (with ``"fail"`` it stops naming table, statement,
  ``file:pos`` and the option, which then works as written; by default, ``"evolve"``, it
  re-snapshots too).
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from airflow_harness import lake_verify, make_context, mysql_uri
from test_operator_ddl import Harness

from airflow_provider_binlog.canal.sql.operations import SourceOperationError
from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.lake.options import TargetOptions
from airflow_provider_binlog.lake.sql import quote_parts
from airflow_provider_binlog.lake.types import InvalidDateError, TypeOptions
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _time(v: int) -> str:
    sign, v = ("-" if v < 0 else ""), abs(v)
    s, us = divmod(v, 1_000_000)
    return f"{sign}{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}.{us:06d}"


def _dt6(v: dt.datetime) -> str:
    return v.strftime("%Y-%m-%d %H:%M:%S.%f")


def _utc(v: dt.datetime) -> str:
    return _dt6(v.astimezone(dt.timezone.utc))


def _g6(v: float) -> str:  # MariaDB prints a FLOAT with 6 significant digits
    return f"{v:.6g}".replace("e+", "e")


def _repr(v: float) -> str:  # and a DOUBLE with the shortest digits that read back
    return repr(v).replace("e+", "e")


def _hex(v: bytes) -> str:
    return bytes(v).hex().upper()


# name -> (column type, SQL literals, SQL text of the source value, lake value -> that text)
TYPES: dict[str, tuple[str, list[str], str, Callable[[Any], str]]] = {
    "uuid": ("UUID", ["'123e4567-e89b-12d3-a456-426655440000'", "'00000000-0000-0000-0000-000000000000'",
                      "'ffffffff-ffff-4fff-bfff-ffffffffffff'"], "CAST(v AS CHAR)", str),
    "inet6": ("INET6", ["'::ffff:1.2.3.4'", "'2001:db8::1'", "'::'", "'fe80::1:0:0:2'", "'::1.2.3.4'"],
              "CAST(v AS CHAR)", str),
    "inet4": ("INET4", ["'1.2.3.4'", "'0.0.0.0'", "'255.255.255.255'"], "CAST(v AS CHAR)", str),
    "zerofill": ("INT(5) ZEROFILL", ["7", "12345", "0", "4294967295"], "CAST(v AS CHAR)",
                 lambda v: str(v).zfill(5)),
    "bit5": ("BIT(5)", ["b'101'", "b'0'", "b'11111'"], "CAST(v + 0 AS CHAR)", str),
    "bit64": ("BIT(64)", ["x'ffffffffffffffff'", "x'8000000000000001'"], "CAST(v + 0 AS CHAR)",
              lambda v: str(int(v))),
    "year": ("YEAR", ["2024", "0", "1901", "2155"], "CAST(v AS CHAR)", lambda v: f"{v:04d}"),
    "date": ("DATE", ["'2024-02-29'", "'1000-01-01'", "'9999-12-31'"], "CAST(v AS CHAR)", str),
    "datetime6": ("DATETIME(6)", ["'2024-01-02 03:04:05.678901'", "'1000-01-01 00:00:00'"],
                  "CAST(v AS CHAR)", _dt6),
    "enum": ("ENUM('a', 'bb', 'ccc')", ["'bb'", "'a'", "'ccc'", "'zz'"], "CAST(v AS CHAR)", str),
    "set": ("SET('x', 'y', 'z')", ["'x,z'", "''", "'y'", "'x,y,z'"], "CAST(v AS CHAR)", str),
    "json": ("JSON", ["'{\"a\": [1, 2.5, \"s\", null, true]}'", "'[\"a\", \"b\",1]'", "'null'", "'\"t\"'"],
             "CAST(v AS CHAR)", str),
    "decimal": ("DECIMAL(12,4)", ["-12345678.1234", "0.0001", "0", "99999999.9999"], "CAST(v AS CHAR)",
                str),
    "timestamp3": ("TIMESTAMP(3) NULL", ["'2038-01-19 03:14:07.499'", "'1970-01-01 00:00:01'"],
                   "CAST(v AS CHAR)", lambda v: _utc(v)[:-3]),
    "float": ("FLOAT", ["1.1", "-3.4e38", "0"], "CAST(v AS CHAR)", _g6),
    "double": ("DOUBLE", ["-2.5e-300", "0.1", "1e308"], "CAST(v AS CHAR)", _repr),
    "ubigint": ("BIGINT UNSIGNED", ["18446744073709551615", "0"], "CAST(v AS CHAR)", lambda v: str(int(v))),
    "latin1": ("VARCHAR(20) CHARACTER SET latin1", ["'café'", "''"], "CAST(v AS CHAR)", str),
    "utf8mb4": ("TEXT CHARACTER SET utf8mb4", ["'héllo ✓ 😀'"], "CAST(v AS CHAR)", str),
    "binary4": ("BINARY(4)", ["x'0102'", "x'ffffffff'", "x''"], "HEX(v)", _hex),
    "point": ("POINT", ["ST_GeomFromText('POINT(1 2)')"], "HEX(ST_AsWKB(v))", _hex),
    "time6": ("TIME(6)", ["'-838:59:59'", "'12:34:56.789012'", "'00:00:00'", "'838:59:59.000000'"],
              "CAST(v AS CHAR)", _time),
}  # fmt: skip
# zero and partial dates: NULL in the lake on both paths (zero_dates="null")
NULL_DATES: dict[str, tuple[str, list[str]]] = {
    "zdate": ("DATE", ["'0000-00-00'", "'2020-00-10'", "'2020-05-00'"]),
    "zdatetime": ("DATETIME(6)", ["'0000-00-00 00:00:00'", "'2020-00-10 01:02:03.000004'"]),
}
BINLOG_OFFSET = 1000


class Source:
    def __init__(self, server: MariaDbServer, spark: Any, warehouse: str) -> None:
        self.server, self.spark, self.warehouse = server, spark, warehouse
        tag = uuid.uuid4().hex[:8]
        self.db, self.dest = f"ty_{tag}", f"types-{tag}"
        self.conn = server.connect()
        self.conn.autocommit(True)
        self.sql(f"CREATE DATABASE `{self.db}`")

    def sql(self, *statements: str) -> None:
        with self.conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")  # zero dates, invalid ENUM
            for s in statements:
                cur.execute(s)

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute(sql)
            return list(cur.fetchall())

    @property
    def tables(self) -> dict[str, str]:
        return {f"{self.db}.*": f"lake.{self.db}.{{table}}"}

    def run(self, snapshot: str, target_options: TargetOptions | None = None) -> dict[str, Any]:
        op = BinlogToSparkOperator(
            task_id="load", destination=self.dest, tables=self.tables, warehouse=self.warehouse,
            spark_master="local[2]", stop_spark=False, mysql_conn_id="mysql_types", snapshot=snapshot,
            target_options=target_options,
        )  # fmt: skip
        return op.execute(make_context(run_id=f"r-{uuid.uuid4().hex[:6]}"))

    def lake(self, table: str) -> dict[int, Any]:
        name = quote_parts(("lake", self.db, table))
        self.spark.catalog.refreshTable(name)
        return {r["id"]: r["v"] for r in self.spark.table(name).collect()}

    def verify(self, tables: list[str]) -> None:
        pairs = {f"{self.db}.{t}": f"lake.{self.db}.{t}" for t in tables}
        diffs = lake_verify(self.server, self.spark, pairs)
        assert all(d.equal for d in diffs), [str(d) for d in diffs if not d.equal]


@pytest.fixture(params=["full", "minimal"])
def server(request: pytest.FixtureRequest) -> MariaDbServer:
    return request.getfixturevalue("mariadb" if request.param == "full" else "mariadb_minimal")


@pytest.fixture
def source(
    server: MariaDbServer, spark: Any, spark_warehouse: str, conns: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Source]:  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_TYPES", mysql_uri(server))
    s = Source(server, spark, spark_warehouse)
    try:
        yield s
    finally:
        s.sql(f"DROP DATABASE IF EXISTS `{s.db}`")
        s.conn.close()


def _insert(source: Source, table: str, literals: list[str], offset: int) -> None:
    rows = ", ".join(f"({offset + i}, {lit})" for i, lit in enumerate(literals, 1))
    source.sql(f"INSERT INTO `{source.db}`.`{table}` (id, v) VALUES {rows}")


def test_snapshot_and_binlog_agree_type_by_type(source: Source) -> None:
    every = {**{n: (t, lits) for n, (t, lits, _, _) in TYPES.items()}, **NULL_DATES}
    for name, (ctype, literals) in every.items():
        source.sql(f"CREATE TABLE `{source.db}`.`{name}` (id INT PRIMARY KEY, v {ctype})")
        _insert(source, name, [*literals, "NULL"], 0)
    nulls = TargetOptions(types=TypeOptions(zero_dates="null"))
    source.run("initial", nulls)  # the rows come from the snapshot
    for name, (_ctype, literals) in every.items():
        _insert(source, name, [*literals, "NULL"], BINLOG_OFFSET)
    summary = source.run("initial", nulls)  # the same values from the binlog
    assert summary["changes"] >= sum(len(lits) + 1 for _, lits in every.values())
    for name, (_ctype, literals, text_sql, render) in TYPES.items():
        lake = source.lake(name)
        texts = dict(source.query(f"SELECT id, {text_sql} FROM `{source.db}`.`{name}`"))
        assert len(lake) == 2 * (len(literals) + 1), (name, lake)
        for i in range(1, len(literals) + 2):
            snap, binlog = lake[i], lake[BINLOG_OFFSET + i]
            assert snap == binlog and type(snap) is type(binlog), (name, i, snap, binlog)
            assert texts[i] == texts[BINLOG_OFFSET + i], (name, i)
            shown = None if snap is None else render(snap)
            assert shown == texts[i], (name, i, snap, shown, texts[i])
    for name, (_ctype, literals) in NULL_DATES.items():
        lake = source.lake(name)
        assert len(lake) == 2 * (len(literals) + 1), (name, lake)
        assert set(lake.values()) == {None}, (name, lake)
    source.verify(list(every))


def _rows(source: Source, table: str) -> dict[int, Any]:
    name = quote_parts(("lake", source.db, table))
    source.spark.catalog.refreshTable(name)
    return {r["id"]: r for r in source.spark.table(name).collect()}


@pytest.mark.parametrize("server", ["full"], indirect=True)
def test_invalid_dates_stop_until_the_option_the_stop_names(source: Source) -> None:
    """The snapshot's and then the binlog's invalid dates stop by default, naming lake table,
    column, value and ``file:pos``; ``zero_dates='null'`` (what the message says) loads them."""
    db = source.db
    source.sql(
        f"CREATE TABLE `{db}`.`zd` (id INT PRIMARY KEY, d DATE, dt DATETIME(3), ts TIMESTAMP(3) NULL)",
        f"INSERT INTO `{db}`.`zd` VALUES (1, '2024-01-02', '2024-01-02 03:04:05.678', "
        "'2024-01-02 03:04:05'), (2, '2024-00-15', '2024-01-02 00:00:00', NULL)",
    )
    with pytest.raises(InvalidDateError) as stopped:
        source.run("initial")
    message = str(stopped.value)
    for part in (
        f"lake table {db}.zd",
        "'d'",
        "'2024-00-15'",
        "(the snapshot's read point)",
        "zero_dates='null'",
    ):
        assert part in message, (part, message)
    assert re.search(r"at [\w.-]+:\d+ \(the snapshot", message), message
    nulls = TargetOptions(types=TypeOptions(zero_dates="null"))
    source.run("initial", nulls)  # the remedy, as written
    source.verify(["zd"])
    rows = _rows(source, "zd")
    assert sorted(rows) == [1, 2] and rows[2]["d"] is None and rows[1]["d"] == dt.date(2024, 1, 2)
    source.sql(
        f"INSERT INTO `{db}`.`zd` VALUES (3, '2024-03-04', '0000-00-00 00:00:00', '2024-01-02 03:04:05')",
        f"INSERT INTO `{db}`.`zd` VALUES (4, '2024-03-04', '2024-03-04 05:06:07', '0000-00-00 00:00:00')",
    )
    with pytest.raises(InvalidDateError) as stopped:
        source.run("initial")
    message = str(stopped.value)
    for part in (f"lake table {db}.zd", "'dt'", "'0000-00-00 00:00:00.000'", "zero_dates='null'"):
        assert part in message, (part, message)
    assert re.search(r"the row at [\w.-]+\.\d+:\d+ holds", message), message
    source.run("initial", nulls)
    source.verify(["zd"])
    rows = _rows(source, "zd")
    assert rows[3]["dt"] is None and rows[4]["ts"] is None and rows[3]["d"] == dt.date(2024, 3, 4)
    source.sql(f"ALTER TABLE `{db}`.`zd` ADD COLUMN z DATE NOT NULL")  # every row gets 0000-00-00
    with pytest.raises(InvalidDateError) as stopped:
        source.run("initial")
    message = str(stopped.value)
    for part in ("'z'", "'0000-00-00'", "the default the ALTER gives every row", "zero_dates='null'"):
        assert part in message, (part, message)
    assert re.search(r"at [\w.-]+\.\d+:\d+ \(the default the ALTER", message), message
    source.run("initial", nulls)
    source.verify(["zd"])


def test_a_dropped_lake_table_is_reloaded_by_when_needed(source: Source) -> None:
    """The remedy of a type-change stop ("drop it and run with snapshot='when_needed'"): the dropped
    lake table comes back whole (it held 3 of 4 rows), the changes after the cursor on top."""
    db = source.db
    source.sql(
        f"CREATE TABLE `{db}`.`u` (id INT PRIMARY KEY, v UUID, n INT)",
        f"INSERT INTO `{db}`.`u` VALUES (1, '123e4567-e89b-12d3-a456-426655440000', 1), (2, NULL, 2), "
        "(3, '00112233-4455-6677-8899-aabbccddeeff', 3)",
    )
    source.run("initial")
    source.sql(f"INSERT INTO `{db}`.`u` VALUES (4, 'ffffffff-ffff-4fff-bfff-ffffffffffff', 4)")
    source.run("initial")
    source.verify(["u"])
    source.spark.sql(f"DROP TABLE {quote_parts(('lake', db, 'u'))}")
    source.sql(
        f"INSERT INTO `{db}`.`u` VALUES (5, '6ccd780c-baba-4026-9564-5b8c656024db', 5)",
        f"UPDATE `{db}`.`u` SET v = NULL WHERE id = 1",
        f"DELETE FROM `{db}`.`u` WHERE id = 2",
    )
    source.run("when_needed")
    assert sorted(source.lake("u")) == [1, 3, 4, 5]
    source.verify(["u"])
    schema = {f.name: f.dataType.simpleString() for f in source.spark.table(f"lake.{db}.u").schema}
    assert schema["v"] == "string", schema
    source.run("when_needed")  # the lake table exists again: nothing is snapshotted
    source.verify(["u"])


@pytest.fixture
def harness(
    mariadb: MariaDbServer, spark: Any, spark_warehouse: str, conns: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Harness]:  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_DDL", mysql_uri(mariadb))
    h = Harness(mariadb, spark, spark_warehouse, "mysql_ddl")
    h.sql(f"CREATE DATABASE `{h.db}`")
    try:
        yield h
    finally:
        h.close()


def test_zerofill_integer_made_a_string_keeps_the_padding(harness: Harness) -> None:
    h, db = harness, harness.db
    h.sql(
        f"CREATE TABLE {db}.z (id INT PRIMARY KEY, c INT(5) ZEROFILL, n INT)",
        f"INSERT INTO {db}.z VALUES (1, 7, 1), (2, 12345, 2), (3, NULL, 3), (4, 123456, 4)",
    )
    h.run()
    h.assert_equal("z")
    h.sql(
        f"ALTER TABLE {db}.z MODIFY c VARCHAR(10)",
        f"INSERT INTO {db}.z VALUES (5, '42', 5)",
        f"UPDATE {db}.z SET n = 10 WHERE id = 2",
    )
    (padded,), *_ = h.server.execute(f"SELECT c FROM {db}.z WHERE id = 1")
    assert padded == "00007"  # what MariaDB stored: the padding kept, no row event for it
    with pytest.raises(SourceOperationError) as stopped:
        h.run(on_schema_change={"modify_column": "fail"})
    message = str(stopped.value)
    assert f"{db}.z" in message and "MODIFY c VARCHAR(10)" in message, message
    assert "ZEROFILL" in message, message
    assert re.search(rf"at {re.escape(str(stopped.value.position))}\b", message), message
    assert 'on_schema_change={"modify_column": "resnapshot"}' in message, message
    h.run(on_schema_change={"modify_column": "resnapshot"})  # the option the message names
    h.assert_equal("z")
    assert h.lake("z")[1][1]["c"] == "00007"
    # the default ("evolve": the lake cannot cast exactly, so it re-snapshots) on a second column
    h.sql(
        f"ALTER TABLE {db}.z ADD COLUMN d SMALLINT ZEROFILL DEFAULT 3",
        f"UPDATE {db}.z SET d = 42 WHERE id = 1",
        f"ALTER TABLE {db}.z MODIFY d TEXT",
        f"INSERT INTO {db}.z VALUES (6, '6', 6, '0006')",
    )
    h.run()
    h.assert_equal("z")
    assert h.lake("z")[1][1]["d"] == "00042"
