"""Row changes built by the C extension's ``records`` equal those the Python path builds.

The converter turns every row of a rows event into a :class:`RowChange`; with the C row decoder
loaded it builds them in C (``_rowdecode.records``, no ``__init__`` per row), otherwise in Python.
Both are fed the same stub rows events here (pure code: no server), and compared field by field.
"""

from __future__ import annotations

import gc
import sys
from dataclasses import fields
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_binlog.binlog import values
from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType
from airflow_provider_binlog.binlog.event import Event, EventHeader
from airflow_provider_binlog.canal import convert
from airflow_provider_binlog.canal.change import Entry, Op, OrderKey, RowChange
from airflow_provider_binlog.canal.convert import EntryConverter
from airflow_provider_binlog.canal.filter import TableFilter

native = values.native_module()
needs_c = pytest.mark.skipif(native is None, reason="the C row decoder is not built (or turned off)")

SCHEMA = TableSchema(
    "db", "t", (ColumnDef("id", ColumnType.LONG), ColumnDef("name", ColumnType.VARCHAR)), ("id",)
)
ROWS: dict[str, list[Any]] = {
    "insert": [{"id": 1, "name": "a"}, {"id": 2, "name": None}],
    "delete": [{"id": 3, "name": "c"}],
    "update": [
        ({"id": 4, "name": "d"}, {"id": 4, "name": "e"}),
        ({"id": 5, "name": "x"}, {"id": 6, "name": "y"}),
    ],
    "empty": [],
}


def _body(kind: str) -> Any:
    tm = SimpleNamespace(schema="db", table="t", table_schema=SCHEMA)
    return SimpleNamespace(
        table_map=tm, kind="insert" if kind == "empty" else kind, rows=ROWS[kind], rows_bytes=100,
        rows_keeping=lambda keep: ROWS[kind], images=lambda keep=None: [],
    )  # fmt: skip


def _convert(kind: str, payload_index: int | None, filter: TableFilter) -> list[Entry]:
    out: list[Entry] = []
    conv = EntryConverter("dest", filter, lambda e, size: out.extend(e))
    event = Event(EventHeader(1_700_000_000, 30, 1, 500, 1500, 0), None, "mysql-bin.000007", 1000, 1500,
                  payload_index)  # fmt: skip
    conv._rows(event, _body(kind))
    return out


@needs_c
@pytest.mark.parametrize("kind", ["insert", "delete", "update", "empty"])
@pytest.mark.parametrize("payload_index", [None, 3])
def test_c_and_python_build_the_same_row_changes(
    kind: str, payload_index: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    flt = TableFilter("db\\.t")
    built_in_c = _convert(kind, payload_index, flt)
    monkeypatch.setattr(convert, "_records", None)
    built_in_python = _convert(kind, payload_index, flt)
    assert built_in_c == built_in_python
    assert len(built_in_c) == len(ROWS[kind])
    for i, change in enumerate(built_in_c):
        assert type(change) is RowChange
        assert type(change.order_key) is OrderKey
        assert change.order_key == (7, 1000, -1 if payload_index is None else payload_index, i)
        assert change.op is Op(_body(kind).kind)
        assert change.primary_key == ("id",) and change.table_schema is SCHEMA
        row = ROWS[kind][i]
        assert (change.before, change.after) == (row if kind == "update" else (None, row) if kind == "insert"
                                                 else (row, None))  # fmt: skip
        for f in fields(RowChange):  # every slot is set
            getattr(change, f.name)


def test_the_c_path_is_taken_when_the_extension_is_loaded() -> None:
    """A field added to RowChange must be added to ``convert._ROW_FIELDS`` too (else the C path
    is silently left out)."""
    assert (convert._records is not None) == (native is not None and hasattr(native, "records"))
    assert tuple(f.name for f in fields(RowChange)) == convert._ROW_FIELDS


@needs_c
def test_records_hold_their_references() -> None:
    """No reference leaked or lost: a template value's count is back where it was once the
    records are gone, and the images live as long as the records do."""
    marker = "dest-" + "x" * 20
    image = {"id": 1}
    plan = native.record_plan(RowChange, convert._ROW_FIELDS)
    template = (marker, "db", "t", Op.INSERT, None, None, ("id",), None, None, None, 0, None, None)
    gc.collect()
    before = sys.getrefcount(marker), sys.getrefcount(image)
    built = native.records(plan, template, [image] * 50, 1, OrderKey, (1, 2, -1), convert._ROW_SLOTS)
    assert sys.getrefcount(marker) == before[0] + 50 and sys.getrefcount(image) == before[1] + 50
    assert built[49].after is image and built[49].order_key == (1, 2, -1, 49)
    assert not gc.is_tracked(built[0]) and not gc.is_tracked(built[0].order_key)  # no cycle possible
    del built
    gc.collect()
    assert (sys.getrefcount(marker), sys.getrefcount(image)) == before


@needs_c
def test_bad_arguments_raise() -> None:
    plan = native.record_plan(RowChange, convert._ROW_FIELDS)
    template = (None,) * len(convert._ROW_FIELDS)
    with pytest.raises(TypeError):  # mode 0 takes (before, after) pairs
        native.records(plan, template, [{"id": 1}], 0, OrderKey, (1, 2, 3), convert._ROW_SLOTS)
    with pytest.raises(ValueError):  # the template must fill every slot
        native.records(plan, template[:-1], [], 1, OrderKey, (1, 2, 3), convert._ROW_SLOTS)
    with pytest.raises(ValueError):  # a key type that is not a tuple
        native.records(plan, template, [], 1, dict, (1, 2, 3), convert._ROW_SLOTS)
    with pytest.raises(ValueError):  # a plan must name every slot
        native.record_plan(RowChange, convert._ROW_FIELDS[:-1])
    with pytest.raises(ValueError):  # and only slots
        native.record_plan(RowChange, (*convert._ROW_FIELDS[:-1], "qualified_name"))
    with pytest.raises(ValueError):  # a class with a __dict__
        native.record_plan(SimpleNamespace, ("x",))
