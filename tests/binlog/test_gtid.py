"""GTID values: MySQL sets (tagged and untagged), varlen integers, MariaDB positions."""

from __future__ import annotations

import struct
import uuid

import pytest

from airflow_provider_binlog.binlog.errors import DecodeError
from airflow_provider_binlog.binlog.gtid import (
    MariadbGtid,
    MariadbGtidList,
    MysqlGtid,
    MysqlGtidSet,
    read_varlen_int,
    read_varlen_uint,
    write_varlen_uint,
)
from airflow_provider_binlog.binlog.reader import Reader
from airflow_provider_binlog.errors import ConfigurationError

U1 = "55778904-0299-11f1-b1b8-4ef0c4956feb"
U2 = "93e95066-a2f4-11ec-9b69-9657f0ae95e2"


def test_parse_and_format_normalise() -> None:
    s = MysqlGtidSet.parse(f"{U2}:5-7:1-3:4,\n{U1.upper()}:Tag_B:9:tag_a:1-2:3")
    assert str(s) == f"{U1}:tag_a:1-3:tag_b:9,{U2}:1-7"
    assert MysqlGtidSet.parse(str(s)) == s
    assert str(MysqlGtidSet.parse("")) == "" and not MysqlGtidSet.parse("")
    assert str(MysqlGtidSet.parse(f"{U1}:1:3:2")) == f"{U1}:1-3"


def test_contains_add_union_subset() -> None:
    s = MysqlGtidSet.parse(f"{U1}:1-13:mytag:1-2")
    assert f"{U1}:13" in s and f"{U1}:14" not in s
    assert MysqlGtid(U1, 2, "mytag") in s and f"{U1}:mytag:3" not in s
    s2 = s.add(f"{U1}:mytag:3").add(MysqlGtid(U1, 14))
    assert str(s2) == f"{U1}:1-14:mytag:1-3"
    assert str(s) == f"{U1}:1-13:mytag:1-2"  # immutable
    u = s | MysqlGtidSet.parse(f"{U2}:1-5,{U1}:20")
    assert str(u) == f"{U1}:1-13:20:mytag:1-2,{U2}:1-5"
    assert s.issubset(u) and not u.issubset(s)


def test_untagged_binary_form() -> None:
    s = MysqlGtidSet.parse(f"{U2}:1-5:7")
    expected = (
        struct.pack("<Q", 1)
        + uuid.UUID(U2).bytes
        + struct.pack("<Q", 2)
        + struct.pack("<QQ", 1, 6)
        + struct.pack("<QQ", 7, 8)
    )
    assert s.encode() == expected
    assert MysqlGtidSet.decode(Reader(expected)) == s
    assert MysqlGtidSet().encode() == struct.pack("<Q", 0)


def test_tagged_binary_form_round_trips() -> None:
    s = MysqlGtidSet.parse(f"{U1}:1-13:mytag:1-2")
    raw = s.encode()
    assert raw[:8] == bytes([1, 2, 0, 0, 0, 0, 0, 1])
    assert MysqlGtidSet.decode(Reader(raw)) == s


def test_decode_rejects_nonsense() -> None:
    with pytest.raises(DecodeError):
        MysqlGtidSet.decode(Reader(struct.pack("<Q", 10**9)))
    with pytest.raises(DecodeError):
        MysqlGtidSet.decode(Reader(struct.pack("<Q", 1) + uuid.UUID(U1).bytes + struct.pack("<QQQ", 1, 5, 5)))


@pytest.mark.parametrize("bad", ["nope", f"{U1}", f"{U1}:0", f"{U1}:5-3", "1234:1", f"{U1}:BAD-TAG:1"])
def test_parse_rejects(bad: str) -> None:
    with pytest.raises(ConfigurationError):
        MysqlGtidSet.parse(bad)


@pytest.mark.parametrize(
    "value", [0, 1, 63, 64, 127, 128, 300, 2**14, 2**21 - 1, 2**49, 2**56 - 1, 2**56, 2**64 - 1]
)
def test_varlen_round_trip(value: int) -> None:
    raw = write_varlen_uint(value)
    r = Reader(raw)
    assert read_varlen_uint(r) == value
    assert r.remaining() == 0


def test_varlen_known_bytes_and_signed() -> None:
    assert write_varlen_uint(60) == b"\x78"
    assert read_varlen_uint(Reader(b"\x25\x02")) == 0x89
    # signed values are zig-zag coded (sign in the lowest bit) before the varlen step
    assert read_varlen_int(Reader(b"\x0c")) == 3  # the gno of the GTID_TAGGED fixture
    assert read_varlen_int(Reader(b"\x06")) == -2
    assert read_varlen_int(Reader(write_varlen_uint(5))) == -3
    with pytest.raises(DecodeError):
        read_varlen_uint(Reader(b"\x03\x00"))  # 3 bytes announced, 2 present


def test_mariadb_positions() -> None:
    g = MariadbGtid.parse("0-1-100")
    assert str(g) == "0-1-100"
    pos = MariadbGtidList.parse("1-2-7,0-1-100")
    assert str(pos) == "1-2-7,0-1-100"
    nxt = pos.advance("0-1-101").advance(MariadbGtid(2, 5, 1))
    assert str(nxt) == "0-1-101,1-2-7,2-5-1"
    assert nxt.reached(pos) and not pos.reached(nxt)
    assert nxt.domain(1) == MariadbGtid(1, 2, 7) and nxt.domain(9) is None
    assert not MariadbGtidList.parse("")
    with pytest.raises(ConfigurationError):
        MariadbGtidList.parse("0-1")
    with pytest.raises(ConfigurationError):
        MysqlGtid.parse("0-1-2")
