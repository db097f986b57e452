"""Helpers of the bad-input tests (``test_bad_*.py``): an in-process operator run that must fail, the
destination's cursor, and closed binlog files to damage on a dedicated MariaDB.

A damaged binlog is made on a server of its own (never the session's shared ``mariadb``): rows are
written to a table, ``FLUSH BINARY LOGS`` closes their file, and the test changes bytes in that
closed file while the server runs (the server reopens a closed file for every dump and does not
verify checksums when sending, so the damage reaches our client as it is on disk).
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import make_context, meta_manager

from airflow_provider_binlog.binlog.event import Event
from airflow_provider_binlog.binlog.files import read_binlog_file
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

CRC = struct.Struct("<I")
TYPE_OFFSET, FLAGS_OFFSET, HEADER_LEN = 4, 17, 19


def operator(
    destination: str, tables: dict[str, str], warehouse: str, **kwargs: Any
) -> BinlogToSparkOperator:
    """The operator on this process's SparkSession (``stop_spark=False``)."""
    return BinlogToSparkOperator(
        task_id="load", destination=destination, tables=tables, warehouse=warehouse,
        spark_master="local[2]", stop_spark=False, **kwargs,
    )  # fmt: skip


def run_fails(op: BinlogToSparkOperator, *secrets: str) -> BaseException:
    """Run ``op``; it must raise. Returns the error after checking no secret is in its text or repr."""
    with pytest.raises(Exception) as failed:
        op.execute(make_context())
    for secret in secrets:
        assert secret not in str(failed.value), failed.value
        assert secret not in repr(failed.value), repr(failed.value)
    return failed.value


def cursor(
    zookeeper: ZooKeeperServer, chroot: str, destination: str, auth: tuple[str, str] | None = None
) -> BinlogPosition | None:
    """The destination's acked cursor in ZooKeeper (``None`` when it has none).

    :param auth: digest ``(user, password)`` when the nodes are the ``creator`` ACL's.
    """
    if auth is None:
        meta = meta_manager(zookeeper, chroot)
    else:
        from kazoo.client import KazooClient

        from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager

        client = KazooClient(hosts=zookeeper.hosts + chroot, auth_data=[("digest", ":".join(auth))])
        client.start(timeout=15)
        meta = ZooKeeperMetaManager(client)
    try:
        value = meta.get_cursor(ClientIdentity(destination, 1001)).value
    finally:
        meta.client.stop()
        meta.client.close()
    return value.binlog_position if value is not None else None


def names(prefix: str) -> tuple[str, str]:
    """A unique ``(source database, lake namespace)`` pair for one test."""
    tag = uuid.uuid4().hex[:8]
    return f"{prefix}_{tag}", f"{prefix}_{tag}"


@dataclass
class ClosedBinlog:
    """Rows of ``db.t`` written in their own transactions into a binlog file that is now closed.

    :param start: the binlog point just before the first row transaction.
    :param events: every event of the file, as our reader decodes it before any damage.
    """

    server: MariaDbServer
    db: str
    path: Path
    start: str
    events: list[Event]
    original: bytes = field(repr=False)

    def rows_events(self) -> list[Event]:
        """The row events of ``db.t``, in file order."""
        return [e for e in self.events if getattr(e.body, "table", None) == "t" and hasattr(e.body, "images")]

    def event(self, type_name: str, after: Event | None = None) -> Event:
        """The first event of this type (after ``after``)."""
        floor = after.pos if after is not None else BinlogPosition.parse(self.start).pos
        return next(e for e in self.events if e.type_name == type_name and e.pos >= floor)

    def where(self, event: Event) -> str:
        return f"{event.file}:{event.pos}"

    def write(self, data: bytes | bytearray) -> None:
        self.path.write_bytes(bytes(data))

    def restore(self) -> None:
        self.write(self.original)

    def flip(self, offset: int, mask: int = 0x5A) -> bytes:
        """The file with one byte XORed (not written)."""
        data = bytearray(self.original)
        data[offset] ^= mask
        return bytes(data)

    def retype(self, event: Event, code: int, flags: int = 0) -> bytes:
        """The file with ``event``'s type code set to ``code``, ``flags`` or-ed into its header flags and
        its CRC32 recomputed (so only the type is wrong), not written."""
        data = bytearray(self.original)
        data[event.pos + TYPE_OFFSET] = code
        struct.pack_into("<H", data, event.pos + FLAGS_OFFSET, event.header.flags | flags)
        end = event.end_pos - CRC.size
        CRC.pack_into(data, end, zlib.crc32(bytes(data[event.pos : end])))
        return bytes(data)


def closed_binlog(server: MariaDbServer, rows: int = 3) -> ClosedBinlog:
    """Create a database with table ``t``, write ``rows`` rows (one transaction each, the last an XA
    transaction, so the file ends with XA COMMIT, a group without XID) into a fresh binlog file and
    close it with ``FLUSH BINARY LOGS``."""
    db = f"bad_{uuid.uuid4().hex[:8]}"
    server.execute(f"CREATE DATABASE {db}")
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(40), n DECIMAL(10,2))")
    server.execute("FLUSH BINARY LOGS")
    (file, pos, *_), *_ = server.execute("SHOW MASTER STATUS")
    insert = f"INSERT INTO {db}.t VALUES (%s, %s, %s)"
    for i in range(1, rows):
        server.execute(insert, (i, f"row {i}", f"{i}.25"))
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for sql in ("XA START 'bad'", insert, "XA END 'bad'", "XA PREPARE 'bad'", "XA COMMIT 'bad'"):
                cur.execute(sql, (rows, f"row {rows}", f"{rows}.25") if sql == insert else None)
    finally:
        conn.close()
    server.execute("FLUSH BINARY LOGS")
    path = server.datadir / str(file)
    return ClosedBinlog(server, db, path, f"{file}:{pos}", list(read_binlog_file(path)), path.read_bytes())
