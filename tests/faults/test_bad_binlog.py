"""Bad binlogs, live: damaged bytes (checksums on and off), files cut short and unknown event types,
read by BinlogToSparkOperator from a dedicated MariaDB whose closed binlog file the test damages.

Each case: the run fails with an error naming the event type and ``file:pos`` and saying what to do;
the destination's cursor stays where it was; after the cause is removed (the file restored), the
next run loads everything and the lake equals the source value by value. The same damaged files
read from disk (``binlog-cdc events --file``) fail with the decoder's own error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_harness import lake_verify, make_context, mysql_uri
from bad_input_harness import HEADER_LEN, ClosedBinlog, closed_binlog, cursor, names, operator, run_fails

from airflow_provider_binlog import cli
from airflow_provider_binlog.binlog.constants import EventFlag
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import UnreadableBinlogError
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROW_V1 = "WRITE_ROWS_EVENT_V1"
IGNORABLE = int(EventFlag.LOG_EVENT_IGNORABLE_F)


@pytest.fixture(scope="module")
def damaged() -> Iterator[MariaDbServer]:
    """A MariaDB of these tests alone (CRC32 checksums): its binlog files get damaged."""
    server = MariaDbServer(server_id=41).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def damaged_nochecksum() -> Iterator[MariaDbServer]:
    """The same with ``binlog_checksum=NONE``."""
    server = MariaDbServer(server_id=42, checksum="NONE").start()
    yield server
    server.stop()


class Case:
    """One destination reading ``db.t`` of a damaged server into ``lake.<ns>.t``."""

    def __init__(self, binlog: ClosedBinlog, warehouse: str, zookeeper: ZooKeeperServer, chroot: str) -> None:
        self.binlog = binlog
        _, ns = names("badlog")
        self.destination = f"bad-{ns}"
        self.tables = {f"{binlog.db}.t": f"lake.{ns}.t"}
        self.warehouse = warehouse
        self.zookeeper, self.chroot = zookeeper, chroot

    def fails(self, *may_reach: str) -> UnreadableBinlogError:
        """Run; it must fail reading the binlog, the cursor staying at the start (or at one of
        ``may_reach``: ends of complete transactions before the damage)."""
        op = operator(self.destination, self.tables, self.warehouse, start_from=self.binlog.start)
        err = run_fails(op, self.binlog.server.repl_password)
        assert isinstance(err, UnreadableBinlogError), f"{type(err).__name__}: {err}"
        allowed = [BinlogPosition.parse(p) for p in (self.binlog.start, *may_reach)]
        assert self.cursor() in allowed, "the cursor moved past the damage"
        return err

    def cursor(self) -> BinlogPosition | None:
        return cursor(self.zookeeper, self.chroot, self.destination)

    def loads(self, spark: Any) -> dict[str, Any]:
        """A run after the fix: everything lands, the cursor moves past the damaged place."""
        summary: dict[str, Any] = operator(
            self.destination, self.tables, self.warehouse, start_from=self.binlog.start
        ).execute(make_context(try_number=2, run_id="fixed"))
        diffs = lake_verify(self.binlog.server, spark, self.tables)
        assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
        assert diffs[0].source_rows == 3, diffs[0].describe()
        after = self.cursor()
        assert after is not None and after > BinlogPosition.parse(self.binlog.start)
        return summary


@pytest.fixture
def source(monkeypatch: pytest.MonkeyPatch, conns: dict[str, str], damaged: MariaDbServer) -> MariaDbServer:
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_DEFAULT", mysql_uri(damaged))
    return damaged


def _events_cli(path: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``binlog-cdc events --file path``: must exit 1; returns its error line."""
    capsys.readouterr()
    assert cli.main(["events", "--file", path]) == 1
    return capsys.readouterr().err


# --------------------------------------------------------------------------- damaged bytes


