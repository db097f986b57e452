"""The schema history checked against the server itself (issue 42), on a FULL and a MINIMAL server.

A generated corpus of ``CREATE``/``ALTER`` statements (column types with their options and defaults,
identifiers in other cases, quoted and unicode, primary and unique keys, generated and invisible
columns, ``LIKE``, table options, comments), and the forms of :func:`_forms` (partitions,
``CREATE ... SELECT``, ``LIKE`` of a partitioned table, defaults of every literal kind, stored and
persistent generated columns, hash-enforced unique keys, ``IF [NOT] EXISTS`` clauses, MySQL syntax
variants MariaDB accepts, other engines, ``CREATE OR REPLACE``) run on the test MariaDB.
``WITH SYSTEM VERSIONING`` is not in the corpus: it stops a run (``canal/operations.py``,
``tests/airflow/test_remedies.py::test_a_system_versioned_table_stops_then_exclude``). Column
defaults are not compared: the decoded schema carries none (a default matters to the lake only as
an ``ADD COLUMN``'s fill, which ``tests/canal/test_operations.py`` checks). After each statement a row
is written to the table, and ``information_schema`` is read. Then the binlog is read from before
the corpus through the canal instance: the schema each row was decoded with (with MINIMAL metadata
the schema history's, from the DDL in the stream) must say what ``information_schema`` said after
that statement: column names, types, signedness, charsets, DECIMAL precision and scale,
fractional seconds, ENUM/SET labels and the key. The corpus size and the agreement are printed.
"""

from __future__ import annotations

import random
from typing import Any

import pymysql
import pytest

from airflow_provider_binlog.binlog.constants import ColumnType
from airflow_provider_binlog.binlog.table_map import collation_codec
from airflow_provider_binlog.canal.change import Op, RowChange
from airflow_provider_binlog.canal.meta import MemoryMetaManager
from airflow_provider_binlog.canal.positions.start import StartSpec
from airflow_provider_binlog.canal.schema import TYPE_NAMES

from .test_instance import drain, head, make

pytestmark = pytest.mark.integration
T = ColumnType

# (declaration, needs a value) pieces the generator combines
_TYPES = [
    "INT", "INTEGER UNSIGNED", "TINYINT(1)", "BOOL", "SMALLINT ZEROFILL", "MEDIUMINT UNSIGNED", "BIGINT",
    "INT1", "INT8 UNSIGNED", "MIDDLEINT", "DECIMAL(12,4)", "DEC(5)", "NUMERIC(20,10) UNSIGNED", "FIXED(3,1)",
    "DECIMAL", "FLOAT", "FLOAT(10)", "FLOAT(24)", "FLOAT(25)", "FLOAT(53)", "FLOAT(7,3)", "REAL",
    "DOUBLE PRECISION", "DOUBLE(10,2)", "FLOAT4", "FLOAT8", "BIT(1)", "BIT(13)", "DATE", "TIME", "TIME(3)",
    "DATETIME", "DATETIME(6)", "TIMESTAMP(2) NULL", "YEAR", "CHAR(4)", "CHARACTER(2)", "NCHAR(5)",
    "NATIONAL CHAR(3)", "NVARCHAR(10)", "NATIONAL VARCHAR(7)", "NATIONAL CHAR VARYING(6)",
    "NCHAR VARCHAR(4)", "CHARACTER VARYING(9)", "VARCHAR(20) CHARACTER SET latin1",
    "VARCHAR(8) CHARSET ascii COLLATE ascii_bin", "VARCHAR(30) COLLATE utf8mb4_unicode_ci",
    "VARCHAR(5) CHARACTER SET utf8mb3", "BINARY(3)", "VARBINARY(12)", "TINYTEXT", "TEXT", "MEDIUMTEXT",
    "LONGTEXT CHARACTER SET latin1", "LONG", "LONG VARCHAR", "LONG VARBINARY", "TINYBLOB", "BLOB",
    "MEDIUMBLOB", "LONGBLOB", "JSON", "ENUM('a','b''c','Ü')", "SET('x','y','z')", "GEOMETRY", "POINT",
]  # fmt: skip
_OPTIONS = [
    "",
    " NOT NULL",
    " NULL",
    " DEFAULT NULL",
    " COMMENT 'a, b (c)'",
    " INVISIBLE",
    " DEFAULT '1'",
    " NOT NULL DEFAULT 0",
    " DEFAULT (1 + 1)",
]
_NAMES = ["a", "B", "`Mixed Case`", "`ünï`", "`sel ect`", "`x,y`", "c_3", "`NuMbEr`", "d"]


