"""``docker/``: the compose file agrees with ``docker/topology.env`` and with what
:mod:`airflow_provider_binlog.dev.topology` derives from it, and the same topology comes up as
plain processes (``docker/local-topology.sh``): MariaDB, ZooKeeper, PostgreSQL with the catalog's
role and database made by the compose file's own init script, a Spark master and a worker in its own
mount namespace; a Spark job through the env file it writes creates, fills and reads an Iceberg table
in the JDBC catalog on the cluster. (The operator through the same topology:
``tests/airflow/test_operator_cluster.py``.)
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from airflow_provider_binlog.dev.topology import (
    CATALOG_CONN_ID,
    SETTINGS,
    airflow_env,
    load_settings,
    spark_defaults,
    spark_defaults_text,
)

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"


def _compose() -> dict[str, Any]:
    """The compose file as ``docker compose --env-file docker/topology.env`` reads it (``${VAR}``
    from the settings; an unknown variable fails here, as compose would warn and leave it empty)."""
    settings = load_settings(SETTINGS)

    def sub(found: re.Match[str]) -> str:
        return settings[found.group(1)]

    text = re.sub(r"\$\{(\w+)\}", sub, (DOCKER / "docker-compose.yml").read_text())
    return dict(yaml.safe_load(text))


def _environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's container environment: its env_file (relative to docker/), then ``environment``."""
    env: dict[str, str] = {}
    files = service.get("env_file", [])
    for name in [files] if isinstance(files, str) else files:
        env.update(load_settings(DOCKER / name))
    env.update({k: str(v) for k, v in (service.get("environment") or {}).items()})
    return env


def test_the_compose_file_follows_the_settings() -> None:
    import pyspark

    settings = load_settings(SETTINGS)
    compose = _compose()
    services = compose["services"]
    airflow = _environment(services["airflow"])
    expected = airflow_env(
        settings, "mysql://cdc_repl:cdc_repl@mysql:3306", "zookeeper://zookeeper:2181/binlog-cdc",
        "spark://spark-master:7077", postgres="postgres:5432",
    )  # fmt: skip
    assert {k: airflow.get(k) for k in expected} == expected
    assert airflow["BINLOG_CDC_CATALOG_CONN_ID"] == CATALOG_CONN_ID
    # the init container keeps the whole Airflow environment (a YAML merge, not a replacement)
    init = _environment(services["airflow-init"])
    assert init["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == airflow["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert init["MYSQL_ROOT_PASSWORD"] == "root"

    # one warehouse volume, at the settings' path, in the driver's and the executors' containers;
    # the staging root on it
    warehouse = settings["BINLOG_CDC_WAREHOUSE"]
    for name in ("airflow", "spark-worker"):
        assert f"warehouse:{warehouse}" in services[name]["volumes"], name
    assert "warehouse" in compose["volumes"]
    assert settings["BINLOG_CDC_STAGING_URI"].startswith(warehouse.rstrip("/") + "/")
    # the worker's size from the settings (Spark's Worker reads these variables itself)
    worker = _environment(services["spark-worker"])
    assert worker["SPARK_WORKER_CORES"] == settings["SPARK_WORKER_CORES"]
    assert worker["SPARK_WORKER_MEMORY"] == settings["SPARK_WORKER_MEMORY"]
    assert services["spark-worker"]["user"].split(":")[0] == "50000"  # Airflow's uid
    # the driver's spark-defaults.conf is what the settings make (regenerate with the module's CLI)
    assert f"./spark:{airflow['SPARK_CONF_DIR']}:ro" in services["airflow"]["volumes"]
    written = (DOCKER / "spark" / "spark-defaults.conf").read_text()
    assert written == spark_defaults_text(spark_defaults(settings)), (
        "docker/spark/spark-defaults.conf is stale: "
        "python -m airflow_provider_binlog.dev.topology spark-defaults"
    )
    # the Spark images are the driver's Spark version
    for name in ("spark-master", "spark-worker"):
        assert services[name]["image"] == f"apache/spark:{pyspark.__version__}", name
    # the catalog's database is made from the same settings
    postgres = services["postgres"]
    assert postgres["env_file"] == "topology.env"
    assert "./postgres/init-catalog.sh:/docker-entrypoint-initdb.d/init-catalog.sh:ro" in postgres["volumes"]


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, port)) == 0


