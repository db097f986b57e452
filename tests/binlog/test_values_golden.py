"""Golden bytes: every column type as MariaDB 10.11 wrote it (golden/all_types.sql, captured by
golden/capture.py into golden/all_types.json), decoded offline and compared with what SELECT showed."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from binlog_capture import GOLDEN, from_json

from airflow_provider_binlog.binlog.event import REGISTRY, DecodeContext, EventHeader
from airflow_provider_binlog.binlog.rows import RowsEvent
from airflow_provider_binlog.binlog.table_map import TableMapEvent

DATA = json.loads((GOLDEN / "all_types.json").read_text())
COLUMNS = [c for c in json.loads(json.dumps(DATA["full"]["snapshots"][0]["1"]))["$map"]]


def decode_events(variant: str, resolver: Any = None) -> list[Any]:
    ctx = DecodeContext(flavor="mariadb", server_version=DATA[variant]["server"], schema_resolver=resolver)
    out = []
    for e in DATA[variant]["events"]:
        body = bytes.fromhex(e["body"])
        ctx.header = EventHeader(0, e["type"], 1, 19 + len(body) + 4, 0, 0)
        out.append(REGISTRY[e["type"]].decode(memoryview(body), ctx))
    return out


def snapshots(variant: str) -> list[dict[int, dict[str, Any]]]:
    return [{int(k): from_json(v) for k, v in snap.items()} for snap in DATA[variant]["snapshots"]]


@functools.cache
def images(variant: str = "full") -> list[tuple[Any, Any, Any, Any]]:
    """(decoded before, decoded after, SELECTed before, SELECTed after) for every row image."""
    return _pair(decode_events(variant), snapshots(variant))


def _pair(events: list[Any], snaps: list[dict[int, dict[str, Any]]]) -> list[tuple[Any, Any, Any, Any]]:
    groups: list[list[RowsEvent]] = [[]]
    for ev in events:
        if isinstance(ev, RowsEvent):
            groups[-1].append(ev)
            if ev.is_statement_end:
                groups.append([])
    groups.pop()
    assert len(groups) == len(snaps)
    out = []
    previous: dict[int, dict[str, Any]] = {}
    for group, snap in zip(groups, snaps, strict=True):
        for ev in group:
            for before, after in ev.images():
                key = (after or before)["id"]
                want_before = previous.get(key) if before else None
                out.append((before, after, want_before, snap.get(key) if after else None))
        previous = snap
    return out


def test_event_sequence() -> None:
    kinds = [type(e).__name__ + ":" + getattr(e, "kind", "") for e in decode_events("full")]
    assert kinds.count("RowsEvent:insert") == 5
    assert kinds.count("RowsEvent:update") == 3 and kinds.count("RowsEvent:delete") == 1
    assert len(images()) == 5 + 2 + 1 + 1


@pytest.mark.parametrize("column", COLUMNS)
def test_column_values(column: str) -> None:
    for before, after, want_before, want_after in images():
        if before is not None:
            assert before[column] == want_before[column], f"before image of id {before['id']}"
        if after is not None:
            got, want = after[column], want_after[column]
            assert got == want and type(got) is type(want), f"id {after['id']}: {got!r} != {want!r}"


def test_table_map_full_metadata() -> None:
    tm = decode_events("full")[0]
    assert isinstance(tm, TableMapEvent)
    cols = {c.name: c for c in tm.table_schema.columns}
    assert tm.table_schema.primary_key == ("id",)
    assert list(cols) == COLUMNS
    assert cols["tiu"].unsigned and not cols["ti"].unsigned and cols["biu"].unsigned
    assert cols["dec65"].precision == 65 and cols["dec65"].scale == 30
    assert cols["tm6"].fsp == 6 and cols["dtm2"].fsp == 2 and cols["ts3"].fsp == 3
    assert cols["e"].enum_values == ("a", "b", "ç") and cols["s"].set_values == ("x", "y", "z")
    assert cols["e_latin1"].enum_values == ("é", "f")
    assert cols["c_latin1"].charset == "cp1252" and cols["vc_ucs2"].charset == "utf-16-be"
    assert cols["bin4"].is_binary and cols["b"].is_binary and not cols["t"].is_binary
    assert cols["g"].geometry_type == 0 and cols["pt"].geometry_type == 1
    assert not cols["id"].nullable and cols["ti"].nullable
