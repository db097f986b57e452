"""Schedule-aligned stop points (issue #22, :mod:`airflow_provider_binlog.canal.positions.interval`): the stop
of an interval ending at T against the harness's MariaDB with a writer running, the bounded wait
while the server has not reached T, the binlog index's cache, MariaDB GTID stops live, and the
transaction scanner's GTID sets and time split on recorded MySQL binlog files."""

from __future__ import annotations

import datetime as dt
import itertools
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.binlog.files import read_binlog_file
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.positions import binlog_index
from airflow_provider_binlog.canal.positions.binlog_index import BinlogIndex
from airflow_provider_binlog.canal.positions.interval import (
    IntervalNotReachedError,
    commit_point_at,
    interval_stop,
    split_at,
    transactions,
)
from airflow_provider_binlog.canal.positions.points import parse_point
from airflow_provider_binlog.canal.positions.start import side_client, start_at_time
from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.drain.source import stop_point

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "binlog"


@pytest.fixture
def client(mariadb: MariaDbServer) -> ReplicationClient:
    return ReplicationClient(
        ReplicationConfig(
            host=mariadb.host, port=mariadb.port, user=mariadb.repl_user, password=mariadb.repl_password
        )
    )


@pytest.fixture
def table(mariadb: MariaDbServer, database: str) -> str:
    name = f"`{database}`.`ticks`"
    mariadb.execute(f"CREATE TABLE {name} (id INT AUTO_INCREMENT PRIMARY KEY, at DATETIME(6))")
    return name


def _server_now(mariadb: MariaDbServer) -> float:
    return float(mariadb.execute("SELECT UNIX_TIMESTAMP(NOW(6))")[0][0])


class Writer:
    """One autocommit INSERT every ``every`` seconds on its own connection until stopped."""

    def __init__(self, mariadb: MariaDbServer, table: str, every: float = 0.05) -> None:
        self.conn = mariadb.connect()
        self.table, self.every = table, every
        self.stopped = threading.Event()
        self.rows = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self.conn.cursor() as cur:
            while not self.stopped.is_set():
                cur.execute(f"INSERT INTO {self.table} (at) VALUES (NOW(6))")
                self.rows += 1
                time.sleep(self.every)

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(10)
        self.conn.close()


def _txns(client: ReplicationClient, start: BinlogPosition, stop: BinlogPosition) -> list[Any]:
    with side_client(client).dump(start, stop_at=stop) as stream:
        return list(transactions(stream))


@pytest.mark.integration
def test_interval_stop_waits_for_the_instant_and_is_reproducible(
    mariadb: MariaDbServer, client: ReplicationClient, table: str
) -> None:
    """With a writer running and T 1.5 s ahead on the server's clock, the search waits until a
    transaction committed at or after T exists, then stops right before it; after the writer has
    written far past T, the same search gives the same stop and the same last transaction; every
    transaction before the stop is committed before T, the one at the stop at or after it."""
    begin = client.head_position()
    with Writer(mariadb, table):
        when = _server_now(mariadb) + 1.5
        lines: list[str] = []
        first = interval_stop(client, when, wait=20, poll=0.2, report=lambda level, line: lines.append(line))
        assert first.waited > 0.5 and lines and "has not reached the interval's end" in lines[0], lines
        time.sleep(1.5)
    again = interval_stop(client, when, wait=0)
    assert (again.stop, again.last) == (first.stop, first.last)
    assert first.last is not None and first.end is not None and first.end.position == first.last.end
    txns = _txns(client, begin, client.head_position())
    before = [t for t in txns if t.start < first.stop]
    assert before and all(t.time < when for t in before), before[-3:]
    assert before[-1] == first.last
    at = next(t for t in txns if t.start == first.stop)
    assert at.time >= when
    assert first.last.gtid is not None and first.last.gtid.startswith("0-")
    point = commit_point_at(client, first.last.end)
    assert (point.gtid, point.time) == (first.last.gtid, first.last.time)
    cursor_point = commit_point_at(client, BinlogPosition(first.last.end.file, first.last.end.pos - 31), True)
    assert cursor_point == point  # a cursor at the transaction's XID event is after the transaction


@pytest.mark.integration
def test_idle_server_past_the_instant_stops_at_the_head(
    mariadb: MariaDbServer, client: ReplicationClient, table: str
) -> None:
    """No transaction after T yet, but the server's clock is past T (plus the settle margin): the
    head is the stop; once one is written, the search finds it exactly there."""
    mariadb.execute(f"INSERT INTO {table} (at) VALUES (NOW(6))")
    when = _server_now(mariadb)
    time.sleep(math.ceil(when) - when + 0.6)  # past T's second (binlog times are whole seconds) + settle
    waits: list[str] = []
    idle = interval_stop(client, when, wait=5, poll=0.1, settle=0.5, report=lambda lv, ln: waits.append(ln))
    assert idle.reached and "is the stop" in idle.reason and not waits, (idle, waits)
    assert idle.stop == client.head_position()
    mariadb.execute(f"INSERT INTO {table} (at) VALUES (NOW(6))")
    later = interval_stop(client, when, wait=0)
    assert later.stop == idle.stop and later.last == idle.last, (later, idle)
    instant = dt.datetime.fromtimestamp(when, dt.timezone.utc)
    assert stop_point(client, instant.isoformat()) == later.stop  # the same rule, without the wait
    assert start_at_time(client, when) == later.stop  # a start at T is where an interval ending at T stops


