"""The replication client against the harness MariaDB (real server, nothing mocked)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from airflow_provider_binlog.binlog.client import (
    AuthenticationError,
    PrivilegeError,
    ReplicationClient,
    ReplicationConfig,
)
from airflow_provider_binlog.binlog.errors import ConnectionLostError, PurgedBinlogError
from airflow_provider_binlog.binlog.events import HeartbeatEvent, XidEvent
from airflow_provider_binlog.binlog.events_mariadb import MariadbGtidEvent
from airflow_provider_binlog.binlog.gtid import MariadbGtidList
from airflow_provider_binlog.binlog.position import BinlogPosition

pytestmark = pytest.mark.integration


def client(server: Any, **kwargs: Any) -> ReplicationClient:
    cfg = ReplicationConfig(server.host, server.port, server.repl_user, server.repl_password, **kwargs)
    return ReplicationClient(cfg)


def rows_of(events: list[Any], table: str) -> list[Any]:
    out = []
    for e in events:
        if getattr(e.body, "table", None) == table and hasattr(e.body, "images"):
            out.extend(e.body.images())
    return out


def test_server_info_head_and_files(mariadb: Any) -> None:
    c = client(mariadb)
    info = c.server_info()
    assert info.flavor == "mariadb" and info.is_mariadb
    assert info.server_id == mariadb.server_id
    assert info.binlog_checksum == "CRC32"
    assert info.gtid_domain_id == 0
    head = c.head_position()
    files = c.binlog_files()
    assert head.file == files[-1][0]
    assert head.pos == files[-1][1]
    assert isinstance(c.head_gtid(), MariadbGtidList)
    assert mariadb.repl_password not in repr(c) and mariadb.repl_password not in repr(c.config)


def test_dump_from_file_position_non_blocking(mariadb: Any, database: str) -> None:
    c = client(mariadb)
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v VARCHAR(20))")
    start = c.head_position()
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1, 'a'), (2, 'b')")
    mariadb.execute(f"UPDATE `{database}`.t SET v = 'c' WHERE id = 2")
    end = c.head_position()
    with c.dump(start, blocking=False) as stream:
        events = list(stream)
    top = [e for e in events if e.header.log_pos]
    assert top[0].pos == start.pos
    assert stream.position == end
    assert [e.type_name for e in events if e.type_name != "ROTATE_EVENT"][1:6] == [
        "GTID_EVENT",
        "ANNOTATE_ROWS_EVENT",
        "TABLE_MAP_EVENT",
        "WRITE_ROWS_EVENT_V1",
        "XID_EVENT",
    ]
    assert rows_of(events, "t") == [
        (None, {"id": 1, "v": "a"}),
        (None, {"id": 2, "v": "b"}),
        ({"id": 2, "v": "b"}, {"id": 2, "v": "c"}),
    ]
    assert all(e.file == start.file for e in events if e.type_name != "ROTATE_EVENT")


def test_dump_without_annotate_rows(mariadb: Any, database: str) -> None:
    """``dump(annotate_rows=False)`` (the canal reader's): MariaDB sends no ANNOTATE_ROWS events;
    every other event comes at the same position with the same rows; the config's default asks
    for them, and ``annotate_rows=True`` does so for a config that does not."""
    c = client(mariadb)
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v VARCHAR(20))")
    start = c.head_position()
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1, 'a'), (2, 'b')")
    mariadb.execute(f"UPDATE `{database}`.t SET v = 'c' WHERE id = 2")
    end = c.head_position()

    def read(cl: ReplicationClient, **kw: Any) -> list[Any]:
        with cl.dump(start, stop_at=end, **kw) as stream:
            events = list(stream)
        assert stream.position == end
        return events

    full, bare = read(c), read(c, annotate_rows=False)
    assert [e.type_name for e in full].count("ANNOTATE_ROWS_EVENT") == 2
    assert "ANNOTATE_ROWS_EVENT" not in [e.type_name for e in bare]
    kept = [e for e in full if e.type_name != "ANNOTATE_ROWS_EVENT"]
    assert [(e.type_name, e.position, e.end_position) for e in bare] == [
        (e.type_name, e.position, e.end_position) for e in kept
    ]
    assert rows_of(bare, "t") == rows_of(full, "t")
    assert rows_of(bare, "t") == [
        (None, {"id": 1, "v": "a"}),
        (None, {"id": 2, "v": "b"}),
        ({"id": 2, "v": "b"}, {"id": 2, "v": "c"}),
    ]
    off = client(mariadb, annotate_rows=False)
    assert "ANNOTATE_ROWS_EVENT" not in [e.type_name for e in read(off)]
    assert [e.type_name for e in read(off, annotate_rows=True)].count("ANNOTATE_ROWS_EVENT") == 2


def test_dump_from_mariadb_gtid(mariadb: Any, database: str) -> None:
    c = client(mariadb)
    mariadb.execute(f"CREATE TABLE `{database}`.g (id INT PRIMARY KEY)")
    before = c.head_gtid()
    assert isinstance(before, MariadbGtidList)
    mariadb.execute(f"INSERT INTO `{database}`.g VALUES (10)")
    mariadb.execute(f"INSERT INTO `{database}`.g VALUES (11)")
    after = c.head_gtid()
    # non-blocking GTID dumps on MariaDB are drained to the head in blocking mode
    with c.dump(gtid=before, blocking=False) as stream:
        events = list(stream)
    gtids = [str(e.body) for e in events if isinstance(e.body, MariadbGtidEvent)]
    last = after.domain(0)
    assert last is not None
    # exactly the two new transactions
    assert gtids == [f"0-{last.server_id}-{last.seq_no - 1}", str(last)]
    assert rows_of(events, "g") == [(None, {"id": 10}), (None, {"id": 11})]
    assert stream.gtid_position == after
    assert stream.position == c.head_position()
    # the string form works as well
    with c.dump(gtid=str(before), stop_at=c.head_position()) as stream2:
        assert [str(e.body) for e in stream2 if isinstance(e.body, MariadbGtidEvent)] == gtids


def test_stop_at_head_in_blocking_mode(mariadb: Any, database: str) -> None:
    c = client(mariadb)
    mariadb.execute(f"CREATE TABLE `{database}`.s (id INT PRIMARY KEY)")
    start = c.head_position()
    mariadb.execute(f"INSERT INTO `{database}`.s VALUES (1)")
    head = c.head_position()
    t0 = time.monotonic()
    with c.dump(start, stop_at=head) as stream:
        events = list(stream)
    assert time.monotonic() - t0 < 10
    assert stream.position == head
    assert isinstance(events[-1].body, XidEvent) and events[-1].end_pos == head.pos
    # stopping where we start yields nothing after the stream's own preamble
    with c.dump(head, stop_at=head) as stream:
        assert [e for e in stream if e.header.log_pos and e.pos >= head.pos] == []


def test_blocking_with_heartbeats_and_new_events(mariadb: Any, database: str) -> None:
    c = client(mariadb, heartbeat_period=0.5)
    mariadb.execute(f"CREATE TABLE `{database}`.b (id INT PRIMARY KEY)")
    start = c.head_position()
    seen: list[Any] = []
    heartbeats = 0
    timer = threading.Timer(1.6, lambda: mariadb.execute(f"INSERT INTO `{database}`.b VALUES (7)"))
    t0 = time.monotonic()
    timer.start()
    try:
        with c.dump(start, include_heartbeats=True) as stream:
            for ev in stream:
                if isinstance(ev.body, HeartbeatEvent):
                    heartbeats += 1
                    assert ev.body.log_file == start.file
                else:
                    seen.append(ev)
                if isinstance(ev.body, XidEvent):
                    break
                assert time.monotonic() - t0 < 20, "no row event arrived"
    finally:
        timer.cancel()
    assert heartbeats >= 2
    assert rows_of(seen, "b") == [(None, {"id": 7})]


def test_idle_timeout_without_heartbeats_is_a_lost_connection(mariadb: Any) -> None:
    c = client(mariadb, heartbeat_period=30, idle_timeout=1.0)
    head = c.head_position()
    t0 = time.monotonic()
    with pytest.raises(ConnectionLostError) as info, c.dump(head) as stream:
        list(stream)
    assert time.monotonic() - t0 < 15
    assert info.value.retryable
    assert info.value.position == head


def test_killed_connection_reports_last_complete_position(mariadb: Any, database: str) -> None:
    c = client(mariadb, heartbeat_period=1)
    mariadb.execute(f"CREATE TABLE `{database}`.k (id INT PRIMARY KEY)")
    start = c.head_position()
    mariadb.execute(f"INSERT INTO `{database}`.k VALUES (1)")
    stream = c.dump(start)
    last = None
    with pytest.raises(ConnectionLostError) as info:
        for ev in stream:
            if isinstance(ev.body, XidEvent):
                last = ev
                thread_id = stream._conn.server_thread_id[0]  # type: ignore[union-attr]
                mariadb.execute(f"KILL CONNECTION {thread_id}")
    assert last is not None
    assert info.value.position == BinlogPosition(start.file, last.end_pos)
    assert str(info.value.position) in str(info.value)


def test_wrong_password_error_has_no_password(mariadb: Any) -> None:
    secret = "s3cret-Not-The-Password-42"
    cfg = ReplicationConfig(mariadb.host, mariadb.port, mariadb.repl_user, secret)
    assert secret not in repr(cfg)
    c = ReplicationClient(cfg)
    with pytest.raises(AuthenticationError) as info:
        c.server_info()
    assert info.value.code == 1045
    for text in (str(info.value), repr(info.value), repr(c)):
        assert secret not in text
    assert mariadb.repl_user in str(info.value)
    with pytest.raises(AuthenticationError) as info2:
        c.dump(BinlogPosition("mysql-bin.000001", 4))
    assert secret not in str(info2.value)


def test_missing_privilege(mariadb: Any) -> None:
    mariadb.execute("CREATE USER IF NOT EXISTS 'cdc_noslave'@'%' IDENTIFIED BY 'pw-noslave-1'")
    mariadb.execute("GRANT SELECT ON *.* TO 'cdc_noslave'@'%'")
    c = ReplicationClient(ReplicationConfig(mariadb.host, mariadb.port, "cdc_noslave", "pw-noslave-1"))
    with pytest.raises(PrivilegeError) as info:
        c.binlog_files()
    assert "REPLICATION" in str(info.value) and "pw-noslave-1" not in str(info.value)
    with pytest.raises(PrivilegeError), c.dump(BinlogPosition("mysql-bin.000001", 4), blocking=False) as s:
        list(s)


def test_purged_binlog_names_file_and_oldest(mariadb: Any) -> None:
    c = client(mariadb)
    oldest = c.binlog_files()[0][0]
    with pytest.raises(PurgedBinlogError) as info, c.dump(BinlogPosition("mysql-bin.000000", 4)) as s:
        list(s)
    msg = str(info.value)
    assert "mysql-bin.000000" in msg and oldest in msg
    assert info.value.code == 1236


def test_no_checksum_server(mariadb_nochecksum: Any) -> None:
    srv = mariadb_nochecksum
    c = client(srv)
    assert c.server_info().binlog_checksum == "NONE"
    srv.execute("CREATE DATABASE IF NOT EXISTS nock")
    srv.execute("CREATE TABLE IF NOT EXISTS nock.t (id INT PRIMARY KEY, v TEXT)")
    start = c.head_position()
    srv.execute("REPLACE INTO nock.t VALUES (1, 'x')")
    with c.dump(start, blocking=False) as stream:
        events = list(stream)
    assert rows_of(events, "t") == [(None, {"id": 1, "v": "x"})]
    assert stream.position == c.head_position()


def test_event_over_16mb_spans_packets(mariadb: Any, database: str) -> None:
    c = client(mariadb)
    mariadb.execute(f"CREATE TABLE `{database}`.big (id INT PRIMARY KEY, b LONGBLOB)")
    start = c.head_position()
    blob = bytes(range(256)) * (17 * 4096)  # 17 MiB: the event is larger than one packet
    conn = mariadb.connect(database, max_allowed_packet=64 * 1024 * 1024)
    try:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO big VALUES (1, %s)", (blob,))
    finally:
        conn.close()
    with c.dump(start, blocking=False) as stream:
        events = list(stream)
    big = [e for e in events if e.type_name.startswith("WRITE_ROWS")]
    assert big and big[0].header.event_size > 0xFFFFFF
    assert rows_of(events, "big") == [(None, {"id": 1, "b": blob})]


def test_dump_needs_exactly_one_start(mariadb: Any) -> None:
    c = client(mariadb)
    with pytest.raises(ValueError):
        c.dump()
    with pytest.raises(ValueError):
        c.dump(BinlogPosition("a.1", 4), gtid="0-1-1")


def test_really_purged_binlog_file_and_gtid() -> None:
    from airflow_provider_binlog.dev.services import MariaDbServer

    srv = MariaDbServer(server_id=33).start()
    try:
        srv.execute("CREATE DATABASE p")
        srv.execute("CREATE TABLE p.t (id INT PRIMARY KEY)")
        c = client(srv)
        first = c.binlog_files()[0][0]
        old_gtid = MariadbGtidList.parse(f"0-{srv.server_id}-1")
        srv.execute("FLUSH BINARY LOGS")
        srv.execute("INSERT INTO p.t VALUES (1)")
        srv.execute("FLUSH BINARY LOGS")
        oldest = c.binlog_files()[-1][0]
        deadline = time.monotonic() + 20
        while c.binlog_files()[0][0] != oldest:  # MariaDB keeps files crash recovery still needs
            assert time.monotonic() < deadline, c.binlog_files()
            srv.execute(f"PURGE BINARY LOGS TO '{oldest}'")
            time.sleep(0.2)
        with pytest.raises(PurgedBinlogError) as info, c.dump(BinlogPosition(first, 4)) as s:
            list(s)
        assert first in str(info.value) and oldest in str(info.value)
        with pytest.raises(PurgedBinlogError) as info2, c.dump(gtid=old_gtid, stop_at=c.head_position()) as s:
            list(s)
        assert oldest in str(info2.value) and f"GTID position 0-{srv.server_id}-1" in str(info2.value)
    finally:
        srv.stop()


def test_tls_connection(tmp_path_factory: Any) -> None:
    """A replication user that must use TLS reads the binlog over an encrypted connection."""
    import shutil
    import subprocess

    from airflow_provider_binlog.dev.services import MariaDbServer

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"),
         "-out", str(d / "cert.pem"), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    srv = MariaDbServer(
        server_id=34, extra_args=(f"--ssl-cert={d / 'cert.pem'}", f"--ssl-key={d / 'key.pem'}")
    ).start()
    try:
        srv.execute("CREATE USER 'cdc_tls'@'%' IDENTIFIED BY 'tls-pw-1' REQUIRE SSL")
        srv.execute("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc_tls'@'%'")
        srv.execute("CREATE DATABASE tls")
        srv.execute("CREATE TABLE tls.t (id INT PRIMARY KEY)")
        wrong_ca = d / "other.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "k2.pem"),
             "-out", str(wrong_ca), "-days", "2", "-subj", "/CN=someone-else"],
            check=True, capture_output=True,
        )  # fmt: skip
        untrusted = ReplicationClient(
            ReplicationConfig(srv.host, srv.port, "cdc_tls", "tls-pw-1", ssl={"ca": str(wrong_ca)})
        )
        with pytest.raises(ConnectionLostError, match=r"(?i)certificate"):  # does not verify
            untrusted.server_info()
        cfg = ReplicationConfig(srv.host, srv.port, "cdc_tls", "tls-pw-1", ssl={"ca": str(d / "cert.pem")})
        c = ReplicationClient(cfg)
        start = c.head_position()
        srv.execute("INSERT INTO tls.t VALUES (3)")
        with c.dump(start, blocking=False) as stream:
            events = list(stream)
            assert stream._conn is None  # closed at the end
        assert rows_of(events, "t") == [(None, {"id": 3})]
        probe = c._connect()
        try:
            with probe.cursor() as cur:
                cur.execute("SHOW STATUS LIKE 'Ssl_cipher'")
                assert cur.fetchone()[1]
        finally:
            probe.close()
    finally:
        srv.stop()
