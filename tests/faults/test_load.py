"""Load: a writer at a fixed rate into the demo ``shop`` tables for the whole test while operator runs
drain back to back; the lag after each run stays bounded and, once the writer stops, one more run
leaves the lake equal to the source (:func:`airflow_provider_binlog.dev.load.run_load`).

The figures (per-run changes, seconds and lag) go to the run's "fault suite figures" summary and
to ``load-figures.txt`` in the test's ``tmp_path``. A larger setting runs through the benchmark.

The bound, per run: the cursor reached the head the run saw at its start, so the lag at the run's
end is at most the run's own time plus ``LAG_SLACK`` (the cursor's time is in whole seconds, and
the writer's last transaction before the head is a tick old); and over the runs the lag does not
grow: the mean of the second half is at most twice the first half's plus ``LAG_SLACK``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from statistics import mean
from typing import Any

import pytest
from figures import FIGURES
from own_servers import own_server

from airflow_provider_binlog.dev.load import run_load
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer

pytestmark = [pytest.mark.integration, pytest.mark.spark]

RATE = 300  # statements per second (each changes at most one row)
RUNS = 4
LAG_SLACK = 3.0  # seconds


@pytest.fixture(scope="module")
def mariadb() -> Iterator[MariaDbServer]:
    yield from own_server(MariaDbServer(server_id=32))


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[ZooKeeperServer]:
    yield from own_server(ZooKeeperServer())


def test_lag_stays_bounded_under_a_steady_writer(
    mariadb: MariaDbServer, zookeeper: ZooKeeperServer, spark: Any, spark_warehouse: str, tmp_path: Path
) -> None:
    report = run_load(mariadb, zookeeper, spark_warehouse, rate=RATE, runs=RUNS)
    text = "\n".join(report.lines())
    figures = tmp_path / "load-figures.txt"
    figures.write_text(text + "\n")
    FIGURES.append(f"load, {RATE} statements/s, {RUNS} runs:\n{text}")

    assert report.equal, text
    assert report.written >= 0.8 * RATE * report.writer_seconds, f"the writer fell behind its rate\n{text}"
    assert len(report.runs) == RUNS
    for run in report.runs:
        assert run.changes > 0, f"run {run.run} merged nothing although the writer ran\n{text}"
        assert run.lag <= run.seconds + LAG_SLACK, f"run {run.run} ended behind its start's head\n{text}"
    half = RUNS // 2
    first, second = mean(r.lag for r in report.runs[:half]), mean(r.lag for r in report.runs[half:])
    assert second <= 2 * first + LAG_SLACK, f"the lag grows run over run\n{text}"
