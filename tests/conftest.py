"""The test harness: real services as plain processes on free loopback ports, session-scoped.

Fixtures
--------
``mariadb``             MariaDB, binlog ROW/FULL image/FULL row metadata, CRC32, GTIDs.
``mariadb_minimal``     the same with ``binlog_row_metadata=MINIMAL``.
``mariadb_nochecksum``  the same with ``binlog_checksum=NONE``.
``database``            a fresh database on ``mariadb`` (dropped afterwards).
``zookeeper``           standalone ZooKeeper; ``zk_chroot`` a unique chroot; ``zk_client`` a
                        started KazooClient on that chroot.
``spark``               a local[2] SparkSession with Iceberg and a Hadoop catalog ``lake`` on a temp
                        warehouse.
``postgres``            PostgreSQL 15 (an Iceberg JDBC catalog's database), role ``postgres.user``;
                        ``catalog_database`` a fresh database on it (dropped afterwards).
``airflow_home``        a private ``AIRFLOW_HOME`` (sqlite), ``airflow db migrate`` once per session
                        (``airflow_migrated_db``: its database as migrated, before any test's runs)
                        (shared by ``tests/airflow`` and ``tests/faults``).

Servers start on first use, so a run that needs none starts none.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.dev.services import MariaDbServer, PostgresServer, ZooKeeperServer

# py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after pytest
# closed its streams; only its warnings matter here.
logging.getLogger("py4j").setLevel(logging.WARNING)

_db_counter = itertools.count()


def _server(**kwargs: Any) -> Iterator[MariaDbServer]:
    server = MariaDbServer(**kwargs).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDbServer]:
    yield from _server(server_id=11)


@pytest.fixture(scope="session")
def mariadb_minimal() -> Iterator[MariaDbServer]:
    yield from _server(server_id=12, row_metadata="MINIMAL")


@pytest.fixture(scope="session")
def mariadb_nochecksum() -> Iterator[MariaDbServer]:
    yield from _server(server_id=13, checksum="NONE")


@pytest.fixture
def database(mariadb: MariaDbServer) -> Iterator[str]:
    name = f"t{os.getpid()}_{next(_db_counter)}"
    mariadb.execute(f"CREATE DATABASE `{name}`")
    yield name
    mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_chroot() -> str:
    return f"/test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk_client(zookeeper: ZooKeeperServer, zk_chroot: str) -> Iterator[Any]:
    from kazoo.client import KazooClient

    root = KazooClient(hosts=zookeeper.hosts)
    root.start(timeout=15)
    root.ensure_path(zk_chroot)
    root.stop()
    root.close()
    client = KazooClient(hosts=zookeeper.hosts + zk_chroot)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def catalog_database(postgres: PostgresServer) -> Iterator[str]:
    """A fresh database on ``postgres`` owned by ``postgres.user`` (for one JDBC catalog)."""
    name = postgres.create_database(f"catalog_{os.getpid()}_{next(_db_counter)}")
    yield name
    postgres.drop_database(name)


@pytest.fixture(scope="session")
def spark_warehouse() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="binlog-cdc-warehouse-") as path:
        yield path


@pytest.fixture(scope="session")
def spark(spark_warehouse: str) -> Iterator[Any]:
    from airflow_provider_binlog.lake.spark.session import create_session

    session = create_session(app_name="binlog-cdc-tests", master="local[2]", warehouse=spark_warehouse)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private Airflow home with a migrated sqlite database (once per session)."""
    home = tmp_path_factory.mktemp("airflow-home")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "false"}
    airflow = str(Path(sys.executable).parent / "airflow")
    proc = subprocess.run(
        [airflow, "db", "migrate"], env=env, capture_output=True, text=True, check=False, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the database as migrated, before any test's runs: what a new deployment starts from
    shutil.copyfile(home / "airflow.db", home / "airflow.migrated.db")
    return home


@pytest.fixture(scope="session")
def airflow_migrated_db(airflow_home: Path) -> Path:
    """``airflow_home``'s database as migrated, before any test's runs (a new deployment's start)."""
    return airflow_home / "airflow.migrated.db"
