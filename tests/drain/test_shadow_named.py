"""The run start's list of existing tables a glob leaves out for their shadow-like names (pure: the
``information_schema`` answer is given; the operator test runs it against MariaDB)."""

from __future__ import annotations

from typing import Any

from airflow_provider_binlog.canal.routing import Routes
from airflow_provider_binlog.drain.source import ShadowNamed, shadow_named


class _Source:
    """A connection whose cursor answers the one query with ``rows``."""

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        self.rows = rows

    def cursor(self) -> Any:
        return self

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str) -> None:
        assert "information_schema.TABLES" in sql

    def fetchall(self) -> list[tuple[str, str]]:
        return self.rows

    def close(self) -> None:
        pass


def test_shadow_named_tells_own_tables_parked_tables_and_copies_apart() -> None:
    rows = [("d", "t"), ("d", "_audit_old"), ("d", "_t_del"), ("d", "_t_gho"), ("e", "_x_new"), ("d", "u")]
    found = shadow_named(lambda: _Source(rows), Routes({"d.*": "lake.d.{table}"}))
    assert found == [
        ShadowNamed("d._audit_old", "lake.d._audit_old", None),
        ShadowNamed("d._t_del", "lake.d._t_del", "d.t"),
        ShadowNamed("d._t_gho", "lake.d._t_gho", "d.t", copy=True),
    ]
    own, parked, copy = (f.describe("dest") for f in found)
    assert "likely a table of its own" in own and "exclude=['d._audit_old']" in own
    assert "d.t exists" in parked and "shadow_tables=True" in parked
    assert "read as the copy of d.t" in copy
    assert shadow_named(lambda: _Source(rows), Routes({"d.*": "lake.d.{table}"}, shadow_tables=True)) == []
    assert shadow_named(lambda: _Source(rows), Routes({"d.t": "lake.d.t"})) == []  # exact routes only
