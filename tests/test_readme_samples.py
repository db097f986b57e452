"""The README's samples, checked against the code they describe: the full ``verify`` command line
parses with ``binlog-cdc``'s own parser (and its JDBC ``--conf`` sample names a lake ``verify``
accepts), the lake's default place is the one ``default_warehouse`` returns, each OpenLineage
transport sample builds a transport with the OpenLineage client, and the headroom gauge is sent
exactly under the conditions the README lists."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.cli import build_parser
from airflow_provider_binlog.cli.verify import check_lake, run_verify
from airflow_provider_binlog.drain.source import Retention
from airflow_provider_binlog.lake.spark.session import WAREHOUSE_ENV, default_warehouse

README = (Path(__file__).parents[1] / "README.md").read_text()


def _verify_lines() -> str:
    block = re.search(r"```bash\n(DB_PASSWORD=\.\.\. binlog-cdc verify .*?)```", README, re.S)
    assert block, "the README's verify sample is gone"
    return block.group(1).replace("\\\n", " ")


def test_the_full_verify_command_line_parses() -> None:
    words = shlex.split(_verify_lines())
    assert words[:2] == ["DB_PASSWORD=...", "binlog-cdc"]
    args = build_parser().parse_args(words[2:])
    assert args.func is run_verify
    assert (args.host, args.port, args.user, args.password_env) == ("db", 3306, "repl", "DB_PASSWORD")
    assert (args.warehouse, args.catalog, args.at_cursor, args.destination) == (
        "/data/warehouse",
        "lake",
        True,
        "shop",
    )
    # the JDBC catalog sample: --conf pairs that name the catalog, accepted without --warehouse
    confs = re.findall(r"--conf\s+(spark\.sql\.catalog\.lake[^\s`]*)", README)
    assert len(confs) == 4, confs
    args = build_parser().parse_args(
        [
            "verify",
            "--host",
            "db",
            "--tables",
            "shop.t=lake.shop.t",
            *[w for c in confs for w in ("--conf", c)],
        ]
    )
    conf = dict(item.split("=", 1) for item in args.conf)
    assert conf["spark.sql.catalog.lake.catalog-impl"] == "org.apache.iceberg.jdbc.JdbcCatalog"
    check_lake(args.warehouse, args.catalog, conf)  # no "needs to know where the lake is"


def test_the_lake_default_place_is_as_the_readme_says(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert "`$BINLOG_CDC_WAREHOUSE`, else in `$XDG_DATA_HOME/airflow-provider-binlog/warehouse`" in README
    assert "(`~/.local/share/airflow-provider-binlog/warehouse` of the user the task runs as)" in README
    monkeypatch.setenv(WAREHOUSE_ENV, "/data/wh")
    assert default_warehouse() == "/data/wh"
    monkeypatch.delenv(WAREHOUSE_ENV)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_warehouse() == str(tmp_path / "airflow-provider-binlog" / "warehouse")
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_warehouse() == str(tmp_path / ".local" / "share" / "airflow-provider-binlog" / "warehouse")


def test_each_openlineage_transport_sample_builds_a_transport() -> None:
    from openlineage.client.transport import get_default_factory

    samples = [json.loads(s) for s in re.findall(r"AIRFLOW__OPENLINEAGE__TRANSPORT='(\{.*?\})'", README)]
    assert [s["type"] for s in samples] == ["http", "file"]
    for sample in samples:
        transport: Any = get_default_factory().create(sample)
        assert transport.kind == sample["type"]


def _retention(**changes: Any) -> Retention:
    base: dict[str, Any] = dict(
        destination="shop", file="mysql-bin.000003", retention_seconds=86400.0, oldest="mysql-bin.000001",
        head="mysql-bin.000005", closed_at=1.0, headroom_seconds=3600.0, warn_below=21600.0,
    )  # fmt: skip
    return Retention(**{**base, **changes})


def test_the_headroom_gauge_is_sent_under_the_readme_conditions() -> None:
    said = " ".join(README.split())
    for condition in (
        "when the run starts at a binlog position",
        "purges binlogs by age",
        "the whole retention while the cursor is in the file the server writes now",
        "Nothing is sent when the server purges nothing by age or the file's age is unknown",
    ):
        assert condition in said, condition
    assert _retention().metric_seconds == 3600.0  # the time left for the cursor's file
    assert _retention(headroom_seconds=-60.0).metric_seconds == -60.0  # past the retention: negative
    now = _retention(file="mysql-bin.000005", closed_at=None, headroom_seconds=None)
    assert now.metric_seconds == 86400.0  # the file the server writes now: the whole retention
    assert _retention(retention_seconds=None, headroom_seconds=None).metric_seconds is None  # no purge by age
    assert _retention(closed_at=None, headroom_seconds=None).metric_seconds is None  # the age unknown
