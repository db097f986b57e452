"""Snapshot values equal the binlog decoder's values for the same rows, every column type."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.binlog.rows import RowsEvent
from airflow_provider_binlog.canal.snapshot.initial import ChunkReader, table_schema

pytestmark = pytest.mark.integration

COLUMNS = """
    id INT PRIMARY KEY,
    ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED, mi MEDIUMINT,
    mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED,
    d1 DECIMAL(12,4), d2 DECIMAL(40,10), d3 DECIMAL(5,0) UNSIGNED, f FLOAT, db DOUBLE,
    b1 BIT(1), b10 BIT(10), b64 BIT(64),
    dt DATE, dtm DATETIME, dtm6 DATETIME(6), ts TIMESTAMP(3) NULL, ts0 TIMESTAMP NULL, tm TIME,
    tm2 TIME(2), y YEAR,
    c CHAR(5), vc VARCHAR(20), vl VARCHAR(20) CHARACTER SET latin1, vb VARBINARY(10), bn BINARY(4),
    tt TINYTEXT, tx TEXT, mb MEDIUMBLOB, lt LONGTEXT, js JSON,
    en ENUM('a', 'bb', 'ccc'), st SET('x', 'y', 'z'), g GEOMETRY, pt POINT
"""

ROWS = [
    # full values
    "(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, "
    "-9223372036854775808, 18446744073709551615, -12345678.1234, 123456789012345678901234567890.0123456789, "
    "99999, 1.1, -2.5e-300, 1, 1023, 18446744073709551615, '2024-02-29', '1000-01-01 00:00:00', "
    "'9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.499', '1970-01-01 00:00:01', '-838:59:59', "
    "'12:34:56.78', 2155, 'ab', 'héllo ✓', 'café', x'00ff10', x'0102', 'tiny', 'text ✓', x'deadbeef', "
    "REPEAT('x', 70000), '{\"a\": [1, 2.5, \"s\", null, true]}', 'bb', 'x,z', "
    "ST_GeomFromText('LINESTRING(0 0, 1 1)'), ST_GeomFromText('POINT(1 2)', 4326))",
    # NULLs everywhere but the key
    "(2" + ", NULL" * 40 + ")",
    # edge values: zero dates, empty strings, zero bit
    "(3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '0000-00-00', '0000-00-00 00:00:00', "
    "'2020-00-10 00:00:00', '0000-00-00 00:00:00', NULL, '00:00:00', '-00:00:00.01', 0, '', '', '', '', "
    "x'00000000', '', '', '', '', 'null', '', '', NULL, NULL)",
]


def test_snapshot_values_equal_decoded_binlog(mariadb: Any, database: str) -> None:
    mariadb.execute(f"CREATE TABLE `{database}`.allt ({COLUMNS})")
    cfg = ReplicationConfig(
        host=mariadb.host, port=mariadb.port, user=mariadb.repl_user, password=mariadb.repl_password
    )
    client = ReplicationClient(cfg)
    start = client.head_position()
    conn = mariadb.connect(database)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
            for values in ROWS:
                cur.execute(f"INSERT INTO allt VALUES {values}")
    finally:
        conn.close()
    end = client.head_position()
    decoded: dict[int, dict[str, Any]] = {}
    with client.dump(start, stop_at=end) as stream:
        for event in stream:
            if isinstance(event.body, RowsEvent) and event.body.table_map is not None:
                for _, after in event.body.images():
                    assert after is not None
                    decoded[after["id"]] = after
    assert sorted(decoded) == [1, 2, 3]

    def connect() -> Any:
        return mariadb.connect(database)

    ts = table_schema(connect, database, "allt")
    reader = ChunkReader(client, connect, ts, chunk_size=2)
    try:
        first = reader.read(1, None)
        second = reader.read(2, first.last_key)
    finally:
        reader.close()
    assert not first.final and second.final
    snap = {k[0]: v for c in (first, second) for k, v in c.rows.items()}
    assert sorted(snap) == [1, 2, 3]
    for key in (1, 2, 3):
        for col in ts.column_names:
            assert snap[key][col] == decoded[key][col], (key, col, snap[key][col], decoded[key][col])
            assert type(snap[key][col]) is type(decoded[key][col]), (key, col)
