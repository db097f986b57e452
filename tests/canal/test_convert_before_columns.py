"""The converter's ``before_columns``: before images (of updates and deletes) keep the columns it
names, every other field of every entry is what the converter makes without it. Fed the events of a
recorded binlog (no server), with the C row decoder and without it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from airflow_provider_binlog.binlog import values
from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.binlog.files import read_binlog_file
from airflow_provider_binlog.canal.change import Entry, Op, RowChange
from airflow_provider_binlog.canal.convert import BeforeColumns, EntryConverter
from airflow_provider_binlog.canal.filter import TableFilter

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "binlog" / "mysql-enum-string-set.000001"


def convert(before_columns: BeforeColumns | None, exclude_columns: str = "") -> list[Entry]:
    out: list[Entry] = []
    flt = TableFilter(include="mysql\\.t", exclude_columns=exclude_columns)
    conv = EntryConverter("d", flt, lambda e, size: out.extend(e), before_columns=before_columns)
    for event in read_binlog_file(FIXTURE):
        conv.handle(event)
    return out


def rows(entries: list[Entry]) -> list[RowChange]:
    return [e for e in entries if isinstance(e, RowChange)]


@pytest.fixture(params=["c", "python"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setattr(values, "_native", None)
    elif values._native is None:
        pytest.skip("the C row decoder is not built (or turned off)")
    return str(request.param)


def test_before_images_keep_the_named_columns(decoder: str) -> None:
    asked: list[tuple[str, str, tuple[str, ...]]] = []

    def first_and_third(schema: str, table: str, ts: TableSchema) -> Sequence[str]:
        asked.append((schema, table, tuple(c.name for c in ts.columns)))
        return ("f3", "f1")

    whole, kept = convert(None), convert(first_and_third)
    assert asked and asked[0][:2] == ("mysql", "t")
    assert {c.op for c in rows(whole)} == {Op.INSERT, Op.UPDATE, Op.DELETE}
    assert len(whole) == len(kept)
    for w, k in zip(whole, kept, strict=True):
        if not isinstance(w, RowChange):
            assert k == w
            continue
        assert isinstance(k, RowChange)
        assert k.after == w.after  # after images stay whole
        if w.before is None:
            assert k.before is None
        else:
            assert set(w.before) > {"f1", "f3"}
            assert k.before == {"f1": w.before["f1"], "f3": w.before["f3"]}
        for name in ("destination", "schema", "table", "op", "primary_key", "position", "order_key"):
            assert getattr(k, name) == getattr(w, name)


def test_a_column_the_table_lacks_or_no_answer_keeps_whole_images(decoder: str) -> None:
    whole = rows(convert(None))
    for policy in (lambda s, t, ts: ("f1", "nope"), lambda s, t, ts: None, lambda s, t, ts: ()):
        assert rows(convert(policy)) == whole


def test_with_column_rules_the_rules_and_the_named_columns_both_cut(decoder: str) -> None:
    """A table with column rules: its images lose the excluded columns, and its before images keep
    only the named ones among the rest."""
    whole = rows(convert(None, exclude_columns="mysql.t:f2"))
    kept = rows(convert(lambda s, t, ts: ("f1", "f3"), exclude_columns="mysql.t:f2"))
    assert any(w.before for w in whole) and all("f2" not in (w.after or w.before or {}) for w in whole)
    for w, k in zip(whole, kept, strict=True):
        assert k.after == w.after
        assert k.before == (None if w.before is None else {"f1": w.before["f1"], "f3": w.before["f3"]})
