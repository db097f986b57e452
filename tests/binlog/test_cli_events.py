"""``binlog-cdc events``: from files and from the live MariaDB, text and JSON lines."""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.cli import build_parser, main
from airflow_provider_binlog.cli.events import format_time, run_events, to_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "binlog"


def run(argv: list[str]) -> str:
    args = build_parser().parse_args(argv)
    out = io.StringIO()
    assert run_events(args, out) == 0
    return out.getvalue()


def jsonl(argv: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in run([*argv, "--format", "jsonl"]).splitlines()]


def test_values_as_json() -> None:
    assert to_json(Decimal("-12.3400")) == "-12.3400"
    assert to_json(b"\x00\xff") == {"base64": base64.b64encode(b"\x00\xff").decode()}
    assert to_json(dt.datetime(2024, 2, 29, 23, 59, 59, 5)) == "2024-02-29T23:59:59.000005"
    assert to_json(dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)) == "2024-01-01T00:00:00+00:00"
    assert to_json(dt.date(1, 1, 1)) == "0001-01-01"
    assert format_time(dt.timedelta(hours=838, minutes=59, seconds=59)) == "838:59:59"
    assert format_time(-dt.timedelta(hours=1, seconds=2, microseconds=500)) == "-1:00:02.000500"
    assert format_time(dt.timedelta(0)) == "0:00:00"
    assert to_json(dt.timedelta(seconds=-1)) == "-0:00:01"
    # inside a JSON document numbers stay numbers
    assert to_json({"a": [Decimal("1.5"), Decimal("10")]}, in_document=True) == {"a": [1.5, 10]}
    assert to_json(float("nan")) == "nan"


def test_file_jsonl_transaction_payload() -> None:
    lines = jsonl(["events", "--file", str(FIXTURES / "transaction_compression.000001")])
    assert [x["type"] for x in lines] == [
        "FORMAT_DESCRIPTION_EVENT",
        "PREVIOUS_GTIDS_LOG_EVENT",
        "ANONYMOUS_GTID_LOG_EVENT",
        "TRANSACTION_PAYLOAD_EVENT",
        "QUERY_EVENT",
        "TABLE_MAP_EVENT",
        "WRITE_ROWS_EVENT_V2",
        "XID_EVENT",
        "ROTATE_EVENT",
    ]
    payload = lines[3]
    assert payload["pos"] == "transaction_compression.000001:274" and payload["end_pos"] == 431
    inner = lines[4:8]
    assert [x["payload_index"] for x in inner] == [0, 1, 2, 3]
    assert all(x["pos"] == payload["pos"] for x in inner)
    rows = inner[2]
    assert rows["schema"] == "test" and rows["table"] == "tb1"
    assert rows["rows"] == [{"before": None, "after": {"@1": 1}}]
    for x in lines:
        assert set(x) >= {"type", "pos", "end_pos", "timestamp", "server_id"}
    assert "payload_index" not in lines[3]


def test_file_jsonl_unknown_event_and_gtid_tag() -> None:
    lines = jsonl(["events", "--file", str(FIXTURES / "mysql-bin.aurora-padding")])
    unknown = [x for x in lines if x["type"] == "UNKNOWN_EVENT_100"]
    assert len(unknown) == 1 and base64.b64decode(unknown[0]["data"]["base64"])
    tagged = jsonl(["events", "--file", str(FIXTURES / "binlog_transaction_with_GTID_TAG.000001")])
    assert tagged[1]["gtid_set"] == "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2"
    assert tagged[2]["gtid"] == "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"
    rows = next(x for x in tagged if x["type"] == "WRITE_ROWS_EVENT_V2")
    assert rows["rows"][0]["after"]["@3"] == "250.00"  # DECIMAL as a string


def test_file_text_and_from_offset() -> None:
    text = run(["events", "--file", str(FIXTURES / "mariadb-bin.000001")])
    assert "mariadb-bin.000001:612 WRITE_ROWS_EVENT_V1" in text
    assert '    insert {"id": 62, "topic": "foo", "event_type": "JSON"' in text
    path = str(FIXTURES / "mariadb-bin.000001")
    lines = jsonl(["events", "--file", path, "--from", "mariadb-bin.000001:702"])
    assert lines[0]["pos"] == "mariadb-bin.000001:702" and lines[0]["type"] == "GTID_EVENT"
    assert lines[0]["gtid"] == "0-1-2"


def test_errors_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["events"]) == 1
    assert "--host" in capsys.readouterr().err
    assert main(["events", "--host", "127.0.0.1", "--password-env", "NO_SUCH_VAR_XYZ"]) == 1
    assert "NO_SUCH_VAR_XYZ" in capsys.readouterr().err


@pytest.mark.integration
def test_server_mode_jsonl_and_text(mariadb: Any, database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig

    monkeypatch.setenv("CDC_TEST_PW", mariadb.repl_password)
    cfg = ReplicationConfig(mariadb.host, mariadb.port, mariadb.repl_user, mariadb.repl_password)
    c = ReplicationClient(cfg)
    mariadb.execute(f"CREATE TABLE `{database}`.c (id INT PRIMARY KEY, d DECIMAL(10,2), t TIME, j JSON)")
    start = c.head_position()
    gtid = str(c.head_gtid())
    mariadb.execute(f"INSERT INTO `{database}`.c VALUES (1, 12.50, '-838:59:59', '{{\"a\": 1}}')")
    base = ["events", "--host", mariadb.host, "--port", str(mariadb.port), "--user", mariadb.repl_user]
    base += ["--password-env", "CDC_TEST_PW"]
    lines = jsonl([*base, "--from", str(start)])
    rows = [x for x in lines if x["type"].startswith("WRITE_ROWS")]
    assert rows[-1]["schema"] == database and rows[-1]["table"] == "c"
    after = rows[-1]["rows"][0]["after"]
    assert after["id"] == 1 and after["d"] == "12.50" and after["t"] == "-838:59:59"
    by_gtid = jsonl([*base, "--gtid", gtid])
    assert [x["rows"] for x in by_gtid if x["type"].startswith("WRITE_ROWS")] == [rows[-1]["rows"]]
    text = run([*base, "--from", str(start)])
    assert "WRITE_ROWS_EVENT_V1" in text and mariadb.repl_password not in text
