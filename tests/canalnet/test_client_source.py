"""Our canal client and entry decoder through our canal server: the entries read back equal, value
by value, order key by order key, what the embedded instance reads from the same binlog."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.canal.change import DdlEntry, RowChange, TransactionEnd
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.instance import CanalInstance, InstanceConfig
from airflow_provider_binlog.canal.meta import FileMetaManager, MemoryMetaManager
from airflow_provider_binlog.canalnet.client import CanalClient
from airflow_provider_binlog.canalnet.decode import EntryDecoder
from airflow_provider_binlog.canalnet.errors import CanalAuthError
from airflow_provider_binlog.canalnet.protocol import scramble_gen_pass
from airflow_provider_binlog.canalnet.server import Account, CanalServer, ServedDestination

pytestmark = pytest.mark.integration


def source(server: Any) -> Any:
    from airflow_provider_binlog.binlog.client import ReplicationConfig

    return ReplicationConfig(
        host=server.host, port=server.port, user=server.repl_user, password=server.repl_password,
        heartbeat_period=1.0,
    )  # fmt: skip


def view(e: Any) -> tuple[Any, ...]:
    if isinstance(e, RowChange):
        return ("row", e.op, e.schema, e.table, e.before, e.after, e.order_key, e.position, e.primary_key)
    if isinstance(e, TransactionEnd):
        return ("end", e.position, e.order_key[:2])
    assert isinstance(e, DdlEntry)
    return ("ddl", e.kind, e.sql, e.position)


def test_entries_read_through_the_server_equal_the_embedded_ones(
    mariadb: Any, database: str, tmp_path: Path
) -> None:
    mariadb.execute(
        f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, u INT UNSIGNED, big BIGINT UNSIGNED, "
        "d DECIMAL(12,4), f FLOAT, g DOUBLE, s VARCHAR(20), c CHAR(3), b VARBINARY(8), bl BLOB, tx TEXT, "
        "dt DATETIME(6), ts TIMESTAMP(3) NULL, dd DATE, tm TIME(1), y YEAR, e ENUM('x','y'), "
        "st SET('a','b','c'), j JSON, bt BIT(5))"
    )
    flt = TableFilter(include=f"{database}\\..*")
    server = CanalServer(
        [ServedDestination(InstanceConfig("shop", source(mariadb), flt))],
        meta=FileMetaManager(str(tmp_path / "meta")), account=Account("canal", scramble_gen_pass(b"pw")),
        port=0, max_get_wait=2.0,
    )  # fmt: skip
    server.start()
    direct = CanalInstance(InstanceConfig("direct", source(mariadb), flt), MemoryMetaManager())
    try:
        client = CanalClient(
            "127.0.0.1", server.port, "shop", filter=flt.include, user="canal", password="pw"
        )
        client.connect()
        direct.subscribe()
        mariadb.execute(
            f"INSERT INTO `{database}`.t VALUES (1, 4294967295, 18446744073709551615, -123.4500, 1.1, "
            "0.1, 'ünï', 'ab', x'00ff', x'0102', 'txt', '2024-01-02 03:04:05.678901', "
            "'2024-06-30 23:59:59.125', '0999-12-31', '-838:59:59.0', 1901, 'y', 'b,c', "
            "'{\"a\": [1, \"x\", null]}', b'10101'), (2, 0, 0, 0, -0.0, 1e300, '', '', '', '', '', "
            "'1000-01-01 00:00:00', NULL, '2000-02-29', '00:00:00.5', 2155, 'x', '', '[]', 0)"
        )
        mariadb.execute(f"UPDATE `{database}`.t SET s = 'neu', ts = NULL WHERE id = 1")
        mariadb.execute(f"DELETE FROM `{database}`.t WHERE id = 2")
        mariadb.execute(f"TRUNCATE TABLE `{database}`.t")
        theirs: list[Any] = []
        ours: list[Any] = []
        decoder = EntryDecoder("shop")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(ours) < 6 or len(theirs) < len(ours)):
            batch_id, entries = client.get_without_ack(100, 0.5)
            if batch_id > 0:
                ours += decoder.decode(entries)
                client.ack(batch_id)
            b = direct.get_without_ack(100, 0.2)
            if b.id is not None:
                theirs += list(b.entries)
                direct.ack(b.id)
        assert [view(e) for e in ours] == [view(e) for e in theirs]
        assert sum(isinstance(e, RowChange) for e in ours) == 4
        client.close()

        wrong = CanalClient("127.0.0.1", server.port, "shop", user="canal", password="nope")
        with pytest.raises(CanalAuthError, match="auth failed") as err:
            wrong.connect()
        assert "nope" not in str(err.value) and "nope" not in repr(wrong)
    finally:
        direct.close()
        server.stop()