_TABLE_OPTIONS = [
    "",
    " ENGINE=InnoDB",
    " DEFAULT CHARSET=latin1",
    " CHARSET utf8mb4 COMMENT 'x'",
    " DEFAULT CHARACTER SET = utf8mb4 COLLATE utf8mb4_bin ROW_FORMAT=DYNAMIC",
]


def _column(rnd: random.Random) -> str:
    return rnd.choice(_TYPES) + rnd.choice(_OPTIONS)


def _corpus(db: str, seed: int = 42, hash_keys_change: bool = True) -> list[tuple[str, str]]:
    """``(table, statement)`` pairs: each table is created, then altered a few times."""
    rnd = random.Random(seed)
    out: list[tuple[str, str]] = []
    for t in range(40):
        table = f"t{t}"
        names = rnd.sample(_NAMES, 4)
        cols = [f"{n} {_column(rnd)}" for n in names]
        key = rnd.choice(["pk", "pk_case", "unique", "unique_null", "none", "inline"])
        body = ["id INT NOT NULL" + (" PRIMARY KEY" if key == "inline" else ""), *cols]
        if key == "pk":
            body.append("PRIMARY KEY (id)")
        elif key == "pk_case":
            body.append("CONSTRAINT pk PRIMARY KEY (ID)")
        elif key == "unique":
            body += [
                "u1 INT NULL",
                "u2 VARCHAR(10) NOT NULL",
                "UNIQUE KEY nul (u1)",
                "CONSTRAINT uq UNIQUE (U2, id)",
            ]
        elif key == "unique_null":
            body += ["u1 INT NULL", "UNIQUE (u1)", "KEY plain (id)"]
        options = rnd.choice(_TABLE_OPTIONS)
        out.append((table, f"CREATE TABLE `{db}`.{table} ({', '.join(body)}){options}"))
        for _ in range(4):
            n = "`" + rnd.choice(["e", "Fé", "G h"]) + str(rnd.randrange(100)) + "`"
            alter = rnd.choice(
                [
                    f"ADD COLUMN {n} {_column(rnd)}",
                    f"ADD COLUMN {n} {rnd.choice(_TYPES)} FIRST",
                    f"ADD {n} INT AS (id + 1) VIRTUAL",
                    f"ADD COLUMN {n} INT NOT NULL DEFAULT 3, ADD UNIQUE KEY ({n})",
                    f"MODIFY COLUMN {names[0]} {rnd.choice(_TYPES)}",
                    f"CHANGE {names[1]} {n} {rnd.choice(_TYPES)} AFTER id",
                    f"DROP COLUMN {names[2]}",
                    f"RENAME COLUMN {names[3]} TO {n}",
                    "DROP PRIMARY KEY",
                    "ADD PRIMARY KEY (ID)",
                    "DROP INDEX uq",
                    "MODIFY u1 INT NOT NULL",
                    "ADD CONSTRAINT uz UNIQUE KEY (id)",
                    "COMMENT = 'changed', ENGINE = InnoDB",
                ]
            )
            out.append((table, f"ALTER TABLE `{db}`.{table} {alter}"))
        if t % 5 == 0:
            out.append((f"{table}_like", f"CREATE TABLE `{db}`.{table}_like LIKE `{db}`.{table}"))
    # inline keys (UNIQUE keys on whole TEXT/BLOB columns, with their hidden DB_ROW_HASH_n
    # columns: see _forms)
    out.append(
        ("tu", f"CREATE TABLE `{db}`.tu (Id INT NULL UNIQUE, k VARCHAR(5) NOT NULL UNIQUE KEY, v INT)")
    )
    out.append(("tu", f"ALTER TABLE `{db}`.tu MODIFY v INT NOT NULL UNIQUE FIRST"))
    out.append(("tu", f"ALTER TABLE `{db}`.tu DROP INDEX V, MODIFY k VARCHAR(5) NULL"))
    out.append(("tu", f"ALTER TABLE `{db}`.tu MODIFY id INT NOT NULL, RENAME INDEX id TO j"))
    # a unique key's NULL-ness is decided when it is made: MODIFY ... NOT NULL does not promote it,
    # a new key, LIKE or dropping the key before it does
    out.append(("q", f"CREATE TABLE `{db}`.q (a INT NULL, b INT NULL, UNIQUE KEY ua (a), UNIQUE KEY ub (b))"))
    out.append(("q", f"ALTER TABLE `{db}`.q MODIFY b INT NOT NULL"))
    out.append(("q", f"ALTER TABLE `{db}`.q ADD COLUMN z INT NOT NULL"))
    out.append(("q_like", f"CREATE TABLE `{db}`.q_like LIKE `{db}`.q"))
    out.append(("q", f"ALTER TABLE `{db}`.q ADD UNIQUE KEY uz (z)"))
    out.append(("q", f"ALTER TABLE `{db}`.q DROP INDEX uz, ADD UNIQUE KEY ud (b)"))
    out.append(("q_like", f"ALTER TABLE `{db}`.q_like MODIFY b INT NULL"))
    out.append(("q_like", f"ALTER TABLE `{db}`.q_like DROP INDEX ub, MODIFY a INT NOT NULL, ADD UNIQUE (b)"))
    out.append(
        ("f", f"CREATE TABLE `{db}`.f (a INT NOT NULL, b INT NOT NULL, UNIQUE KEY ua (a), UNIQUE KEY ub (b))")
    )
    out.append(("f", f"ALTER TABLE `{db}`.f MODIFY a INT NULL"))  # ub first: b
    out.append(("f", f"ALTER TABLE `{db}`.f MODIFY b INT NULL"))
    out.append(("f", f"ALTER TABLE `{db}`.f MODIFY b INT NOT NULL"))  # ub is first: b
    out.append(("f", f"ALTER TABLE `{db}`.f ADD KEY plain (a), MODIFY a INT NOT NULL"))
    out.append(("f", f"ALTER TABLE `{db}`.f DROP INDEX ub"))
    return out + _forms(db, hash_keys_change)


