"""The SQL text of the merge (``lake/write/merge_sql.py``): pure functions, no Spark. The statements run
against real Spark in ``test_merge.py``; here their exact shape and the quoting of every name."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
from airflow_provider_binlog.lake.collapse import Piece, fold
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.sql import quote_parts
from airflow_provider_binlog.lake.types import BIGINT, STRING, LakeColumn
from airflow_provider_binlog.lake.write import merge_sql
from airflow_provider_binlog.lake.write.statements import piece_columns

ODD = ["id", "a.b", "x`y", "it's", "sp ace"]  # a dot, a backtick, a quote, a space
ODD_SQL = ["`id`", "`a.b`", "`x``y`", "`it's`", "`sp ace`"]
TABLE = quote_parts(("lake", "my.db", "t`x"))


def test_a_table_name_is_quoted_part_by_part() -> None:
    assert TABLE == "`lake`.`my.db`.`t``x`"
    assert (
        merge_sql.create_namespace_sql(("lake", "my.db", "t`x"))
        == "CREATE NAMESPACE IF NOT EXISTS `lake`.`my.db`"
    )
    assert merge_sql.create_namespace_sql(("t",)) is None


def test_column_lists_quote_every_name() -> None:
    assert merge_sql.column_list(ODD) == ", ".join(ODD_SQL)
    assert merge_sql.column_list(ODD, "s") == ", ".join(f"s.{q}" for q in ODD_SQL)
    assert merge_sql.column_list([]) == ""


@pytest.mark.parametrize(
    ("value", "literal"),
    [("plain", "'plain'"), ("it's", "'it\\'s'"), ("back\\slash", "'back\\\\slash'"), ("\\'", "'\\\\\\''")],
)
def test_string_literals_escape_quotes_and_backslashes(value: str, literal: str) -> None:
    assert merge_sql.sql_string(value) == literal


def test_key_condition_is_null_safe_only_for_configured_keys() -> None:
    assert merge_sql.key_condition(["id"], null_safe=False) == "t.`id` = s.`id`"
    assert (
        merge_sql.key_condition(["a.b", "x`y"], null_safe=True)
        == "t.`a.b` <=> s.`a.b` AND t.`x``y` <=> s.`x``y`"
    )


def test_key_ranges_bound_the_table_side_of_the_condition() -> None:
    assert merge_sql.key_condition(["id", "x`y"], null_safe=False, key_ranges={"x`y": (-5, 12)}) == (
        "t.`id` = s.`id` AND t.`x``y` = s.`x``y` AND t.`x``y` >= -5 AND t.`x``y` <= 12"
    )
    sql = merge_sql.merge_sql(TABLE, "v", ["id", "v"], ["id"], key_ranges={"id": (3, 9)})
    assert " ON t.`id` = s.`id` AND t.`id` >= 3 AND t.`id` <= 9 WHEN " in sql


def test_key_ranges_of_a_piece_only_for_integer_columns_without_nulls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_provider_binlog.lake.types import INT, TIME, UBIGINT
    from airflow_provider_binlog.lake.write.statements import KEY_RANGE_ENV, key_ranges

    def items(*keys: Any) -> dict[Any, Any]:  # a piece's state: its keys, each a delete here
        return dict.fromkeys(keys)

    cols = [LakeColumn("id", BIGINT), LakeColumn("s", STRING), LakeColumn("n", INT)]
    assert key_ranges(items(7, -2, 40), ("id",), cols) == {"id": (-2, 40)}
    composite = items((5, "b", 1), (3, "a", None), (9, "c", 2))
    assert key_ranges(composite, ("id", "s", "n"), cols) == {"id": (3, 9)}  # a NULL in n, s text
    assert key_ranges(items(2**64 - 1, 0), ("u",), [LakeColumn("u", UBIGINT)]) == {"u": (0, 2**64 - 1)}
    # a TIME key is staged as microseconds, not as the decoder's value: no range
    times = items(datetime.timedelta(seconds=1), datetime.timedelta(seconds=2))
    assert key_ranges(times, ("t",), [LakeColumn("t", TIME)]) == {}
    assert key_ranges(items(True, 3), ("n",), cols) == {}
    assert key_ranges({}, ("id",), cols) == {}
    monkeypatch.setenv(KEY_RANGE_ENV, "off")
    assert key_ranges(items(1, 2), ("id",), cols) == {}


def test_merge_of_upserts_and_deletes() -> None:
    sql = merge_sql.merge_sql(TABLE, "v1", ["id", "it's"], ["id"])
    assert sql == (
        "MERGE INTO `lake`.`my.db`.`t``x` t USING `v1` s ON t.`id` = s.`id` "
        "WHEN MATCHED AND s.`_cdc_action` = 'D' THEN DELETE "
        "WHEN MATCHED AND s.`_cdc_action` = 'U' THEN UPDATE SET t.`id` = s.`id`, t.`it's` = s.`it's` "
        "WHEN NOT MATCHED AND s.`_cdc_action` = 'U' THEN INSERT (`id`, `it's`) VALUES (s.`id`, s.`it's`)"
    )


def test_merge_leaves_out_the_clauses_of_what_the_piece_lacks() -> None:
    deletes = merge_sql.merge_sql(TABLE, "v", ["id", "v"], ["id"], upserts=False)
    assert deletes.endswith("ON t.`id` = s.`id` WHEN MATCHED AND s.`_cdc_action` = 'D' THEN DELETE")
    upserts = merge_sql.merge_sql(TABLE, "v", ["id", "v"], ["id"], deletes=False)
    assert "DELETE" not in upserts and upserts.count("WHEN ") == 2
    with pytest.raises(ValueError, match="deletes or upserts"):
        merge_sql.merge_sql(TABLE, "v", ["id"], ["id"], deletes=False, upserts=False)


def test_merge_with_soft_deletes_and_metadata_columns() -> None:
    sql = merge_sql.merge_sql(
        TABLE, "v", ["k`1", "v"], ["k`1"], null_safe=True, soft_delete=True, with_meta=True
    )
    meta = "t.`_cdc_op` = s.`_cdc_op`, t.`_cdc_ts` = s.`_cdc_ts`, t.`_cdc_position` = s.`_cdc_position`"
    assert sql == (
        f"MERGE INTO {TABLE} t USING `v` s ON t.`k``1` <=> s.`k``1` "
        f"WHEN MATCHED AND s.`_cdc_action` = 'D' THEN UPDATE SET t.`_cdc_deleted` = true, {meta} "
        f"WHEN MATCHED AND s.`_cdc_action` = 'U' THEN UPDATE SET t.`k``1` = s.`k``1`, t.`v` = s.`v`, "
        f"{meta}, t.`_cdc_deleted` = false "
        "WHEN NOT MATCHED AND s.`_cdc_action` = 'U' THEN INSERT "
        "(`k``1`, `v`, `_cdc_op`, `_cdc_ts`, `_cdc_position`, `_cdc_deleted`) "
        "VALUES (s.`k``1`, s.`v`, s.`_cdc_op`, s.`_cdc_ts`, s.`_cdc_position`, false)"
    )


def test_a_composite_key_joins_on_every_key_column() -> None:
    sql = merge_sql.merge_sql(TABLE, "v", ODD, ["id", "a.b"])
    assert " ON t.`id` = s.`id` AND t.`a.b` = s.`a.b` WHEN " in sql
    assert "INSERT (" + ", ".join(ODD_SQL) + ") VALUES (" + ", ".join(f"s.{q}" for q in ODD_SQL) + ")" in sql


def _change(n: int, op: Op, before: dict[str, Any] | None, after: dict[str, Any] | None) -> RowChange:
    schema = TableSchema("db", "t", (ColumnDef("id", T.LONG), ColumnDef("v", T.VARCHAR)), ("id",))
    pos = BinlogPosition("mysql-bin.000001", 4 + 10 * n)
    return RowChange(
        "dest", "db", "t", op, before, after, ("id",), pos, BinlogPosition(pos.file, pos.pos + 10),
        None, 1_700_000_000 + n, OrderKey(1, pos.pos, -1, 0), schema,
    )  # fmt: skip


def test_a_key_change_is_staged_as_a_delete_and_an_upsert_that_one_merge_applies() -> None:
    piece = Piece(("id",), with_meta=True)
    fold(
        piece,
        [
            _change(1, Op.INSERT, None, {"id": 1, "v": "a"}),
            _change(2, Op.UPDATE, {"id": 1, "v": "a"}, {"id": 2, "v": "b"}),  # the key moves 1 -> 2
        ],
        "lake.db.t",
    )
    chunks = list(piece_columns(list(piece.state.items()), ["id", "v"], ("id",), with_meta=True))
    assert len(chunks) == 1
    ids, values, actions, ops, stamps, positions = chunks[0]
    assert list(zip(ids, values, actions, ops, strict=True)) == [
        (1, None, "D", "update"),
        (2, "b", "U", "update"),
    ]
    assert stamps == [datetime.datetime(2023, 11, 14, 22, 13, 22, tzinfo=datetime.timezone.utc)] * 2
    assert positions == ["mysql-bin.000001:24"] * 2
    sql = merge_sql.merge_sql(TABLE, "v", ["id", "v"], ["id"], with_meta=True)
    assert "'D' THEN DELETE" in sql and "WHEN NOT MATCHED AND s.`_cdc_action` = 'U' THEN INSERT" in sql


def test_count_of_matched_keys_joins_only_the_key_columns() -> None:
    assert merge_sql.matched_actions_sql(TABLE, "v", ["id", "x`y"], null_safe=False) == (
        f"SELECT s.`_cdc_action`, count(*) FROM `v` s LEFT SEMI JOIN (SELECT `id`, `x``y` FROM {TABLE}) t "
        "ON t.`id` = s.`id` AND t.`x``y` = s.`x``y` GROUP BY s.`_cdc_action`"
    )


def test_append_inserts_the_named_columns_of_the_view() -> None:
    assert merge_sql.append_sql(TABLE, "stage`1", ["id", "it's", "_cdc_op"]) == (
        f"INSERT INTO {TABLE} (`id`, `it's`, `_cdc_op`) SELECT `id`, `it's`, `_cdc_op` FROM `stage``1`"
    )


def test_truncate_deletes_or_marks_the_live_rows() -> None:
    assert merge_sql.truncate_sql(TABLE, soft_delete=False) == (
        f"SELECT count(*) FROM {TABLE}",
        f"DELETE FROM {TABLE}",
    )
    live = "`_cdc_deleted` IS DISTINCT FROM true"
    assert merge_sql.truncate_sql(TABLE, soft_delete=True) == (
        f"SELECT count(*) FROM {TABLE} WHERE {live}",
        f"UPDATE {TABLE} SET `_cdc_deleted` = true WHERE {live}",
    )
    at = datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    _, update = merge_sql.truncate_sql(TABLE, soft_delete=True, meta=(at, "bin.000001:4'"))
    assert update == (
        f"UPDATE {TABLE} SET `_cdc_deleted` = true, `_cdc_op` = 'truncate', "
        "`_cdc_ts` = TIMESTAMP '2025-01-02 03:04:05+00:00', `_cdc_position` = 'bin.000001:4\\'' "
        f"WHERE {live}"
    )


def test_create_table_quotes_columns_partitions_and_properties() -> None:
    columns = [LakeColumn("id", BIGINT), LakeColumn("it's", STRING), LakeColumn("a.b", STRING)]
    sql = merge_sql.create_table_sql(TABLE, columns, ["id", "bucket(16, `a.b`)"], {"k": "it's"})
    assert sql == (
        f"CREATE TABLE IF NOT EXISTS {TABLE} (`id` bigint, `it's` string, `a.b` string) USING iceberg "
        "PARTITIONED BY (`id`, bucket(16, `a.b`)) TBLPROPERTIES ('k' = 'it\\'s')"
    )
    assert "PARTITIONED" not in merge_sql.create_table_sql(TABLE, columns)
    with pytest.raises(LakeError, match="invalid partition"):
        merge_sql.create_table_sql(TABLE, columns, ["bucket(x, id)"])


def test_alter_statements_quote_the_column() -> None:
    col = LakeColumn("x`y", BIGINT)
    assert merge_sql.add_column_sql(TABLE, col) == f"ALTER TABLE {TABLE} ADD COLUMN `x``y` bigint"
    assert (
        merge_sql.alter_column_type_sql(TABLE, col) == f"ALTER TABLE {TABLE} ALTER COLUMN `x``y` TYPE bigint"
    )
