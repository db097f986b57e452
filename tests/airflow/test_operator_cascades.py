"""Routed children of cascading foreign keys (issue #17): InnoDB applies ``ON DELETE/UPDATE
CASCADE`` and ``SET NULL`` itself and the ROW binlog does not hold those changes, so the run warns
(naming the constraint and the remedies, listed in the summary), stops with ``on_cascade="fail"``
before reading, or says nothing with ``"ignore"``. Against the real MariaDB (the divergence itself
is shown too: a cascaded delete never reaches the lake)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_harness import make_context, meta_manager

from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.drain.source import CascadeError, cascades
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration]


@pytest.fixture(autouse=True)
def task_log_to_caplog(monkeypatch: pytest.MonkeyPatch) -> None:
    """The task log goes to structlog's sink; a stdlib logger lets caplog read it."""
    logger = logging.getLogger("tests.airflow.cascades")
    monkeypatch.setattr(BinlogToSparkOperator, "log", property(lambda self: logger))


@pytest.fixture
def fk_db(mariadb: MariaDbServer) -> Iterator[str]:
    """``p`` <- ``c`` (ON DELETE CASCADE ON UPDATE SET NULL), ``p`` <- ``r`` (RESTRICT), and
    ``p`` <- ``other.o`` (CASCADE, in a schema the routes do not match); a few rows."""
    db = f"cas_{uuid.uuid4().hex[:8]}"
    other = f"{db}_o"
    for name in (db, other):
        mariadb.execute(f"CREATE DATABASE `{name}`")
    mariadb.execute(f"CREATE TABLE `{db}`.p (id INT PRIMARY KEY)")
    mariadb.execute(
        f"CREATE TABLE `{db}`.c (id INT PRIMARY KEY, pid INT, CONSTRAINT fk_c_p FOREIGN KEY (pid) "
        f"REFERENCES `{db}`.p (id) ON DELETE CASCADE ON UPDATE SET NULL)"
    )
    mariadb.execute(
        f"CREATE TABLE `{db}`.r (id INT PRIMARY KEY, pid INT, CONSTRAINT fk_r_p FOREIGN KEY (pid) "
        f"REFERENCES `{db}`.p (id) ON DELETE RESTRICT)"
    )
    mariadb.execute(
        f"CREATE TABLE `{other}`.o (id INT PRIMARY KEY, pid INT, CONSTRAINT fk_o_p FOREIGN KEY (pid) "
        f"REFERENCES `{db}`.p (id) ON DELETE CASCADE)"
    )
    yield db
    for name in (other, db):
        mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")


def _head(mariadb: MariaDbServer) -> str:
    (file, pos, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    return f"{file}:{pos}"


def test_cascades_finds_routed_children_only(mariadb: MariaDbServer, fk_db: str) -> None:
    known = {f"{fk_db}.p": "lake.x.p", f"{fk_db}.c": "lake.x.c", f"{fk_db}.r": "lake.x.r"}
    found = cascades(mariadb.connect, known)
    assert [(c.child, c.constraint, c.parent, c.on_delete, c.on_update) for c in found] == [
        (f"{fk_db}.c", "fk_c_p", f"{fk_db}.p", "CASCADE", "SET NULL")
    ]
    message = found[0].describe("dest")
    assert (
        f"{fk_db}.c is the child of foreign key `fk_c_p` (ON DELETE CASCADE, ON UPDATE SET NULL)" in message
    )
    assert f"--table {fk_db}.c --target lake.x.c" in message and "lake.x.c misses them" in message, message
    assert cascades(mariadb.connect, {f"{fk_db}.r": "lake.x.r"}) == []


@pytest.mark.spark
def test_operator_warns_fails_or_ignores(
    conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer, zk_chroot: str, fk_db: str, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    start = _head(mariadb)
    mariadb.execute(f"INSERT INTO `{fk_db}`.p VALUES (1), (2)")
    mariadb.execute(f"INSERT INTO `{fk_db}`.c VALUES (10, 1), (20, 2)")
    ns = fk_db

    def operator(destination: str, namespace: str = ns, **kwargs: Any) -> BinlogToSparkOperator:
        return BinlogToSparkOperator(
            task_id="load", destination=destination, tables={f"{fk_db}.*": f"lake.{namespace}.{{table}}"},
            start_from=start, warehouse=spark_warehouse, spark_master="local[2]", stop_spark=False, **kwargs,
        )  # fmt: skip

    # fail: the run stops before it reads or pins anything
    with pytest.raises(CascadeError) as failed:
        operator(f"{ns}-fail", on_cascade="fail").execute(make_context(run_id="fail"))
    message = str(failed.value)
    assert f"{fk_db}.c is the child of `fk_c_p` (ON DELETE CASCADE, ON UPDATE SET NULL)" in message, message
    assert "fk_r_p" not in message and "fk_o_p" not in message, message
    meta = meta_manager(zookeeper, zk_chroot)
    try:
        assert meta.get_cursor(ClientIdentity(f"{ns}-fail", 1001)).value is None, (
            "the failed run pinned a cursor"
        )
    finally:
        meta.client.stop()
        meta.client.close()

    # warn (default): one warning naming the constraint, the summary lists it
    caplog.set_level(logging.INFO)
    caplog.clear()
    summary = operator(f"{ns}-warn").execute(make_context(run_id="warn"))
    assert summary["cascades"] == [
        {"table": f"{fk_db}.c", "target": f"lake.{ns}.c", "constraint": "fk_c_p", "parent": f"{fk_db}.p",
         "on_delete": "CASCADE", "on_update": "SET NULL"}
    ]  # fmt: skip
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("`fk_c_p`" in w for w in warnings) == 1, warnings
    # the reason: a cascaded delete is not in the binlog, so the lake keeps the child row
    mariadb.execute(f"DELETE FROM `{fk_db}`.p WHERE id = 1")
    assert mariadb.execute(f"SELECT id FROM `{fk_db}`.c ORDER BY id") == [(20,)]
    operator(f"{ns}-warn").execute(make_context(run_id="warn2", try_number=2))
    lake = sorted(r[0] for r in spark.sql(f"SELECT id FROM lake.{ns}.c").collect())
    assert lake == [10, 20], lake

    # ignore: no warning, no summary entry (its own lake tables: another destination fills lake.{ns})
    caplog.clear()
    ignoring = operator(f"{ns}-ignore", f"{ns}_ignore", on_cascade="ignore")
    summary = ignoring.execute(make_context(run_id="ignore"))
    assert "cascades" not in summary
    assert not any("fk_c_p" in r.getMessage() for r in caplog.records), caplog.text