_FORM_TABLES = {
    "pr",
    "pr_like",
    "ph",
    "pl",
    "pk",
    "cs",
    "cs2",
    "cs3",
    "df",
    "gc",
    "hu",
    "hk",
    "sy",
    "ma",
    "cr",
}


def _forms(db: str, hash_keys_change: bool) -> list[tuple[str, str]]:
    """Statement forms the generator does not make: partitions, ``CREATE ... SELECT``, ``LIKE`` of a
    partitioned table, defaults of every literal kind, stored/persistent generated and invisible
    columns, UNIQUE keys MariaDB enforces with a hidden hash column, system versioning, and MySQL
    and MariaDB syntax variants (``IF [NOT] EXISTS``, parenthesized ``ADD``, ``ALGORITHM``/``LOCK``,
    ``ONLINE``/``IGNORE``, table options)."""
    q = f"`{db}`"
    return [
        (t, sql.format(d=q))
        for t, sql in [
            ("pr", "CREATE TABLE {d}.pr (id INT NOT NULL, d DATE NOT NULL DEFAULT '1999-01-01', "
                   "v VARCHAR(10), "
                   "PRIMARY KEY (id, d)) PARTITION BY RANGE (YEAR(d)) (PARTITION p0 VALUES LESS THAN (2000), "
                   "PARTITION p1 VALUES LESS THAN MAXVALUE)"),
            ("pr", "ALTER TABLE {d}.pr ADD COLUMN w INT UNSIGNED AFTER id"),
            ("pr", "ALTER TABLE {d}.pr REORGANIZE PARTITION p1 INTO (PARTITION p1 VALUES LESS THAN (2030), "
                   "PARTITION p2 VALUES LESS THAN MAXVALUE)"),
            ("pr_like", "CREATE TABLE {d}.pr_like LIKE {d}.pr"),
            ("pr", "ALTER TABLE {d}.pr REMOVE PARTITIONING"),
            ("ph", "CREATE TABLE {d}.ph (id INT PRIMARY KEY, v BIGINT) PARTITION BY HASH (id) PARTITIONS 3"),
            ("ph", "ALTER TABLE {d}.ph PARTITION BY KEY (id) PARTITIONS 2"),
            ("ph", "ALTER TABLE {d}.ph COALESCE PARTITION 1"),
            ("pl", "CREATE TABLE {d}.pl (id INT NOT NULL, c CHAR(2) NOT NULL DEFAULT 'a', "
                   "PRIMARY KEY (id, c)) PARTITION BY LIST COLUMNS (c) (PARTITION pa VALUES IN ('a', 'b'), "
                   "PARTITION pz VALUES IN ('z'))"),
            ("pk", "CREATE TABLE {d}.pk (id INT PRIMARY KEY, t TINYTEXT) PARTITION BY KEY () PARTITIONS 2"),
            ("cs", "CREATE TABLE {d}.cs SELECT 1 AS id, 'x' AS b, CAST(2.5 AS DECIMAL(4,2)) AS c"),
            ("cs2", "CREATE TABLE {d}.cs2 (id INT PRIMARY KEY, z INT DEFAULT 4) SELECT 2 AS id, 'yy' AS b"),
            ("cs2", "ALTER TABLE {d}.cs2 ADD COLUMN w VARCHAR(3) CHARACTER SET latin1 FIRST"),
            ("cs3", "CREATE TABLE IF NOT EXISTS {d}.cs3 AS SELECT * FROM {d}.ph"),
            ("df", "CREATE TABLE {d}.df (id INT PRIMARY KEY DEFAULT 1, b BIT(3) DEFAULT b'101', "
                   "x VARBINARY(4) DEFAULT x'41', n DECIMAL(5,2) DEFAULT -1.5, s VARCHAR(9) DEFAULT 'it''s', "
                   "u CHAR(36) DEFAULT (UUID()), ts TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) "
                   "ON UPDATE CURRENT_TIMESTAMP(3), dt DATETIME DEFAULT '2020-01-02 03:04:05', "
                   "e ENUM('p','q') DEFAULT 'q', "
                   "f DOUBLE DEFAULT 1e3, y YEAR DEFAULT 2024)"),
            ("df", "ALTER TABLE {d}.df ALTER COLUMN s DROP DEFAULT, ALTER n SET DEFAULT 2, "
                   "MODIFY COLUMN f FLOAT DEFAULT 0"),
            ("gc", "CREATE TABLE {d}.gc (id INT PRIMARY KEY, a INT DEFAULT 2, g INT AS (a * 2) STORED, "
                   "g2 VARCHAR(10) GENERATED ALWAYS AS (CONCAT('a', id)) VIRTUAL, g3 BIGINT AS (a + id) "
                   "PERSISTENT, h INT INVISIBLE DEFAULT 3)"),
            ("gc", "ALTER TABLE {d}.gc ADD COLUMN i2 INT INVISIBLE FIRST, MODIFY h INT DEFAULT 5"),
            ("gc", "ALTER TABLE {d}.gc DROP COLUMN g, ADD g4 DATE AS (FROM_DAYS(id + 700000)) VIRTUAL"),
            ("hu", "CREATE TABLE {d}.hu (id INT PRIMARY KEY, t TEXT, b BLOB, "
                   "v VARCHAR(3000) CHARACTER SET utf8mb4, "
                   "UNIQUE KEY ut (t), UNIQUE (b(10)), UNIQUE KEY uv (v))"),
            ("hu", "ALTER TABLE {d}.hu ADD COLUMN m MEDIUMTEXT, DROP INDEX ut, ADD UNIQUE KEY um (m)"),
            *(
                [("hk", "CREATE TABLE {d}.hk (id INT PRIMARY KEY, t TEXT, UNIQUE KEY ut (t))"),
                 ("hk", "ALTER TABLE {d}.hk ADD UNIQUE KEY ux (id, t) USING HASH")]
                # with MINIMAL metadata the hidden hash columns are matched by the server's HASH
                # keys now: once their number changed, the older row images stop decoding with a
                # clear stop (tests/airflow/test_remedies.py takes its remedy)
                if hash_keys_change else []
            ),
            # not here: WITH SYSTEM VERSIONING (the row images carry the hidden row_start/row_end and
            # history rows, keyed by (id, row_end)): see test_system_versioning_is_a_clear_stop
            ("sy", "CREATE TABLE {d}.sy (id INT NOT NULL, a INT, PRIMARY KEY (id)) ENGINE=InnoDB "
                   "AUTO_INCREMENT=5 MAX_ROWS=100 STATS_SAMPLE_PAGES=5 PACK_KEYS=1"),
            ("sy", "ALTER TABLE {d}.sy ADD COLUMN (b INT UNSIGNED, c VARCHAR(4) CHARSET ascii)"),
            ("sy", "ALTER TABLE {d}.sy ADD d TINYINT FIRST, ALGORITHM=INPLACE, LOCK=NONE"),
            ("sy", "ALTER ONLINE TABLE {d}.sy CHANGE COLUMN d d2 TINYINT, ADD COLUMN o INT"),
            ("sy", "ALTER IGNORE TABLE {d}.sy MODIFY COLUMN a BIGINT NOT NULL"),
            ("sy", "ALTER TABLE {d}.sy ADD COLUMN IF NOT EXISTS a INT, ADD COLUMN IF NOT EXISTS e DATE"),
            ("sy", "ALTER TABLE {d}.sy DROP COLUMN IF EXISTS nope, MODIFY IF EXISTS e DATETIME(2)"),
            ("sy", "ALTER TABLE {d}.sy MAX_ROWS=200, STATS_AUTO_RECALC=0"),
            ("sy", "ALTER TABLE {d}.sy CHARACTER SET latin1"),
            ("sy", "ALTER TABLE {d}.sy ADD COLUMN f VARCHAR(3)"),
            ("sy", "ALTER TABLE {d}.sy CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"),
            ("sy", "ALTER TABLE {d}.sy RENAME COLUMN f TO `F é`, ADD KEY k (a)"),
            ("sy", "ALTER TABLE {d}.sy ENGINE=InnoDB, FORCE"),
            ("ma", "CREATE TABLE {d}.ma (id INT PRIMARY KEY, v INT) ENGINE=MyISAM"),
            ("ma", "ALTER TABLE {d}.ma ENGINE=Aria TRANSACTIONAL=1, ADD COLUMN w INT"),
            ("cr", "CREATE OR REPLACE TABLE {d}.cr (id INT PRIMARY KEY)"),
            ("cr", "CREATE OR REPLACE TABLE {d}.cr (id BIGINT PRIMARY KEY, v TEXT)"),
        ]
    ]  # fmt: skip


