"""MariaDB UUID/INET6/INET4 in the row decoder (pure unit: the server checks are in
``tests/canal/test_mariadb_types.py``): the Python decoder makes their text, the C decoder declines
those columns (so both paths give the same value), a plain BINARY(16) stays bytes."""

from __future__ import annotations

from airflow_provider_binlog.binlog import values
from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.table_map import OptionalMetadata, TableMapEvent

UUID = bytes.fromhex("123e4567e89b12d3a456426655440000")


def _col(name: str, length: int, plugin: str | None) -> ColumnDef:
    return ColumnDef(name, T.STRING, meta=(T.STRING << 8) | length, collation=63, max_length=length,
                     plugin_type=plugin)  # fmt: skip


def test_python_decoder_makes_the_text_and_c_declines() -> None:
    ts = TableSchema("s", "t", (_col("u", 16, "uuid"), _col("i6", 16, "inet6"), _col("i4", 4, "inet4"),
                                _col("b", 16, None)))  # fmt: skip
    dec = values.RowDecoder(ts)
    # null bitmap (no NULLs), then each value as 1-byte length + bytes (trailing zeros cut, as written)
    addr = bytes(10) + b"\xff\xff\x01\x02\x03\x04"
    image = b"\x00" + bytes([14]) + UUID[:14] + bytes([16]) + addr + b"\x04\x0a\x00\x00\x01" + b"\x02\x00\xff"
    row, end = dec.row_function(b"\x0f")(image, 0)
    assert end == len(image)
    assert row == {
        "u": "123e4567-e89b-12d3-a456-426655440000", "i6": "::ffff:1.2.3.4", "i4": "10.0.0.1",
        "b": b"\x00\xff" + bytes(14),
    }  # fmt: skip
    assert dec.native_plan(b"\x0f") is None
    plain = values.RowDecoder(TableSchema("s", "t", (_col("b", 16, None),)))
    if values._native is not None:  # built with the C decoder: it takes a plain BINARY(16)
        assert plain.native_plan(b"\x01") is not None


def test_a_complete_table_map_takes_only_the_type_names_from_the_history() -> None:
    binlog = TableSchema(
        "s", "t", (ColumnDef("id", T.LONG), _col("u", 16, None), _col("b", 16, None)), ("id",)
    )
    tm = TableMapEvent(1, 0, "s", "t", (T.LONG, T.STRING, T.STRING), (0, 0, 0), (False, True, True),
                       OptionalMetadata(column_names=("id", "u", "b")), binlog)  # fmt: skip
    assert tm.may_hold_plugin_types()
    history = TableSchema("s", "t", (ColumnDef("id", T.LONG, unsigned=True), _col("u", 16, "uuid"),
                                     _col("b", 16, None)))  # fmt: skip
    merged = tm.with_plugin_types(history).table_schema
    assert [c.plugin_type for c in merged.columns] == [None, "uuid", None]
    assert merged.columns[0].unsigned is False  # the binlog's own facts stay
    wrong_length = TableSchema(
        "s", "t", (ColumnDef("id", T.LONG), _col("u", 4, "inet4"), _col("b", 16, None))
    )
    assert tm.with_plugin_types(wrong_length).table_schema.columns[1].plugin_type is None
