"""Collation and charset names as each server family lists them (no server needed: the rows are
what information_schema.COLLATIONS gives on MySQL 5.7, MySQL 8.0.30+ and MariaDB)."""

from __future__ import annotations

from airflow_provider_binlog.canal.schema import Collations, spec_to_column
from airflow_provider_binlog.canal.sql.ddl import parse_ddl
from airflow_provider_binlog.lake.types import map_column

MYSQL57 = [("utf8_general_ci", 33, "utf8", True), ("utf8_unicode_ci", 192, "utf8", False),
           ("utf8_bin", 83, "utf8", False), ("utf8mb4_general_ci", 45, "utf8mb4", True),
           ("latin1_swedish_ci", 8, "latin1", True), ("binary", 63, "binary", True)]  # fmt: skip
MYSQL8 = [("utf8mb3_general_ci", 33, "utf8mb3", True), ("utf8mb3_unicode_ci", 192, "utf8mb3", False),
          ("utf8mb3_bin", 83, "utf8mb3", False), ("utf8mb4_0900_ai_ci", 255, "utf8mb4", True),
          ("utf8mb4_general_ci", 45, "utf8mb4", False), ("binary", 63, "binary", True)]  # fmt: skip
MARIADB = [*MYSQL8[:3], ("utf8mb4_general_ci", 45, "utf8mb4", True), ("uca1400_ai_ci", None, None, None),
           ("utf8mb4_uca1400_ai_ci", 2304, "utf8mb4", False), ("binary", 63, "binary", True)]  # fmt: skip


def test_utf8_is_utf8mb3_whichever_name_the_server_lists() -> None:
    for rows in (MYSQL57, MYSQL8, MARIADB):
        c = Collations(rows)  # type: ignore[arg-type]
        for charset in ("utf8", "UTF8MB3", "utf8mb3"):
            assert c.resolve(None, charset) == 33, (rows[0], charset)
        for name in ("utf8_unicode_ci", "utf8mb3_unicode_ci"):
            assert c.resolve(name, None) == 192, (rows[0], name)
        assert c.resolve("utf8_nonexistent_ci", None) == 33  # its charset's default
        assert c.binary_of(33) == 83


def test_mariadb_short_names_and_utf8_as_utf8mb4() -> None:
    c = Collations(MARIADB)  # type: ignore[arg-type]
    assert c.resolve("uca1400_ai_ci", "utf8mb4") == 2304
    assert c.codec(2304) == "utf-8"  # an id only the server lists
    assert Collations(MARIADB, utf8="utf8mb4").resolve(None, "utf8") == 45  # old_mode without UTF8_IS_UTF8MB3


def test_a_text_column_of_a_legacy_table_is_text_in_the_lake() -> None:
    c = Collations(MYSQL57)  # type: ignore[arg-type]
    stmt = parse_ddl(
        "CREATE TABLE t (id INT, b TEXT, n NCHAR(2), x BLOB, y TEXT CHARSET binary) CHARSET=utf8", "d"
    )
    assert stmt is not None and stmt.default_charset == "utf8"
    cols = [
        spec_to_column(s, c, c.resolve(stmt.default_collation, stmt.default_charset)) for s in stmt.columns
    ]
    assert [map_column(col).sql for col in cols] == ["int", "string", "string", "binary", "binary"]
