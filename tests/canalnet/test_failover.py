"""Two ``binlog-cdc canal-server`` processes on one ZooKeeper: the first runs the destination (canal's
``running`` node names it, both are under ``cluster/``); SIGKILL it and the standby takes over; a
client that finds the running server in ZooKeeper resumes from the acked cursor."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import pytest

from canalnet.test_server import CanalPython, drain

pytestmark = pytest.mark.integration


def start_server(
    mariadb: Any, zookeeper: Any, chroot: str, database: str, port: int
) -> subprocess.Popen[str]:
    env = dict(os.environ, DB_PASSWORD=mariadb.repl_password, CANAL_PW="pw")
    cmd = [
        sys.executable, "-m", "airflow_provider_binlog.cli", "canal-server", "--host", mariadb.host,
        "--port", str(mariadb.port), "--user", mariadb.repl_user, "--password-env", "DB_PASSWORD",
        "--listen", "127.0.0.1", "--canal-port", str(port), "--destination", "shop",
        "--filter", f"{database}\\..*", "--zookeeper", zookeeper.hosts + chroot, "--zk-timeout", "4",
        "--canal-user", "canal", "--canal-password-env", "CANAL_PW", "--running-timeout", "30",
        "--max-get-wait", "2",
    ]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def running_address(zk: Any) -> str | None:
    try:
        data, _ = zk.get("/otter/canal/destinations/shop/running")
    except Exception:
        return None
    return str(json.loads(data)["address"])


def wait_for(pred: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out")


def connect(port: int, database: str) -> CanalPython:
    client = CanalPython()
    client.call(op="connect", host="127.0.0.1", port=port, user="canal", password="pw")
    client.call(op="subscribe", destination="shop", client_id="1001", filter=f"{database}\\..*")
    return client


def test_standby_takes_over_after_sigkill(
    mariadb: Any, zookeeper: Any, zk_client: Any, zk_chroot: str, database: str
) -> None:
    mariadb.execute(f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY)")
    port_a, port_b = free_port(), free_port()
    a = start_server(mariadb, zookeeper, zk_chroot, database, port_a)
    try:
        wait_for(lambda: running_address(zk_client) == f"127.0.0.1:{port_a}", 30)
        b = start_server(mariadb, zookeeper, zk_chroot, database, port_b)
        try:
            wait_for(lambda: len(zk_client.get_children("/otter/canal/destinations/shop/cluster")) == 2, 30)
            assert running_address(zk_client) == f"127.0.0.1:{port_a}"
            client = connect(port_a, database)
            mariadb.execute(f"INSERT INTO `{database}`.t VALUES (1)")
            rows, _ = drain(client, 1)  # acked
            assert [r[3] for r in rows] == [{"id": "1"}]
            mariadb.execute(f"INSERT INTO `{database}`.t VALUES (2)")
            rows, _ = drain(client, 1, ack=False)  # handed out, not acked
            assert [r[3] for r in rows] == [{"id": "2"}]
            client.proc.kill()
            client.proc.wait(timeout=10)
            a.send_signal(signal.SIGKILL)
            a.wait(timeout=10)
            wait_for(lambda: running_address(zk_client) == f"127.0.0.1:{port_b}", 60)
            mariadb.execute(f"INSERT INTO `{database}`.t VALUES (3)")
            client = wait_for(lambda: _try_connect(port_b, database), 60)
            try:
                rows, _ = drain(client, 2)
                assert [r[3] for r in rows] == [{"id": "2"}, {"id": "3"}]
            finally:
                client.close()
        finally:
            b.terminate()
            b.wait(timeout=30)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait(timeout=10)


def _try_connect(port: int, database: str) -> CanalPython | None:
    client = CanalPython()
    try:
        client.call(op="connect", host="127.0.0.1", port=port, user="canal", password="pw")
        client.call(op="subscribe", destination="shop", client_id="1001", filter=f"{database}\\..*")
        return client
    except RuntimeError:
        client.proc.kill()
        client.proc.wait(timeout=10)
        return None
