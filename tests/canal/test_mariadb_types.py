"""MariaDB's UUID, INET6 and INET4 columns: the binlog path gives the text a SELECT gives.

The TABLE_MAP says BINARY(16)/BINARY(4) for them (also with FULL metadata); the schema history
names the type (from ``information_schema`` at its bootstrap, or from the ``CREATE TABLE`` in the
stream) and the decoder turns the bytes into MariaDB's text (:mod:`.mariadb_types`). A plain
``BINARY(16)`` stays bytes. Real MariaDB, both metadata modes.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.binlog.mariadb_types import inet4_text, inet6_text, uuid_text
from airflow_provider_binlog.canal.change import RowChange
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.instance import CanalInstance, InstanceConfig
from airflow_provider_binlog.canal.meta import MemoryMetaManager
from airflow_provider_binlog.canal.positions.start import StartSpec
from airflow_provider_binlog.canal.snapshot.initial import ChunkReader, table_schema

pytestmark = pytest.mark.integration

COLUMNS = "id INT PRIMARY KEY, u UUID, i6 INET6, i4 INET4, b16 BINARY(16), b4 BINARY(4)"
VALUES = [
    "(1, '123e4567-e89b-12d3-a456-426655440000', '::ffff:1.2.3.4', '1.2.3.4', x'00ff', x'01')",
    "(2, UUID(), '2001:db8::1', '255.0.0.1', x'123e4567e89b12d3a456426655440000', x'01020304')",
    "(3, '00000000-0000-0000-0000-000000000000', '::', '0.0.0.0', x'', x'')",
    "(4, 'ffffffff-ffff-4fff-bfff-ffffffffffff', '::1.2.3.4', '10.0.0.1', NULL, NULL)",
    "(5, NULL, 'fe80::1:0:0:2', NULL, NULL, NULL)",
]


def test_text_forms_are_the_servers(mariadb: Any) -> None:
    """The text functions against the server's own CAST, on addresses rich in zero groups."""
    rng = random.Random(42)
    values = [bytes(16), bytes(15) + b"\1", bytes(15) + b"\2", bytes(10) + b"\xff\xff" + bytes(4)]
    for _ in range(400):
        words = [rng.choice([0, 0, 0, 1, 0xFFFF, rng.randrange(65536)]) for _ in range(8)]
        if rng.random() < 0.25:
            words[:5] = [0] * 5
            words[5] = rng.choice([0, 0xFFFF])
            words[6] = rng.choice([0, 1, 0x100, words[6]])
        values.append(b"".join(w.to_bytes(2, "big") for w in words))
    selects = ", ".join(
        f"CAST(CAST(X'{v.hex()}' AS INET6) AS CHAR), CAST(CAST(X'{v[:4].hex()}' AS INET4) AS CHAR), "
        f"CAST(CAST(X'{v.hex()}' AS UUID) AS CHAR)"
        for v in values
    )
    (row,) = mariadb.execute(f"SELECT {selects}")
    ours = [t for v in values for t in (inet6_text(v), inet4_text(v[:4]), uuid_text(v))]
    assert list(row) == ours


def _drain(inst: CanalInstance) -> list[RowChange]:
    out: list[RowChange] = []
    deadline = time.monotonic() + 60
    while not inst.done:
        assert time.monotonic() < deadline
        batch = inst.get_without_ack(1000, timeout=0.5)
        if batch.id is not None:
            out += [e for e in batch.entries if isinstance(e, RowChange)]
            inst.ack(batch.id)
    return out


