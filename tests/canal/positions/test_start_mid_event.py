"""A start position inside an event is refused, naming the nearest event starts (issue #17): the
destination's ``start_from`` (it was silently moved to the event's transaction start) and
``binlog-cdc events --from`` (it passed on the server's error 1236). Against the real MariaDB."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_binlog.binlog.client import ReplicationClient
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import StartPositionError
from airflow_provider_binlog.canal.meta import MemoryMetaManager
from airflow_provider_binlog.canal.positions.start import StartSpec, check_event_start
from airflow_provider_binlog.cli import main

from ..test_instance import head, make, source

pytestmark = pytest.mark.integration


def _row_event(mariadb: Any, database: str) -> tuple[BinlogPosition, BinlogPosition]:
    """A committed one-row insert; the start and end of its WRITE_ROWS event."""
    mariadb.execute(f"CREATE TABLE `{database}`.m (id INT PRIMARY KEY, v VARCHAR(200))")
    start = head(mariadb)
    mariadb.execute(f"INSERT INTO `{database}`.m VALUES (1, %s)", ("x" * 100,))
    stop = head(mariadb)
    with ReplicationClient(source(mariadb)).dump(start, stop_at=stop) as stream:
        for event in stream:
            if event.type_name.startswith("WRITE_ROWS"):
                return event.position, BinlogPosition(event.file, event.end_pos)
    raise AssertionError("no WRITE_ROWS event")


def test_start_from_inside_an_event_is_refused(mariadb: Any, database: str) -> None:
    begin, end = _row_event(mariadb, database)
    inside = BinlogPosition(begin.file, begin.pos + 7)
    meta = MemoryMetaManager()
    inst = make(mariadb, database, meta, start=StartSpec(position=str(inside)))
    with pytest.raises(StartPositionError) as refused:
        inst.subscribe(stop_at="head")
    inst.close()
    message = str(refused.value)
    assert f"start position {inside} is inside a WRITE_ROWS" in message, message
    assert f"the nearest events start at {begin} and {end}" in message, message
    assert meta.get_cursor(inst.identity).value is None, "a refused start was pinned"
    # an event's own start is accepted (inside a transaction: moved to the transaction's start)
    ok = make(mariadb, database, MemoryMetaManager(), start=StartSpec(position=str(begin)))
    point = ok.subscribe(stop_at="head")
    ok.close()
    assert point.position is not None and point.position < begin


def test_check_event_start_header_and_past_the_end(mariadb: Any, database: str) -> None:
    client = ReplicationClient(source(mariadb))
    begin, end = _row_event(mariadb, database)
    check_event_start(client, begin)
    check_event_start(client, end)
    with pytest.raises(StartPositionError, match=f"the first event starts at {begin.file}:4"):
        check_event_start(client, BinlogPosition(begin.file, 2))
    size = dict(client.binlog_files())[begin.file]
    with pytest.raises(StartPositionError, match=f"past the end of {begin.file} \\({size} bytes\\)"):
        check_event_start(client, BinlogPosition(begin.file, size + 1000))


def test_cli_events_from_inside_an_event(
    mariadb: Any, database: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    begin, end = _row_event(mariadb, database)
    inside = BinlogPosition(begin.file, begin.pos + 7)
    monkeypatch.setenv("CDC_TEST_PW", mariadb.repl_password)
    base = ["events", "--host", mariadb.host, "--port", str(mariadb.port), "--user", mariadb.repl_user]
    base += ["--password-env", "CDC_TEST_PW"]
    capsys.readouterr()
    assert main([*base, "--from", str(inside)]) == 1
    captured = capsys.readouterr()
    assert f"--from {inside} is inside a WRITE_ROWS" in captured.err, captured.err
    assert f"the nearest events start at {begin} and {end}" in captured.err, captured.err
    assert "1236" not in captured.err and captured.out == "", captured
    code = main([*base, "--from", str(end), "--limit", "3"])  # an event's start: read from there
    assert code == 0, capsys.readouterr()
    printed = capsys.readouterr()
    assert f"{end} XID_EVENT" in printed.out, printed