@pytest.mark.integration
def test_wait_is_bounded_and_says_why(mariadb: MariaDbServer, client: ReplicationClient, table: str) -> None:
    """T a minute ahead, nothing written: the search gives up after ``wait`` (well inside the bound
    plus slack) with a message naming T, the head and the remedies; ``on_unreached='head'`` stops
    at the head instead, saying a rerun may stop later."""
    when = _server_now(mariadb) + 60
    started = time.monotonic()
    with pytest.raises(IntervalNotReachedError) as failed:
        interval_stop(client, when, wait=1.5, poll=0.3)
    elapsed = time.monotonic() - started
    assert elapsed < 1.5 + 2.0, elapsed
    message = str(failed.value)
    assert "has not reached the interval's end" in message and "stop_wait=1.5" in message, message
    assert str(client.head_position()) in message and "on_unreached='head'" in message, message
    lines: list[str] = []
    started = time.monotonic()
    head = interval_stop(
        client, when, wait=1.0, poll=0.3, on_unreached="head", report=lambda lv, ln: lines.append(ln)
    )
    assert time.monotonic() - started < 1.0 + 2.0
    assert not head.reached and head.stop == client.head_position()
    assert any("A rerun of this interval may stop later" in line for line in lines), lines


@pytest.mark.integration
def test_index_caches_closed_files(mariadb: MariaDbServer, client: ReplicationClient, table: str) -> None:
    """The index reads a closed file's start time once; a second search reads none of them."""
    for _ in range(3):
        mariadb.execute(f"INSERT INTO {table} (at) VALUES (NOW(6))")
        mariadb.execute("FLUSH BINARY LOGS")
    binlog_index.clear_cache()
    when = _server_now(mariadb) - 0.5
    first = BinlogIndex(client)
    file = first.file_at(when)
    assert first.reads >= 1
    second = BinlogIndex(client)
    assert second.file_at(when) == file
    assert second.reads <= 1, second.reads  # at most the head file, which is never cached
    starts = [first.start_time(i) for i in range(len(first.files))]
    assert all(s is not None for s in starts) and starts == sorted(starts)  # type: ignore[type-var]


@pytest.mark.integration
def test_mariadb_gtid_stop(mariadb: MariaDbServer, client: ReplicationClient, table: str) -> None:
    """``stop_at='gtid:...'``: right after the transaction that completes the GTID position."""
    begin = client.head_position()
    mariadb.execute(f"INSERT INTO {table} (at) VALUES (NOW(6))")
    mariadb.execute(f"INSERT INTO {table} (at) VALUES (NOW(6))")
    (gtid,) = mariadb.execute("SELECT @@GLOBAL.gtid_binlog_pos")[0]
    mariadb.execute(f"INSERT INTO {table} (at) VALUES (NOW(6))")
    stop = stop_point(client, f"gtid:{gtid}")
    txns = _txns(client, begin, client.head_position())
    ending = next(t for t in txns if t.gtid == gtid)
    assert stop == ending.end, (stop, ending)


def test_mysql_gtid_sets_and_time_split_on_recorded_files() -> None:
    """MySQL's GTID sets (from PREVIOUS_GTIDS, tagged ones too) grow per transaction, and the
    interval rule splits the recorded transactions by commit time."""
    tagged = list(transactions(read_binlog_file(FIXTURES / "binlog_transaction_with_GTID_TAG.000001")))
    assert [t.gtid for t in tagged] == ["55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-3"]
    txns = list(transactions(read_binlog_file(FIXTURES / "mysql-enum-string-set.000001")))
    uuid = "93e95066-a2f4-11ec-9b69-9657f0ae95e2"
    assert [t.gtid for t in txns] == [f"{uuid}:1"] + [f"{uuid}:1-{n}" for n in range(2, 6)]
    assert all(a.end == b.start for a, b in itertools.pairwise(txns))
    when = txns[2].time  # committed at exactly T: not before T
    found, last = split_at(txns, when)
    assert (found, last) == (txns[2], txns[1])
    assert split_at(txns, when + 0.5) == (txns[3], txns[2])
    assert split_at(txns, txns[-1].time + 1) == (None, txns[-1])
    assert parse_point({"position": str(last.end), "gtid": last.gtid, "time": None}).position == str(last.end)
    assert parse_point({"position": None, "gtid": last.gtid, "time": None}).gtid == last.gtid


@pytest.fixture(autouse=True)
def _fresh_index_cache() -> Iterator[None]:
    yield
    binlog_index.clear_cache()
