"""The schema history's charsets and collations checked against a real MariaDB's information_schema.

Each statement runs on the server, then the history applies the same text; every character column's
collation id must be the server's. Legacy schemas write ``utf8`` (``utf8mb3``), ``utf8_*`` collation
names, table-level ``COLLATE``, column-level ``CHARACTER SET``, ``NATIONAL``/``NCHAR``; a TEXT column
with no known collation would be typed ``binary`` in the lake while its row events say ``string``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.schema import SchemaHistory
from airflow_provider_binlog.canal.sql.ddl import parse_ddl
from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.lake.types import map_column

pytestmark = pytest.mark.integration

_n = itertools.count(1)

CORPUS = [
    "CREATE TABLE a (id INT PRIMARY KEY, t TEXT, v VARCHAR(10)) DEFAULT CHARSET=utf8",
    "CREATE TABLE b (id INT PRIMARY KEY, t TEXT, c CHAR(3))",
    "CREATE TABLE c (id INT PRIMARY KEY, t TEXT) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci",
    "CREATE TABLE d (id INT PRIMARY KEY, t TEXT CHARACTER SET utf8, n NATIONAL VARCHAR(10), m NCHAR(3), "
    "nc NATIONAL CHARACTER(2), nv NVARCHAR(4), l LONGTEXT CHARSET utf8mb3 COLLATE utf8mb3_bin)",
    "CREATE TABLE e (id INT PRIMARY KEY, t MEDIUMTEXT COLLATE utf8mb3_bin, u TINYTEXT) COLLATE utf8mb4_bin",
    "CREATE TABLE f (id INT PRIMARY KEY, t TEXT COLLATE utf8_general_ci, a CHAR(2) ASCII, "
    "x TEXT CHARACTER SET latin1, y TEXT COLLATE latin1_swedish_ci, z VARCHAR(5) BINARY) "
    "CHARACTER SET = latin2",
    "CREATE TABLE g (id INT PRIMARY KEY, t TEXT, e ENUM('a','b'), s SET('x')) DEFAULT CHARACTER SET utf8 "
    "DEFAULT COLLATE utf8_bin",
    "CREATE TABLE h (id INT PRIMARY KEY, t TEXT COLLATE uca1400_ai_ci) CHARSET utf8mb4",
    "CREATE TABLE i (id INT PRIMARY KEY, b BLOB, t TEXT CHARACTER SET binary)",
    "ALTER TABLE a ADD COLUMN t2 TEXT, ADD COLUMN t3 TEXT CHARACTER SET utf8mb4",
    "ALTER TABLE a MODIFY t MEDIUMTEXT CHARACTER SET utf8 COLLATE utf8_unicode_ci",
    "ALTER TABLE b DEFAULT CHARSET=utf8",
    "ALTER TABLE b ADD COLUMN t2 TEXT",
    "ALTER TABLE b CONVERT TO CHARACTER SET utf8 COLLATE utf8_unicode_ci",
    "ALTER TABLE b ADD COLUMN t3 TEXT",
    "ALTER TABLE c COLLATE utf8mb4_unicode_ci, ADD COLUMN t2 TEXT",
    "ALTER TABLE e CONVERT TO CHARACTER SET latin1",
    "ALTER TABLE f CHANGE x x2 TEXT, ADD COLUMN w TEXT",
    "CREATE TABLE j LIKE a",
    "DROP TABLE a",
    "CREATE TABLE a (id VARCHAR(20) PRIMARY KEY, name TEXT, qty INT) DEFAULT CHARSET=utf8",
    "CREATE TABLE k (id INT PRIMARY KEY, t TEXT) DEFAULT CHARSET=utf8mb3 COLLATE=utf8mb3_general_ci",
]


@pytest.fixture
def db(mariadb: MariaDbServer) -> Iterator[str]:
    name = f"cs{os.getpid()}_{next(_n)}"
    mariadb.execute(f"CREATE DATABASE `{name}`")
    try:
        yield name
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")


def _server_collations(server: MariaDbServer, db: str, table: str) -> dict[str, int | None]:
    rows = server.execute(
        "SELECT c.COLUMN_NAME, l.ID, c.DATA_TYPE FROM information_schema.COLUMNS c "
        "LEFT JOIN information_schema.COLLATION_CHARACTER_SET_APPLICABILITY l "
        "ON l.FULL_COLLATION_NAME = c.COLLATION_NAME "
        "WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s",
        (db, table),
    )
    binary = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")
    return {  # the history's id for binary strings is 63, the binary charset's (the server: NULL)
        str(name): int(cid) if cid is not None else (63 if data_type in binary else None)
        for name, cid, data_type in rows
    }


def _check(server: MariaDbServer, history: SchemaHistory, db: str, statements: list[str]) -> int:
    checked = 0
    for i, sql in enumerate(statements):
        server.execute(sql, database=db)
        stmt = parse_ddl(sql, db)
        assert stmt is not None, sql
        out = history.apply_ddl(stmt, BinlogPosition("mysql-bin.000001", 1000 + i))
        for (schema, table), ts in out.items():
            if ts is None:
                continue
            want = _server_collations(server, schema, table)
            got = {c.name: c.collation for c in ts.columns}
            assert got == want, (sql, got, want)
            for c in ts.columns:  # a character column is text in the lake, a binary one bytes
                lake = map_column(c).sql
                assert lake == ("binary" if c.collation == 63 else "string") or want[c.name] is None, (sql, c)
            checked += len(got)
    return checked


def test_history_collations_equal_the_servers(mariadb: MariaDbServer, db: str) -> None:
    history = SchemaHistory(connect=mariadb.connect)
    checked = _check(mariadb, history, db, CORPUS)
    print(f"{len(CORPUS)} statements, {checked} columns: every collation equal to the server's")


def test_a_fresh_history_alters_with_the_tables_collation_now(mariadb: MariaDbServer, db: str) -> None:
    """A later process (no CREATE seen) adds a column under the table's default as the server has it."""
    _check(mariadb, SchemaHistory(connect=mariadb.connect), db, [CORPUS[0]])
    mariadb.execute(f"CREATE DATABASE `{db}_l1` CHARACTER SET latin1")
    try:
        fresh = SchemaHistory(connect=mariadb.connect)
        assert fresh.bootstrap([(db, "a")], BinlogPosition("mysql-bin.000001", 500)) == 1
        _check(mariadb, fresh, db, ["ALTER TABLE a ADD COLUMN n TEXT"])
        _check(mariadb, SchemaHistory(connect=mariadb.connect), f"{db}_l1",
               ["CREATE TABLE z (id INT PRIMARY KEY, t TEXT, u TEXT CHARSET utf8)"])  # fmt: skip
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{db}_l1`")
