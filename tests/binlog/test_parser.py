"""Parser: framing, checksums, dispatch, unknown and unsupported events, MariaDB compression.

Synthetic events are built byte by byte here (layouts in ``binlog/events.py``); real ones come from
the fixture binlogs.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from eventbytes import mariadb_compress, raw_event

from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.errors import ChecksumError, DecodeError, UnsupportedError
from airflow_provider_binlog.binlog.event import UnknownEvent
from airflow_provider_binlog.binlog.events import (
    HeartbeatEvent,
    HeartbeatEventV2,
    IncidentEvent,
    IntvarEvent,
    RandEvent,
    RotateEvent,
    RowsQueryEvent,
    StopEvent,
    UserVarEvent,
    XaPrepareEvent,
    XidEvent,
)
from airflow_provider_binlog.binlog.events_mariadb import GtidListEvent, MariadbGtidEvent
from airflow_provider_binlog.binlog.events_query import QueryEvent
from airflow_provider_binlog.binlog.files import read_binlog_file
from airflow_provider_binlog.binlog.gtid import MariadbGtidList
from airflow_provider_binlog.binlog.parser import BinlogParser

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "binlog"
E = EventType


def parse_one(raw: bytes, parser: BinlogParser | None = None) -> object:
    p = parser or BinlogParser("mysql-bin.000003", 4, checksum=True)
    events = list(p.parse(raw))
    assert len(events) == 1
    return events[0]


def query_body(schema: bytes, sql: bytes, status: bytes = b"", error: int = 0) -> bytes:
    return struct.pack("<IIBHH", 42, 3, len(schema), error, len(status)) + status + schema + b"\0" + sql


# ------------------------------------------------------------------ checksums


def test_checksum_mismatch_raises_naming_type_and_position(tmp_path: Path) -> None:
    data = bytearray((FIXTURES / "mysql-enum-string-set.000001").read_bytes())
    data[1100] ^= 0x01  # inside the WRITE_ROWS_EVENT_V2 at 1077
    path = tmp_path / "mysql-bin.000009"
    path.write_bytes(bytes(data))
    with pytest.raises(ChecksumError) as info:
        list(read_binlog_file(path))
    assert info.value.event_type == "WRITE_ROWS_EVENT_V2"
    assert info.value.position == "mysql-bin.000009:1077"
    assert "WRITE_ROWS_EVENT_V2 at mysql-bin.000009:1077" in str(info.value)


def test_checksum_mismatch_in_format_description(tmp_path: Path) -> None:
    data = bytearray((FIXTURES / "mariadb-bin.000001").read_bytes())
    data[30] ^= 0x40  # server version text
    path = tmp_path / "x.000001"
    path.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match=r"FORMAT_DESCRIPTION_EVENT at x.000001:4"):
        list(read_binlog_file(path))


def test_checksum_mismatch_on_a_stream_event() -> None:
    raw = bytearray(raw_event(E.XID_EVENT, struct.pack("<Q", 5), end=231))
    raw[20] ^= 0xFF
    with pytest.raises(ChecksumError) as info:
        parse_one(bytes(raw))
    assert info.value.position == "mysql-bin.000003:200"
    assert info.value.event_type == "XID_EVENT"


def test_no_checksum_stream() -> None:
    ev = parse_one(raw_event(E.XID_EVENT, struct.pack("<Q", 5), end=100, checksum=False), BinlogParser("f.1"))
    assert ev.body == XidEvent(5)


# ------------------------------------------------------------------ unknown / unsupported


def test_unknown_event_keeps_bytes_and_the_stream_goes_on() -> None:
    p = BinlogParser("mysql-bin.000003", 4, checksum=True)
    (u,) = p.parse(raw_event(200, b"\x01\x02\x03", end=30))
    assert isinstance(u.body, UnknownEvent)
    assert u.body == UnknownEvent(200, b"\x01\x02\x03")
    assert u.type_name == "UNKNOWN_EVENT_200"
    (x,) = p.parse(raw_event(E.XID_EVENT, struct.pack("<Q", 9), end=61))
    assert x.body == XidEvent(9)
    assert p.position.pos == 61


def test_start_encryption_is_unsupported_with_a_clear_message() -> None:
    body = bytes([1]) + struct.pack("<I", 1) + b"\0" * 12
    with pytest.raises(UnsupportedError, match="encrypted binlogs are unsupported") as info:
        parse_one(raw_event(E.START_ENCRYPTION_EVENT, body, end=300))
    assert "START_ENCRYPTION_EVENT at mysql-bin.000003:260" in str(info.value)


def test_truncated_body_is_a_decode_error_with_position() -> None:
    with pytest.raises(DecodeError) as info:
        parse_one(raw_event(E.XID_EVENT, b"\x01\x02", end=100))
    assert info.value.event_type == "XID_EVENT"
    assert info.value.position == "mysql-bin.000003:75"


def test_event_size_must_match() -> None:
    raw = raw_event(E.XID_EVENT, struct.pack("<Q", 5), end=100)
    with pytest.raises(DecodeError, match="event_size"):
        parse_one(raw + b"\0")
    with pytest.raises(DecodeError, match="truncated"):
        parse_one(raw[:10])


def test_truncated_file_tail(tmp_path: Path) -> None:
    data = (FIXTURES / "mysql_type_bit.000001").read_bytes()
    path = tmp_path / "t.000001"
    path.write_bytes(data[:950])  # cuts the WRITE_ROWS_EVENT_V2 at 927
    with pytest.raises(DecodeError) as info:
        list(read_binlog_file(path))
    assert info.value.position == "t.000001:927"
    assert info.value.event_type == "WRITE_ROWS_EVENT_V2"
    path.write_bytes(data[:930])  # inside the header
    with pytest.raises(DecodeError, match="header") as info:
        list(read_binlog_file(path))
    assert info.value.position == "t.000001:927"


def test_bad_magic(tmp_path: Path) -> None:
    path = tmp_path / "nope"
    path.write_bytes(b"\xfebim" + b"\0" * 40)
    with pytest.raises(DecodeError, match="not a binlog file"):
        list(read_binlog_file(path))


# ------------------------------------------------------------------ positions


def test_fake_rotate_sets_file_and_position_without_advancing() -> None:
    p = BinlogParser(checksum=True)
    (r,) = p.parse(raw_event(E.ROTATE_EVENT, struct.pack("<Q", 1234) + b"mysql-bin.000042", timestamp=0))
    assert r.body == RotateEvent(1234, "mysql-bin.000042", True)
    assert str(p.position) == "mysql-bin.000042:1234"
    (x,) = p.parse(raw_event(E.XID_EVENT, struct.pack("<Q", 1), end=1265))
    assert (x.file, x.pos, x.end_pos) == ("mysql-bin.000042", 1234, 1265)
    # a heartbeat does not move the position
    (h,) = p.parse(raw_event(E.HEARTBEAT_LOG_EVENT, b"mysql-bin.000042", end=1265, timestamp=0))
    assert h.body == HeartbeatEvent("mysql-bin.000042", 1265)
    assert str(p.position) == "mysql-bin.000042:1265"
    # a real rotate at the end of a file
    (r2,) = p.parse(raw_event(E.ROTATE_EVENT, struct.pack("<Q", 4) + b"mysql-bin.000043", end=1312))
    assert (r2.file, r2.pos) == ("mysql-bin.000042", 1265)
    assert not r2.body.artificial
    assert str(p.position) == "mysql-bin.000043:4"


# ------------------------------------------------------------------ bodies


def test_query_event_with_all_status_variables() -> None:
    status = (
        b"\x00" + struct.pack("<I", 0x4000)  # flags2
        + b"\x01" + struct.pack("<Q", 1436549152)  # sql_mode
        + b"\x06\x03std"  # catalog
        + b"\x03" + struct.pack("<HH", 2, 1)  # auto increment
        + b"\x04" + struct.pack("<HHH", 33, 33, 8)  # charset
        + b"\x05\x06+00:00"  # time zone
        + b"\x07" + struct.pack("<H", 0)  # lc_time_names
        + b"\x08" + struct.pack("<H", 45)  # charset_database
        + b"\x09" + struct.pack("<Q", 3)  # table map for update
        + b"\x0a" + struct.pack("<I", 99)  # master data written
        + b"\x0b\x04root\x09localhost"  # invoker
        + b"\x0c\x02db1\x00db2\x00"  # updated db names
        + b"\x0d" + (123456).to_bytes(3, "little")  # microseconds
        + b"\x10\x01"  # explicit defaults for timestamp
        + b"\x11" + struct.pack("<Q", 77)  # ddl xid
        + b"\x12" + struct.pack("<H", 255)  # default utf8mb4 collation
        + b"\x13\x01"  # sql_require_primary_key
        + b"\x14\x00"  # default table encryption
        + b"\x81" + struct.pack("<Q", 555)  # MariaDB Q_XID
        + b"\x82\x04" + struct.pack("<Q", 31)  # MariaDB Q_GTID_FLAGS3 with commit-alter seq
        + b"\x83\x01" + struct.pack("<HH", 45, 224)  # MariaDB Q_CHARACTER_SET_COLLATIONS
    )  # fmt: skip
    sql = b"ALTER TABLE t ADD c INT"
    ev = parse_one(raw_event(E.QUERY_EVENT, query_body(b"shop", sql, status, 0), end=500))
    q = ev.body
    assert isinstance(q, QueryEvent)
    assert (q.schema, q.sql, q.error_code, q.exec_time, q.thread_id) == ("shop", sql.decode(), 0, 3, 42)
    s = q.status
    assert s.flags2 == 0x4000 and s.sql_mode == 1436549152 and s.catalog == "std"
    assert (s.auto_increment_increment, s.auto_increment_offset) == (2, 1)
    assert s.charset == (33, 33, 8) and s.time_zone == "+00:00" and s.lc_time_names == 0
    assert s.charset_database == 45 and s.table_map_for_update == 3 and s.master_data_written == 99
    assert (s.invoker_user, s.invoker_host) == ("root", "localhost")
    assert s.updated_db_names == ("db1", "db2") and s.microseconds == 123456
    assert s.explicit_defaults_for_timestamp is True and s.ddl_xid == 77
    assert s.default_collation_for_utf8mb4 == 255 and s.sql_require_primary_key is True
    assert s.default_table_encryption is False and s.mariadb_xid == 555
    assert s.gtid_flags3 == 4 and s.start_alter_seq_no == 31
    assert s.character_set_collations == ((45, 224),)
    assert s.unparsed == b""


def test_query_mariadb_hrnow_and_unknown_status_code() -> None:
    status = b"\x80" + (654321).to_bytes(3, "little") + b"\xf0\x01\x02"
    q = parse_one(raw_event(E.QUERY_EVENT, query_body(b"", b"COMMIT", status, 1062), end=500)).body
    assert q.status.microseconds == 654321
    assert q.status.unparsed == b"\xf0\x01\x02"
    assert q.error_code == 1062 and q.schema == "" and q.sql == "COMMIT"


def test_query_compressed() -> None:
    sql = b"INSERT INTO t VALUES " + b",".join(b"(%d)" % i for i in range(200))
    body = query_body(b"d", mariadb_compress(sql))
    ev = parse_one(raw_event(E.QUERY_COMPRESSED_EVENT, body, end=900))
    assert ev.type_name == "QUERY_COMPRESSED_EVENT"
    assert isinstance(ev.body, QueryEvent)
    assert ev.body.sql == sql.decode() and ev.body.schema == "d"
    with pytest.raises(DecodeError) as info:
        parse_one(raw_event(E.QUERY_COMPRESSED_EVENT, query_body(b"d", b"\x81\x05garbage"), end=900))
    assert info.value.event_type == "QUERY_COMPRESSED_EVENT"


@pytest.mark.parametrize(
    ("code", "body", "expected"),
    [
        (E.INTVAR_EVENT, b"\x02" + struct.pack("<Q", 1001), IntvarEvent(2, 1001)),
        (E.RAND_EVENT, struct.pack("<QQ", 11, 22), RandEvent(11, 22)),
        (E.STOP_EVENT, b"", StopEvent()),
        (E.ROWS_QUERY_LOG_EVENT, b"\x07DELETE 1", RowsQueryEvent("DELETE 1")),
        (E.INCIDENT_EVENT, struct.pack("<H", 1) + b"\x04lost", IncidentEvent(1, "lost")),
        (
            E.USER_VAR_EVENT,
            struct.pack("<I", 1) + b"a\x00\x00" + struct.pack("<II", 33, 2) + b"hi\x00",
            UserVarEvent("a", False, 0, 33, b"hi", 0),
        ),
        (E.USER_VAR_EVENT, struct.pack("<I", 1) + b"b" + b"\x01", UserVarEvent("b", True)),
        (
            E.XA_PREPARE_LOG_EVENT,
            b"\x00" + struct.pack("<III", 1, 3, 2) + b"abcxy",
            XaPrepareEvent(False, 1, b"abc", b"xy"),
        ),
        (
            E.HEARTBEAT_LOG_EVENT_V2,
            b"\x01\x10mysql-bin.000007\x02\x09\xfe" + struct.pack("<Q", 5_000_000_000) + b"\x00",
            HeartbeatEventV2("mysql-bin.000007", 5_000_000_000),
        ),
    ],
)
def test_small_bodies(code: int, body: bytes, expected: object) -> None:
    assert parse_one(raw_event(code, body, end=400)).body == expected


def test_mariadb_gtid_with_commit_id_xa_and_extra_flags() -> None:
    body = (
        struct.pack("<QIB", 100, 3, 0x02 | 0x40)
        + struct.pack("<Q", 9999)  # commit id
        + struct.pack("<IBB", 1, 3, 2) + b"gtrbq"  # XA id
        + b"\x05\x02" + struct.pack("<Q", 77)  # extra flags: multi-engine, commit-alter
    )  # fmt: skip
    g = parse_one(raw_event(E.GTID_EVENT, body, end=400, server_id=12)).body
    assert isinstance(g, MariadbGtidEvent)
    assert str(g) == "3-12-100"
    assert g.commit_id == 9999 and (g.xa_format_id, g.xa_gtrid, g.xa_bqual) == (1, b"gtr", b"bq")
    assert (g.flags_extra, g.extra_engines, g.start_alter_seq_no) == (5, 2, 77)
    plain = parse_one(raw_event(E.GTID_EVENT, struct.pack("<QIB", 5, 0, 0x01) + b"\0" * 6, end=400)).body
    assert plain.standalone and plain.commit_id is None and plain.flags_extra == 0


def test_mariadb_gtid_list() -> None:
    body = struct.pack("<I", 2) + struct.pack("<IIQ", 0, 1, 10) + struct.pack("<IIQ", 1, 2, 7)
    g = parse_one(raw_event(E.GTID_LIST_EVENT, body, end=400)).body
    assert g == GtidListEvent(MariadbGtidList.parse("0-1-10,1-2-7"), 0)
    with pytest.raises(DecodeError):
        parse_one(raw_event(E.GTID_LIST_EVENT, struct.pack("<I", 0x0FFFFFFF), end=400))


def test_mariadb_compressed_rows_decode_like_uncompressed() -> None:
    """Re-encode the fixture's WRITE_ROWS_EVENT_V1 as WRITE_ROWS_COMPRESSED_EVENT_V1 (166)."""
    evs = list(read_binlog_file(FIXTURES / "mariadb-bin.000001"))
    data = (FIXTURES / "mariadb-bin.000001").read_bytes()
    tmap = next(e for e in evs if e.type_name == "TABLE_MAP_EVENT")
    rows = next(e for e in evs if e.type_name == "WRITE_ROWS_EVENT_V1")
    p = BinlogParser("mariadb-bin.000001", checksum=True)
    list(p.parse(data[4 : evs[0].end_pos], 4))  # the FDE
    list(p.parse(data[tmap.pos : tmap.end_pos], tmap.pos))
    body = data[rows.pos + 19 : rows.end_pos - 4]
    # table id (6), flags (2), column count (1), columns-present bitmap (1), then rows
    split = 6 + 2 + 1 + 1
    compressed = body[:split] + mariadb_compress(body[split:])
    (ev,) = p.parse(raw_event(E.WRITE_ROWS_COMPRESSED_EVENT_V1, compressed, end=5000))
    assert ev.type_name == "WRITE_ROWS_COMPRESSED_EVENT_V1"
    assert ev.body.rows == rows.body.rows
    assert ev.body.kind == "insert"
    assert ev.body.rows[0]["topic"] == "foo"
