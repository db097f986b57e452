"""Servers of a test module's own: the service-fault tests stop and restart them (and the load test
floods one), which the session's shared servers of ``tests/conftest.py`` must never see.

A module overrides the harness's ``mariadb`` and ``zookeeper`` fixtures with module-scoped ones
built on :func:`own_server`, so ``shop``, ``conns`` and the other fixtures use them unchanged::

    @pytest.fixture(scope="module")
    def mariadb() -> Iterator[MariaDbServer]:
        yield from own_server(MariaDbServer(server_id=31))
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer

S = TypeVar("S", MariaDbServer, ZooKeeperServer)


def own_server(server: S) -> Iterator[S]:
    """Start ``server``, yield it, stop it and remove its directory."""
    server.start()
    try:
        yield server
    finally:
        server.stop()
