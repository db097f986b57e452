"""Live: every column type with edge values, decoded from the binlog, equals a SELECT of the rows."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from binlog_capture import (
    GOLDEN,
    binlog_events,
    master_position,
    select_rows,
    sql_statements,
    statement_groups,
)

pytestmark = pytest.mark.integration


def _run(mariadb: Any, database: str, statements: list[str], table: str) -> tuple[list[Any], list[Any]]:
    """Run statements one by one; return the row-event groups and the table snapshot after each DML."""
    conn = mariadb.connect(database)
    snapshots = []
    try:
        with conn.cursor() as cur:
            start = master_position(cur)
            for sql in statements:
                cur.execute(sql)
                if sql.split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE"):
                    snapshots.append(select_rows(cur, table)[1])
            cur.execute("FLUSH BINARY LOGS")
    finally:
        conn.close()
    events = binlog_events(mariadb.datadir, start, database)
    return statement_groups(events), snapshots


def _check(groups: list[Any], snapshots: list[dict[int, dict[str, Any]]]) -> int:
    assert len(groups) == len(snapshots)
    checked = 0
    previous: dict[int, dict[str, Any]] = {}
    for group, snap in zip(groups, snapshots, strict=True):
        for ev in group:
            for before, after in ev.images():
                if before is not None:
                    assert before == previous[before["id"]], f"before image of id {before['id']}"
                if after is not None:
                    expected = snap[after["id"]]
                    for k, v in expected.items():
                        assert after[k] == v, f"id {after['id']} column {k}: {after[k]!r} != {v!r}"
                    assert after == expected
                else:
                    assert before is not None and before["id"] not in snap
                checked += 1
        previous = snap
    return checked


def test_all_types_equal_select(mariadb: Any, database: str) -> None:
    groups, snapshots = _run(mariadb, database, sql_statements(GOLDEN / "all_types.sql"), "all_types")
    assert _check(groups, snapshots) == 5 + 2 + 1 + 1


def test_large_values_equal_select(mariadb: Any, database: str) -> None:
    blob = os.urandom(16 * 1024 * 1024)
    items = [{"i": i, "s": "v" * (i % 50), "f": i / 7, "n": None, "b": i % 2 == 0} for i in range(20000)]
    doc = {"items": items}
    statements = [
        "CREATE TABLE big (id INT PRIMARY KEY, lb LONGBLOB, lt LONGTEXT, j JSON, mb MEDIUMBLOB)",
    ]
    conn = mariadb.connect(database)
    try:
        with conn.cursor() as cur:
            cur.execute(statements[0])
            start = master_position(cur)
            cur.execute(
                "INSERT INTO big VALUES (1, %s, %s, %s, %s)",
                (blob, "ü😀" * 1_000_000, json.dumps(doc), blob[: (1 << 24) - 1]),
            )
            snap = select_rows(cur, "big")[1]
            cur.execute("UPDATE big SET lb = NULL, lt = '' WHERE id = 1")
            snap2 = select_rows(cur, "big")[1]
            cur.execute("FLUSH BINARY LOGS")
    finally:
        conn.close()
    groups = statement_groups(binlog_events(mariadb.datadir, start, database))
    assert _check(groups, [snap, snap2]) == 2
    ((row,),) = [g[0].rows for g in groups[:1]]
    assert len(row["lb"]) == 16 * 1024 * 1024 and json.loads(row["j"]) == doc
