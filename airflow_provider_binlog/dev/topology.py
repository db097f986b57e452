"""The cluster topology as plain processes: a Spark standalone master and worker from the PySpark
installation, and the whole ``docker/`` topology (MariaDB, ZooKeeper, PostgreSQL, Spark, the shared
warehouse) from the settings file the compose file reads.

* :class:`SparkStandalone`: master + one worker on loopback. With ``isolate_worker=True`` the worker
  runs in its own mount namespace (``unshare --mount --propagation private``, root only) with a
  private tmpfs on ``/tmp``; it sees only the directories in ``shared`` (bound back at the same
  paths), so its executors cannot read the driver's temporary files: a second host, as far as files
  go, on one machine.
* :func:`load_settings` / :func:`spark_defaults` / :class:`LocalTopology`: ``docker/topology.env``
  holds the settings both topologies share (warehouse and staging paths, catalog, worker and
  executor sizes); :func:`spark_defaults` turns them and the service addresses into the Spark
  settings of the Airflow worker (the compose file's Airflow container writes them with
  ``python -m airflow_provider_binlog.dev.topology spark-defaults``); :class:`LocalTopology` starts
  the services themselves and writes an env file for ``airflow`` commands.

Container paths (``/warehouse``...) are put under the local topology's own directory. Every wait is
bounded; a service that does not come up fails with :class:`~.services.ServiceStartError` and the
tail of its log.

    python -m airflow_provider_binlog.dev.topology up [--settings docker/topology.env] [--dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from airflow_provider_binlog.dev.services import (
    POSTGRES_BIN,
    MariaDbServer,
    PostgresServer,
    ServiceStartError,
    ZooKeeperServer,
    free_port,
)

REPO = Path(__file__).resolve().parents[2]
SETTINGS = REPO / "docker" / "topology.env"
POSTGRES_JDBC_JAR = "/usr/share/java/postgresql.jar"
LOOPBACK_DRIVER = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
"""Driver settings for a cluster on loopback (executors call the driver back there)."""
# run in the worker's new mount namespace: keep the shared directories, then a private /tmp
_ISOLATE = r"""
set -e
hold="$1"; shift; n="$1"; shift
mount --bind /tmp "$hold"
mount -t tmpfs -o size=1g,mode=1777 binlog-cdc-worker-tmp /tmp
i=0
while [ "$i" -lt "$n" ]; do
  p="$1"; shift; i=$((i + 1))
  case "$p" in
    /tmp/*) mkdir -p "$p"; mount --bind "$hold/${p#/tmp/}" "$p" ;;
  esac
done
umount "$hold"
exec "$@"
"""


def spark_home() -> Path:
    """The Spark distribution inside the PySpark installation (``bin/spark-class``, ``jars/``)."""
    from airflow_provider_binlog.lake.spark.jars import pyspark_jars_dir

    return pyspark_jars_dir().parent


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _stop_group(proc: subprocess.Popen[bytes] | None, timeout: float = 20.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@dataclass
class SparkStandalone:
    """A Spark standalone master and one worker on 127.0.0.1, as processes of their own.

    :param workdir: logs, the worker's directory (executors' output, fetched jars).
    :param worker_cores: cores the worker offers.
    :param worker_memory: memory the worker offers (``1g``).
    :param isolate_worker: run the worker in its own mount namespace with a private ``/tmp``.
    :param shared: directories the isolated worker sees at their own paths (the warehouse); only
        those under ``/tmp`` need it (the rest of the filesystem is not hidden). ``workdir`` and
        the Spark installation are always shared.
    """

    workdir: Path
    worker_cores: int = 1
    worker_memory: str = "1g"
    isolate_worker: bool = False
    shared: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    master_port: int = 0
    ui_port: int = 0
    master: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    worker: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _hold: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The master URL (``spark://127.0.0.1:PORT``)."""
        return f"spark://{self.host}:{self.master_port}"

    def _spawn(self, args: list[str], log: Path, prefix: list[str] | None = None) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_LOG_DIR": str(self.workdir),
            "SPARK_WORKER_DIR": str(self.workdir / "work"),
        }
        for key in ("SPARK_WORKER_CORES", "SPARK_WORKER_MEMORY", "SPARK_CONF_DIR"):
            env.pop(key, None)  # the arguments say it
        cmd = [*(prefix or []), str(spark_home() / "bin" / "spark-class"), *args]
        with log.open("ab") as out:
            return subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def _isolation(self) -> list[str]:
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            raise ServiceStartError("an isolated Spark worker needs root and unshare (util-linux)")
        self._hold = tempfile.mkdtemp(prefix="binlog-cdc-ns-hold-", dir="/var/tmp")
        # Spark itself too: a checkout (and its virtualenv) may live under /tmp, like a CI clone
        shared = [os.path.abspath(p) for p in (*self.shared, str(self.workdir), str(spark_home()))]
        script = ["sh", "-c", _ISOLATE, "isolate", self._hold, str(len(shared)), *shared]
        return ["unshare", "--mount", "--propagation", "private", "--", *script]

    def start(self, timeout: float = 120.0) -> SparkStandalone:
        """Start the master, then the worker; return once the master lists the worker ALIVE."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "work").mkdir(exist_ok=True)
        self.master_port = self.master_port or free_port()
        self.ui_port = self.ui_port or free_port()
        self.master = self._spawn(
            ["org.apache.spark.deploy.master.Master", "--host", self.host,
             "--port", str(self.master_port), "--webui-port", str(self.ui_port)],
            self.workdir / "master.log",
        )  # fmt: skip
        try:
            self.worker = self._spawn(
                ["org.apache.spark.deploy.worker.Worker", "--host", self.host, "--port", str(free_port()),
                 "--webui-port", str(free_port()), "--cores", str(self.worker_cores),
                 "--memory", self.worker_memory, "--work-dir", str(self.workdir / "work"), self.url],
                self.workdir / "worker.log",
                self._isolation() if self.isolate_worker else None,
            )  # fmt: skip
            self._wait_alive(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications); ``{}`` when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.ui_port}/json/", timeout=2) as resp:
                return dict(json.load(resp))
        except (OSError, ValueError):
            return {}

    def _wait_alive(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if any(w.get("state") == "ALIVE" for w in self.state().get("workers", [])):
                return
            dead = [
                n for n, p in (("master", self.master), ("worker", self.worker)) if p and p.poll() is not None
            ]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {p.name}\n{_tail(p)}" for p in sorted(self.workdir.glob("*.log")))
                why = f"{', '.join(dead)} exited" if dead else f"no worker ALIVE within {timeout:.0f} s"
                raise ServiceStartError(f"Spark standalone cluster: {why}\n{logs}")
            time.sleep(0.5)

    def worker_mount_namespace(self) -> str | None:
        """The worker process's mount namespace (``mnt:[...]``), ``None`` when it is not running."""
        if self.worker is None or self.worker.poll() is not None:
            return None
        return os.readlink(f"/proc/{self.worker.pid}/ns/mnt")

    def stop(self) -> None:
        """Stop the worker, then the master (idempotent)."""
        _stop_group(self.worker)
        _stop_group(self.master)
        self.worker = self.master = None
        if self._hold is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self._hold)  # empty: its mount lived in the worker's namespace only
            self._hold = None


# ---------------------------------------------------------------------------------------- settings


def load_settings(path: Path | str = SETTINGS) -> dict[str, str]:
    """``KEY=VALUE`` lines of an env file as docker compose reads them (``#`` comments, blank lines,
    no interpolation); a value in matching quotes loses them."""
    out: dict[str, str] = {}
    for number, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ValueError(f"{path}:{number}: not KEY=VALUE: {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.strip()] = value
    return out


CATALOG_CONN_ID = "iceberg_catalog"
"""The Airflow connection the topology's DAGs name as ``catalog_conn_id`` (JDBC catalog)."""


def spark_defaults(
    settings: dict[str, str], master: str = "spark://spark-master:7077", driver_host: str = "airflow"
) -> dict[str, str]:
    """The Spark settings of the Airflow worker's driver for this topology (its
    ``$SPARK_CONF_DIR/spark-defaults.conf``): master, the address executors call the driver back on,
    executor size and, for the JDBC catalog, the PostgreSQL driver on the driver's class path (the
    catalog runs in the driver). The catalog itself is the ``iceberg_catalog`` connection
    (:func:`airflow_env`): the operator's catalog settings would win over this file's."""
    conf = {
        "spark.master": master,
        "spark.driver.host": driver_host,
        "spark.executor.memory": settings.get("SPARK_EXECUTOR_MEMORY", "512m"),
        "spark.cores.max": settings.get("SPARK_CORES_MAX", "1"),
    }
    kind = settings.get("BINLOG_CDC_CATALOG_TYPE", "hadoop")
    if kind == "jdbc":
        conf["spark.driver.extraClassPath"] = POSTGRES_JDBC_JAR
    elif kind != "hadoop":
        raise ValueError(f"BINLOG_CDC_CATALOG_TYPE must be jdbc or hadoop, not {kind!r}")
    return conf


def airflow_env(
    settings: dict[str, str],
    mysql_uri: str,
    zookeeper_uri: str,
    spark_master: str,
    postgres: str = "postgres:5432",
    catalog_login: tuple[str, str] | None = None,
    rebase: str = "",
    catalog_database: str | None = None,
) -> dict[str, str]:
    """The environment of the Airflow worker for this topology (connections as ``AIRFLOW_CONN_*``;
    holds passwords: never log it). ``rebase`` is prefixed to container paths; ``catalog_login``
    (user, password) and ``catalog_database`` replace the settings' ones."""
    warehouse = rebase + settings["BINLOG_CDC_WAREHOUSE"]
    env = {
        "AIRFLOW_CONN_MYSQL_DEFAULT": mysql_uri,
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zookeeper_uri,
        "BINLOG_CDC_SPARK_MASTER": spark_master,
        "BINLOG_CDC_WAREHOUSE": warehouse,
        "BINLOG_CDC_STAGING_URI": rebase + settings["BINLOG_CDC_STAGING_URI"],
    }
    if settings.get("BINLOG_CDC_CATALOG_TYPE", "hadoop") == "jdbc":
        user, password = catalog_login or (
            settings.get("BINLOG_CDC_CATALOG_USER", "iceberg"),
            settings.get("BINLOG_CDC_CATALOG_PASSWORD", ""),
        )
        database = catalog_database or settings.get("BINLOG_CDC_CATALOG_DATABASE", "iceberg")
        env["AIRFLOW_CONN_" + CATALOG_CONN_ID.upper()] = (
            f"postgres://{quote(user, safe='')}:{quote(password, safe='')}@{postgres}/{quote(database)}"
            f"?warehouse={quote(warehouse, safe='')}"
        )
        env["BINLOG_CDC_CATALOG_CONN_ID"] = CATALOG_CONN_ID
    return env


def init_catalog(postgres: PostgresServer, settings: dict[str, str]) -> None:
    """Create the catalog's role and database on ``postgres`` with the compose file's own script
    (``docker/postgres/init-catalog.sh``, as the postgres image runs it on a new volume)."""
    assert postgres.basedir is not None, "server not started"
    env = {
        **os.environ, **settings, "POSTGRES_USER": postgres.admin_user, "POSTGRES_DB": "postgres",
        "PGHOST": str(postgres.basedir), "PGPORT": str(postgres.port),
        "PATH": f"{POSTGRES_BIN}:{os.environ.get('PATH', '')}",
    }  # fmt: skip
    script = SETTINGS.parent / "postgres" / "init-catalog.sh"
    out = subprocess.run(
        ["sh", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    if out.returncode != 0:
        raise ServiceStartError(f"{script} failed ({out.returncode}): {out.stderr.strip()[-1500:]}")


def write_spark_defaults(conf: dict[str, str], conf_dir: Path) -> Path:
    """Write ``conf`` as ``conf_dir/spark-defaults.conf`` (no secrets in it: the catalog's login is
    in a connection); return the file."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    path = conf_dir / "spark-defaults.conf"
    path.write_text(spark_defaults_text(conf))
    return path


def spark_defaults_text(conf: dict[str, str]) -> str:
    """``conf`` in the format of ``spark-defaults.conf``, keys sorted, with a header naming its source."""
    head = "# written by python -m airflow_provider_binlog.dev.topology spark-defaults (from topology.env)\n"
    return head + "".join(f"{k} {v}\n" for k, v in sorted(conf.items()))


@dataclass
class LocalTopology:
    """The compose topology as processes: MariaDB, ZooKeeper, PostgreSQL (JDBC catalog), a Spark
    master and a worker in its own mount namespace, the warehouse under ``workdir``.

    Services given to the constructor are used as they are (and left running by :meth:`down`);
    the others are started by :meth:`up`.

    :param settings: :func:`load_settings` of ``docker/topology.env``.
    :param workdir: everything lives here (``root/warehouse``, ``spark``, ``conf``, ``airflow.env``).
    :param catalog_database: the JDBC catalog's database (default: the settings').
    :param catalog_login: its (user, password) on a given ``postgres`` (default: the settings'; a
        PostgreSQL started here gets them from the compose file's ``docker/postgres/init-catalog.sh``).
    :param zk_chroot: the ZooKeeper chroot of the meta store.
    """

    settings: dict[str, str]
    workdir: Path
    mariadb: MariaDbServer | None = None
    zookeeper: ZooKeeperServer | None = None
    postgres: PostgresServer | None = None
    spark: SparkStandalone | None = None
    spark_conf: dict[str, str] = field(default_factory=dict, repr=False)
    catalog_database: str | None = None
    catalog_login: tuple[str, str] | None = field(default=None, repr=False)
    zk_chroot: str = "/binlog-cdc"
    _started: list[Any] = field(default_factory=list, repr=False)

    @property
    def root(self) -> str:
        """The prefix container paths get here."""
        return str(self.workdir / "root")

    def path(self, container_path: str) -> Path:
        return Path(self.root + container_path)

    def up(self) -> LocalTopology:
        """Start everything (stopping what started when something fails)."""
        try:
            warehouse = self.path(self.settings["BINLOG_CDC_WAREHOUSE"])
            warehouse.mkdir(parents=True, exist_ok=True)
            if self.mariadb is None:
                self.mariadb = self._start(MariaDbServer())
            if self.zookeeper is None:
                self.zookeeper = self._start(ZooKeeperServer())
            jdbc = self.settings.get("BINLOG_CDC_CATALOG_TYPE", "hadoop") == "jdbc"
            if jdbc and self.postgres is None:
                self.postgres = self._start(PostgresServer(database="topology"))
                init_catalog(self.postgres, self.settings)
            self.spark = SparkStandalone(
                self.workdir / "spark",
                worker_cores=int(self.settings.get("SPARK_WORKER_CORES", "1")),
                worker_memory=self.settings.get("SPARK_WORKER_MEMORY", "1g"),
                isolate_worker=True,
                shared=(str(warehouse),),
            )
            self._start(self.spark)
            self.spark_conf = {
                **spark_defaults(self.settings, self.spark.url, "127.0.0.1"),
                **LOOPBACK_DRIVER,
            }
        except BaseException:
            self.down()
            raise
        return self

    def _start(self, service: Any) -> Any:
        self._started.append(service)
        return service.start()

    def airflow_env(self) -> dict[str, str]:
        """The environment of ``airflow`` commands on this machine for the topology, ``SPARK_CONF_DIR``
        included (holds passwords: write it to a file, never to a log)."""
        assert self.mariadb is not None and self.zookeeper is not None and self.spark is not None
        conf_dir = self.workdir / "conf"
        write_spark_defaults(self.spark_conf, conf_dir)
        pg = self.postgres
        env = airflow_env(
            self.settings, self.mariadb.airflow_uri(), self.zookeeper.airflow_uri(self.zk_chroot),
            self.spark.url, postgres=f"{pg.host}:{pg.port}" if pg else "",
            catalog_login=self.catalog_login, rebase=self.root,
            catalog_database=self.catalog_database,
        )  # fmt: skip
        return {**env, "SPARK_CONF_DIR": str(conf_dir)}

    def down(self) -> None:
        """Stop what :meth:`up` started, newest first (idempotent)."""
        while self._started:
            self._started.pop().stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m airflow_provider_binlog.dev.topology", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the topology as processes until interrupted")
    up.add_argument("--settings", default=str(SETTINGS))
    up.add_argument("--dir", default=None, help="work directory (default: a new temporary one)")
    sd = sub.add_parser("spark-defaults", help="write docker/spark/spark-defaults.conf for the containers")
    sd.add_argument("--settings", default=str(SETTINGS))
    sd.add_argument("--conf-dir", default=str(SETTINGS.parent / "spark"))
    args = ap.parse_args(argv)
    settings = load_settings(args.settings)
    if args.command == "spark-defaults":
        path = write_spark_defaults(spark_defaults(settings), Path(args.conf_dir))
        print(f"wrote {path}")
        return 0
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="binlog-cdc-topology-"))
    topology = LocalTopology(settings, workdir).up()
    try:
        env_file = workdir / "airflow.env"
        fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.writelines(f"export {k}={shlex.quote(v)}\n" for k, v in topology.airflow_env().items())
        print(f"up: Spark {topology.spark.url if topology.spark else '?'}, warehouse "
              f"{topology.path(settings['BINLOG_CDC_WAREHOUSE'])}", flush=True)  # fmt: skip
        print(f"for airflow commands: source {env_file}   (Ctrl-C stops everything)", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(60)
    finally:
        topology.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
