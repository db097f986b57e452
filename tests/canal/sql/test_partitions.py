"""Partitioning in the schema history and the rows of a partition (pure; one test asks MariaDB where
it puts rows, to check the predicates against the server's own placement)."""

from __future__ import annotations

import datetime
import itertools
from typing import Any

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.meta import ClientIdentity, MemoryMetaManager
from airflow_provider_binlog.canal.schema import SchemaHistory
from airflow_provider_binlog.canal.sql import operations
from airflow_provider_binlog.canal.sql import partitions as P
from airflow_provider_binlog.canal.sql.ddl import parse_ddl
from airflow_provider_binlog.lake.ddl.actions import predicate_sql
from airflow_provider_binlog.lake.options import TargetOptions

ID = ColumnDef("id", T.LONG)
V = ColumnDef("v", T.LONG)
D = ColumnDef("d", T.DATE)
DT = ColumnDef("dt", T.DATETIME2, fsp=0)
S = ColumnDef("s", T.VARCHAR, collation=45)


def _schema(create: str, *cols: ColumnDef) -> TableSchema:
    stmt = parse_ddl(create, "db")
    assert stmt is not None and stmt.kind == "create"
    return P.with_partitioning(TableSchema("db", "t", (ID, *cols), ("id",)), stmt.partitioning)


