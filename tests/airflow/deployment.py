"""A real Airflow deployment as plain processes: ``airflow api-server`` (the task SDK's execution
API), ``scheduler`` (LocalExecutor), ``dag-processor`` and ``triggerer``, on a private
``AIRFLOW_HOME`` with a sqlite metadata database, free loopback ports, the example DAGs copied into
a temp DAGs folder, connections as ``AIRFLOW_CONN_*`` env vars.

:class:`AirflowDeployment` starts them, waits (bounded) for each to be ready, triggers and unpauses
DAGs through the ``airflow`` CLI, reads run and task states from the metadata database, and stops
every process it started. Each process logs into ``home/logs/<name>.log``; :meth:`describe` gives the
tails of those logs and of the task logs (printed by the tests on failure).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_harness import AIRFLOW, REPO
from cryptography.fernet import Fernet

from airflow_provider_binlog.dev.services import free_port

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
TERMINAL = ("success", "failed")


class DeploymentError(AssertionError):
    """The deployment did not get where a test waited for it to be; the message holds the logs."""


@dataclass
class AirflowDeployment:
    home: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    api_port: int = 0

    @classmethod
    def create(cls, home: Path, migrated_db: Path, extra_env: dict[str, str]) -> AirflowDeployment:
        """A deployment in ``home`` (its database a copy of the migrated ``migrated_db``, the DAGs
        folder a copy of the repo's ``dags/``); ``extra_env`` adds connections and DAG settings."""
        dags = home / "dags"
        shutil.copytree(REPO / "dags", dags, ignore=shutil.ignore_patterns("__pycache__"))
        (home / "logs").mkdir(parents=True, exist_ok=True)
        db = home / "airflow.db"
        shutil.copyfile(migrated_db, db)
        port = free_port()
        env = dict(os.environ)
        for key in list(env):
            if key.startswith("AIRFLOW__") or key.startswith("AIRFLOW_CONN_"):
                del env[key]
        env.pop("BINLOG_CDC_FAILPOINTS", None)
        jwt = secrets.token_urlsafe(32)
        env.update(
            AIRFLOW_HOME=str(home),
            # one key for every component: each one started before airflow.cfg exists would otherwise
            # write or read its own, and a trigger's kwargs encrypted by the dag-processor could not
            # be read by the triggerer (it died on an asset watcher's trigger: "Trigger runner failed")
            AIRFLOW__CORE__FERNET_KEY=Fernet.generate_key().decode(),
            AIRFLOW__CORE__DAGS_FOLDER=str(dags),
            AIRFLOW__CORE__LOAD_EXAMPLES="false",
            AIRFLOW__CORE__EXECUTOR="LocalExecutor",
            AIRFLOW__CORE__PARALLELISM="2",
            AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="true",
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{port}/execution/",
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{db}",
            AIRFLOW__API__HOST="127.0.0.1",
            AIRFLOW__API__PORT=str(port),
            AIRFLOW__API__WORKERS="1",
            AIRFLOW__API__SECRET_KEY=secrets.token_urlsafe(16),
            AIRFLOW__API_AUTH__JWT_SECRET=jwt,
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="true",
            AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5",
            AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="2",
            AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK="false",
            AIRFLOW__LOGGING__BASE_LOG_FOLDER=str(home / "logs"),
            AIRFLOW__LOGGING__LOGGING_LEVEL="INFO",
            AIRFLOW__TRIGGERER__DEFAULT_CAPACITY="50",
        )
        env.update(extra_env)
        return cls(home, env, api_port=port)

    # ------------------------------------------------------------------------------ processes

    def log_path(self, name: str) -> Path:
        return self.home / "logs" / f"{name}.log"

    def start(self, timeout: float = 300) -> AirflowDeployment:
        """Start every component; return when the api-server answers and each process is alive."""
        for name in COMPONENTS:
            self.start_component(name)
        self._wait(self._api_ready, timeout, "the api-server to answer /api/v2/version")
        return self

    def start_component(self, name: str) -> None:
        """Start one component (again, after :meth:`stop_component`)."""
        args = [AIRFLOW, name]
        if name == "api-server":
            args += ["--host", "127.0.0.1", "--port", str(self.api_port), "--workers", "1"]
        with open(self.log_path(name), "ab") as out:
            self.procs[name] = subprocess.Popen(
                args, env=self.env, cwd=self.home, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def stop_component(self, name: str, grace: float = 20) -> int | None:
        """SIGTERM one component's process group (SIGKILL after ``grace`` seconds); its exit code."""
        proc = self.procs.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(5)

    def _api_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.api_port}/api/v2/version", timeout=5) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def check_alive(self) -> None:
        dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
        if dead:
            raise DeploymentError(f"airflow components exited: {dead}\n{self.describe()}")

    def stop(self) -> None:
        """SIGTERM each component's process group, SIGKILL what is left after 20 s."""
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)

    def _wait(self, ready: Any, timeout: float, what: str, every: float = 1.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            value = ready()
            if value:
                return value
            if time.monotonic() > deadline:
                raise DeploymentError(f"waited {timeout:.0f} s for {what}\n{self.describe()}")
            time.sleep(every)

    # ------------------------------------------------------------------------------ the CLI and the DB

    def cli(self, *args: str, timeout: float = 180) -> str:
        proc = subprocess.run(
            [AIRFLOW, *args], env=self.env, capture_output=True, text=True, check=False, timeout=timeout
        )
        if proc.returncode != 0:
            raise DeploymentError(
                f"airflow {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
                f"{proc.stderr[-3000:]}"
            )
        return proc.stdout

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """A read of the metadata database (sqlite, opened read-only for this one query)."""
        db = self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///")
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    def wait_parsed(self, dag_ids: list[str], timeout: float = 300) -> None:
        """Until the dag-processor serialized every one of ``dag_ids``."""

        def parsed() -> bool:
            rows = self.query("SELECT dag_id FROM serialized_dag")
            return set(dag_ids) <= {r[0] for r in rows}

        self._wait(parsed, timeout, f"the dag-processor to parse {dag_ids}", every=2)

    def unpause(self, dag_id: str) -> None:
        self.cli("dags", "unpause", dag_id)

    def trigger(self, dag_id: str, run_id: str, conf: dict[str, Any] | None = None) -> str:
        args = ["dags", "trigger", dag_id, "--run-id", run_id]
        if conf is not None:
            args += ["--conf", json.dumps(conf)]
        self.cli(*args)
        return run_id

    def runs(self, dag_id: str) -> dict[str, tuple[str, str]]:
        """``{run_id: (run_type, state)}`` of every run of ``dag_id``."""
        rows = self.query("SELECT run_id, run_type, state FROM dag_run WHERE dag_id = ?", (dag_id,))
        return {r[0]: (r[1], r[2]) for r in rows}

    def wait_idle(self, dag_id: str, timeout: float = 900, at_least: int = 1) -> dict[str, tuple[str, str]]:
        """Until ``dag_id`` has at least ``at_least`` runs and every one ended; returns them."""

        def idle() -> dict[str, tuple[str, str]] | None:
            runs = self.runs(dag_id)
            if len(runs) >= at_least and all(state in TERMINAL for _, state in runs.values()):
                return runs
            return None

        result: dict[str, tuple[str, str]] = self._wait(
            idle, timeout, f"every run of {dag_id} to end", every=3
        )
        return result

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        rows = self.query(
            "SELECT task_id, map_index, state FROM task_instance WHERE dag_id = ? AND run_id = ?",
            (dag_id, run_id),
        )
        return {(t if m < 0 else f"{t}[{m}]"): s for t, m, s in rows}

    def task_logs(self, dag_id: str, run_id: str | None = None) -> list[Path]:
        base = self.home / "logs" / f"dag_id={dag_id}"
        if run_id is not None:
            base = base / f"run_id={run_id}"
        return sorted(base.rglob("*.log")) if base.exists() else []

    def describe(self, lines: int = 40) -> str:
        """The tail of every component's log and of the last task logs."""
        parts = []
        for name in COMPONENTS:
            parts.append(f"----- {name} ({self.log_path(name)})\n{_tail(self.log_path(name), lines)}")
        task_logs = sorted((self.home / "logs").glob("dag_id=*/**/*.log"), key=lambda p: p.stat().st_mtime)[
            -4:
        ]
        for path in task_logs:
            parts.append(f"----- task log {path}\n{_tail(path, lines)}")
        return "\n".join(parts)


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(line[:400] for line in path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
