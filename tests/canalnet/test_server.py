"""The canal server against PyPI's canal-python (an independent canal client) and a real MariaDB:
handshake, authentication, subscribe, get without ack, ack, rollback; the entries it decodes equal
the source's changes value by value; a wrong password is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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

pytestmark = pytest.mark.integration

DRIVER = Path(__file__).with_name("canal_python_driver.py")
PASSWORD = "s3cret-canal"


class CanalPython:
    """canal-python in its own process (see canal_python_driver.py)."""

    def __init__(self) -> None:
        env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, cwd="/", env=env,
        )  # fmt: skip

    def call(self, **cmd: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "canal-python driver died"
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer["ok"]

    def close(self) -> None:
        try:
            self.call(op="close")
        finally:
            self.proc.wait(timeout=10)


def source(server: Any) -> ReplicationConfig:
    return ReplicationConfig(
        host=server.host, port=server.port, user=server.repl_user, password=server.repl_password,
        heartbeat_period=1.0,
    )  # fmt: skip


@pytest.fixture
def canal_server(mariadb: Any, database: str, tmp_path: Path) -> Iterator[CanalServer]:
    config = InstanceConfig("shop", source(mariadb), TableFilter(include=f"{database}\\..*"))
    server = CanalServer(
        [ServedDestination(config)], meta=FileMetaManager(str(tmp_path / "meta")),
        account=Account("canal", scramble_gen_pass(PASSWORD.encode())), port=0, max_get_wait=5.0,
    )  # fmt: skip
    server.start()
    yield server
    server.stop()


def rows_of(batch: dict[str, Any]) -> list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]]:
    out = []
    for e in batch["entries"]:
        if e["entryType"] != "ROWDATA" or e["isDdl"]:
            continue
        for r in e["rows"]:
            img = lambda cols: {c["name"]: (None if c["isNull"] else c["value"]) for c in cols} or None  # noqa: E731
            out.append((e["eventType"], e["tableName"], img(r["before"]), img(r["after"])))
    return out


def drain(client: CanalPython, want: int, ack: bool = True) -> tuple[list[Any], list[dict[str, Any]]]:
    rows: list[Any] = []
    batches = []
    for _ in range(40):
        batch = client.call(op="get", size=100, timeout=500, unit=2)
        if batch["id"] > 0:
            batches.append(batch)
            rows += rows_of(batch)
            if ack:
                client.call(op="ack", id=batch["id"])
        if len(rows) >= want:
            break
    return rows, batches


def test_canal_python_reads_the_source_changes_value_by_value(
    canal_server: CanalServer, mariadb: Any, database: str
) -> None:
    mariadb.execute(
        f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, u TINYINT UNSIGNED, big BIGINT UNSIGNED, "
        "d DECIMAL(10,3), f FLOAT, g DOUBLE, s VARCHAR(20), b VARBINARY(8), dt DATETIME(3), "
        "dd DATE, tm TIME(2), y YEAR, e ENUM('x','y','z'), st SET('a','b','c'), j JSON, tx TEXT, n INT)"
    )
    client = CanalPython()
    try:
        client.call(op="connect", host="127.0.0.1", port=canal_server.port, user="canal", password=PASSWORD)
        client.call(op="subscribe", destination="shop", client_id="1001", filter=f"{database}\\..*")
        mariadb.execute(
            f"INSERT INTO `{database}`.t VALUES (1, 250, 18446744073709551615, -12.500, 1.5, 2.25, 'héllo', "
            "x'00ff41', '2024-02-29 13:14:15.123', '1999-12-31', '-01:02:03.45', 2024, 'y', 'a,c', "
            "'{\"k\": [1, 2]}', 'long text', NULL)"
        )
        mariadb.execute(f"UPDATE `{database}`.t SET s = 'bye', n = 7 WHERE id = 1")
        mariadb.execute(f"DELETE FROM `{database}`.t WHERE id = 1")
        rows, batches = drain(client, 3, ack=False)
        first = {
            "id": "1", "u": "250", "big": "18446744073709551615", "d": "-12.500", "f": "1.5", "g": "2.25",
            "s": "héllo", "b": "\x00\xffA", "dt": "2024-02-29 13:14:15.123", "dd": "1999-12-31",
            "tm": "-01:02:03.45", "y": "2024", "e": "2", "st": "5", "j": '{"k": [1, 2]}', "tx": "long text",
            "n": None,
        }  # fmt: skip
        second = dict(first, s="bye", n="7")
        assert rows == [
            ("INSERT", "t", None, first),
            ("UPDATE", "t", first, second),
            ("DELETE", "t", second, None),
        ]
        entries = [e for b in batches for e in b["entries"]]
        kinds = [e["entryType"] for e in entries]
        assert kinds.count("TRANSACTIONBEGIN") == kinds.count("TRANSACTIONEND") == 3
        update = next(e for e in entries if e.get("eventType") == "UPDATE" and e["entryType"] == "ROWDATA")
        cols = {c["name"]: c for c in update["rows"][0]["after"]}
        assert {n for n, c in cols.items() if c["updated"]} == {"s", "n"}
        assert cols["id"]["isKey"] and not cols["s"]["isKey"]
        assert (cols["id"]["sqlType"], cols["big"]["sqlType"], cols["d"]["sqlType"]) == (4, 3, 3)
        assert (cols["dt"]["sqlType"], cols["b"]["sqlType"], cols["tx"]["sqlType"]) == (93, 2004, 2005)
        assert cols["s"]["mysqlType"].startswith("varchar")

        # rollback: the same changes again, then ack them; nothing after
        client.call(op="rollback")
        again, batches2 = drain(client, 3, ack=True)
        assert again == rows
        assert batches2[0]["id"] > batches[-1]["id"]
        assert client.call(op="get", size=100)["id"] == 0  # canal-python: 0 when the server says -1
    finally:
        client.close()

    # a new client resumes after the acked cursor: only what came later
    mariadb.execute(f"INSERT INTO `{database}`.t (id, n) VALUES (2, 42)")
    client = CanalPython()
    try:
        client.call(op="connect", host="127.0.0.1", port=canal_server.port, user="canal", password=PASSWORD)
        client.call(op="subscribe", destination="shop", client_id="1001", filter=f"{database}\\..*")
        rows, _ = drain(client, 1)
        assert [(op, after["id"], after["n"]) for op, _, _, after in rows] == [("INSERT", "2", "42")]
    finally:
        client.close()


def test_a_client_that_goes_away_gives_its_batch_back(
    canal_server: CanalServer, mariadb: Any, database: str
) -> None:
    mariadb.execute(f"CREATE TABLE `{database}`.k (id INT PRIMARY KEY)")
    client = CanalPython()
    client.call(op="connect", host="127.0.0.1", port=canal_server.port, user="canal", password=PASSWORD)
    client.call(op="subscribe", destination="shop", client_id="1001", filter="")
    mariadb.execute(f"INSERT INTO `{database}`.k VALUES (1), (2)")
    rows, _ = drain(client, 2, ack=False)
    assert len(rows) == 2
    client.proc.kill()
    client.proc.wait(timeout=10)
    client = CanalPython()
    try:
        client.call(op="connect", host="127.0.0.1", port=canal_server.port, user="canal", password=PASSWORD)
        client.call(op="subscribe", destination="shop", client_id="1001", filter="")
        again, _ = drain(client, 2)
        assert again == rows
    finally:
        client.close()


@pytest.mark.parametrize("user, password", [("canal", "wrong"), ("canal", None), ("other", PASSWORD)])
def test_a_wrong_account_is_refused(canal_server: CanalServer, user: str, password: str | None) -> None:
    client = CanalPython()
    try:
        with pytest.raises(RuntimeError, match="auth failed") as err:
            client.call(op="connect", host="127.0.0.1", port=canal_server.port, user=user, password=password)
        assert PASSWORD not in str(err.value)
    finally:
        client.proc.kill()
        client.proc.wait(timeout=10)
