"""Golden bytes from a real MariaDB: the events control_events.sql wrote (see golden/), decoded offline.

Covers what the MySQL fixtures cannot: MariaDB GTIDs (domains, XA, standalone), GTID_LIST and
BINLOG_CHECKPOINT with content, ANNOTATE_ROWS, statement-format INTVAR/RAND/USER_VAR,
XA_PREPARE, QUERY_COMPRESSED and the compressed row events, a ROTATE into a second file, and
``LOAD DATA`` in statement format (BEGIN_LOAD_QUERY, EXECUTE_LOAD_QUERY).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.binlog.event import Event
from airflow_provider_binlog.binlog.events import (
    IntvarEvent,
    LoadBlockEvent,
    RandEvent,
    RotateEvent,
    UserVarEvent,
    XaPrepareEvent,
)
from airflow_provider_binlog.binlog.events_mariadb import BinlogCheckpointEvent, MariadbGtidEvent
from airflow_provider_binlog.binlog.events_query import ExecuteLoadQueryEvent, QueryEvent
from airflow_provider_binlog.binlog.gtid import MariadbGtidList
from airflow_provider_binlog.binlog.gtid_tracker import GtidTracker
from airflow_provider_binlog.binlog.parser import BinlogParser

GOLDEN = json.loads((Path(__file__).parent / "golden" / "control_events.json").read_text())
SERVER_ID = GOLDEN["server_id"]


def decode_all() -> list[Event]:
    out: list[Event] = []
    parser: BinlogParser | None = None
    for e in GOLDEN["events"]:
        if parser is None or e["file"] != parser.file:
            parser = BinlogParser(e["file"], ctx=parser.ctx if parser else None)
        out.extend(parser.parse(bytes.fromhex(e["hex"]), e["pos"]))
    return out


EVENTS = decode_all()
BY_POS = {(e.file, e.pos): e for e in EVENTS}


def at(pos: int, file: str = "mysql-bin.000001") -> Any:
    return BY_POS[(file, pos)].body


def test_every_event_decodes_and_follows_the_previous() -> None:
    assert GOLDEN["server"].startswith("10.")
    for prev, cur in itertools.pairwise(EVENTS):
        if cur.file == prev.file and cur.pos != 256 and prev.pos > 285:
            assert cur.pos == prev.end_pos
    assert sum(1 for e in EVENTS if e.type_name == "FORMAT_DESCRIPTION_EVENT") == 2


@pytest.mark.parametrize(
    ("pos", "expected"),
    [
        (1440, IntvarEvent(2, 1)),  # INSERT_ID
        (1472, UserVarEvent("greeting", False, 0, 45, b"hello", None)),
        (1967, IntvarEvent(1, 2)),  # LAST_INSERT_ID
        (1999, IntvarEvent(2, 3)),
        (2490, XaPrepareEvent(False, 1, b"xa1", b"")),
        (4334, RotateEvent(4, "mysql-bin.000002", False)),
    ],
)
def test_small_bodies(pos: int, expected: object) -> None:
    assert at(pos) == expected


def test_rand_seeds() -> None:
    r = at(1736)
    assert isinstance(r, RandEvent) and r.seed1 > 0 and r.seed2 > 0


def test_queries_and_status() -> None:
    create = at(1097)
    assert isinstance(create, QueryEvent)
    assert (create.schema, create.sql, create.error_code) == ("golden_ev", "CREATE DATABASE golden_ev", 0)
    assert create.status.charset == (45, 45, 45) and create.status.catalog == "std"
    assert create.status.sql_mode == 1411383296 and create.status.unparsed == b""
    ddl = at(1236)
    assert ddl.sql.startswith("CREATE TABLE golden_ev.t ") and ddl.status.mariadb_xid == 13
    assert at(1522).sql == "INSERT INTO golden_ev.t (v) VALUES (@greeting)"
    compressed = BY_POS[("mysql-bin.000001", 3216)]
    assert compressed.type_name == "QUERY_COMPRESSED_EVENT"
    assert compressed.body.sql == (
        "CREATE TABLE golden_ev.compressed (id INT PRIMARY KEY, long_text VARCHAR(500)) ENGINE=InnoDB"
    )


def test_mariadb_gtids() -> None:
    gtids = [e.body for e in EVENTS if isinstance(e.body, MariadbGtidEvent)]
    assert [str(g) for g in gtids] == [
        *(f"0-{SERVER_ID}-{n}" for n in range(5, 13)),
        f"7-{SERVER_ID}-1",
        *(f"0-{SERVER_ID}-{n}" for n in range(13, 19)),
    ]
    ddl = at(1055)
    assert ddl.standalone and ddl.flags == 41
    prepared, committed = at(2178), at(2529)
    assert (prepared.xa_format_id, prepared.xa_gtrid, prepared.xa_bqual) == (1, b"xa1", b"")
    assert prepared.flags & 0x40 and committed.flags & 0x80
    assert prepared.flags_extra == 1 and prepared.extra_engines is not None


def test_gtid_list_and_checkpoint_of_the_second_file() -> None:
    gl = at(256, "mysql-bin.000002")
    assert gl.gtids == MariadbGtidList.parse(f"7-{SERVER_ID}-1,0-{SERVER_ID}-16")
    assert at(315, "mysql-bin.000002") == BinlogCheckpointEvent("mysql-bin.000001")
    assert at(256).gtids == MariadbGtidList()


def test_rows_plain_and_compressed() -> None:
    def images(pos: int, file: str = "mysql-bin.000001") -> list[Any]:
        return list(at(pos, file).images())

    assert images(2360) == [(None, {"id": 4, "v": "in xa"})]
    assert images(541, "mysql-bin.000002") == [(None, {"id": 7, "v": "second file"})]
    assert BY_POS[("mysql-bin.000001", 3628)].type_name == "WRITE_ROWS_COMPRESSED_EVENT_V1"
    assert images(3628) == [
        (None, {"id": 1, "long_text": "abc" * 100}),
        (None, {"id": 2, "long_text": "xyz" * 100}),
    ]
    assert images(3952) == [({"id": 1, "long_text": "abc" * 100}, {"id": 1, "long_text": "def" * 100})]
    assert images(4246) == [({"id": 2, "long_text": "xyz" * 100}, None)]
    assert at(3628).type_code == 23 and at(3952).type_code == 24 and at(4246).type_code == 25


def test_load_data_in_statement_format() -> None:
    block = at(697, "mysql-bin.000002")
    assert block == LoadBlockEvent(1, b"loaded 1\nloaded 2\n")
    load = at(774, "mysql-bin.000002")
    assert isinstance(load, ExecuteLoadQueryEvent)
    assert load.file_id == 1 and load.sql.startswith("LOAD DATA INFILE '")
    # the part a replica rewrites to name its own copy of the file
    assert load.sql[load.start_pos : load.end_pos].strip().startswith("INFILE '")
    assert "load.txt" in load.sql[load.start_pos : load.end_pos]
    assert "INTO TABLE `golden_ev`.`t`" in load.sql


def test_tracker_over_the_golden_stream() -> None:
    t = GtidTracker(MariadbGtidList.parse(f"0-{SERVER_ID}-4"))
    ends = [e.pos for e in EVENTS if t.update(e)]
    assert str(t.position) == f"0-{SERVER_ID}-18,7-{SERVER_ID}-1"
    assert 2490 in ends and 2574 in ends  # XA PREPARE, then XA COMMIT in its own group
