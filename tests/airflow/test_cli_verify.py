"""``binlog-cdc verify``: lake tables loaded by the operator, one difference put there on purpose."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from airflow_harness import Shop, make_context

from airflow_provider_binlog import cli
from airflow_provider_binlog.cli_verify import parse_conf, parse_tables
from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_parse_arguments() -> None:
    assert parse_tables(" shop.a=lake.s.a , shop.b=cat.x.b ") == {"shop.a": "lake.s.a", "shop.b": "cat.x.b"}
    for bad in ("", "shop.a", "shopa=lake.s.a", "shop.a=", "shop.a=x,shop.a=y"):
        with pytest.raises(ConfigurationError, match="--tables"):
            parse_tables(bad)
    assert parse_conf(["spark.a=1", "spark.b=x=y"]) == {"spark.a": "1", "spark.b": "x=y"}
    with pytest.raises(ConfigurationError, match="--conf"):
        parse_conf(["novalue"])
    assert "verify" in cli.build_parser().format_help()


def test_verify_lists_the_differing_key(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    shop.changes(120)
    ns = f"verify_{uuid.uuid4().hex[:8]}"
    BinlogToSparkOperator(
        task_id="load", destination=f"verify-{ns}", tables={"shop.*": f"lake.{ns}.{{table}}"},
        start_from=shop.start_from, warehouse=spark_warehouse, spark_master="local[2]", stop_spark=False,
    ).execute(make_context())  # fmt: skip
    monkeypatch.setenv("VERIFY_PASSWORD", mariadb.root_password)
    argv = [
        "verify", "--host", mariadb.host, "--port", str(mariadb.port), "--user", mariadb.root_user,
        "--password-env", "VERIFY_PASSWORD", "--warehouse", spark_warehouse, "--spark-master", "local[2]",
        "--conf", "spark.sql.shuffle.partitions=4",
        "--tables", f"shop.orders=lake.{ns}.orders,shop.customers=lake.{ns}.customers",
    ]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert f"shop.orders == lake.{ns}.orders: " in out and f"shop.customers == lake.{ns}.customers: " in out

    (key,) = mariadb.execute("SELECT MIN(id) FROM shop.orders")[0]
    spark.sql(f"UPDATE lake.{ns}.orders SET quantity = quantity + 1 WHERE id = {key}")
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert f"shop.customers == lake.{ns}.customers: " in out, out
    assert f"shop.orders != lake.{ns}.orders: " in out, out
    assert f"different values: 1 key(s): ({key},)" in out, out
    assert mariadb.root_password not in out

    monkeypatch.delenv("VERIFY_PASSWORD")
    assert cli.main(argv) == 1
    assert "VERIFY_PASSWORD (--password-env) is not set" in capsys.readouterr().err
