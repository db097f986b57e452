"""The reader's reconnect bound counts one outage at a time: a dump that received events before it
failed starts a new count (issue #17). The bounded give-up itself, with the source really stopped,
is in ``tests/faults/test_bounded_waits.py``."""

from __future__ import annotations

import time
from typing import Any

import pymysql
import pytest

from airflow_provider_binlog.canal.change import Entry, RowChange
from airflow_provider_binlog.canal.meta import MemoryMetaManager
from airflow_provider_binlog.canal.positions.start import StartSpec

from .test_instance import head, make

pytestmark = pytest.mark.integration


def _kill_dumps(mariadb: Any) -> int:
    killed = 0
    for (tid,) in mariadb.execute(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%%' AND USER = %s",
        (mariadb.repl_user,),
    ):
        try:
            mariadb.execute(f"KILL {int(tid)}")
            killed += 1
        except pymysql.err.OperationalError:
            pass  # already gone
    return killed


def test_each_outage_counts_on_its_own(mariadb: Any, database: str) -> None:
    """``reconnect_attempts=1``: kills of the dump, each followed by a successful reconnect, never
    exhaust it (a count over the whole run would fail at the second reconnect); every change
    arrives once, in order. (A late kill may find the rest already in the socket buffers.)"""
    mariadb.execute(f"CREATE TABLE `{database}`.r (id INT PRIMARY KEY, t INT, pad TEXT)")
    start = head(mariadb)
    conn = mariadb.connect(database)
    pad = "p" * 10000  # 30 MB of binlog: much more than the socket buffers hold
    try:
        with conn.cursor() as cur:
            for t in range(30):
                conn.begin()
                cur.executemany(
                    "INSERT INTO r VALUES (%s, %s, %s)", [(t * 100 + i, t, pad) for i in range(100)]
                )
                conn.commit()
    finally:
        conn.close()
    inst = make(
        mariadb, database, MemoryMetaManager(), start=StartSpec(position=str(start)),
        max_entries=16, reconnect_initial=0.1, reconnect_attempts=1, reconnect_timeout=None,
    )  # fmt: skip
    inst.subscribe(stop_at="head")
    got: list[Entry] = []
    kills = 0
    deadline = time.monotonic() + 60
    try:
        while not inst.done:
            assert time.monotonic() < deadline
            batch = inst.get_without_ack(50, timeout=0.5)
            if batch.id is None:
                continue
            got.extend(batch.entries)
            inst.ack(batch.id)
            if kills < 3 and len(got) > 300 * (kills + 1) and inst.reconnects >= kills:
                kills += _kill_dumps(mariadb) > 0
    finally:
        inst.close()
    assert kills >= 2 and inst.reconnects >= 2, (kills, inst.reconnects, len(got))
    ids = [e.after["id"] for e in got if isinstance(e, RowChange) and e.after]
    assert ids == list(range(3000))
