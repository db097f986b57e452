"""The Airflow-layer fixtures (defined in :mod:`airflow_fixtures`, shared with ``tests/faults``)."""

from airflow_fixtures import conns, dag_env, shop

__all__ = ["conns", "dag_env", "shop"]
