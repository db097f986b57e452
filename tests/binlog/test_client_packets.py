"""The replication commands' bytes (MySQL's COM_BINLOG_DUMP_GTID cannot run against MariaDB here)."""

from __future__ import annotations

import struct
import uuid
from typing import Any

from airflow_provider_binlog.binlog.client import (
    COM_BINLOG_DUMP,
    COM_BINLOG_DUMP_GTID,
    COM_REGISTER_SLAVE,
    ReplicationClient,
    ReplicationConfig,
    ServerInfo,
)
from airflow_provider_binlog.binlog.gtid import MysqlGtidSet
from airflow_provider_binlog.binlog.position import BinlogPosition


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[int, bytes]] = []

    def _execute_command(self, command: int, payload: bytes) -> None:
        self.sent.append((command, payload))

    def _read_packet(self) -> None:
        return None


def stream_for(flavor: str, **dump: Any) -> Any:
    c = ReplicationClient(ReplicationConfig("db", 3306, "repl", "pw", server_id=4242))
    c._info = ServerInfo("8.4.3" if flavor == "mysql" else "10.11.6-MariaDB", flavor, 1, "CRC32")
    return c.dump(**dump)


def test_register_slave() -> None:
    s = stream_for("mysql", start=BinlogPosition("binlog.000001", 4))
    rec = Recorder()
    s._register(rec)
    assert rec.sent == [(COM_REGISTER_SLAVE, struct.pack("<IBBBHII", 4242, 0, 0, 0, 0, 0, 0))]


def test_dump_from_file_position() -> None:
    s = stream_for("mysql", start=BinlogPosition("binlog.000042", 1234), blocking=False)
    rec = Recorder()
    s._send_dump(rec)
    assert rec.sent == [(COM_BINLOG_DUMP, struct.pack("<IHI", 1234, 1, 4242) + b"binlog.000042")]


def test_dump_gtid_mysql() -> None:
    gtids = MysqlGtidSet.parse("55778904-0299-11f1-b1b8-4ef0c4956feb:1-13")
    s = stream_for("mysql", gtid=gtids)
    rec = Recorder()
    s._send_dump(rec)
    data = struct.pack("<Q", 1) + uuid.UUID("55778904-0299-11f1-b1b8-4ef0c4956feb").bytes
    data += struct.pack("<QQQ", 1, 1, 14)
    expected = struct.pack("<HII", 4, 4242, 0) + struct.pack("<Q", 4) + struct.pack("<I", len(data)) + data
    assert rec.sent == [(COM_BINLOG_DUMP_GTID, expected)]


def test_mariadb_dump_asks_for_annotations() -> None:
    s = stream_for("mariadb", start=BinlogPosition("mysql-bin.000001", 4))
    rec = Recorder()
    s._send_dump(rec)
    assert rec.sent == [(COM_BINLOG_DUMP, struct.pack("<IHI", 4, 2, 4242) + b"mysql-bin.000001")]
