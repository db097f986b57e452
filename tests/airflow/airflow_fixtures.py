"""Fixtures of the Airflow-layer and fault tests (helpers in :mod:`airflow_harness`); the
``conftest.py`` of ``tests/airflow`` and ``tests/faults`` import them from here.

``dag_env``       ``dag_env(start_from, **more)``: the environment of an ``airflow`` subprocess (the
                  repo's DAGs, env-var connections to the harness's MariaDB and this test's
                  ZooKeeper chroot, the warehouse ``tmp_path/warehouse``); run it with
                  :func:`airflow_harness.run_dag`.
``shop``          a fresh demo ``shop`` schema and the binlog point it starts at.
``conns``         the same connections as env vars of this process (in-process operator, sensor,
                  trigger and hook tests).

Everything talks to the real services of ``tests/conftest.py`` (which also makes ``airflow_home``, a
private ``AIRFLOW_HOME`` migrated once per session). The ``shop`` schema is rebuilt by
every test that uses it, so these tests run one at a time (no xdist).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from airflow_harness import REPO, Shop, fresh_shop, mysql_uri, zookeeper_uri

from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer


@pytest.fixture
def dag_env(
    airflow_home: Path, mariadb: MariaDbServer, zookeeper: ZooKeeperServer, zk_chroot: str, tmp_path: Path
) -> Callable[..., dict[str, str]]:
    """``dag_env(start_from, **more)``: the environment of an ``airflow`` subprocess for this test."""

    def make(start_from: str = "", **more: str) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("BINLOG_CDC_FAILPOINTS", None)
        env.update(
            AIRFLOW_HOME=str(airflow_home),
            AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"),
            AIRFLOW__CORE__LOAD_EXAMPLES="false",
            AIRFLOW__LOGGING__LOGGING_LEVEL="INFO",
            AIRFLOW_CONN_MYSQL_DEFAULT=mysql_uri(mariadb),
            AIRFLOW_CONN_ZOOKEEPER_DEFAULT=zookeeper_uri(zookeeper, zk_chroot),
            BINLOG_CDC_WAREHOUSE=str(tmp_path / "warehouse"),
            BINLOG_CDC_SPARK_MASTER="local[2]",
            BINLOG_CDC_START_FROM=start_from,
        )
        env.update(more)
        return env

    return make


@pytest.fixture
def shop(mariadb: MariaDbServer) -> Iterator[Shop]:
    s = fresh_shop(mariadb)
    try:
        yield s
    finally:
        s.conn.close()


@pytest.fixture
def conns(
    monkeypatch: pytest.MonkeyPatch, mariadb: MariaDbServer, zookeeper: ZooKeeperServer, zk_chroot: str
) -> dict[str, str]:
    """``mysql_default`` and ``zookeeper_default`` as env-var connections of this process."""
    values = {
        "AIRFLOW_CONN_MYSQL_DEFAULT": mysql_uri(mariadb),
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zookeeper_uri(zookeeper, zk_chroot),
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("BINLOG_CDC_FAILPOINTS", raising=False)
    return values
