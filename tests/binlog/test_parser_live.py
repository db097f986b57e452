"""The parser against MariaDB-specific binlogs written by real servers started here: compressed
events (``log_bin_compress``) and encrypted binlog files (``encrypt_binlog``); and the same events
read over the protocol and from the binlog file on disk.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.binlog.errors import UnsupportedError
from airflow_provider_binlog.binlog.events_query import QueryEvent
from airflow_provider_binlog.binlog.files import read_binlog_file
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.dev.services import MariaDbServer

pytestmark = pytest.mark.integration


def client(server: Any) -> ReplicationClient:
    return ReplicationClient(
        ReplicationConfig(server.host, server.port, server.repl_user, server.repl_password)
    )


def summary(events: list[Any]) -> list[tuple[Any, ...]]:
    out = []
    for e in events:
        if not e.header.log_pos:  # artificial events exist only on the wire
            continue
        rows = e.body.images() if hasattr(e.body, "images") else None
        sql = e.body.sql if isinstance(e.body, QueryEvent) else None
        out.append((e.type_name, e.pos, e.end_pos, sql, rows))
    return out


@pytest.fixture(scope="module")
def compressing_mariadb() -> Iterator[MariaDbServer]:
    server = MariaDbServer(
        server_id=31, extra_args=("--log-bin-compress=ON", "--log-bin-compress-min-len=10")
    ).start()
    try:
        yield server
    finally:
        server.stop()


def test_compressed_events_over_the_wire_and_from_disk(compressing_mariadb: MariaDbServer) -> None:
    srv = compressing_mariadb
    c = client(srv)
    start = c.head_position()
    srv.execute("CREATE DATABASE cz")
    srv.execute("CREATE TABLE cz.t (id INT PRIMARY KEY, v VARCHAR(200), n DECIMAL(20,6))")
    long = "x" * 150
    srv.execute(f"INSERT INTO cz.t VALUES (1, '{long}', 1.5), (2, 'short', -2.25)")
    srv.execute("UPDATE cz.t SET v = CONCAT(v, 'y') WHERE id = 1")
    srv.execute("DELETE FROM cz.t WHERE id = 2")
    with c.dump(start, blocking=False) as stream:
        events = list(stream)
    kinds = {e.type_name for e in events}
    assert {"QUERY_COMPRESSED_EVENT", "WRITE_ROWS_COMPRESSED_EVENT_V1"} <= kinds
    assert {"UPDATE_ROWS_COMPRESSED_EVENT_V1", "DELETE_ROWS_COMPRESSED_EVENT_V1"} <= kinds
    ddl = [e.body.sql for e in events if e.type_name == "QUERY_COMPRESSED_EVENT"]
    assert "CREATE TABLE cz.t (id INT PRIMARY KEY, v VARCHAR(200), n DECIMAL(20,6))" in ddl
    rows = [img for e in events if hasattr(e.body, "images") for img in e.body.images()]
    assert rows == [
        (None, {"id": 1, "v": long, "n": Decimal("1.500000")}),
        (None, {"id": 2, "v": "short", "n": Decimal("-2.250000")}),
        (
            {"id": 1, "v": long, "n": Decimal("1.500000")},
            {"id": 1, "v": long + "y", "n": Decimal("1.500000")},
        ),
        ({"id": 2, "v": "short", "n": Decimal("-2.250000")}, None),
    ]
    # the binlog file on disk decodes to the same events
    disk = list(read_binlog_file(Path(srv.datadir) / start.file, start=start.pos))
    assert summary(disk) == summary(events)
    assert disk[-1].end_pos == c.head_position().pos


def test_encrypted_binlog_file_is_unsupported_but_the_wire_works(tmp_path_factory: Any) -> None:
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text(f"1;{secrets.token_hex(32)}\n")
    srv = MariaDbServer(
        server_id=32,
        extra_args=(
            "--plugin-load-add=file_key_management",
            f"--file-key-management-filename={keys}",
            "--encrypt-binlog=ON",
        ),
    ).start()
    try:
        srv.execute("CREATE DATABASE enc")
        srv.execute("CREATE TABLE enc.t (id INT PRIMARY KEY)")
        srv.execute("INSERT INTO enc.t VALUES (5)")
        c = client(srv)
        first = c.binlog_files()[0][0]
        with pytest.raises(UnsupportedError, match="encrypted binlogs are unsupported") as info:
            list(read_binlog_file(Path(srv.datadir) / first))
        assert f"START_ENCRYPTION_EVENT at {first}:" in str(info.value)
        # over the replication protocol the server decrypts
        with c.dump(BinlogPosition(first, 4), blocking=False) as stream:
            events = list(stream)
        rows = [img for e in events if hasattr(e.body, "images") for img in e.body.images()]
        assert rows == [(None, {"id": 5})]
    finally:
        srv.stop()
