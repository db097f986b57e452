"""Archived binlogs as a source (issue #22): the MariaDB binlog files are copied aside, purged on
the server, and a backfill reads them from the archive into fresh lake tables, continues on the
live server where the archive ends, and a later run goes on from its cursor: the lake equals the
source value by value. Gaps (a file missing in the middle, an archive ending before the server's
oldest file) fail before anything is read, naming the missing files.

The module runs its own MariaDB (:mod:`own_servers`): it purges the server's binlogs.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import Shop, lake_verify, make_context
from own_servers import own_server

from airflow_provider_binlog.canal.errors import StartPositionError
from airflow_provider_binlog.canal.positions.archive import ArchiveGapError
from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TABLE_NAMES = ("customers", "products", "orders")


@pytest.fixture(scope="module")
def mariadb() -> Iterator[MariaDbServer]:
    yield from own_server(MariaDbServer(server_id=46))


@pytest.fixture(autouse=True)
def task_log(monkeypatch: pytest.MonkeyPatch) -> None:
    logger = logging.getLogger("tests.faults.archive")
    monkeypatch.setattr(BinlogToSparkOperator, "log", property(lambda self: logger))


def _files(mariadb: MariaDbServer) -> list[str]:
    return [str(r[0]) for r in mariadb.execute("SHOW BINARY LOGS")]


def _op(ns: str, warehouse: str, start_from: str, **kwargs: Any) -> BinlogToSparkOperator:
    return BinlogToSparkOperator(
        task_id="load", destination=kwargs.pop("destination", f"arch-{ns}"),
        tables={"shop.*": f"lake.{ns}.{{table}}"}, start_from=start_from, warehouse=warehouse,
        spark_master="local[2]", stop_spark=False, **kwargs,
    )  # fmt: skip


def _copy(src: Path, names: list[str], to: Path) -> Path:
    to.mkdir()
    for name in names:
        shutil.copy2(src / name, to / name)
    return to


def test_backfill_from_the_archive_then_the_live_server(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    for n in (150, 150, 100):
        shop.changes(n)
        mariadb.execute("FLUSH BINARY LOGS")
    files = _files(mariadb)
    closed, head_file = files[:-1], files[-1]
    assert shop.start_from.split(":")[0] == closed[0] and len(closed) >= 3, (shop.start_from, files)
    archive = _copy(mariadb.datadir, closed, tmp_path / "archive")
    (archive / "mysql-bin.index").write_text("".join(f"./{n}\n" for n in files))  # not a binlog: ignored
    mariadb.purge_binlogs_to(head_file)
    shop.changes(100)  # written after the purge: only the server has it
    ns = f"arch_{uuid.uuid4().hex[:8]}"

    # the server alone cannot: the start was purged
    with pytest.raises(StartPositionError, match="purged"):
        _op(ns, spark_warehouse, shop.start_from, destination=f"none-{ns}").execute(make_context())
    # the archive without saying where old column names come from is refused, naming the choices
    with pytest.raises(ConfigurationError, match="archive_schema='binlog'"):
        _op(ns, spark_warehouse, shop.start_from, archive_uri=str(archive)).execute(make_context())
    # a file missing in the middle, and an archive that ends before the server's oldest file
    middle = _copy(archive, [n for n in closed if n != closed[1]], tmp_path / "middle")
    with pytest.raises(ArchiveGapError) as gap:
        _op(ns, spark_warehouse, shop.start_from, archive_uri=str(middle), archive_schema="binlog").execute(
            make_context()
        )
    assert f"binlog gap: {closed[1]} missing" in str(gap.value), gap.value
    short = _copy(archive, closed[:-2], tmp_path / "short")
    with pytest.raises(ArchiveGapError) as gap:
        _op(ns, spark_warehouse, shop.start_from, archive_uri=str(short), archive_schema="binlog").execute(
            make_context()
        )
    message = str(gap.value)
    assert f"{closed[-2]} .. {closed[-1]} missing" in message and f"oldest binlog {head_file}" in message

    # the backfill: archive, then the live server
    with caplog.at_level(logging.INFO):
        first = _op(
            ns, spark_warehouse, shop.start_from, archive_uri=str(archive), archive_schema="binlog"
        ).execute(make_context())
    log = caplog.text
    assert (
        f"reading {len(closed)} archived binlog file(s)" in log
        and f"then the server from {head_file}:4" in log
    )
    assert "schema for archived positions: the binlog's own column names" in log
    assert first["changes"] > 500 and first["end"].startswith(head_file), first
    targets = {f"shop.{t}": f"lake.{ns}.{t}" for t in TABLE_NAMES}
    diffs = lake_verify(mariadb, spark, targets)
    assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)

    # the next run goes on from the cursor on the live server (the archive still given, unused)
    shop.changes(80)
    second = _op(
        ns, spark_warehouse, shop.start_from, archive_uri=str(archive), archive_schema="binlog"
    ).execute(make_context(run_id="second"))
    assert second["start"] == first["end"] and second["changes"] > 0, (first, second)
    diffs = lake_verify(mariadb, spark, targets)
    assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)

    # the other schema source: today's information_schema (the tables did not change since)
    ns2 = f"arch_{uuid.uuid4().hex[:8]}"
    with caplog.at_level(logging.INFO):
        _op(
            ns2,
            spark_warehouse,
            shop.start_from,
            archive_uri=str(archive),
            archive_schema="information_schema",
        ).execute(make_context(run_id="today"))
    assert "schema for archived positions: today's information_schema" in caplog.text
    diffs = lake_verify(mariadb, spark, {f"shop.{t}": f"lake.{ns2}.{t}" for t in TABLE_NAMES})
    assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