JOB = textwrap.dedent(
    """
    import os
    from urllib.parse import parse_qs, unquote, urlsplit
    from airflow_provider_binlog.lake.spark.session import create_session, jdbc_catalog_conf, jdbc_uri

    conn = urlsplit(os.environ["AIRFLOW_CONN_" + os.environ["BINLOG_CDC_CATALOG_CONN_ID"].upper()])
    warehouse = parse_qs(conn.query)["warehouse"][0]
    conf = jdbc_catalog_conf(
        jdbc_uri(conn.hostname, conn.port, conn.path.lstrip("/")), unquote(conn.username),
        unquote(conn.password), warehouse,
    )
    spark = create_session("topology-check", master=os.environ["BINLOG_CDC_SPARK_MASTER"], conf=conf)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.check")
    spark.sql("CREATE TABLE lake.check.t (id BIGINT, v STRING) USING iceberg")
    spark.sql("INSERT INTO lake.check.t VALUES (1, 'a'), (2, 'b')")
    rows = sorted(tuple(r) for r in spark.table("lake.check.t").collect())
    print("ROWS", rows, spark.sparkContext.master)
    spark.stop()
    """
)


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.timeout(900)
def test_the_topology_as_processes(tmp_path: Path) -> None:
    work = tmp_path / "topology"
    log = (tmp_path / "topology.log").open("wb")
    proc = subprocess.Popen(
        ["bash", str(DOCKER / "local-topology.sh"), "--dir", str(work)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    env_file = work / "airflow.env"
    try:
        deadline = time.monotonic() + 300
        while "for airflow commands: source" not in (tmp_path / "topology.log").read_text():
            assert proc.poll() is None, (tmp_path / "topology.log").read_text()[-4000:]
            assert time.monotonic() < deadline, (tmp_path / "topology.log").read_text()[-4000:]
            time.sleep(0.5)
        assert oct(env_file.stat().st_mode & 0o777) == "0o600"  # it holds passwords
        env = dict(os.environ)
        for line in env_file.read_text().splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = subprocess.run(
                ["sh", "-c", f"printf %s {value}"], capture_output=True, text=True, check=True
            ).stdout
        settings = load_settings(SETTINGS)
        warehouse = Path(env["BINLOG_CDC_WAREHOUSE"])
        assert str(warehouse).endswith(settings["BINLOG_CDC_WAREHOUSE"]) and warehouse.is_dir()
        assert env["BINLOG_CDC_STAGING_URI"].startswith(str(warehouse) + "/")
        mysql, zk = (
            urlsplit(env["AIRFLOW_CONN_MYSQL_DEFAULT"]),
            urlsplit(env["AIRFLOW_CONN_ZOOKEEPER_DEFAULT"]),
        )
        assert mysql.hostname and mysql.port and _port_open(mysql.hostname, mysql.port)
        assert zk.hostname and zk.port and _port_open(zk.hostname, zk.port)
        # the catalog's login is the settings' (made by docker/postgres/init-catalog.sh)
        catalog = urlsplit(env["AIRFLOW_CONN_ICEBERG_CATALOG"])
        assert (catalog.username, catalog.password) == (
            settings["BINLOG_CDC_CATALOG_USER"], settings["BINLOG_CDC_CATALOG_PASSWORD"]
        )  # fmt: skip
        job = subprocess.run(
            [sys.executable, "-c", JOB], env=env, capture_output=True, text=True, timeout=400, cwd=str(REPO)
        )
        assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-4000:]
        assert "ROWS [(1, 'a'), (2, 'b')] spark://127.0.0.1:" in job.stdout, job.stdout[-2000:]
        # the executors wrote the table's data files into the shared warehouse
        assert list(warehouse.glob("check/t/data/*.parquet")), sorted(map(str, warehouse.rglob("*")))[:40]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()
    assert proc.returncode == 0, (tmp_path / "topology.log").read_text()[-4000:]
    assert not _port_open(mysql.hostname, mysql.port), "MariaDB still up after the script stopped"
