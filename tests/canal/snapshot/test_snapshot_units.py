"""Snapshot pieces without services: progress keys, key encoding, converters, chunk bookkeeping."""

from __future__ import annotations

import datetime as dt
import decimal

from airflow_provider_binlog.binlog.columns import JSON_NULL, ColumnDef, InvalidDate
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.canal.meta.base import check_key
from airflow_provider_binlog.canal.snapshot.initial import (
    Snapshot,
    converter,
    decode_key,
    encode_key,
    table_key,
)


def test_progress_keys_are_valid_meta_keys() -> None:
    assert table_key("shop.orders") == "snapshot/shop.orders"
    odd = table_key("my db.ta/ble`")
    assert check_key(odd) == odd and odd.startswith("snapshot/my=20db.ta=2fble=60")


def test_key_values_round_trip_through_json() -> None:
    key = (
        1, "a", decimal.Decimal("1.50"), dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.date(2024, 1, 2),
        dt.timedelta(hours=-3, microseconds=5), b"\x00\xff", None,
    )  # fmt: skip
    assert decode_key(encode_key(key)) == key
    assert decode_key(None) is None and encode_key(None) is None


def test_converters_follow_the_decoder_contract() -> None:
    assert converter(ColumnDef("f", T.FLOAT))(1.1) == 1.100000023841858
    assert converter(ColumnDef("b", T.BIT))(b"\x01\x02") == 258
    assert converter(ColumnDef("j", T.JSON))("null") is JSON_NULL
    assert converter(ColumnDef("j", T.JSON))('{"a": [1]}') == {"a": [1]}
    assert converter(ColumnDef("d", T.DATE))("0000-00-00") == InvalidDate("0000-00-00")
    assert converter(ColumnDef("d", T.DATETIME2))("2024-00-15 00:00:00.1") == InvalidDate(
        "2024-00-15 00:00:00.1"
    )
    assert converter(ColumnDef("t", T.TIMESTAMP2))("0000-00-00 00:00:00") == InvalidDate(
        "0000-00-00 00:00:00"
    )
    ts = converter(ColumnDef("t", T.TIMESTAMP2))(dt.datetime(2024, 1, 1, 12))
    assert ts == dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone.utc) and ts.tzinfo is not None
    assert converter(ColumnDef("s", T.SET, set_values=("x", "y", "z")))({"z", "x"}) == "x,z"
    assert converter(ColumnDef("v", T.VARCHAR, collation=63))(bytearray(b"ab")) == b"ab"
    assert converter(ColumnDef("v", T.VARCHAR, collation=45, charset="utf-8"))("é") == "é"


def test_a_chunk_is_counted_once_when_done() -> None:
    prog = {"status": "running", "chunk": 2, "last_key": [5], "rows": 10, "loads": [1, 2], "pending": None}
    pending = {"chunk": 3, "last_key": [9], "rows": 4, "final": True}
    done = Snapshot._done_chunk(prog, pending)
    assert done == {
        "status": "done",
        "chunk": 3,
        "last_key": [9],
        "rows": 14,
        "loads": [1, 2, 3],
        "pending": None,
    }
    empty = Snapshot._done_chunk(done, {"chunk": 4, "last_key": [9], "rows": 0, "final": True})
    assert empty["loads"] == [1, 2, 3]
