"""The lake fed from a canal server (our server over MariaDB, our client), each run its own
process: exact; a run SIGKILLed between the Iceberg commit and the ack to the canal server leaves
the batch unacked, the next run gets it again and the lake marks make it a no-op (no new snapshot),
and a later run takes the new changes: the lake equals the source row for row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.canalnet.client import CanalClient
from airflow_provider_binlog.canalnet.server import CanalServer
from airflow_provider_binlog.faults import KILL_MARK
from airflow_provider_binlog.operators.assets import committed_tables

pytestmark = [pytest.mark.integration, pytest.mark.spark]
CHILD = Path(__file__).with_name("canal_drain_child.py")
OPERATOR_CHILD = Path(__file__).with_name("canal_operator_child.py")


def run_child(
    server: CanalServer,
    warehouse: Path,
    database: str,
    failpoints: str = "",
    airflow_home: Path | None = None,
) -> tuple[int, str, str]:
    env = dict(os.environ)
    if airflow_home is not None:  # the operator: the canal_default connection from the environment
        env["AIRFLOW_HOME"] = str(airflow_home)
        env["AIRFLOW_CONN_CANAL_DEFAULT"] = f"canal://canal:pw@127.0.0.1:{server.port}"
    env.pop("BINLOG_CDC_FAILPOINTS", None)
    if failpoints:
        env["BINLOG_CDC_FAILPOINTS"] = failpoints
    args = [str(warehouse), f"{database}.t", f"lake.{database}.t"]
    cmd = [str(OPERATOR_CHILD), *args] if airflow_home is not None else [str(CHILD), str(server.port), *args]
    done = subprocess.run(
        [sys.executable, *cmd],
        capture_output=True, text=True, timeout=400, env=env, cwd=str(Path(__file__).parents[2]),
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def result_of(out: str) -> dict[str, Any]:
    """The child's JSON line (the operator's task log may print to standard output too)."""
    return json.loads(next(line for line in reversed(out.splitlines()) if line.startswith('{"summary"')))


def source_rows(mariadb: Any, database: str) -> list[dict[str, Any]]:
    rows = mariadb.execute(f"SELECT id, name, amount FROM `{database}`.t ORDER BY id")
    return [{"id": r[0], "name": r[1], "amount": str(Decimal(r[2]))} for r in rows]


def lake_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": r["id"], "name": r["name"], "amount": str(Decimal(r["amount"]))} for r in result["rows"]]


@pytest.mark.parametrize("through", ["drain", "operator"])
def test_the_lake_from_a_canal_server_is_exact_across_a_kill_between_commit_and_ack(
    canal_server: CanalServer,
    mariadb: Any,
    database: str,
    tmp_path: Path,
    through: str,
    request: pytest.FixtureRequest,
) -> None:
    home = request.getfixturevalue("airflow_home") if through == "operator" else None
    warehouse = tmp_path / "warehouse"
    mariadb.execute(
        f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(10,2))"
    )
    pin = CanalClient("127.0.0.1", canal_server.port, "shop", user="canal", password="pw")
    pin.connect()  # the destination starts (at the head, as canal's) and pins its cursor
    pin.close()
    for i in range(1, 21):
        mariadb.execute(f"INSERT INTO `{database}`.t VALUES ({i}, 'n{i}', {i}.25)")
    mariadb.execute(f"UPDATE `{database}`.t SET name = 'changed' WHERE id <= 5")
    mariadb.execute(f"DELETE FROM `{database}`.t WHERE id > 18")

    code, out, err = run_child(canal_server, warehouse, database, "after_commit=kill", home)
    assert code == -9 and KILL_MARK + "after_commit" in err, err[-3000:]

    code, out, err = run_child(
        canal_server, warehouse, database, airflow_home=home
    )  # the unacked batches again
    assert code == 0, err[-3000:]
    replay = result_of(out)
    assert lake_rows(replay) == source_rows(mariadb, database)
    assert replay["snapshots"] == 1, "the replayed batch was merged again"
    # what the killed attempt committed is announced by this one (it emitted no event)
    target = f"lake.{database}.t"
    assert replay["summary"]["committed_earlier"] == [target]
    event = committed_tables(replay["summary"])[target]
    assert event["skipped"] > 0 and event["snapshot_id"] == replay["summary"]["snapshots"][target]
    assert event["snapshot_id"].isdigit()

    mariadb.execute(f"UPDATE `{database}`.t SET amount = amount * 2 WHERE id % 2 = 0")
    mariadb.execute(f"DELETE FROM `{database}`.t WHERE id = 3")
    mariadb.execute(f"INSERT INTO `{database}`.t VALUES (100, 'new', 0.01)")
    code, out, err = run_child(canal_server, warehouse, database, airflow_home=home)
    assert code == 0, err[-3000:]
    later = result_of(out)
    assert lake_rows(later) == source_rows(mariadb, database)
    assert later["snapshots"] == 2
    assert later["summary"]["changes"] > 0
    if through == "operator":  # the end-of-run maintenance on this path too: a healthy table, no action
        (maintained,) = later["summary"]["maintenance"]["tables"].values()
        assert maintained["ran"] == [] and maintained["before"]["snapshots"] == 2
    assert "committed_earlier" not in later["summary"]  # nothing skipped: nothing announced twice
    assert list(committed_tables(later["summary"])) == [target]
