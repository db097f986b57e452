"""Pure units of canal's protocol: Java's number text, DDL kinds, canal type texts, the scramble."""

from __future__ import annotations

import struct

import pytest

from airflow_provider_binlog.binlog.columns import BINARY_COLLATION, ColumnDef, InvalidDate
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.canalnet.decode import column_def, parser
from airflow_provider_binlog.canalnet.entries import ddl_event_type
from airflow_provider_binlog.canalnet.protocol import entry_pb, scramble411, scramble_check, scramble_gen_pass
from airflow_provider_binlog.canalnet.render import Types, java_double, java_float, mysql_type, renderer


@pytest.mark.parametrize(
    "value, text",
    [
        (1.5, "1.5"), (100.0, "100.0"), (0.001, "0.001"), (0.0001, "1.0E-4"), (9999999.0, "9999999.0"),
        (1e7, "1.0E7"), (123456789.0, "1.23456789E8"), (-2.5e-10, "-2.5E-10"), (1e300, "1.0E300"),
        (0.0, "0.0"), (-0.0, "-0.0"), (float("inf"), "Infinity"), (float("nan"), "NaN"),
    ],
)  # fmt: skip
def test_java_double(value: float, text: str) -> None:
    assert java_double(value) == text


@pytest.mark.parametrize("value, text", [(1.1, "1.1"), (0.1, "0.1"), (3.4e38, "3.4E38"), (1e-7, "1.0E-7")])
def test_java_float_is_the_shortest_text_of_the_float32(value: float, text: str) -> None:
    f32 = struct.unpack("<f", struct.pack("<f", value))[0]
    assert java_float(f32) == text
    assert parser(ColumnDef("f", T.FLOAT), Types.REAL)(text) == f32


@pytest.mark.parametrize(
    "sql, kind",
    [
        ("CREATE TABLE t (id int)", entry_pb.CREATE), ("alter table `t` add c int", entry_pb.ALTER),
        ("DROP TABLE a, b", entry_pb.ERASE), ("TRUNCATE TABLE t", entry_pb.TRUNCATE),
        ("RENAME TABLE a TO b", entry_pb.RENAME), ("CREATE UNIQUE INDEX i ON t (c)", entry_pb.CINDEX),
        ("DROP INDEX i ON t", entry_pb.DINDEX), ("CREATE DATABASE d", entry_pb.CREATE),
        ("GRANT ALL ON *.* TO u", entry_pb.QUERY),
    ],
)  # fmt: skip
def test_ddl_event_types(sql: str, kind: int) -> None:
    assert ddl_event_type(sql) == kind


@pytest.mark.parametrize(
    "col",
    [
        ColumnDef("a", T.LONG, unsigned=True), ColumnDef("b", T.NEWDECIMAL, precision=12, scale=4),
        ColumnDef("c", T.DATETIME2, fsp=3), ColumnDef("d", T.TIMESTAMP2, fsp=0),
        ColumnDef("e", T.TIME2, fsp=1),
        ColumnDef("f", T.ENUM, enum_values=("x", "it's")), ColumnDef("g", T.SET, set_values=("a", "b")),
        ColumnDef("h", T.BLOB, meta=3, collation=BINARY_COLLATION),
        ColumnDef("i", T.BLOB, meta=1, charset="utf-8"),
        ColumnDef("j", T.VARCHAR, collation=BINARY_COLLATION), ColumnDef("k", T.JSON), ColumnDef("l", T.YEAR),
    ],
)  # fmt: skip
def test_a_canal_type_text_reads_back_as_the_same_column(col: ColumnDef) -> None:
    back = column_def(col.name, mysql_type(col), renderer(col)(None)[0])
    assert (back.type, back.unsigned, back.precision, back.scale, back.fsp or 0) == (
        col.type, col.unsigned, col.precision, col.scale, col.fsp or 0,
    )  # fmt: skip
    assert (back.enum_values, back.set_values, back.is_binary) == (
        col.enum_values,
        col.set_values,
        col.is_binary,
    )


@pytest.mark.parametrize(
    "col, value, sql_type, text",
    [
        (ColumnDef("u", T.TINY, unsigned=True), 200, Types.SMALLINT, "200"),
        (ColumnDef("u", T.TINY, unsigned=True), 100, Types.TINYINT, "100"),
        (ColumnDef("u", T.LONGLONG, unsigned=True), 2**64 - 1, Types.DECIMAL, "18446744073709551615"),
        (ColumnDef("y", T.YEAR), 0, Types.VARCHAR, "0000"),
        (ColumnDef("e", T.ENUM, enum_values=("x", "y")), "", Types.INTEGER, "0"),
        (ColumnDef("s", T.SET, set_values=("a", "b", "c")), "a,c", Types.BIT, "5"),
        (ColumnDef("d", T.DATE, nullable=False), None, Types.DATE, "0000-00-00"),
        (ColumnDef("d", T.DATE), None, Types.DATE, None),
        (ColumnDef("d", T.DATE), InvalidDate("2020-00-10"), Types.DATE, "2020-00-10"),
        (ColumnDef("t", T.DATETIME2, fsp=3), InvalidDate("0000-00-00 00:00:00.000"), Types.TIMESTAMP,
         "0000-00-00 00:00:00.000"),
    ],
)  # fmt: skip
def test_canal_renders(col: ColumnDef, value: object, sql_type: int, text: str | None) -> None:
    assert renderer(col)(value) == (sql_type, text)


def test_the_scramble_checks_the_password_and_only_it() -> None:
    seed, stored = b"12345678", bytes.fromhex(scramble_gen_pass(b"secret"))
    assert scramble_check(scramble411(b"secret", seed), stored, seed)
    assert not scramble_check(scramble411(b"secret", b"87654321"), stored, seed)
    assert not scramble_check(scramble411(b"Secret", seed), stored, seed)
    assert not scramble_check(b"", stored, seed)
