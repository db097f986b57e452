"""Dates no Python type holds (zero, partial, year 0, a day the month lacks): the decoder makes an
:class:`InvalidDate` with the text MySQL prints, in the C and the Python decoder alike (C declines
the event, Python decodes it), and the rows event stamps its ``file:pos`` on each. Golden bytes:
row 4 of ``golden/all_types.sql``; synthetic row images for the rest of the encodings."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from test_rows_native import EVENTS, fresh

from airflow_provider_binlog.binlog import values
from airflow_provider_binlog.binlog.columns import ColumnDef, InvalidDate, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T

NATIVE = values._native


def _date(y: int, m: int, d: int) -> bytes:
    return (y << 9 | m << 5 | d).to_bytes(3, "little")


def _datetime2(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: int, nbytes: int) -> bytes:
    x = ((y * 13 + mo) << 22 | d << 17 | h << 12 | mi << 6 | s) + 0x8000000000
    return x.to_bytes(5, "big") + frac.to_bytes(nbytes, "big")


SCHEMA = TableSchema(
    "db",
    "t",
    (
        ColumnDef("d", T.DATE),
        ColumnDef("dt3", T.DATETIME2, meta=3, fsp=3),
        ColumnDef("ts6", T.TIMESTAMP2, meta=6, fsp=6),
        ColumnDef("old_dt", T.DATETIME),
        ColumnDef("old_ts", T.TIMESTAMP),
    ),
)
CASES = [  # (row image without its null bitmap, the texts)
    (
        _date(0, 0, 0) + _datetime2(2024, 0, 15, 1, 2, 3, 4560, 2) + bytes(7)
        + struct.pack("<Q", 20240300_101112) + bytes(4),
        ["0000-00-00", "2024-00-15 01:02:03.456", "0000-00-00 00:00:00.000000", "2024-03-00 10:11:12",
         "0000-00-00 00:00:00"],
    ),
    (
        _date(2024, 2, 31) + _datetime2(0, 1, 1, 0, 0, 0, 0, 2) + bytes(7)
        + struct.pack("<Q", 0) + bytes(4),
        ["2024-02-31", "0000-01-01 00:00:00.000", "0000-00-00 00:00:00.000000", "0000-00-00 00:00:00",
         "0000-00-00 00:00:00"],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("image", "texts"), CASES)
def test_each_encoding_makes_the_server_text(image: bytes, texts: list[str]) -> None:
    dec = values.RowDecoder(SCHEMA)
    row, end = dec.decode_row(b"\x00" + image, 0, b"\x1f")
    assert end == 1 + len(image)
    assert [row[c.name] for c in SCHEMA.columns] == [InvalidDate(t) for t in texts]
    assert all(type(v) is InvalidDate for v in row.values())
    assert len(dec.invalid) == 5
    dec.stamp("mysql-bin.000007:1234")
    assert not dec.invalid and {v.position for v in row.values()} == {"mysql-bin.000007:1234"}
    if NATIVE is not None:  # C declines: the event goes to the Python decoder
        plan = dec.native_plan(b"\x1f")
        assert plan is None or NATIVE.decode_rows(plan, b"\x00" + image, 0, 1 + len(image)) is None


def test_golden_zero_dates_carry_their_event_position() -> None:
    evs = [e for e in EVENTS if e.table == "all_types" and e.kind == "insert"]
    where = ("WRITE_ROWS_EVENT", "mysql-bin.000003:4321")  # the capture decodes without a file name
    evs = [dataclasses.replace(e, _where=where) for e in evs]
    rows = [r for e in evs for r in fresh(e).rows if r.get("id") == 4]
    assert rows
    for row in rows:
        assert {k: row[k] for k in ("dt", "dtm", "dtm6", "ts")} == {
            "dt": InvalidDate("0000-00-00"),
            "dtm": InvalidDate("0000-00-00 00:00:00"),
            "dtm6": InvalidDate("2020-00-10 00:00:00.000000"),
            "ts": InvalidDate("0000-00-00 00:00:00"),
        }
        assert {row[k].position for k in ("dt", "dtm", "dtm6", "ts")} == {"mysql-bin.000003:4321"}
    assert InvalidDate("0000-00-00") != "0000-00-00" and InvalidDate("0000-00-00") is not None
