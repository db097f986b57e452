"""RENAME TABLE, ALTER TABLE .. RENAME TO and the swaps of gh-ost / pt-osc: what each name's lake
table does (:func:`airflow_provider_binlog.canal.sql.operations.rename_operation`). Pure: no server."""

from __future__ import annotations

import pytest

from airflow_provider_binlog.canal.sql import operations as ops
from airflow_provider_binlog.canal.sql.ddl import parse_ddl

ROUTES = {"a": "A", "b": "B", "t": "T", "x": "X", "same1": "S", "same2": "S"}


def _route(schema: str, table: str) -> str | None:
    return ROUTES.get(table) if schema == "d" else None


def _verdict(
    sql: str, table: str, policy: object = None, route: object = _route
) -> tuple[str, list[ops.Operation]]:
    p = ops.Policy.of(policy)  # type: ignore[arg-type]
    found = ops.classify(parse_ddl(sql, "d"), ("d", table), None, None, p, route)  # type: ignore[arg-type]
    return ops.decide(found, p)[0], found


def test_origins_follow_the_pairs_in_order() -> None:
    swap = parse_ddl("RENAME TABLE t TO _t_del, _t_gho TO t", "d")
    assert ops.rename_origins(swap.renames) == {("d", "_t_del"): ("d", "t"), ("d", "t"): ("d", "_t_gho")}
    chain = parse_ddl("RENAME TABLE a TO b, b TO c", "d")
    assert ops.rename_origins(chain.renames) == {("d", "c"): ("d", "a")}
    back = parse_ddl("RENAME TABLE a TO tmp, tmp TO a", "d")
    assert ops.rename_origins(back.renames) == {}


@pytest.mark.parametrize(
    ("sql", "table", "verdict", "actions"),
    [
        # the new name is loaded again from the source (a re-snapshot of the NEW name)
        ("RENAME TABLE a TO b", "b", "resnapshot", ()),
        # the old name's rows live on in another lake table: its own is dropped
        ("RENAME TABLE a TO b", "a", "evolve", (ops.DropTable(),)),
        ("ALTER TABLE a ADD COLUMN z INT, RENAME TO b", "b", "resnapshot", ()),
        ("ALTER TABLE a RENAME TO b", "a", "evolve", (ops.DropTable(),)),
        # renamed out of the routes: kept as it was
        ("RENAME TABLE a TO elsewhere", "a", "evolve", ()),
        ("ALTER TABLE a RENAME TO other.a", "a", "evolve", ()),
        # a swap of two routed tables: both loaded again
        ("RENAME TABLE a TO x, b TO a", "a", "resnapshot", ()),
        ("RENAME TABLE a TO x, b TO a", "x", "resnapshot", ()),
        ("RENAME TABLE a TO x, b TO a", "b", "evolve", (ops.DropTable(),)),
        # gh-ost / pt-osc cut-over with the shadow tables not routed: t loaded again
        ("RENAME TABLE t TO _t_del, _t_gho TO t", "t", "resnapshot", ()),
        ("RENAME TABLE t TO _t_old, _t_new TO t", "t", "resnapshot", ()),
        # the same lake table before and after: nothing to do
        ("RENAME TABLE same1 TO same2", "same2", "evolve", ()),
        ("RENAME TABLE same1 TO same2", "same1", "evolve", ()),
        ("RENAME TABLE a TO tmp, tmp TO a", "a", "evolve", ()),
    ],
)
def test_each_name_of_a_rename(sql: str, table: str, verdict: str, actions: tuple[object, ...]) -> None:
    got, found = _verdict(sql, table)
    assert got == verdict, found
    assert tuple(a for op in found for a in op.actions) == actions


def test_policy_and_unknown_routes() -> None:
    # resnapshot: the new name is loaded; a name renamed away has nothing to load (still dropped / kept)
    assert _verdict("RENAME TABLE a TO b", "a", "resnapshot")[0] == "evolve"
    assert _verdict("RENAME TABLE a TO b", "b", "resnapshot")[0] == "resnapshot"
    # fail: both names stop the run
    assert _verdict("RENAME TABLE a TO b", "a", {"rename_table": "fail"})[0] == "fail"
    assert _verdict("RENAME TABLE a TO b", "b", {"rename_table": "fail"})[0] == "fail"
    # routes unknown: the new name is loaded again, the old lake table kept
    assert _verdict("RENAME TABLE a TO b", "b", route=None)[0] == "resnapshot"
    verdict, found = _verdict("RENAME TABLE a TO b", "a", route=None)
    assert verdict == "evolve" and not found[0].actions
