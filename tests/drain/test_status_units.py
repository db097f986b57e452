"""The pure parts of ``binlog-cdc status`` and the headroom gauge: lag arithmetic over the binlog
list, where the cursor's file is, the gauge's value and name (table-driven; the server-backed
tests are in ``tests/airflow/test_cli_status.py``)."""

from __future__ import annotations

import pytest

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.meta.model import LogPosition
from airflow_provider_binlog.drain.source import Retention
from airflow_provider_binlog.drain.status import _cursor_file_state, _lag

FILES = [("mysql-bin.000003", 1000), ("mysql-bin.000004", 500), ("mysql-bin.000005", 300)]


@pytest.mark.parametrize(
    ("cursor", "head", "expected"),
    [
        ("mysql-bin.000005:100", "mysql-bin.000005:300", (200, 0)),  # same file
        ("mysql-bin.000005:300", "mysql-bin.000005:300", (0, 0)),
        ("mysql-bin.000004:200", "mysql-bin.000005:300", (300 + 300, 1)),  # rest of 4, head of 5
        ("mysql-bin.000003:900", "mysql-bin.000005:250", (100 + 500 + 250, 2)),  # 4 whole in between
    ],
)
def test_lag_counts_the_bytes_to_the_head(cursor: str, head: str, expected: tuple[int, int]) -> None:
    assert _lag(BinlogPosition.parse(cursor), BinlogPosition.parse(head), FILES) == expected


@pytest.mark.parametrize(
    ("journal", "expected"),
    [
        ("mysql-bin.000004", "present"),
        ("mysql-bin.000002", "purged"),
        ("mysql-bin.000009", "beyond_head"),
        (None, "none"),
    ],
)
def test_where_the_cursors_file_is(journal: str | None, expected: str) -> None:
    cursor = LogPosition(journal, 4 if journal else None)
    assert _cursor_file_state(cursor, [name for name, _ in FILES]) == expected
    assert _cursor_file_state(None, []) == "none"


def _retention(file: str, retention: float | None, headroom: float | None) -> Retention:
    return Retention("d", file, retention, "mysql-bin.000003", "mysql-bin.000005", None, headroom, None)


@pytest.mark.parametrize(
    ("retention", "expected"),
    [
        (_retention("mysql-bin.000003", 86400, 3600.0), 3600.0),  # known headroom
        (_retention("mysql-bin.000003", 86400, -5.0), -5.0),  # past the retention
        (_retention("mysql-bin.000005", 86400, None), 86400),  # the active file: the whole retention
        (_retention("mysql-bin.000004", 86400, None), None),  # closed, its age unknown
        (_retention("mysql-bin.000003", None, None), None),  # no purge by age
    ],
)
def test_the_gauges_value(retention: Retention, expected: float | None) -> None:
    assert retention.metric_seconds == expected


def test_the_gauges_name_keeps_the_destination_one_segment() -> None:
    pytest.importorskip("airflow")
    from airflow_provider_binlog.operators.metrics import headroom_name

    assert headroom_name("shop") == "binlog_cdc.retention_headroom_seconds.shop"
    assert headroom_name("shop.eu/1 x") == "binlog_cdc.retention_headroom_seconds.shop_eu_1_x"
