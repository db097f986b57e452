"""A DDL entry carries its parsed statement, parsed once in the canal layer; the lake reads it there
and parses no SQL (no server: the converter is fed events made here)."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, OrderKey
from airflow_provider_binlog.canal.sql.ddl import parse_ddl

from .test_convert import FILE, Feed

LAKE = Path(__file__).resolve().parents[2] / "airflow_provider_binlog" / "lake"


def _entry(sql: str, kind: DdlKind = DdlKind.DDL, **kw: object) -> DdlEntry:
    pos = BinlogPosition(FILE, 1000)
    return DdlEntry(
        "d", "db", "t", kind, sql, pos, BinlogPosition(FILE, 1010), None, 1_700_000_000,
        OrderKey(3, 1000, -1, -1), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_the_converter_hands_its_parse_to_every_entry_of_the_statement() -> None:
    feed = Feed(include="db\\..*")
    feed.gtid()
    feed.query("DROP TABLE t, u", schema="db")
    ddls = [e for e in feed.out if isinstance(e, DdlEntry)]
    assert [(e.schema, e.table) for e in ddls] == [("db", "t"), ("db", "u")]
    assert ddls[0].statement is not None and ddls[0].statement is ddls[1].statement  # one parse
    assert ddls[0].statement == parse_ddl("DROP TABLE t, u", "db")
    assert ddls[0].statement.kind == "drop"


def test_an_entry_in_another_schema_than_the_sessions_is_parsed_in_its_own() -> None:
    """As the lake parsed it before (``sql`` with the entry's ``schema`` as the default)."""
    feed = Feed(include="other\\..*")
    feed.gtid()
    feed.query("ALTER TABLE other.t ADD COLUMN c INT", schema="db")
    (ddl,) = [e for e in feed.out if isinstance(e, DdlEntry)]
    assert ddl.schema == "other"
    assert ddl.statement == parse_ddl("ALTER TABLE other.t ADD COLUMN c INT", "other")


def test_an_entry_made_without_a_statement_parses_its_sql_once_when_made() -> None:
    made = _entry("ALTER TABLE t ADD COLUMN c INT")
    assert made.statement == parse_ddl("ALTER TABLE t ADD COLUMN c INT", "db")
    given = parse_ddl("ALTER TABLE t ADD COLUMN c INT", "db")
    assert _entry("ALTER TABLE t ADD COLUMN c INT", statement=given).statement is given
    assert _entry("TRUNCATE TABLE t", DdlKind.TRUNCATE).statement == parse_ddl("TRUNCATE TABLE t", "db")


def test_a_statement_dml_or_unread_statement_carries_none_and_the_statement_is_not_compared() -> None:
    assert _entry("UPDATE t SET a = 1", DdlKind.STATEMENT_DML).statement is None
    assert _entry("GRANT ALL ON *.* TO x").statement is None  # not DDL the grammar reads
    made = _entry("ALTER TABLE t ADD COLUMN c INT")
    assert made == _entry("ALTER TABLE t ADD COLUMN c INT", statement=None)
    assert "statement=" not in repr(made).replace("ends_statement=", "")
    back = pickle.loads(pickle.dumps(made))
    assert back == made and back.statement == made.statement


def test_the_lake_parses_no_sql() -> None:
    """No module of ``lake/`` imports the SQL grammar's parsers (``canal/sql/ddl.py``,
    ``canal/sql/tokens.py``, ``canal/sql/statement.py``), lazily or not."""
    parsers = {f"airflow_provider_binlog.canal.sql.{m}" for m in ("ddl", "tokens", "statement")}
    found = []
    modules = sorted(LAKE.rglob("*.py"))
    assert any(p.name == "pending.py" for p in modules)  # the tree is read
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                names = {a.name for a in node.names}
            else:
                continue
            if names & parsers:
                found.append(f"{path.name}:{node.lineno}")
    assert found == []
