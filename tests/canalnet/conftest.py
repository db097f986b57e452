"""The canal server most tests here talk to: our server over the test MariaDB, destination ``shop``
on the test database's tables, account ``canal``/``pw``, file meta store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.binlog.client import ReplicationConfig
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.instance import InstanceConfig
from airflow_provider_binlog.canal.meta import FileMetaManager
from airflow_provider_binlog.canalnet.protocol import scramble_gen_pass
from airflow_provider_binlog.canalnet.server import Account, CanalServer, ServedDestination


@pytest.fixture
def canal_server(mariadb: Any, database: str, tmp_path: Path) -> Iterator[CanalServer]:
    src = ReplicationConfig(
        host=mariadb.host, port=mariadb.port, user=mariadb.repl_user, password=mariadb.repl_password,
        heartbeat_period=1.0,
    )  # fmt: skip
    server = CanalServer(
        [ServedDestination(InstanceConfig("shop", src, TableFilter(include=f"{database}\\..*")))],
        meta=FileMetaManager(str(tmp_path / "meta")), account=Account("canal", scramble_gen_pass(b"pw")),
        port=0, max_get_wait=3.0,
    )  # fmt: skip
    server.start()
    yield server
    server.stop()
