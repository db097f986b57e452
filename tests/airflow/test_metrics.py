"""The operator's run metrics (:mod:`airflow_provider_binlog.operators.metrics`) through Airflow's own StatsD
client, received by a real UDP listener on loopback (the ``statsd`` fixture of
``test_cli_status``), compared with the run's summary; the name rules as units.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from typing import Any

import pytest
from airflow_harness import Shop, make_context
from test_cli_status import StatsdListener, statsd  # noqa: F401  (the listener fixture)

from airflow_provider_binlog.drain.observe import Observing
from airflow_provider_binlog.operators import metrics


def _received(listener: StatsdListener, quiet: float = 1.0, timeout: float = 10.0) -> list[str]:
    """Every StatsD line the listener got until it was quiet for ``quiet`` seconds (bounded)."""
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - last < quiet:
        try:
            data = listener.sock.recv(65535)
        except TimeoutError:
            continue
        listener.lines += data.decode().splitlines()
        last = time.monotonic()
    return listener.lines


def _parse(lines: list[str]) -> dict[tuple[str, str], list[float]]:
    """``(name without Airflow's prefix, type) -> values`` of StatsD lines ``prefix.name:value|type``."""
    found: dict[tuple[str, str], list[float]] = defaultdict(list)
    for line in lines:
        name, _, rest = line.partition(":")
        value, _, kind = rest.partition("|")
        found[(name.split(".", 1)[1], kind.split("|")[0])].append(float(value))
    return found


@pytest.mark.integration
@pytest.mark.spark
def test_a_runs_metrics_equal_its_summary(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, statsd: StatsdListener,  # noqa: F811
) -> None:  # fmt: skip
    """Per lake table the changes read and merged (counters equal to the summary's counts), a commit
    duration per commit, the lag at start (the changes were waiting) and at the end (caught up)."""
    from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

    shop.changes(60)
    waiting_since = time.time()
    dest = f"metrics.{uuid.uuid4().hex[:8]}"  # a dot: the name part becomes metrics_...
    ns = dest.replace(".", "_")
    started = time.time()
    summary = BinlogToSparkOperator(
        task_id="load", destination=dest, tables={"shop.*": f"lake.{ns}.{{table}}"},
        start_from=shop.start_from, warehouse=spark_warehouse, spark_master="local[2]", stop_spark=False,
    ).execute(make_context(run_id="metrics"))  # fmt: skip
    elapsed = time.time() - started
    got = _parse(_received(statsd))
    part = metrics.name_part(dest)
    assert part == ns

    tables = summary["tables"]
    assert set(tables) == {f"lake.{ns}.{t}" for t in ("customers", "products", "orders")}, summary
    assert summary["changes"] > 0, summary
    read_total = 0
    for table, counts in tables.items():
        segment = table.replace(".", "_")
        merged = sum(counts[k] for k in metrics.MERGED_COUNTS)
        assert merged > 0
        assert got[(f"binlog_cdc.changes_merged.{part}.{segment}", "c")] == [merged], (table, got)
        read = got[(f"binlog_cdc.changes_read.{part}.{segment}", "c")]
        # the row changes (none in the table before: all merged) and the statements (the shop's
        # CREATE TABLE after the start point)
        assert len(read) == 1 and merged < read[0] <= merged + 2, (table, got)
        read_total += int(read[0])
        timings = got[(f"binlog_cdc.commit_duration.{part}.{segment}", "ms")]
        assert len(timings) == counts["commits"] > 0, (table, counts, timings)
        assert all(0 < ms < elapsed * 1000 for ms in timings), timings
    assert summary["changes"] < read_total <= summary["changes"] + 2 * len(tables)
    (start,) = got[(f"binlog_cdc.lag_start_seconds.{part}", "g")]
    assert 0 < start <= time.time() - waiting_since + 1, start
    assert got[(f"binlog_cdc.lag_end_seconds.{part}", "g")] == [0.0]  # nothing after the stop point
    names = {name for name, _ in got}
    assert {n.split(".")[1] for n in names} == {
        "changes_read",
        "changes_merged",
        "commit_duration",
        "lag_start_seconds",
        "lag_end_seconds",
    }, names  # fmt: skip  (the server purges nothing by age here: no headroom gauge)


@pytest.mark.parametrize(
    ("value", "part"),
    [
        ("shop", "shop"),
        ("lake.shop.orders", "lake_shop_orders"),
        ("lake.`we.ird`.ta ble/ü", "lake__we_ird__ta_ble__"),
        ("x" * 60, "x" * 60),
    ],
)
def test_name_parts(value: str, part: str) -> None:
    assert metrics.name_part(value) == part


def test_a_long_name_part_is_cut_with_a_hash() -> None:
    import hashlib

    long = "x" * 61
    assert metrics.name_part(long) == "x" * 51 + "_" + hashlib.sha1(long.encode()).hexdigest()[:8]
    assert metrics.name_part("x" * 62) != metrics.name_part(long)


def test_names_under_statsd_and_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """StatsD: the parts in the name; OpenTelemetry: the constant name (the parts are tags)."""
    monkeypatch.setenv("AIRFLOW__METRICS__OTEL_ON", "False")
    assert metrics.stat_name(metrics.CHANGES_MERGED, "shop", "lake.shop.orders") == (
        "binlog_cdc.changes_merged.shop.lake_shop_orders"
    )
    monkeypatch.setenv("AIRFLOW__METRICS__OTEL_ON", "True")
    assert metrics.stat_name(metrics.CHANGES_MERGED, "shop", "lake.t") == "binlog_cdc.changes_merged"
    assert metrics.headroom_name("shop") == metrics.HEADROOM


def test_run_metrics_send_tags(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every metric is tagged with the destination, the table ones with the table too; merged is the
    lineage's sum; a failing back end is logged, not raised."""
    monkeypatch.setenv("AIRFLOW__METRICS__OTEL_ON", "False")
    sent: list[tuple[str, str, float, dict[str, Any]]] = []
    monkeypatch.setattr(metrics, "incr", lambda n, v, tags: sent.append(("c", n, v, tags)))
    monkeypatch.setattr(metrics, "timing", lambda n, v, tags: sent.append(("ms", n, v, tags)))
    monkeypatch.setattr(metrics, "gauge", lambda n, v, tags: sent.append(("g", n, v, tags)))
    run = metrics.RunMetrics("shop")
    run.lag("start", 1.23456)
    run.commit("lake.shop.orders", 0.25)
    counts = {"inserted": 3, "updated": 2, "deleted": 1, "upserted": 4, "appended": 5, "skipped": 7}
    run.tables({"lake.shop.orders": 13}, {"lake.shop.orders": counts})
    table = {"destination": "shop", "table": "lake.shop.orders"}
    assert sent == [
        ("g", "binlog_cdc.lag_start_seconds.shop", 1.235, {"destination": "shop"}),
        ("ms", "binlog_cdc.commit_duration.shop.lake_shop_orders", 250.0, table),
        ("c", "binlog_cdc.changes_read.shop.lake_shop_orders", 13, table),
        ("c", "binlog_cdc.changes_merged.shop.lake_shop_orders", 11, table),
    ]

    def broken(*_: Any) -> None:
        raise OSError("no route")

    monkeypatch.setattr(metrics, "incr", broken)
    run.tables({"lake.shop.orders": 1}, {})  # logged


def test_a_failing_observer_does_not_fail_the_run() -> None:
    reported: list[tuple[int, str]] = []

    class Broken:
        def lag(self, when: str, seconds: float) -> None:
            raise RuntimeError("boom")

    observing = Observing(Broken(), "shop", lambda level, line: reported.append((level, line)))  # type: ignore[arg-type]
    observing._call("lag", "start", 1.0)
    assert reported and "observer failed (lag): RuntimeError: boom" in reported[0][1]
