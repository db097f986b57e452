"""OnlineCopies, the screen of the lake copy of gh-ost / pt-osc shadow tables (pure: entries built by
hand, the in-memory meta store). The runs themselves are in tests/airflow/test_operator_online_copy.py."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Entry, Op, OrderKey, RowChange
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.meta.memory import MemoryMetaManager
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.online_copy import (
    OnlineCopies,
    copy_base,
    copy_key,
    resnapshot_record,
    settle_copies,
)
from airflow_provider_binlog.canal.routing import Routes

ROUTES = Routes({"d.*": "lake.d.{table}"})
IDENTITY = ClientIdentity("dest", 1001)


def _pos(n: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", n)


def ddl(table: str, sql: str, n: int, kind: DdlKind = DdlKind.DDL) -> DdlEntry:
    return DdlEntry("dest", "d", table, kind, sql, _pos(n), _pos(n + 10), None, 0, OrderKey(1, n, -1, 0))


def row(table: str, n: int, key: tuple[str, ...] = ("id",)) -> RowChange:
    return RowChange("dest", "d", table, Op.INSERT, None, {"id": n}, key, _pos(n), _pos(n + 10), None, 0,
                     OrderKey(1, n, -1, 0))  # fmt: skip


def copies(meta: MemoryMetaManager | None = None, flt: TableFilter | None = None) -> OnlineCopies:
    return OnlineCopies("dest", meta or MemoryMetaManager(), IDENTITY, ROUTES.target_for, flt)


def tables(entries: list[Entry]) -> list[str]:
    return [e.table.replace("\0", "#") if e.table else "" for e in entries]  # type: ignore[union-attr]


CREATE = "CREATE /* gh-ost */ TABLE `d`.`_t_gho` LIKE `d`.`t`"
ALTER = "ALTER /* gh-ost */ TABLE `d`.`_t_gho` ADD COLUMN c INT NOT NULL DEFAULT 7"
SWAP = "RENAME /* gh-ost */ TABLE `d`.`t` TO `d`.`_t_del`, `d`.`_t_gho` TO `d`.`t`"


def _swap_entries(n: int) -> list[Entry]:
    return [ddl("t", SWAP, n), ddl("_t_gho", SWAP, n)]


@pytest.mark.parametrize(("name", "base"), [("_t_gho", "t"), ("_t_new", "t"), ("_a_b_new", "a_b"),
                                            ("_t_ghc", None), ("_t_del", None), ("t_gho", None)])  # fmt: skip
def test_copy_base(name: str, base: str | None) -> None:
    assert copy_base(name) == base


def test_the_copy_is_followed_and_swapped() -> None:
    c = copies()
    attempt = None
    out = c.screen([ddl("_t_gho", CREATE, 100), ddl("_t_gho", ALTER, 200), row("t", 300), row("_t_gho", 400)])
    attempt = c.records["d._t_gho"]["attempt"]
    # the copy row first, renamed to its attempt; the shadow's DDL taken out
    assert tables(out) == [f"_t_gho#{attempt}", "t"]
    assert c.resolver(ROUTES.target_for)("d", out[0].table) == f"lake.d.t__resnapshot_{attempt}"  # type: ignore[union-attr]
    assert c.resolver(ROUTES.target_for)("d", "t") == "lake.d.t"
    out = c.screen([row("_t_gho", 500), *_swap_entries(600), row("t", 700)])
    assert tables(out) == [f"_t_gho#{attempt}", "t", "t"]  # the shadow's RENAME entry taken out
    decision = c.decision("d.t", _pos(600))
    assert decision is not None and decision.attempt == attempt and decision.reason is None
    assert decision.end_position == _pos(610) and decision.rows and decision.shadow == "d._t_gho"
    key, value = resnapshot_record(decision, "lake.d.t", 3)
    assert key == "resnapshot/d.t" and value["status"] == "swapping" and value["start"] == str(_pos(610))
    # the record is in the meta store: the next run's screen knows the copy
    again = copies(c.meta)  # type: ignore[arg-type]
    assert tables(again.screen([row("_t_gho", 450)])) == [f"_t_gho#{attempt}"]


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        ([row("_t_gho", 150), ddl("_t_gho", ALTER, 160)], "ALTER after rows"),
        ([ddl("_t_gho", "UPDATE _t_gho SET c = 1", 150, DdlKind.STATEMENT_DML)], "statement-format DML"),
        ([ddl("_t_gho", "TRUNCATE TABLE `d`.`_t_gho`", 150, DdlKind.TRUNCATE)], "TRUNCATE"),
        ([ddl("_t_gho", "ALTER TABLE `d`.`_t_gho` FROBNICATE", 150)], "not followed"),
        ([ddl("_t_gho", "RENAME TABLE `d`.`_t_gho` TO `d`.`x`", 150)], "renamed other than"),
        ([row("_t_gho", 150, key=())], "without a primary key"),
    ],
)
def test_what_breaks_the_copy(entries: list[Entry], why: str) -> None:
    c = copies()
    out = c.screen([ddl("_t_gho", CREATE, 100), *entries, row("_t_gho", 170), *_swap_entries(600)])
    assert c.records["d._t_gho"]["status"] == "broken" and why in c.records["d._t_gho"]["why"]
    decision = c.decision("d.t", _pos(600))
    assert decision is not None and decision.attempt is None and why in str(decision.reason)
    assert not any(e.table and e.table.startswith("_t_gho#") and e.order_key.pos == 170 for e in out)  # type: ignore[union-attr]


def test_creation_not_read_means_re_snapshot() -> None:
    c = copies()
    out = c.screen([row("_t_gho", 150), *_swap_entries(600)])
    assert tables(out) == ["t"]  # the shadow's rows are not kept
    decision = c.decision("d.t", _pos(600))
    assert decision is not None and decision.attempt is None and "was not read" in str(decision.reason)


@pytest.mark.parametrize("sql", ["CREATE TABLE `d`.`_t_gho` AS SELECT * FROM `d`.`t`",
                                 "CREATE TABLE IF NOT EXISTS `d`.`_t_gho` LIKE `d`.`t`"])  # fmt: skip
def test_a_creation_that_may_not_start_empty(sql: str) -> None:
    c = copies()
    c.screen([ddl("_t_gho", sql, 100)])
    assert c.records["d._t_gho"]["status"] == "broken"


def test_column_rules_on_the_table() -> None:
    c = copies(flt=TableFilter(include=".*", columns="d.t:id/v"))
    c.screen([ddl("_t_gho", CREATE, 100)])
    assert c.records["d._t_gho"]["status"] == "broken" and "columns=" in c.records["d._t_gho"]["why"]


def test_not_a_copy() -> None:
    own = OnlineCopies(
        "dest", MemoryMetaManager(), IDENTITY, Routes({"d.t": "lake.d.t", "d._t_gho": "lake.d.g"}).target_for
    )
    assert own.base_of("d", "_t_gho") is None  # it has a route of its own: a lake table as asked
    unrouted = OnlineCopies("dest", MemoryMetaManager(), IDENTITY, Routes({"d.o": "lake.d.o"}).target_for)
    assert unrouted.base_of("d", "_t_gho") is None  # t is not routed
    out = unrouted.screen([ddl("_t_gho", CREATE, 100), row("_t_gho", 110)])
    assert tables(out) == ["_t_gho", "_t_gho"] and not unrouted.records


def test_a_re_read_creation_of_an_ended_copy_stays_ended() -> None:
    c = copies()
    c.screen([ddl("_t_gho", CREATE, 100)])
    c.set_status("d._t_gho", "swapped")
    again = copies(c.meta)  # type: ignore[arg-type]
    out = again.screen([ddl("_t_gho", CREATE, 100), row("_t_gho", 110)])
    assert out == [] and again.records["d._t_gho"]["status"] == "swapped"


def test_settle_copies() -> None:
    meta = MemoryMetaManager()
    c = copies(meta)
    c.screen([ddl("_t_gho", CREATE, 100), ddl("_t_new", CREATE.replace("_t_gho", "_t_new"), 200),
              ddl("_u_gho", CREATE.replace("_t_gho", "_u_gho").replace("`t`", "`u`"), 300)])  # fmt: skip
    done, broken, live = (c.records[f"d.{n}"]["attempt"] for n in ("_t_gho", "_t_new", "_u_gho"))
    c.set_status("d._t_gho", "swapping")
    meta.update_json(IDENTITY, "resnapshot/d.t", lambda _old: {"attempt": done, "status": "done"})
    c.set_status("d._t_new", "broken", "a TRUNCATE")
    dropped: list[Any] = []
    assert settle_copies(meta, IDENTITY, ROUTES.target_for, lambda *a: dropped.append(a)) == {live}
    assert sorted(dropped) == sorted([("d.t", "lake.d.t", done), ("d.t", "lake.d.t", broken)])
    assert meta.get_json(IDENTITY, copy_key("d._t_gho")).value["status"] == "swapped"
    dropped.clear()
    assert settle_copies(meta, IDENTITY, ROUTES.target_for, lambda *a: dropped.append(a)) == {live}
    assert dropped == []  # cleaned once


def test_a_cut_over_covered_by_the_mark_supersedes_the_copy() -> None:
    """A re-snapshot of t taken after the cut-over holds its effect: the RENAME is skipped, the copy
    is not swapped in; its staging table is dropped at the run's end, or at the next start when the
    cursor passed the cut-over."""
    c = copies()
    c.screen([ddl("_t_gho", CREATE, 100), row("_t_gho", 110), *_swap_entries(600)])
    assert c.records["d._t_gho"]["cut_over"] == str(_pos(600))
    ended = c.ended()
    assert [r["status"] for r in ended] == ["superseded"]
    c.cleaned(ended[0])
    assert c.ended() == []
    meta = MemoryMetaManager()
    d = copies(meta)
    d.screen([ddl("_t_gho", CREATE, 100), row("_t_gho", 110), *_swap_entries(600)])
    dropped: list[Any] = []
    attempt = d.records["d._t_gho"]["attempt"]
    assert settle_copies(
        meta, IDENTITY, ROUTES.target_for, lambda *a: dropped.append(a), cursor=_pos(599)
    ) == {attempt}
    assert (
        settle_copies(meta, IDENTITY, ROUTES.target_for, lambda *a: dropped.append(a), cursor=_pos(600))
        == set()
    )
    assert dropped == [("d.t", "lake.d.t", attempt)]
