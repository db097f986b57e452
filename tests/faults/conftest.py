"""Fixtures of the fault and load suite: the Airflow-layer fixtures and helpers of ``tests/airflow``
(``shop``, ``conns``, ``dag_env``; :mod:`airflow_harness`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "airflow"))

from airflow_fixtures import conns, dag_env, shop

__all__ = ["conns", "dag_env", "shop"]
