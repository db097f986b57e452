"""Retention headroom (issue #17): at the start of a run the cursor's binlog file is compared with
the server's age-based retention (``binlog_expire_logs_seconds``, MariaDB 10.6+ and MySQL 8), a
warning is logged within the configured headroom, and the numbers are in the run summary.

The module runs its own MariaDB (:mod:`own_servers`): it changes the server's retention. The
clock of :func:`retention_headroom` is injected where a test needs a file of a given age; the file
times themselves are the server's.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_harness import Shop, make_context
from own_servers import own_server

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.drain.source import retention_headroom
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def mariadb() -> Iterator[MariaDbServer]:
    yield from own_server(MariaDbServer(server_id=38))


@pytest.fixture
def expire(mariadb: MariaDbServer) -> Iterator[Any]:
    """``expire(seconds)`` sets ``binlog_expire_logs_seconds``; 0 (no purge by age) again after."""

    def set_expire(seconds: int) -> None:
        mariadb.execute(f"SET GLOBAL binlog_expire_logs_seconds = {int(seconds)}")

    yield set_expire
    set_expire(0)


def _client(server: MariaDbServer) -> ReplicationClient:
    return ReplicationClient(
        ReplicationConfig(
            host=server.host, port=server.port, user=server.repl_user, password=server.repl_password
        )
    )


def _head_file(server: MariaDbServer) -> str:
    (file, *_), *_ = server.execute("SHOW MASTER STATUS")
    return str(file)


def test_headroom_against_the_servers_retention(mariadb: MariaDbServer, expire: Any) -> None:
    """The active file has no age; a closed file's age counts from the next file's start (the
    server's FORMAT_DESCRIPTION time); within a quarter of the retention it warns, past the
    retention it says the file goes at the next rotation; without retention nothing is by age."""
    client, connect = _client(mariadb), mariadb.connect
    expire(0)
    file = _head_file(mariadb)
    none = retention_headroom(client, connect, "d", file)
    assert none.retention_seconds is None and not none.warn
    assert "purges no binlog by age" in none.describe()

    expire(86400)
    active = retention_headroom(client, connect, "d", file)
    assert active.retention_seconds == 86400 and active.headroom_seconds is None and not active.warn
    assert active.head == file and "is the one the server writes now" in active.describe()

    before = time.time()
    mariadb.execute("FLUSH BINARY LOGS")
    after = time.time()
    fresh = retention_headroom(client, connect, "d", file)
    assert fresh.closed_at is not None and int(before) - 1 <= fresh.closed_at <= after + 1, (before, fresh)
    assert fresh.head != file and fresh.warn_below == 86400 / 4
    closed = fresh.closed_at

    calm = retention_headroom(client, connect, "d", file, now=closed + 86400 * 0.70)
    assert calm.headroom_seconds == pytest.approx(86400 * 0.30) and not calm.warn, calm
    near = retention_headroom(client, connect, "d", file, now=closed + 86400 * 0.80)
    assert near.headroom_seconds == pytest.approx(86400 * 0.20) and near.warn, near
    message = near.describe()
    assert f"the cursor's binlog {file}" in message and "may be purged in 4.8 h" in message, message
    assert "warning below 6.0 h" in message and "binlog_expire_logs_seconds" in message, message
    assert 'snapshot="when_needed"' in message, message
    tight = retention_headroom(client, connect, "d", file, fraction=0.1, now=closed + 86400 * 0.80)
    assert not tight.warn, tight  # the headroom is the caller's
    past = retention_headroom(client, connect, "d", file, now=closed + 86400 + 3600)
    assert past.warn and "60 min past the retention" in past.describe(), past.describe()
    summary = near.as_dict()
    assert summary["warning"] is True and summary["retention_seconds"] == 86400 and summary["file"] == file
    assert summary["headroom_seconds"] == pytest.approx(86400 * 0.2, abs=0.2)


@pytest.mark.spark
def test_operator_warns_and_reports_retention(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    expire: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A run whose cursor file was closed longer ago than the server's retention (2 s here): the
    task log warns naming the file, the summary's ``retention`` holds the numbers; the run itself
    goes on (nothing rotates the file away meanwhile)."""
    shop.changes(50)
    file = shop.start_from.split(":")[0]
    mariadb.execute("FLUSH BINARY LOGS")  # the cursor's file is closed now; its age starts
    expire(2)
    time.sleep(3.0)  # older than the retention: it would go at the next rotation
    ns = f"ret_{uuid.uuid4().hex[:8]}"
    task_log = logging.getLogger("tests.faults.retention")  # the task log goes to structlog's sink
    monkeypatch.setattr(BinlogToSparkOperator, "log", property(lambda self: task_log))
    op = BinlogToSparkOperator(
        task_id="load", destination=f"dest-{ns}", tables={"shop.*": f"lake.{ns}.{{table}}"},
        start_from=shop.start_from, warehouse=spark_warehouse, spark_master="local[2]", stop_spark=False,
    )  # fmt: skip
    with caplog.at_level(logging.INFO):
        summary = op.execute(make_context(run_id="retention"))
    expire(0)
    retention = summary["retention"]
    assert retention["file"] == file and retention["warning"] is True, retention
    assert retention["retention_seconds"] == 2 and retention["headroom_seconds"] < 0, retention
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"the cursor's binlog {file}" in w and "past the retention" in w for w in warnings), warnings
    assert summary["changes"] > 0
