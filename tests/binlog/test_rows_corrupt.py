"""Damaged row data found by fuzzing: each raises the project's DecodeError, never another exception.

Each case is a fixture byte XORed with a mask, read without checksum verification (so the damage
reaches the row decoder), then the rows are decoded.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from airflow_provider_binlog.binlog.errors import DecodeError
from airflow_provider_binlog.binlog.files import read_binlog_stream
from airflow_provider_binlog.binlog.rows import RowsEvent

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "binlog"
CASES = [
    ("mysql-bin.checksum-crc32", 360, 0x01),  # TABLE_MAP fsp 127: no such temporal reader
    ("transaction_compression.000001", 411, 0x20),  # NUL inside a name inside a zstd payload
    ("mariadb-bin.000001", 907, 0x20),  # an unknown metadata key in the row decoder
]


@pytest.mark.parametrize(("name", "offset", "mask"), CASES)
def test_damaged_rows_raise_decode_error(name: str, offset: int, mask: int) -> None:
    data = bytearray((FIXTURES / name).read_bytes())
    data[offset] ^= mask
    with pytest.raises(DecodeError) as info:
        for event in read_binlog_stream(io.BytesIO(bytes(data)), name, verify_checksum=False):
            if isinstance(event.body, RowsEvent):
                event.body.rows  # noqa: B018 - decoding is the point
    assert info.value.event_type and "ROWS" in info.value.event_type


@pytest.mark.timeout(20)
@pytest.mark.parametrize("kind", ["insert", "update", "delete"])
def test_empty_columns_present_bitmap_with_bytes_left_raises(kind: str) -> None:
    """A columns-present bitmap with no bit set makes every row image zero bytes long: the event's
    remaining bytes must fail as damage, not loop forever."""
    name = "mysql-bin.checksum-crc32"
    events = [
        e.body
        for e in read_binlog_stream(io.BytesIO((FIXTURES / name).read_bytes()), name)
        if isinstance(e.body, RowsEvent) and e.body.kind == kind
    ]
    assert events, f"no {kind} rows event in {name}"
    event = events[0]
    assert event.rows  # decodes as recorded
    empty = b"\x00" * len(event.columns_present)
    damaged = dataclasses.replace(
        event, columns_present=empty, columns_present_after=empty if kind == "update" else None, _rows=None
    )
    with pytest.raises(DecodeError, match=r"no columns present but the event has \d+ more bytes"):
        damaged.rows  # noqa: B018 - decoding is the point
