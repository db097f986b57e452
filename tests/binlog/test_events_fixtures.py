"""Every fixture binlog in tests/fixtures/binlog/ decodes event by event as its README says.

Row values are asserted in the row decoder's tests; here: event order, positions, checksums and
the non-row bodies.
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest

from airflow_provider_binlog.binlog.constants import ChecksumAlg, EventType
from airflow_provider_binlog.binlog.event import Event, UnknownEvent
from airflow_provider_binlog.binlog.events import (
    FormatDescriptionEvent,
    RotateEvent,
    TransactionPayloadEvent,
    XidEvent,
)
from airflow_provider_binlog.binlog.events_gtid import GtidEvent, PreviousGtidsEvent
from airflow_provider_binlog.binlog.events_mariadb import (
    AnnotateRowsEvent,
    BinlogCheckpointEvent,
    GtidListEvent,
    MariadbGtidEvent,
)
from airflow_provider_binlog.binlog.events_query import QueryEvent
from airflow_provider_binlog.binlog.files import read_binlog_file
from airflow_provider_binlog.binlog.gtid import MysqlGtidSet

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "binlog"
E = EventType


def events(name: str) -> list[Event]:
    return list(read_binlog_file(FIXTURES / name))


def types(evs: list[Event], top_level: bool = True) -> list[str]:
    return [e.type_name for e in evs if (e.payload_index is None) == top_level]


ALL = sorted(p.name for p in FIXTURES.iterdir() if p.name != "README.md")


@pytest.mark.parametrize("name", ALL)
def test_every_fixture_decodes_with_contiguous_positions(name: str) -> None:
    evs = events(name)
    top = [e for e in evs if e.payload_index is None]
    assert isinstance(top[0].body, FormatDescriptionEvent)
    assert top[0].pos == 4
    assert top[0].body.checksum_alg == ChecksumAlg.CRC32
    for prev, cur in itertools.pairwise(top):
        assert cur.pos == prev.end_pos, (prev, cur)
        assert cur.header.log_pos == cur.end_pos
    assert top[-1].end_pos == (FIXTURES / name).stat().st_size
    assert all(e.file == name for e in top)


def test_transaction_compression_inner_events_in_order() -> None:
    evs = events("transaction_compression.000001")
    assert types(evs) == [
        "FORMAT_DESCRIPTION_EVENT",
        "PREVIOUS_GTIDS_LOG_EVENT",
        "ANONYMOUS_GTID_LOG_EVENT",
        "TRANSACTION_PAYLOAD_EVENT",
        "ROTATE_EVENT",
    ]
    payload = next(e for e in evs if e.type_name == "TRANSACTION_PAYLOAD_EVENT")
    assert isinstance(payload.body, TransactionPayloadEvent)
    assert payload.body.compression == 0
    inner = [e for e in evs if e.payload_index is not None]
    assert [e.type_name for e in inner] == [
        "QUERY_EVENT",
        "TABLE_MAP_EVENT",
        "WRITE_ROWS_EVENT_V2",
        "XID_EVENT",
    ]
    assert [e.payload_index for e in inner] == [0, 1, 2, 3]
    assert all(e.pos == payload.pos and e.end_pos == payload.end_pos for e in inner)
    # inner events follow their payload event immediately, then the ROTATE
    idx = evs.index(payload)
    assert evs[idx + 1 : idx + 5] == inner
    assert isinstance(evs[idx + 5].body, RotateEvent)
    assert inner[0].body.sql == "BEGIN"
    assert inner[0].body.schema == "test"
    assert isinstance(inner[3].body, XidEvent)
    assert sum(e.header.event_size for e in inner) == payload.body.uncompressed_size
    assert str(evs[1].body.gtid_set) == "357df524-4139-11ee-9979-b033ee13919e:1"


def test_gtid_tagged_fixture() -> None:
    evs = events("binlog_transaction_with_GTID_TAG.000001")
    assert types(evs) == [
        "FORMAT_DESCRIPTION_EVENT",
        "PREVIOUS_GTIDS_LOG_EVENT",
        "GTID_TAGGED_LOG_EVENT",
        "QUERY_EVENT",
        "TABLE_MAP_EVENT",
        "WRITE_ROWS_EVENT_V2",
        "XID_EVENT",
        "ROTATE_EVENT",
    ]
    prev = evs[1].body
    assert isinstance(prev, PreviousGtidsEvent)
    assert str(prev.gtid_set) == "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2"
    # the binary form round-trips exactly
    raw = (FIXTURES / "binlog_transaction_with_GTID_TAG.000001").read_bytes()
    body = raw[evs[1].pos + 19 : evs[1].end_pos - 4]
    assert prev.gtid_set.encode() == body
    gtid = evs[2].body
    assert isinstance(gtid, GtidEvent)
    assert str(gtid) == "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"
    assert gtid.tag == "mytag" and gtid.gno == 3 and not gtid.anonymous
    assert gtid.sequence_number == 1 and gtid.last_committed == 0
    assert gtid.immediate_commit_timestamp > 1_700_000_000_000_000
    assert gtid.original_commit_timestamp == gtid.immediate_commit_timestamp
    assert gtid.transaction_length > 0
    assert gtid.gtid in prev.gtid_set.add(gtid.gtid)
    assert gtid.gtid not in prev.gtid_set
    rot = evs[-1].body
    assert rot == RotateEvent(4, "binlog.000005", False)


def test_gtid_events_with_commit_timestamps() -> None:
    evs = events("mysql-enum-string-set.000001")
    gtids = [e.body for e in evs if e.header.type_code == E.GTID_LOG_EVENT]
    assert [str(g) for g in gtids] == [f"93e95066-a2f4-11ec-9b69-9657f0ae95e2:{n}" for n in range(1, 6)]
    assert gtids[2].immediate_commit_timestamp == 1647193281668333
    assert gtids[2].original_commit_timestamp == gtids[2].immediate_commit_timestamp
    assert [g.sequence_number for g in gtids] == [1, 2, 3, 4, 5]


def test_json_binlog_event_counts() -> None:
    evs = events("json.binlog.000001")
    counts = Counter(types(evs))
    assert counts["ANONYMOUS_GTID_LOG_EVENT"] == 8
    assert counts["QUERY_EVENT"] == 8
    assert counts["TABLE_MAP_EVENT"] == 6
    assert counts["WRITE_ROWS_EVENT_V2"] == 4
    assert counts["UPDATE_ROWS_EVENT_V2"] == 1
    assert counts["PARTIAL_UPDATE_ROWS_EVENT"] == 1
    queries = [e.body for e in evs if isinstance(e.body, QueryEvent)]
    create = next(q for q in queries if q.sql.startswith("CREATE TABLE t"))
    assert create.schema == "mysql"
    assert create.error_code == 0
    assert create.status.sql_mode == 1168113696
    assert create.status.charset == (255, 255, 255)
    assert create.status.default_collation_for_utf8mb4 == 255
    assert create.status.ddl_xid is not None


def test_mariadb_fixture() -> None:
    evs = events("mariadb-bin.000001")
    assert types(evs) == [
        "FORMAT_DESCRIPTION_EVENT",
        "GTID_LIST_EVENT",
        "BINLOG_CHECKPOINT_EVENT",
        *(["GTID_EVENT", "ANNOTATE_ROWS_EVENT", "TABLE_MAP_EVENT", "WRITE_ROWS_EVENT_V1", "XID_EVENT"] * 2),
    ]
    fde = evs[0].body
    assert fde.flavor == "mariadb"
    assert isinstance(evs[1].body, GtidListEvent) and not evs[1].body.gtids
    cp = evs[2].body
    assert cp == BinlogCheckpointEvent("mariadb-bin.000001")
    g = [e.body for e in evs if isinstance(e.body, MariadbGtidEvent)]
    assert [str(x) for x in g] == ["0-1-1", "0-1-2"]
    assert not g[0].standalone
    ann = evs[4].body
    assert isinstance(ann, AnnotateRowsEvent)
    assert ann.sql == "insert into outbox (topic, event_type, event) values ('foo', 'JSON', '{\"foo\":1}')"
    assert [e.body.xid for e in evs if isinstance(e.body, XidEvent)] == [800, 820]


def test_minimal_metadata_fixture_event_level() -> None:
    evs = events("minimal_row_metadata.000001")
    assert types(evs) == [
        "FORMAT_DESCRIPTION_EVENT",
        "PREVIOUS_GTIDS_LOG_EVENT",
        "ANONYMOUS_GTID_LOG_EVENT",
        "QUERY_EVENT",
        "TABLE_MAP_EVENT",
        "WRITE_ROWS_EVENT_V2",
        "XID_EVENT",
        "ROTATE_EVENT",
    ]
    assert evs[1].body.gtid_set == MysqlGtidSet()
    assert evs[2].body.anonymous


def test_checksum_crc32_fixture_counts() -> None:
    evs = events("mysql-bin.checksum-crc32")
    counts = Counter(types(evs))
    assert counts["WRITE_ROWS_EVENT_V2"] == 34
    assert counts["UPDATE_ROWS_EVENT_V2"] == 20
    assert counts["DELETE_ROWS_EVENT_V2"] == 6
    assert counts["XID_EVENT"] == 60
    assert evs[-1].body == RotateEvent(4, "mysql-bin.000002", False)


def test_aurora_unknown_event_is_kept_and_reading_goes_on() -> None:
    evs = events("mysql-bin.aurora-padding")
    unknown = [e for e in evs if isinstance(e.body, UnknownEvent)]
    assert len(unknown) == 1
    u = unknown[0]
    assert u.type_name == "UNKNOWN_EVENT_100"
    assert u.body.type_code == 100
    assert len(u.body.data) == u.header.event_size - 19 - 4
    after = evs[evs.index(u) + 1 :]
    assert after and isinstance(after[0].body, QueryEvent)


def test_start_offset_skips_to_position() -> None:
    name = "mysql-enum-string-set.000001"
    evs = list(read_binlog_file(FIXTURES / name, start=1560))
    assert evs[0].pos == 1560
    assert evs[0].type_name == "GTID_LOG_EVENT"
    assert len(evs) == 10


def test_several_files_share_one_parser() -> None:
    from airflow_provider_binlog.binlog.files import read_binlog_files

    names = ["mysql_type_bit.000001", "minimal_row_metadata.000001"]
    evs = list(read_binlog_files([FIXTURES / n for n in names]))
    assert [e.file for e in evs if e.type_name == "FORMAT_DESCRIPTION_EVENT"] == names
    assert len(evs) == len(events(names[0])) + len(events(names[1]))
    assert evs[-1].body == RotateEvent(4, "binlog.000021", False)