@pytest.mark.parametrize("server", ["mariadb", "mariadb_minimal"])
def test_binlog_and_snapshot_give_the_selects_text(server: str, request: pytest.FixtureRequest) -> None:
    db_server = request.getfixturevalue(server)
    database = f"plug_{server}_{random.randrange(1 << 30)}"
    db_server.execute(f"CREATE DATABASE `{database}`")
    try:
        # ``before`` exists at the history's bootstrap (information_schema); ``later`` is created in
        # the stream (the CREATE TABLE names the types)
        db_server.execute(f"CREATE TABLE `{database}`.`before` ({COLUMNS})")
        src = ReplicationConfig(
            host=db_server.host, port=db_server.port, user=db_server.repl_user,
            password=db_server.repl_password, heartbeat_period=1.0,
        )  # fmt: skip
        start = ReplicationClient(src).head_position()
        cfg = InstanceConfig(
            destination="plug", source=src, filter=TableFilter(include=f"{database}\\..*"),
            start=StartSpec(position=str(start)),
        )  # fmt: skip
        inst = CanalInstance(cfg, MemoryMetaManager())
        with inst:
            inst.subscribe(stop_at="head")  # bootstraps the history: `before` only
        db_server.execute(f"CREATE TABLE `{database}`.`later` ({COLUMNS})")
        for table in ("before", "later"):
            db_server.execute(f"INSERT INTO `{database}`.`{table}` VALUES {', '.join(VALUES)}")
            db_server.execute(f"UPDATE `{database}`.`{table}` SET i6 = '::ffff:10.1.2.3' WHERE id = 1")
        end = ReplicationClient(src).head_position()
        inst = CanalInstance(cfg, inst.meta)
        with inst:
            inst.subscribe(stop_at="head")
            changes = _drain(inst)
        decoded: dict[tuple[str, int], dict[str, Any]] = {}
        for ch in changes:
            assert ch.after is not None
            decoded[(ch.table, ch.after["id"])] = ch.after
        assert len(decoded) == 2 * len(VALUES)

        def connect() -> Any:
            return db_server.connect(database)

        for table in ("before", "later"):
            selected = {r[0]: r for r in db_server.execute(f"SELECT * FROM `{database}`.`{table}`")}
            ts = table_schema(connect, database, table)
            reader = ChunkReader(ReplicationClient(src), connect, ts, chunk_size=100)
            try:
                snap = {k[0]: v for k, v in reader.read(1, None).rows.items()}
                # the images a chunk is reconciled with hold the text too
                images = [a for _, a in reader.changes(start, end) if a is not None]
            finally:
                reader.close()
            assert images and all(isinstance(a["u"], str | None) for a in images), images
            assert {a["id"]: a for a in images}[1]["i6"] == "::ffff:10.1.2.3"
            for key, row in selected.items():
                img = decoded[(table, key)]
                assert (img["u"], img["i6"], img["i4"]) == row[1:4], (table, key)
                assert img["b16"] is None or isinstance(img["b16"], bytes)
                assert img["b16"] == (row[4] if row[4] is None else row[4].ljust(16, b"\0"))
                assert snap[key] == img, (table, key)
    finally:
        db_server.execute(f"DROP DATABASE IF EXISTS `{database}`")


def test_versions_recorded_before_plugin_types_get_them_on_load(mariadb: Any, database: str) -> None:
    """A destination's history written before ``plugin_type`` existed typed UUID/INET6 as a text
    column without collation and INET4 as an INT: loaded, those columns get the type the server has
    for them now (a BINARY(16)/BINARY(4) column or a real INT stays as it was); saved again, the
    versions are marked and not checked again."""
    from airflow_provider_binlog.canal.meta.model import ClientIdentity
    from airflow_provider_binlog.canal.schema import SchemaHistory

    mariadb.execute(f"CREATE TABLE `{database}`.p ({COLUMNS}, n INT)")
    old = [
        {"name": "id", "type": 3, "nullable": False},
        {"name": "u", "type": 254},  # STRING, no collation: how UUID was recorded
        {"name": "i6", "type": 254},
        {"name": "i4", "type": 3},  # LONG: how INET4 was recorded
        {"name": "b16", "type": 254, "collation": 63},
        {"name": "b4", "type": 254, "collation": 63},
        {"name": "n", "type": 3},
    ]
    meta, who = MemoryMetaManager(), ClientIdentity("plugin-old")
    key = f"schema/{database}.p"
    meta.set_json(who, key, [{"at": [1, 4], "source": "ddl", "columns": old, "pk": ["id"]}], None)
    history = SchemaHistory(meta, who, lambda: mariadb.connect())
    found = history.at(database, "p", (1, 10))
    assert found is not None and found[0] is not None
    types = {c.name: (c.plugin_type, c.type, c.collation, c.max_length) for c in found[0].columns}
    assert types["u"] == ("uuid", 254, 63, 16) and types["i6"] == ("inet6", 254, 63, 16), types
    assert types["i4"] == ("inet4", 254, 63, 4), types
    assert types["b16"][0] is None and types["n"] == (None, 3, None, None), types
    history.record(database, "p", (1, 20), found[0], "ddl")  # saved: every version marked
    stored = meta.get_json(who, key).value
    assert all(v.get("plugin_types") for v in stored), stored
    assert stored[0]["columns"][1]["plugin_type"] == "uuid"
