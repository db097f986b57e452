"""GtidTracker over real fixture streams: transaction ends and the GTID position after them."""

from __future__ import annotations

import struct
from pathlib import Path

from eventbytes import raw_event

from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.files import read_binlog_file
from airflow_provider_binlog.binlog.gtid import MariadbGtidList, MysqlGtidSet
from airflow_provider_binlog.binlog.gtid_tracker import GtidTracker
from airflow_provider_binlog.binlog.parser import BinlogParser

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "binlog"
E = EventType


def test_mysql_gtids_ddl_and_dml() -> None:
    t = GtidTracker()
    ends = []
    for ev in read_binlog_file(FIXTURES / "mysql-enum-string-set.000001"):
        if t.update(ev):
            ends.append((ev.type_name, str(t.position)))
    u = "93e95066-a2f4-11ec-9b69-9657f0ae95e2"
    assert ends == [
        ("QUERY_EVENT", f"{u}:1"),  # ALTER USER (DDL, no BEGIN)
        ("QUERY_EVENT", f"{u}:1-2"),  # CREATE TABLE
        ("XID_EVENT", f"{u}:1-3"),
        ("XID_EVENT", f"{u}:1-4"),
        ("XID_EVENT", f"{u}:1-5"),
    ]


def test_mysql_tagged_gtid_joins_the_starting_set() -> None:
    start = MysqlGtidSet.parse("55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2")
    t = GtidTracker(start)
    for ev in read_binlog_file(FIXTURES / "binlog_transaction_with_GTID_TAG.000001"):
        t.update(ev)
    assert str(t.position) == "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-3"
    assert t.current is None


def test_anonymous_gtids_end_transactions_without_adding() -> None:
    t = GtidTracker()
    ends = sum(t.update(ev) for ev in read_binlog_file(FIXTURES / "transaction_compression.000001"))
    assert ends == 1 and t.position is None


def test_mariadb_position_advances_per_domain() -> None:
    t = GtidTracker(MariadbGtidList.parse("0-1-0,5-3-9"))
    for ev in read_binlog_file(FIXTURES / "mariadb-bin.000001"):
        t.update(ev)
    assert str(t.position) == "0-1-2,5-3-9"


def test_mariadb_standalone_ddl_and_xa() -> None:
    p = BinlogParser("m.000001", checksum=True)
    t = GtidTracker()

    def q(sql: bytes) -> bytes:
        return struct.pack("<IIBHH", 1, 0, 0, 0, 0) + b"\0" + sql

    def gtid(seq: int, flags: int) -> bytes:
        return struct.pack("<QIB", seq, 0, flags) + b"\0" * 6

    stream = [
        (E.GTID_EVENT, gtid(1, 0x01 | 0x20), False),
        (E.QUERY_EVENT, q(b"CREATE TABLE x (a INT)"), True),
        (E.GTID_EVENT, gtid(2, 0x40), False),
        (E.QUERY_EVENT, q(b"XA START X'78',X'',1"), False),
        (E.QUERY_EVENT, q(b"XA END X'78',X'',1"), False),
        (E.QUERY_EVENT, q(b"XA PREPARE X'78',X'',1"), True),
        (E.GTID_EVENT, gtid(3, 0x80 | 0x01), False),
        (E.QUERY_EVENT, q(b"XA COMMIT X'78',X'',1"), True),
    ]
    end = 4
    for code, body, ends in stream:
        raw = raw_event(code, body, end=end + 19 + len(body) + 4, server_id=9)
        end += len(raw)
        (ev,) = p.parse(raw)
        assert t.update(ev) is ends, ev
    assert str(t.position) == "0-9-3"