def _server_view(conn: Any, db: str, table: str) -> dict[str, Any]:
    """What ``information_schema`` says of the table now."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COLLATION_NAME, NUMERIC_PRECISION, NUMERIC_SCALE, "
            "DATETIME_PRECISION, COLUMN_KEY FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
            "TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (db, table),
        )
        columns = cur.fetchall()
        cur.execute("SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
        ids = dict(cur.fetchall())
        cur.execute(
            "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
            "AND TABLE_NAME = %s AND NON_UNIQUE = 0 ORDER BY SEQ_IN_INDEX",
            (db, table),
        )
        uniques: dict[str, list[str]] = {}
        for index, column in cur.fetchall():
            uniques.setdefault(index, []).append(column)
    pri = {c[0] for c in columns if c[7] == "PRI"}
    key = next((tuple(cols) for cols in uniques.values() if set(cols) == pri), ()) if pri else ()
    view = []
    for name, data_type, column_type, collation, prec, scale, fsp, _ in columns:
        ctype = TYPE_NAMES.get(data_type, T.STRING)
        view.append(
            {
                "name": name,
                "type": _family(ctype),
                "unsigned": "unsigned" in column_type if ctype in _NUMERIC else False,
                "charset": collation_codec(ids[collation]) if collation else None,
                "scale": (prec, scale) if ctype == T.NEWDECIMAL else None,
                "fsp": fsp if ctype in (T.TIME2, T.DATETIME2, T.TIMESTAMP2) else None,
                "labels": column_type[column_type.index("(") :] if ctype in (T.ENUM, T.SET) else None,
            }
        )
    return {"columns": view, "key": key}


_NUMERIC = {T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.NEWDECIMAL, T.FLOAT, T.DOUBLE}
_BLOB = {T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.JSON}


def _family(t: ColumnType) -> ColumnType:
    return T.BLOB if t in _BLOB else t  # the binlog says BLOB for every size; MariaDB's JSON is LONGTEXT


def _decoded_view(change: RowChange) -> dict[str, Any]:
    """What the schema a row was decoded with says (the schema history's with MINIMAL metadata)."""
    ts = change.table_schema
    assert ts is not None
    view = []
    for c in ts.columns:
        text = c.type in (T.STRING, T.VARCHAR, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.ENUM, T.SET)
        labels = c.enum_values if c.type == T.ENUM else c.set_values if c.type == T.SET else None
        view.append(
            {
                "name": c.name,
                "type": _family(c.type),
                "unsigned": c.unsigned if c.type in _NUMERIC else False,
                "charset": c.charset if text and not c.is_binary else None,
                "scale": (c.precision, c.scale) if c.type == T.NEWDECIMAL else None,
                "fsp": c.fsp if c.type in (T.TIME2, T.DATETIME2, T.TIMESTAMP2) else None,
                "labels": "(" + ",".join(_quote(v) for v in labels) + ")" if labels is not None else None,
            }
        )
    return {"columns": view, "key": tuple(change.primary_key)}


def _quote(label: str) -> str:
    return "'" + label.replace("'", "''") + "'"


@pytest.fixture(params=["full", "minimal"])
def server(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("mariadb" if request.param == "full" else "mariadb_minimal")


def test_schema_history_agrees_with_information_schema(server: Any) -> None:
    db = f"diff_{random.randrange(10**8)}"
    server.execute(f"CREATE DATABASE `{db}`")
    conn = server.connect()
    conn.autocommit(True)
    start = head(server)
    expected: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    corpus = _corpus(db, hash_keys_change=server.row_metadata == "FULL")
    rejected = no_row = 0
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")  # rows of defaults for any NOT NULL column
            for table, statement in corpus:
                try:
                    cur.execute(statement)
                except pymysql.MySQLError as exc:
                    rejected += 1  # the server refused it: nothing to follow
                    if table in _FORM_TABLES:
                        print("refused:", statement[:90], exc)
                    continue
                written = 0
                if " SELECT " in statement:  # CREATE ... SELECT: its own rows are in the binlog too
                    cur.execute(f"SELECT COUNT(*) FROM `{db}`.`{table}`")
                    written = cur.fetchone()[0]
                    view = _server_view(conn, db, table)
                    expected.setdefault(table, []).extend([(statement, view)] * written)
                cur.execute(f"DELETE FROM `{db}`.`{table}`")
                try:
                    cur.execute(f"INSERT INTO `{db}`.`{table}` () VALUES ()")
                except pymysql.MySQLError:
                    no_row += 1  # a default the server refuses (a JSON column's CHECK): nothing decoded
                    continue
                expected.setdefault(table, []).append((statement, _server_view(conn, db, table)))
        inst = make(server, db, MemoryMetaManager(), start=StartSpec(position=str(start)))
        inst.subscribe(stop_at="head")
        rows = [e for e in drain(inst) if isinstance(e, RowChange) and e.op == Op.INSERT]
        inst.close()
    finally:
        server.execute(f"DROP DATABASE IF EXISTS `{db}`")
        conn.close()
    seen: dict[str, int] = {}
    disagreements = []
    checks = 0
    for change in rows:
        i = seen[change.table] = seen.get(change.table, -1) + 1
        statement, want = expected[change.table][i]
        got = _decoded_view(change)
        checks += 1
        if got != want:
            disagreements.append((statement, got, want))
    applied = sum(len(v) for v in expected.values())
    print(
        f"schema differential ({server.row_metadata}): {len(corpus)} statements, {applied} applied by the "
        f"server ({rejected} refused), {no_row} without a row of defaults, {checks} checked, "
        f"{checks - len(disagreements)} agree"
    )
    assert checks == applied
    for statement, got, want in disagreements[:5]:
        print(statement)
        for g, w in zip(got["columns"], want["columns"], strict=False):
            if g != w:
                print("  history", g, "\n  server ", w)
        if got["key"] != want["key"] or len(got["columns"]) != len(want["columns"]):
            print("  key", got["key"], "server", want["key"], [c["name"] for c in got["columns"]])
    assert not disagreements
