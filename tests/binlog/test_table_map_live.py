"""Live, binlog_row_metadata=MINIMAL: the TABLE_MAP lacks names and ENUM/SET labels; a schema
resolver built from information_schema (the way the canal layer does it) fills them in, and the
decoded rows equal a SELECT. Without the resolver the same rows decode positionally."""

from __future__ import annotations

import re
from typing import Any

import pytest
from binlog_capture import master_position, select_rows

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.files import read_binlog_file
from airflow_provider_binlog.binlog.parser import BinlogParser
from airflow_provider_binlog.binlog.position import file_number
from airflow_provider_binlog.binlog.rows import RowsEvent
from airflow_provider_binlog.binlog.table_map import TableMapEvent

pytestmark = pytest.mark.integration

TYPES = {
    "tinyint": T.TINY, "smallint": T.SHORT, "mediumint": T.INT24, "int": T.LONG, "bigint": T.LONGLONG,
    "float": T.FLOAT, "double": T.DOUBLE, "decimal": T.NEWDECIMAL, "year": T.YEAR, "date": T.DATE,
    "time": T.TIME2, "datetime": T.DATETIME2, "timestamp": T.TIMESTAMP2, "char": T.STRING,
    "binary": T.STRING, "varchar": T.VARCHAR, "varbinary": T.VARCHAR, "tinytext": T.BLOB, "text": T.BLOB,
    "mediumtext": T.BLOB, "longtext": T.BLOB, "tinyblob": T.BLOB, "blob": T.BLOB, "mediumblob": T.BLOB,
    "longblob": T.BLOB, "enum": T.ENUM, "set": T.SET, "bit": T.BIT,
}  # fmt: skip


def information_schema_resolver(conn: Any) -> Any:
    def resolve(tm: TableMapEvent) -> TableSchema:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.COLUMN_KEY, co.ID "
                "FROM information_schema.COLUMNS c LEFT JOIN information_schema.COLLATIONS co "
                "ON co.COLLATION_NAME = c.COLLATION_NAME "
                "WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s ORDER BY c.ORDINAL_POSITION",
                (tm.schema, tm.table),
            )
            cols, key = [], []
            for name, data_type, column_type, column_key, collation in cur.fetchall():
                labels = tuple(re.findall(r"'((?:[^']|'')*)'", column_type)) or None
                cols.append(
                    ColumnDef(
                        name, TYPES[data_type], unsigned="unsigned" in column_type, collation=collation,
                        enum_values=labels if data_type == "enum" else None,
                        set_values=labels if data_type == "set" else None,
                    )
                )  # fmt: skip
                if column_key == "PRI":
                    key.append(name)
        return TableSchema(tm.schema, tm.table, tuple(cols), tuple(key))

    return resolve


def test_minimal_metadata_with_information_schema_resolver(mariadb_minimal: Any) -> None:
    server = mariadb_minimal
    server.execute("CREATE DATABASE IF NOT EXISTS mini")
    conn = server.connect("mini")
    with conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE t (id INT UNSIGNED PRIMARY KEY, y YEAR, u INT UNSIGNED, e ENUM('on', 'off'),"
            " s SET('r', 'w', 'x'), name VARCHAR(20) CHARACTER SET latin1, b VARBINARY(4), d DECIMAL(9,3))"
        )
        start = master_position(cur)
        cur.execute("INSERT INTO t VALUES (4294967295, 2024, 4000000000, 'off', 'r,x', 'Ça', x'00ff', -1.5)")
        cur.execute("INSERT INTO t VALUES (1, NULL, 0, 'on', '', '', '', 0)")
        cur.execute("UPDATE t SET e = 'on', s = 'w' WHERE id = 4294967295")
        expected = select_rows(cur, "t")[1]
        cur.execute("FLUSH BINARY LOGS")
    names = sorted((p.name for p in server.datadir.glob("mysql-bin.[0-9]*")), key=file_number)[:-1]
    names = [n for n in names if file_number(n) >= file_number(start[0])]

    def decode(resolver: Any) -> list[Any]:
        parser = BinlogParser(names[0])
        parser.ctx.schema_resolver = resolver
        out = []
        for name in names:
            first = start[1] if name == start[0] else 4
            for ev in read_binlog_file(server.datadir / name, start=first, parser=parser):
                if isinstance(ev.body, RowsEvent) and ev.body.schema == "mini":
                    out += ev.body.images()
        return out

    resolved = decode(information_schema_resolver(conn))
    conn.close()
    assert len(resolved) == 3
    assert resolved[0][1] == {**expected[4294967295], "e": "off", "s": "r,x"}
    assert resolved[1][1] == expected[1]
    assert resolved[2][1] == expected[4294967295]
    # without the resolver: positional names, ENUM index and SET bitmask, signedness still exact
    bare = decode(None)
    assert bare[0][1]["@1"] == 4294967295 and bare[0][1]["@3"] == 4000000000
    assert bare[0][1]["@4"] == 2 and bare[0][1]["@5"] == 0b101 and bare[0][1]["@6"] == "Ça"


def test_every_collation_id_the_server_lists_has_its_charset(mariadb: Any) -> None:
    """The decoder's collation table against the server's own list, full names and ids included
    (MariaDB 10.10+ UCA 14.0.0 collations: ids 2048 and up, ``utf8mb4_uca1400_ai_ci`` = 2304), so
    a TABLE_MAP naming any of them decodes its text columns with the right codec."""
    from airflow_provider_binlog.binlog.table_map import collation_charset

    rows = mariadb.execute(
        "SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY "
        "UNION SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATIONS WHERE ID IS NOT NULL"
    )
    wrong = {int(i): (c, collation_charset(int(i))) for i, c in rows if collation_charset(int(i)) != c}
    assert len(rows) > 300 and not wrong, wrong
    assert collation_charset(2304) == "utf8mb4"
