"""``lake/spark/catalog_load.load_catalog`` on a real JVM and a real PostgreSQL: a JDBC catalog whose first
load fails (its database is not there yet, as for the loser of two runs initializing one fresh
catalog) is made by a later attempt and works; one that cannot be made fails with an error that
names it and its cause, not as a wrong namespace at the first table load, and without its password."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.dev.services import PostgresServer, free_port
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.spark import catalog_load
from airflow_provider_binlog.lake.spark.session import jdbc_catalog_conf

SECRET = "pw-" + uuid.uuid4().hex


def register(spark: Any, conf: dict[str, str]) -> None:
    for key, value in conf.items():
        spark.conf.set(key, value)


def test_a_first_load_that_fails_is_retried_and_the_catalog_works(
    spark: Any, postgres: PostgresServer, tmp_path: Path
) -> None:
    name = "late_" + uuid.uuid4().hex[:8]
    database = f"catalog_late_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    register(
        spark,
        jdbc_catalog_conf(postgres.jdbc_url(database), postgres.user, postgres.password, str(tmp_path), name),
    )
    pauses: list[float] = []

    def pause(seconds: float) -> None:  # the database appears while the first attempt's failure waits
        pauses.append(seconds)
        if len(pauses) == 1:
            postgres.create_database(database)

    try:
        catalog_load.load_catalog(spark, name, sleep=pause)
        assert pauses == [catalog_load.PAUSE], "the first load failed once and the second made the catalog"
        spark.sql(f"CREATE TABLE {name}.ns.t (id bigint) USING iceberg")
        spark.sql(f"INSERT INTO {name}.ns.t VALUES (7)")
        assert [r[0] for r in spark.sql(f"SELECT id FROM {name}.ns.t").collect()] == [7]
        assert commits.load_iceberg_table(spark, f"{name}.ns.t") is not None
    finally:
        postgres.drop_database(database)


def test_a_catalog_that_cannot_be_made_is_named_with_its_cause(spark: Any, tmp_path: Path) -> None:
    name = "gone_" + uuid.uuid4().hex[:8]
    port = free_port()  # nothing listens there
    register(
        spark,
        jdbc_catalog_conf(f"jdbc:postgresql://127.0.0.1:{port}/nope", "someone", SECRET, str(tmp_path), name),
    )
    pauses: list[float] = []
    with pytest.raises(LakeError) as info:
        catalog_load.load_catalog(spark, name, attempts=3, sleep=pauses.append)
    message = str(info.value)
    assert f"the Iceberg catalog {name!r} cannot be loaded (3 attempts)" in message
    assert "PSQLException" in message or "ConnectException" in message, message
    assert f"spark.sql.catalog.{name}" in message
    assert SECRET not in message and SECRET not in repr(info.value)
    assert pauses == [catalog_load.PAUSE, 2 * catalog_load.PAUSE], "bounded: two pauses, growing"