def test_flipped_byte_with_checksums(
    source: MariaDbServer, spark: Any, spark_warehouse: str, zookeeper: ZooKeeperServer, zk_chroot: str,
    tmp_path: Any, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A byte flipped inside the first row event: the CRC32 check stops the run there."""
    binlog = closed_binlog(source)
    bad = binlog.rows_events()[0]
    binlog.write(binlog.flip(bad.pos + 25))
    case = Case(binlog, spark_warehouse, zookeeper, zk_chroot)
    err = case.fails()
    text = str(err)
    assert "checksum mismatch: stored CRC32 0x" in text, text
    assert f"({ROW_V1} at {binlog.where(bad)})" in text, text
    assert f"destination {case.destination}: cannot read the binlog" in text
    assert "the cursor stays before it" in text
    assert "restore it from a backup or a replica" in text and "snapshot='initial'" in text
    assert err.position == binlog.where(bad) and err.event_type == ROW_V1

    copy = tmp_path / bad.file
    copy.write_bytes(binlog.path.read_bytes())
    line = _events_cli(str(copy), capsys)
    assert (
        "binlog-cdc events: error: checksum mismatch" in line and f"({ROW_V1} at {binlog.where(bad)})" in line
    )

    binlog.restore()
    case.loads(spark)


def test_flipped_byte_without_checksums(
    damaged_nochecksum: MariaDbServer, monkeypatch: pytest.MonkeyPatch, conns: dict[str, str],
    spark_warehouse: str, zookeeper: ZooKeeperServer, zk_chroot: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Without checksums, damage shows only where it breaks decoding: here the row event's table id
    (its first body byte), so the row event names a table that has no TABLE_MAP. The error says so
    and recommends checksums. (A damaged value byte would decode into a wrong value unnoticed.)"""
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_DEFAULT", mysql_uri(damaged_nochecksum))
    binlog = closed_binlog(damaged_nochecksum)
    bad = binlog.rows_events()[0]
    binlog.write(binlog.flip(bad.pos + HEADER_LEN))
    err = Case(binlog, spark_warehouse, zookeeper, zk_chroot).fails()
    text = str(err)
    assert "without a preceding TABLE_MAP" in text, text
    assert f"({ROW_V1} at {binlog.where(bad)})" in text, text
    assert "restore it" in text
    assert "The source writes no checksums (binlog_checksum=NONE)" in text
    assert "set binlog_checksum=CRC32" in text

    copy = tmp_path / bad.file
    copy.write_bytes(binlog.path.read_bytes())
    line = _events_cli(str(copy), capsys)
    assert "without a preceding TABLE_MAP" in line and f"({ROW_V1} at {binlog.where(bad)})" in line


# --------------------------------------------------------------------------- files cut short


def test_file_cut_inside_an_event(
    source: MariaDbServer, spark_warehouse: str, zookeeper: ZooKeeperServer, zk_chroot: str,
    tmp_path: Any, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """The file ends 20 bytes into the first row event: the server itself refuses to send it
    (error 1236, naming the file and the offset); the error says where our reading stopped."""
    binlog = closed_binlog(source)
    bad = binlog.rows_events()[0]
    binlog.write(binlog.original[: bad.pos + 20])
    err = Case(binlog, spark_warehouse, zookeeper, zk_chroot).fails()
    text = str(err)
    assert f"cannot read the binlog after {binlog.start}" in text, text
    assert "(error 1236): binlog truncated in the middle of event" in text
    assert f"'{bad.file}' at {bad.pos}" in text
    assert "The source cannot read its own binlog file (damaged or cut short): restore it" in text

    copy = tmp_path / bad.file
    copy.write_bytes(binlog.path.read_bytes())
    line = _events_cli(str(copy), capsys)
    size = bad.end_pos - bad.pos
    assert f"truncated: file ends 20 bytes into a {size}-byte event ({ROW_V1} at {binlog.where(bad)})" in line


def test_file_cut_between_events_of_a_transaction(
    source: MariaDbServer, spark_warehouse: str, zookeeper: ZooKeeperServer, zk_chroot: str
) -> None:
    """The file ends just before the first row event, at an event boundary: the server moves on to
    the next file as if this one were complete. A transaction never spans two files, so the ROTATE
    inside the open transaction stops the run, naming where the transaction began."""
    binlog = closed_binlog(source)
    bad = binlog.rows_events()[0]
    binlog.write(binlog.original[: bad.pos])
    err = Case(binlog, spark_warehouse, zookeeper, zk_chroot).fails()
    text = str(err)
    begun = binlog.event("GTID_EVENT")
    assert (
        f"the transaction begun at {binlog.where(begun)} has no COMMIT/XID before the binlog moves on" in text
    )
    assert f"file {bad.file} was cut short (truncated?) (ROTATE_EVENT" in text, text
    assert "restore it" in text


def test_file_cut_between_transactions(
    source: MariaDbServer, spark: Any, spark_warehouse: str, zookeeper: ZooKeeperServer, zk_chroot: str
) -> None:  # fmt: skip
    """The file ends right after the first row transaction's XID: the server moves on to the next
    file, whose GTID_LIST says more transactions were written: reading stops there, naming both
    sequence numbers (the first transaction may have been loaded; nothing after it was)."""
    binlog = closed_binlog(source)
    gtid = binlog.event("GTID_EVENT")
    xid = binlog.event("XID_EVENT", after=gtid)
    last = [e for e in binlog.events if e.type_name == "GTID_EVENT"][-1].body.seq_no
    binlog.write(binlog.original[: xid.end_pos])
    err = Case(binlog, spark_warehouse, zookeeper, zk_chroot).fails(f"{xid.file}:{xid.end_pos}")
    stem, number = xid.file.rsplit(".", 1)
    following = f"{stem}.{int(number) + 1:0{len(number)}d}"
    seq = gtid.body.seq_no
    text = str(err)
    assert (
        f"transactions are missing: the last GTID of domain 0 read before {following} has sequence {seq}, "
        f"but the GTID_LIST of {following} says {last} was written before it: the previous file was "
        f"cut short (truncated?) (GTID_LIST_EVENT at {following}:"
    ) in text, text
    assert "restore it" in text


# --------------------------------------------------------------------------- unknown event types


def test_unknown_event_types(
    source: MariaDbServer, spark: Any, spark_warehouse: str, zookeeper: ZooKeeperServer, zk_chroot: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """MySQL's replica rule: an unknown event type without LOG_EVENT_IGNORABLE_F stops the run (here a
    row event retyped 200, CRC32 recomputed); one with the flag is skipped with a warning (here the
    ANNOTATE_ROWS event retyped 201 | ignorable), and the rows still all land."""
    binlog = closed_binlog(source)
    row = binlog.rows_events()[0]
    binlog.write(binlog.retype(row, 200))
    case = Case(binlog, spark_warehouse, zookeeper, zk_chroot)
    err = case.fails()
    text = str(err)
    assert (
        "event type 200 is unknown to this provider and the server did not mark it ignorable "
        "(LOG_EVENT_IGNORABLE_F)"
    ) in text, text
    assert f"(UNKNOWN_EVENT_200 at {binlog.where(row)})" in text
    assert "Upgrade airflow-provider-binlog if a newer version decodes this event type" in text
    assert err.position == binlog.where(row) and err.event_type == "UNKNOWN_EVENT_200"

    annotate = binlog.event("ANNOTATE_ROWS_EVENT")
    binlog.write(binlog.retype(annotate, 201, flags=IGNORABLE))
    caplog.set_level(logging.WARNING)
    case.loads(spark)
    assert f"skipping UNKNOWN_EVENT_201 at {binlog.where(annotate)}" in caplog.text, caplog.text[-2000:]
