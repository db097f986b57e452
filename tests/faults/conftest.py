"""Fixtures of the fault and load suite: the Airflow-layer fixtures and helpers of ``tests/airflow``
(``shop``, ``conns``, ``dag_env``; :mod:`airflow_harness`), and :data:`FIGURES`: lines a test
appends (kill points tried, divergences, lag) that the run prints at its end."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "airflow"))

from airflow_fixtures import conns, dag_env, shop

__all__ = ["FIGURES", "conns", "dag_env", "shop"]

FIGURES: list[str] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("fault suite figures")
        for line in FIGURES:
            terminalreporter.write_line(line)