def _rows(ts: TableSchema, names: list[str], values: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    action = P.partition_rows(P.partitioning_of(ts), names, ts)
    return [v for v in values if P.evaluate(action.where, v)]


RANGE = (
    "CREATE TABLE t (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (v) (PARTITION p0 VALUES LESS THAN (0), "
    "PARTITION p1 VALUES LESS THAN (10), PARTITION pmax VALUES LESS THAN MAXVALUE)"
)


def test_range_bounds_null_and_maxvalue() -> None:
    ts = _schema(RANGE, V)
    values = [(None,), (-5,), (0,), (9,), (10,), (2**40,)]
    assert _rows(ts, ["p0"], values) == [(None,), (-5,)]  # NULL goes to the first range
    assert _rows(ts, ["p1"], values) == [(0,), (9,)]
    assert _rows(ts, ["pmax"], values) == [(10,), (2**40,)]
    assert _rows(ts, ["P1", "pmax"], values) == [(0,), (9,), (10,), (2**40,)]


def test_range_columns_on_two_columns_with_maxvalue() -> None:
    ts = _schema(
        "CREATE TABLE t (id INT PRIMARY KEY, d DATE, v INT) PARTITION BY RANGE COLUMNS(d, v) ("
        "PARTITION p0 VALUES LESS THAN ('2024-01-01', 5), "
        "PARTITION p1 VALUES LESS THAN ('2024-01-01', MAXVALUE), "
        "PARTITION p2 VALUES LESS THAN (MAXVALUE, MAXVALUE))",
        D,
        V,
    )
    day, before, after = datetime.date(2024, 1, 1), datetime.date(2023, 12, 31), datetime.date(2024, 1, 2)
    values = [(before, 99), (day, None), (day, 4), (day, 5), (day, 10**9), (after, -1), (None, 7)]
    assert _rows(ts, ["p0"], values) == [(before, 99), (day, None), (day, 4), (None, 7)]
    assert _rows(ts, ["p1"], values) == [(day, 5), (day, 10**9)]
    assert _rows(ts, ["p2"], values) == [(after, -1)]
    # a NULL DATE in the lake may be a partial date placed by its value: the lake checks for them
    assert P.partition_rows(P.partitioning_of(ts), ["p2"], ts).ambiguous == (0,)
    assert P.partition_rows(P.partitioning_of(_schema(RANGE, V)), ["p0"], _schema(RANGE, V)).ambiguous == ()


def test_list_with_null_and_datetime_bounds() -> None:
    ts = _schema(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT) PARTITION BY LIST (v) ("
        "PARTITION a VALUES IN (1, 2, NULL), PARTITION b VALUES IN (-3, 4))",
        V,
    )
    values = [(None,), (1,), (2,), (-3,), (4,), (5,)]
    assert _rows(ts, ["a"], values) == [(None,), (1,), (2,)]
    assert _rows(ts, ["b"], values) == [(-3,), (4,)]
    lc = _schema(
        "CREATE TABLE t (id INT PRIMARY KEY, dt DATETIME, v INT) PARTITION BY LIST COLUMNS(dt, v) ("
        "PARTITION a VALUES IN (('2024-01-01 10:00:00', 1), (NULL, 2)), "
        "PARTITION b VALUES IN (('2024-01-01', NULL)))",
        DT,
        V,
    )
    ten, midnight = datetime.datetime(2024, 1, 1, 10), datetime.datetime(2024, 1, 1)
    values = [(ten, 1), (None, 2), (midnight, None), (ten, 2), (None, None)]
    assert _rows(lc, ["a"], values) == [(ten, 1), (None, 2)]
    assert _rows(lc, ["b"], values) == [(midnight, None)]


@pytest.mark.parametrize(
    ("create", "cols", "reason"),
    [
        ("CREATE TABLE t (id INT PRIMARY KEY, v INT) PARTITION BY HASH(v) PARTITIONS 4", (V,), "HASH"),
        ("CREATE TABLE t (id INT PRIMARY KEY, v INT) PARTITION BY KEY(v) PARTITIONS 4", (V,), "KEY"),
        (
            "CREATE TABLE t (id INT PRIMARY KEY, d DATE) PARTITION BY RANGE (YEAR(d)) "
            "(PARTITION p0 VALUES LESS THAN (2020), PARTITION p1 VALUES LESS THAN MAXVALUE)",
            (D,),
            "not a plain column",
        ),
        (
            "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(5)) PARTITION BY RANGE COLUMNS(s) "
            "(PARTITION p0 VALUES LESS THAN ('m'), PARTITION p1 VALUES LESS THAN MAXVALUE)",
            (S,),
            "collation",
        ),
        (
            "CREATE TABLE t (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (v) SUBPARTITION BY HASH(id) "
            "SUBPARTITIONS 2 (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
            (V,),
            "subpartitioned",
        ),
        (RANGE, (), "not a column of the lake table"),  # columns= left v out
    ],
)
def test_not_exact(create: str, cols: tuple[ColumnDef, ...], reason: str) -> None:
    ts = _schema(create, *cols)
    with pytest.raises(P.NotExact, match=reason):
        P.partition_rows(P.partitioning_of(ts), ["p0"], ts)


def test_information_schema_rows() -> None:
    rows = [
        ("p0", "RANGE COLUMNS", None, "`d`,`v`", "'2024-01-01',5"),
        ("p1", "RANGE COLUMNS", None, "`d`,`v`", "MAXVALUE,MAXVALUE"),
    ]
    p = P.from_information_schema_rows(rows)
    assert p is not None and p.method == "RANGE COLUMNS" and p.columns == ("d", "v")
    assert p.partitions[0].less_than == (("str", "2024-01-01"), ("num", "5"))
    lst = P.from_information_schema_rows(
        [("a", "LIST", None, "`v`", "NULL,1,-2"), ("b", "LIST", None, "`v`", "3")]
    )
    assert lst is not None and lst.partitions[0].values_in == (
        (("null", ""),),
        (("num", "1"),),
        (("num", "-2"),),
    )
    assert P.from_information_schema_rows([(None, None, None, None, None)]) == P.NOT_PARTITIONED
    sub = P.from_information_schema_rows(
        [("p0", "RANGE", "HASH", "`v`", "10"), ("p0", "RANGE", "HASH", "`v`", "10")]
    )
    assert sub is not None and sub.subpartitioned and len(sub.partitions) == 1
    assert P.from_information_schema_rows([("p0", "SYSTEM_TIME", None, None, None)]) is None
    assert P.from_information_schema_rows([]) is None


def _history() -> tuple[SchemaHistory, MemoryMetaManager, ClientIdentity]:
    meta, ident = MemoryMetaManager(), ClientIdentity("d", 1001)
    return SchemaHistory(meta, ident), meta, ident


def _pos(n: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", n)


def test_history_follows_partition_ddl_and_persists() -> None:
    h, meta, ident = _history()
    h.apply_ddl(parse_ddl(RANGE, "db"), _pos(100))  # type: ignore[arg-type]
    steps = [
        ("ALTER TABLE t DROP PARTITION pmax", ["p0", "p1"]),
        ("ALTER TABLE t ADD PARTITION (PARTITION p2 VALUES LESS THAN (20))", ["p0", "p1", "p2"]),
        (
            "ALTER TABLE t REORGANIZE PARTITION p1, p2 INTO (PARTITION a VALUES LESS THAN (5), "
            "PARTITION b VALUES LESS THAN (20))",
            ["p0", "a", "b"],
        ),
        ("ALTER TABLE t ADD COLUMN x INT", ["p0", "a", "b"]),
        ("ALTER TABLE t TRUNCATE PARTITION a", ["p0", "a", "b"]),
        ("ALTER TABLE t MODIFY v BIGINT", None),  # the partitioning column changed: not followed
        ("ALTER TABLE t DROP PARTITION a", None),  # and stays not known
        ("ALTER TABLE t PARTITION BY LIST (v) (PARTITION l VALUES IN (1))", ["l"]),
        ("ALTER TABLE t ENGINE=InnoDB PARTITION BY HASH(v)", None),  # a PARTITION BY not read as a clause
        ("ALTER TABLE t PARTITION BY HASH(v) PARTITIONS 3", []),
        ("ALTER TABLE t REMOVE PARTITIONING", []),
    ]
    for n, (sql, expected) in enumerate(steps):
        pos = 200 + 100 * n
        h.apply_ddl(parse_ddl(sql, "db"), _pos(pos))  # type: ignore[arg-type]
        found = h.at("db", "t", (1, pos))
        assert found is not None
        p = P.partitioning_of(found[0])
        names = None if p is None else [d.name for d in p.partitions]
        assert names == expected, (sql, names)
    # persisted: a new history reads the same versions back
    again = SchemaHistory(meta, ident)
    for key, ts, _ in h.versions("db", "t"):
        back = again.at("db", "t", key)
        assert back is not None and P.partitioning_of(back[0]) == P.partitioning_of(ts), key
    reorganized = again.at("db", "t", (1, 400))
    assert reorganized is not None
    p = P.partitioning_of(reorganized[0])
    assert p is not None and p.partitions[1].less_than == (("num", "5"),)
    last = again.at("db", "t", (1, 10**6))
    assert last is not None and P.partitioning_of(last[0]) == P.NOT_PARTITIONED


def test_old_records_load_as_not_known() -> None:
    h, meta, ident = _history()
    meta.set_json(
        ident, "schema/db.t",
        [{"at": [1, 4], "source": "bootstrap", "dropped": False, "columns": [{"name": "id", "type": 3}],
          "pk": ["id"]}],
        None,
    )  # fmt: skip
    found = h.at("db", "t", (1, 9))
    assert found is not None and found[0] is not None and found[0].column_names == ("id",)
    assert P.partitioning_of(found[0]) is None
    ops = operations.classify(
        parse_ddl("ALTER TABLE t TRUNCATE PARTITION p0", "db"),
        ("db", "t"),
        found[0],
        found[0],
        operations.Policy(),
    )
    assert [(o.kind, o.exact) for o in ops] == [("partition", False)]
    assert "not known" in ops[0].reason


def test_classify_partition_clauses() -> None:
    ts = _schema(RANGE, V)
    policy = operations.Policy()

    def ops(sql: str, table: tuple[str, str] = ("db", "t"), before: TableSchema | None = ts) -> list[Any]:
        return operations.classify(parse_ddl(sql, "db"), table, before, before, policy)

    (drop,) = ops("ALTER TABLE t DROP PARTITION p1")
    assert drop.exact and isinstance(drop.actions[0], operations.DeleteRows)
    assert drop.actions[0].partitions == ("p1",)
    (everything,) = ops("ALTER TABLE t TRUNCATE PARTITION ALL")
    assert everything.actions == (operations.EmptyTable(),)
    assert ops("ALTER TABLE t REORGANIZE PARTITION p1 INTO (PARTITION a VALUES LESS THAN (10))") == []
    assert ops("ALTER TABLE t ADD PARTITION (PARTITION z VALUES LESS THAN (99))") == []
    (missing,) = ops("ALTER TABLE t TRUNCATE PARTITION nope")
    assert not missing.exact and "nope" in missing.reason
    (unknown,) = ops("ALTER TABLE t TRUNCATE PARTITION p1", before=TableSchema("db", "t", (ID, V)))
    assert not unknown.exact
    exchange = parse_ddl("ALTER TABLE t EXCHANGE PARTITION p1 WITH TABLE o", "db")
    assert exchange is not None and exchange.tables == (("db", "t"), ("db", "o"))
    for table in exchange.tables:
        (op,) = ops("ALTER TABLE t EXCHANGE PARTITION p1 WITH TABLE o", table=table)
        assert op.kind == "partition" and not op.exact
        assert policy.verdict(op) == "resnapshot"


def test_predicate_sql_typed_literals_and_quoted_names() -> None:
    odd = ColumnDef("we`ird", T.DATE)
    ts = P.with_partitioning(
        TableSchema("db", "t", (ID, odd, V), ("id",)),
        P.Partitioning(
            "RANGE COLUMNS", "", ("we`ird", "v"),
            (P.PartitionDef("p0", (("str", "2024-02-29"), ("num", "18446744073709551615"))),
             P.PartitionDef("p1", (("str", "2025-01-01"), ("num", "-5")))),
        ),
    )  # fmt: skip
    action = P.partition_rows(P.partitioning_of(ts), ["p1"], ts)
    sql = predicate_sql(action, TargetOptions(), "lake.db.t")
    assert "`we``ird`" in sql and "DATE '2024-02-29'" in sql, sql
    assert "CAST('18446744073709551615' AS DECIMAL(20,0))" in sql and "CAST('-5' AS BIGINT)" in sql, sql
    for bad in (("str", "x'); DROP TABLE t; --"), ("expr", "TO_DAYS('2024-01-01')"), ("str", "2024-13-01")):
        bad_ts = P.with_partitioning(
            TableSchema("db", "t", (ID, odd), ("id",)),
            P.Partitioning("RANGE COLUMNS", "", ("we`ird",), (P.PartitionDef("p0", (bad,)),)),
        )
        with pytest.raises(P.NotExact):
            P.partition_rows(P.partitioning_of(bad_ts), ["p0"], bad_ts)


@pytest.mark.integration
def test_predicates_agree_with_mariadb_placement(mariadb: Any, database: str) -> None:
    """Rows inserted into RANGE COLUMNS / LIST tables: the partition MariaDB puts each in (read with
    ``SELECT ... PARTITION (p)``) is the one whose predicate holds, NULLs and MAXVALUE included."""
    tables = {
        "rc": (
            "CREATE TABLE {t} (id INT, d DATE, v INT) PARTITION BY RANGE COLUMNS(d, v) ("
            "PARTITION p0 VALUES LESS THAN ('2024-01-01', 5), "
            "PARTITION p1 VALUES LESS THAN ('2024-01-01', MAXVALUE), "
            "PARTITION p2 VALUES LESS THAN ('2025-06-01', 0), "
            "PARTITION p3 VALUES LESS THAN (MAXVALUE, MAXVALUE))",
            ["d", "v"],
            list(
                itertools.product(
                    [None, "2023-12-31", "2024-01-01", "2025-06-01", "2030-01-01"], [None, -1, 0, 5, 7]
                )
            ),
        ),
        "r": (
            "CREATE TABLE {t} (id INT, v INT) PARTITION BY RANGE (v) ("
            "PARTITION p0 VALUES LESS THAN (0), "
            "PARTITION p1 VALUES LESS THAN (10), PARTITION p2 VALUES LESS THAN MAXVALUE)",
            ["v"],
            [(None,), (-1,), (0,), (9,), (10,), (2**31 - 1,)],
        ),
        "l": (
            "CREATE TABLE {t} (id INT, v INT) PARTITION BY LIST (v) ("
            "PARTITION a VALUES IN (NULL, 1), "
            "PARTITION b VALUES IN (2, 3))",
            ["v"],
            [(None,), (1,), (2,), (3,)],
        ),
    }
    h = SchemaHistory(connect=mariadb.connect)
    conn = mariadb.connect()
    conn.autocommit(True)
    try:
        with conn.cursor() as cur:
            for name, (create, cols, values) in tables.items():
                t = f"`{database}`.`{name}`"
                cur.execute(create.format(t=t))
                for i, row in enumerate(values):
                    cur.execute(f"INSERT INTO {t} VALUES (%s, {', '.join(['%s'] * len(row))})", (i, *row))
                ts = h.from_information_schema(database, name, with_partitioning=True)
                p = P.partitioning_of(ts)
                assert p is not None and p.method and ts is not None, name
                for d in p.partitions:
                    cur.execute(f"SELECT {', '.join(f'`{c}`' for c in cols)} FROM {t} PARTITION (`{d.name}`)")
                    placed = sorted(map(tuple, cur.fetchall()), key=repr)
                    cur.execute(f"SELECT {', '.join(f'`{c}`' for c in cols)} FROM {t}")
                    every = list(map(tuple, cur.fetchall()))
                    action = P.partition_rows(p, [d.name], ts)
                    ours = sorted((r for r in every if P.evaluate(action.where, r)), key=repr)
                    assert ours == placed, (name, d.name, ours, placed)
    finally:
        conn.close()
