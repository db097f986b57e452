"""Differential: on a mixed workload, every row image we decode equals python-mysql-replication's.

Both read the same binlog of the test MariaDB (ours from the binlog files, theirs over the
replication protocol). Known representational differences are normalised explicitly, in
:func:`theirs_to_ours`, and each is documented there; everything else must be equal.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

import pytest
from binlog_capture import binlog_events, master_position

pytestmark = pytest.mark.integration

UTC = dt.timezone.utc

DDL = """
CREATE TABLE mixed (
  id INT PRIMARY KEY, ti TINYINT, su SMALLINT UNSIGNED, mi MEDIUMINT, iu INT UNSIGNED, bi BIGINT,
  bu BIGINT UNSIGNED, f FLOAT, d DOUBLE, dec1 DECIMAL(12,4), dec2 DECIMAL(30,10), y YEAR, dte DATE,
  tm TIME(3), dtm DATETIME(6), ts TIMESTAMP(6) NULL DEFAULT NULL, c CHAR(8), vc VARCHAR(200),
  vl VARCHAR(50) CHARACTER SET latin1, bn VARBINARY(16), t TEXT, b BLOB, e ENUM('red', 'green', 'blue'),
  s SET('a', 'b', 'c'), bt BIT(12), j JSON
) DEFAULT CHARSET=utf8mb4
"""
WORDS = ["", "x", "hello", "ünïcødé", "😀 emoji", "a" * 150, "tab\tnew\nline", "quote'\""]


def random_row(rnd: random.Random, i: int) -> tuple[Any, ...]:
    def maybe(v: Any) -> Any:
        return None if rnd.random() < 0.1 else v

    return (
        i, maybe(rnd.randint(-128, 127)), maybe(rnd.randint(0, 65535)),
        maybe(rnd.randint(-(2**23), 2**23 - 1)), maybe(rnd.randint(0, 2**32 - 1)),
        maybe(rnd.randint(-(2**63), 2**63 - 1)), maybe(rnd.randint(0, 2**64 - 1)),
        maybe(rnd.choice([0.0, 1.5, -2.25, 3.0e10])), maybe(rnd.uniform(-1e12, 1e12)),
        maybe(Decimal(rnd.randint(-(10**12) + 1, 10**12 - 1)) / 10000),
        maybe(Decimal(rnd.randint(-(10**30) + 1, 10**30 - 1)) / 10**10),
        maybe(rnd.randint(1901, 2155)),
        maybe(dt.date(rnd.randint(1, 9999), rnd.randint(1, 12), rnd.randint(1, 28))),
        maybe(dt.timedelta(seconds=rnd.randint(-838 * 3600, 838 * 3600), milliseconds=rnd.randint(0, 999))),
        maybe(dt.datetime(rnd.randint(1000, 9999), rnd.randint(1, 12), rnd.randint(1, 28), rnd.randint(0, 23),
                          rnd.randint(0, 59), rnd.randint(0, 59), rnd.randint(0, 999999))),
        maybe(dt.datetime(rnd.randint(1971, 2037), rnd.randint(1, 12), rnd.randint(1, 28), 12, 0, 0,
                          rnd.randint(0, 999999))),
        maybe(rnd.choice(WORDS)[:8]), maybe(rnd.choice(WORDS)), maybe(rnd.choice(["", "café", "Ça", "x"])),
        maybe(rnd.randbytes(rnd.randint(0, 16))), maybe(rnd.choice(WORDS) * 3),
        maybe(rnd.randbytes(rnd.randint(0, 300))),
        maybe(rnd.choice(["red", "green", "blue"])), maybe(rnd.choice(["", "a", "a,c", "a,b,c"])),
        maybe(rnd.randint(0, 4095)), maybe('{"k": [1, 2, {"n": null}], "s": "v"}'),
    )  # fmt: skip


def theirs_to_ours(table_types: dict[str, str], name: str, value: Any) -> Any:
    """python-mysql-replication's value -> ours. The differences, one by one:

    * TIMESTAMP: theirs is a naive datetime in UTC (``utcfromtimestamp``); ours is UTC-aware.
    * SET: theirs is a Python ``set`` of labels; ours is MySQL's text form, labels in definition order.
    * BIT: theirs is a string of '0'/'1' digits; ours is an ``int``.
    * TIME(n) below zero with a fraction: theirs takes the stored fraction's complement
      (``-00:00:01.250`` comes out as ``-00:00:01.750``); ours equals SELECT (test_values_live.py
      checks negative fractional TIMEs against SELECT), so theirs is mapped back here.
    * empty BLOB/VARBINARY: theirs is ``''`` (``b''.decode('binary')`` skips the codec lookup that
      makes non-empty binary values stay bytes); ours is ``b''``.
    * empty SET: theirs is ``None``, like SQL NULL (its ``none_sources`` marker is kept per event,
      not per row, so it cannot tell them apart); ours is ``""``. Compared as equal in the test.
    * MariaDB JSON (LONGTEXT): theirs decodes the text the same; both ``str`` (no difference).
    """
    if value is None:
        return None
    t = table_types[name]
    if t == "timestamp":
        return value.replace(tzinfo=UTC)
    if t == "set":
        order = ["a", "b", "c"]
        return ",".join(x for x in order if x in value)
    if t in ("blob", "varbinary") and value == "":
        return b""
    if t == "bit":
        return int(value, 2) if isinstance(value, str) else value
    if t == "time" and value < dt.timedelta(0):
        whole, us = divmod(-value, dt.timedelta(seconds=1))
        if us:
            return -(dt.timedelta(seconds=whole) + (dt.timedelta(seconds=1) - us))
    return value


def test_every_row_image_equals_python_mysql_replication(mariadb: Any, database: str) -> None:
    from pymysqlreplication.binlogstream import BinLogStreamReader
    from pymysqlreplication.event import XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    rnd = random.Random(7)
    conn = mariadb.connect(database)
    with conn.cursor() as cur:
        cur.execute(DDL)
        start = master_position(cur)
        placeholders = ",".join(["%s"] * 26)
        for i in range(1, 301):
            cur.execute(f"INSERT INTO mixed VALUES ({placeholders})", random_row(rnd, i))
        cur.execute("BEGIN")
        for i in range(1, 301, 3):
            new = random_row(rnd, i)
            cur.execute(f"REPLACE INTO mixed VALUES ({placeholders})", new)
        cur.execute("COMMIT")
        cur.execute("UPDATE mixed SET vc = CONCAT('u-', IFNULL(vc, '')), bt = 5, ts = NULL WHERE id % 5 = 0")
        cur.execute("UPDATE mixed SET id = id + 1000 WHERE id % 7 = 0")  # primary-key change
        cur.execute("DELETE FROM mixed WHERE id % 4 = 1")
        cur.execute("INSERT INTO mixed (id) VALUES (5000), (5001)")
        cur.execute(
            "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'mixed'"
        )
        types = dict(cur.fetchall())
        head = master_position(cur)
        cur.execute("FLUSH BINARY LOGS")
    conn.close()

    ours = []
    for ev in binlog_events(mariadb.datadir, start, database):
        body = ev.body
        if hasattr(body, "images"):
            ours += [(body.kind, before, after) for before, after in body.images()]

    settings = {
        "host": mariadb.host,
        "port": mariadb.port,
        "user": mariadb.root_user,
        "passwd": mariadb.root_password,
    }
    stream = BinLogStreamReader(
        connection_settings=settings, server_id=4242, log_file=start[0], log_pos=start[1], resume_stream=True,
        blocking=True, only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent],
        only_schemas=[database], enable_logging=False,
    )  # fmt: skip
    theirs = []
    try:
        for ev in stream:
            if not isinstance(ev, XidEvent) and ev.table == "mixed":
                kinds = {WriteRowsEvent: "insert", UpdateRowsEvent: "update", DeleteRowsEvent: "delete"}
                kind = kinds[type(ev)]
                for r in ev.rows:
                    images = [
                        r.get("before_values", r.get("values") if kind == "delete" else None),
                        r.get("after_values", r.get("values") if kind == "insert" else None),
                    ]
                    norm = [
                        None if img is None else {k: theirs_to_ours(types, k, v) for k, v in img.items()}
                        for img in images
                    ]
                    theirs.append((kind, norm[0], norm[1]))
            if (stream.log_file, stream.log_pos) >= head:
                break
    finally:
        stream.close()

    assert len(ours) == len(theirs) > 500
    for k, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert a[0] == b[0], f"image {k}: kind"
        for side in (1, 2):
            if a[side] is None:
                assert b[side] is None
                continue
            for col, v in a[side].items():
                if types[col] == "set" and v == "" and b[side][col] is None:
                    continue  # theirs: empty SET -> None (see theirs_to_ours)
                w = b[side][col]
                assert v == w and type(v) is type(w), f"image {k} {col}: {v!r} != {w!r}"
            assert a[side].keys() == b[side].keys()
