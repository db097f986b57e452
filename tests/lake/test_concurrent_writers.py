"""Concurrent writers on Iceberg's JDBC catalog (issue #16): two destinations, each a process of its
own (:mod:`concurrent_writer`), committing at the same time into one namespace, and into one table
(disjoint keys), round after round. Real PostgreSQL, Spark and Iceberg.

The conflict is made certain once: writer A pauses (failpoint ``lake_commit=pause``) between reading
the table and its MERGE, writer B commits to the table meanwhile, then A continues: its MERGE
fails validation for real and is retried (A's log says so). The other rounds run both writers at once.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog import faults
from airflow_provider_binlog.dev.services import PostgresServer
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.spark.session import jdbc_catalog_conf

pytestmark = [pytest.mark.integration, pytest.mark.spark]

CHILD = Path(__file__).with_name("concurrent_writer.py")
WAIT = 240.0  # seconds any one step of a writer may take (Spark start on a loaded 2-core machine)


class Writer:
    """One writer process: send rounds, wait for their answers (every wait bounded)."""

    def __init__(self, name: str, cfg: dict[str, str], log: Path, failpoints: str = "") -> None:
        self.name = name
        self.log = log
        env = dict(os.environ)
        env.pop(faults.ENV, None)
        if failpoints:
            env[faults.ENV] = failpoints
        repo = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
        with log.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(CHILD), json.dumps(cfg)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, env=env,
            )  # fmt: skip
        self._buf = b""

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def expect(self, prefix: str, timeout: float = WAIT) -> str:
        """The next stdout line (which must start with ``prefix``)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise AssertionError(
                    f"writer {self.name}: no {prefix!r} (exit {self.proc.poll()}):\n{self.tail()}"
                )
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    time.sleep(0.1)
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        text = line.decode()
        assert text.startswith(prefix), f"writer {self.name}: {text!r}\n{self.tail()}"
        return text[len(prefix) :].strip()

    def done(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.expect("DONE"))
        return result

    def wait_paused(self, timeout: float = WAIT) -> None:
        """Until the process paused at its failpoint."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if faults.PAUSE_MARK in self.log.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise AssertionError(f"writer {self.name} did not pause at its failpoint:\n{self.tail()}")

    def resume(self) -> None:
        faults.continue_file(self.proc.pid).touch()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)


class Model:
    """One destination's keys (disjoint from the other's) and the ops of each round."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.rows: dict[int, str] = {}
        self.next = base

    def round(self, r: int) -> list[list[Any]]:
        ops: list[list[Any]] = []
        for _ in range(6):
            ops.append(["i", self.next, f"r{r}-new"])
            self.rows[self.next] = f"r{r}-new"
            self.next += 1
        live = sorted(self.rows)
        for key in live[:-6][-3:]:  # update three older keys
            ops.append(["u", key, f"r{r}-upd"])
            self.rows[key] = f"r{r}-upd"
        if len(live) > 8:  # and delete the oldest
            ops.append(["d", live[0], ""])
            del self.rows[live[0]]
        return ops


@pytest.fixture
def catalog(spark: Any, postgres: PostgresServer, catalog_database: str, tmp_path: Path) -> dict[str, str]:
    """The writers' catalog settings; the test session reads the same catalog (uncached)."""
    name = "jc_" + uuid.uuid4().hex[:8]
    cfg = {"catalog": name, "uri": postgres.jdbc_url(catalog_database), "user": postgres.user,
           "password": postgres.password, "warehouse": str(tmp_path / "warehouse")}  # fmt: skip
    conf = jdbc_catalog_conf(cfg["uri"], cfg["user"], cfg["password"], cfg["warehouse"], name,
                             {"cache-enabled": "false"})  # fmt: skip
    for key, value in conf.items():
        spark.conf.set(key, value)
    return cfg


def _writers(
    catalog: dict[str, str], targets: dict[str, str], tmp_path: Path, **failpoints: str
) -> list[Writer]:
    out = []
    for name, target in targets.items():
        cfg = dict(catalog, destination=f"dest_{name}", target=target)
        out.append(Writer(name, cfg, tmp_path / f"writer-{name}.log", failpoints.get(name, "")))
    for w in out:
        w.expect("READY")
    return out


def _table(spark: Any, target: str) -> list[tuple[int, str]]:
    spark.catalog.refreshTable(target)
    return sorted((int(r[0]), str(r[1])) for r in spark.sql(f"SELECT id, v FROM {target}").collect())


def _both(writers: list[Writer], models: list[Model], r: int) -> list[dict[str, Any]]:
    for w, m in zip(writers, models, strict=True):
        w.send({"round": r, "ops": m.round(r)})
    return [w.done() for w in writers]


def test_two_destinations_into_one_namespace_at_the_same_time(
    spark: Any, catalog: dict[str, str], tmp_path: Path
) -> None:
    """Both create their table in the (new) namespace at once, then merge side by side for rounds."""
    ns = catalog["catalog"] + ".shop"
    targets = {"a": f"{ns}.a", "b": f"{ns}.b"}
    writers = _writers(catalog, targets, tmp_path)
    models = [Model(0), Model(0)]
    try:
        for r in range(4):
            for result in _both(writers, models, r):
                assert result["counts"]["commits"] == 1
    finally:
        for w in writers:
            w.close()
    for (name, target), model in zip(targets.items(), models, strict=True):
        assert _table(spark, target) == sorted(model.rows.items()), name
        mark = commits.read_mark(spark, target, f"dest_{name}")
        assert mark is not None and mark.order_key.pos >= 1000 + 3 * 10_000
    assert sorted(r[1] for r in spark.sql(f"SHOW TABLES IN {ns}").collect()) == ["a", "b"]


def test_two_writers_on_disjoint_keys_of_one_table_retry_their_conflicts(
    spark: Any, catalog: dict[str, str], tmp_path: Path
) -> None:
    """Writer A pauses before its second commit, B commits, A continues: A's MERGE conflicts and is
    retried. Then both write at once for several rounds. The table ends with exactly both writers'
    rows (no key lost or doubled) and each destination's mark at its last round."""
    target = catalog["catalog"] + ".shop.t"
    # A's commits: round 0 is its first, round 1 its second
    writers = _writers(catalog, {"a": target, "b": target}, tmp_path, a="lake_commit=pause@2")
    a, b = writers
    models = [Model(0), Model(100_000)]
    rounds = 6
    try:
        a.send({"round": 0, "ops": models[0].round(0)})  # A creates the table
        a.done()
        b.send({"round": 0, "ops": models[1].round(0)})
        b.done()
        a.send({"round": 1, "ops": models[0].round(1)})
        a.wait_paused()  # A read the table and stands before its MERGE
        b.send({"round": 1, "ops": models[1].round(1)})
        assert b.done()["counts"]["commits"] == 1
        a.resume()
        result = a.done()
        assert result["retried"] >= 1 and result["counts"]["commits"] == 1
        assert "commit conflict on" in a.log.read_text(), a.tail()
        retried = 0
        for r in range(2, rounds):
            results = _both(writers, models, r)
            retried += sum(x["retried"] for x in results)
    finally:
        for w in writers:
            w.close()
    rows = _table(spark, target)
    assert len(rows) == len({k for k, _ in rows})  # no key twice
    assert rows == sorted({**models[0].rows, **models[1].rows}.items())
    for name in ("a", "b"):
        mark = commits.read_mark(spark, target, f"dest_{name}")
        assert mark is not None and mark.order_key.pos >= 1000 + (rounds - 1) * 10_000, name
    print(f"conflicts retried over the concurrent rounds: {retried}")
