"""The read point's rules that need no Spark (``lake/read_point.py``): when a table's mark is past a
run's end, which snapshot a recorded position picks from the summaries, the tag names, the setting."""

from __future__ import annotations

import pytest

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import OrderKey
from airflow_provider_binlog.canal.snapshot.initial import SNAPSHOT_FILE_NUMBER
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.lake import read_point as rp
from airflow_provider_binlog.lake.commits import CommittedMark


def _pos(n: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000002", n)


def _mark(n: int, snapshot: bool = False) -> CommittedMark:
    key = OrderKey(SNAPSHOT_FILE_NUMBER, 3, -1, 0) if snapshot else OrderKey(2, n, -1, 0)
    return CommittedMark(key, _pos(n), None, None, 7)


def test_a_mark_at_or_past_the_end_is_ahead() -> None:
    end = _pos(500)
    assert not rp._ahead(_mark(420), end)
    assert rp._ahead(_mark(500), end) and rp._ahead(_mark(501), end)  # a row event there: after the end
    assert not rp._ahead(_mark(500, snapshot=True), end)  # a snapshot's rows as of its high watermark
    assert rp._ahead(_mark(501, snapshot=True), end)


def _summary(snapshot: int, at: int, start: int | None = None, snap: bool = False) -> rp._Summary:
    return rp._Summary(snapshot, _pos(at), None, None if start is None else _pos(start), None, snap)


def test_a_recorded_position_picks_the_newest_snapshot_before_it() -> None:
    history = [_summary(3, 900, start=700), _summary(2, 650, start=600), _summary(1, 100, snap=True)]
    assert rp._at("t", "d", history, _pos(700)) == 2
    assert rp._at("t", "d", history, _pos(600)) == 1  # the run of snapshot 2 started there
    assert rp._at("t", "d", history, _pos(100)) == 1  # the snapshot stood there
    with pytest.raises(rp.ReadPointError, match=r"spans mysql-bin\.000002:620"):
        rp._at("t", "d", history, _pos(620))  # inside the run of snapshot 2: no snapshot there
    with pytest.raises(rp.ReadPointError, match="t: no snapshot of destination 'd' before"):
        rp._at("t", "d", [_summary(3, 900), _summary(-1, 0)], _pos(800))


def test_names_and_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert rp.read_tag("shop") == "binlog-cdc-read-shop"
    assert rp.point_tag("shop", _pos(4)) == "binlog-cdc-read-shop@mysql-bin.000002:4"
    monkeypatch.delenv(rp.KEEP_ENV, raising=False)
    assert rp.keep_default() == rp.DEFAULT_KEEP
    monkeypatch.setenv(rp.KEEP_ENV, "0")
    assert rp.keep_default() == 0
    monkeypatch.setenv(rp.KEEP_ENV, "many")
    with pytest.raises(ConfigurationError, match="BINLOG_CDC_READ_POINTS='many'"):
        rp.keep_default()
