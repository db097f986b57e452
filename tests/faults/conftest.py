"""Fixtures of the fault and load suite: the Airflow-layer fixtures and helpers of ``tests/airflow``
(``shop``, ``conns``, ``dag_env``; :mod:`airflow_harness`), and the end-of-run "fault suite figures"
section: the lines tests append to :data:`figures.FIGURES` (kill points, divergences, lag)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "airflow"))

from airflow_fixtures import conns, dag_env, shop
from figures import FIGURES

__all__ = ["conns", "dag_env", "shop"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("fault suite figures")
        for line in FIGURES:
            terminalreporter.write_line(line)
