"""Reproducible intervals through the operator (issue #22): ``stop_at="data_interval_end"`` with a
writer running. Two runs of the same interval on fresh destinations and lake tables give the same
lake contents and the same ends; the next interval continues exactly (on the same destination from
its cursor, and on another one from the recorded end); the commits carry both ends as snapshot
properties; at the head the lake equals the source.

The operator shares this process's SparkSession (``stop_spark=False``).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
import time
import uuid
from typing import Any

import pytest
from airflow_harness import Shop, lake_verify, make_context

from airflow_provider_binlog.dev import demo_data
from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TABLE_NAMES = ("customers", "products", "orders")


@pytest.fixture(autouse=True)
def task_log_to_caplog(monkeypatch: pytest.MonkeyPatch) -> None:
    logger = logging.getLogger("tests.airflow.operator_interval")
    monkeypatch.setattr(BinlogToSparkOperator, "log", property(lambda self: logger))


class Writer:
    """The demo workload in small transactions on its own connection until stopped."""

    def __init__(self, mariadb: MariaDbServer) -> None:
        self.conn = mariadb.connect()
        self.stopped = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        seed = 1000
        try:
            while not self.stopped.is_set():
                seed += 1
                demo_data.generate_changes(self.conn, 10, seed=seed)
                time.sleep(0.05)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(30)
        self.conn.close()
        assert self.error is None, self.error


def _run(
    spark_warehouse: str, destination: str, namespace: str, until: float | None, **kwargs: Any
) -> dict[str, Any]:
    op = BinlogToSparkOperator(
        task_id="load", destination=destination, tables={"shop.*": f"lake.{namespace}.{{table}}"},
        warehouse=spark_warehouse, spark_master="local[2]", stop_spark=False,
        stop_at=kwargs.pop("stop_at", "data_interval_end"), **kwargs,
    )  # fmt: skip
    context = make_context(run_id=f"run-{uuid.uuid4().hex[:6]}")
    if until is not None:
        context["data_interval_end"] = dt.datetime.fromtimestamp(until, dt.timezone.utc)
    return op.execute(context)  # type: ignore[no-any-return]


def _rows(spark: Any, namespace: str) -> dict[str, list[Any]]:
    out = {}
    for t in TABLE_NAMES:
        df = spark.table(f"lake.{namespace}.{t}")
        out[t] = sorted(tuple(r) for r in df.collect())
    return out


def _server_now(mariadb: MariaDbServer) -> float:
    return float(mariadb.execute("SELECT UNIX_TIMESTAMP(NOW(6))")[0][0])


def _newest_summary(spark: Any, table: str) -> dict[str, str]:
    row = spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").first()
    return dict(row[0])


def test_same_interval_twice_then_the_next(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer
) -> None:  # fmt: skip
    tag = uuid.uuid4().hex[:6]
    shop.changes(100)
    with Writer(mariadb):
        t1 = _server_now(mariadb) + 3.0
        t2 = t1 + 4.0
        # run A starts before the server reaches t1: it waits, then stops before t1
        a1 = _run(spark_warehouse, f"a-{tag}", f"ia_{tag}", t1, start_from=shop.start_from)
        assert a1["interval"]["waited_seconds"] > 0.5, a1["interval"]
        b1 = _run(spark_warehouse, f"b-{tag}", f"ib_{tag}", t1, start_from=shop.start_from)
        a2 = _run(spark_warehouse, f"a-{tag}", f"ia_{tag}", t2)  # the next interval, from A's cursor
        while _server_now(mariadb) < t2 + 3:
            time.sleep(0.2)
    # the same interval twice: same lake contents, same ends
    assert a1["changes"] > 0 and a1["changes"] == b1["changes"]
    assert a1["end"] == b1["end"] and a1["interval"]["end"] == b1["interval"]["end"], (a1, b1)
    assert a1["interval"]["start"] == b1["interval"]["start"]
    end1 = a1["interval"]["end"]
    assert end1["position"] and end1["gtid"] and end1["time"] < a1["interval"]["until"], end1
    lake_b1 = _rows(spark, f"ib_{tag}")
    # the next interval continues exactly where the first ended
    assert a2["interval"]["start"] == end1, (a2["interval"], end1)
    # B continues from A's recorded end (another destination, B's tables) to t2: B's tables are
    # handed over to B2 first, with the statements the refusal names (one per table, all at once)
    with pytest.raises(LakeError) as refused:
        _run(spark_warehouse, f"b2-{tag}", f"ib_{tag}", t2, start_from=a1)
    unset = re.findall(r"ALTER TABLE \S+ UNSET TBLPROPERTIES \([^)]*\)", str(refused.value))
    assert len(unset) == len(TABLE_NAMES) and all(f"'binlog-cdc.writer.b-{tag}'" in u for u in unset), unset
    for statement in unset:
        spark.sql(statement)
    b2 = _run(spark_warehouse, f"b2-{tag}", f"ib_{tag}", t2, start_from=a1)
    assert b2["interval"]["start"] == end1 and b2["interval"]["end"] == a2["interval"]["end"]
    # one run over both intervals agrees with the two in a row
    c = _run(spark_warehouse, f"c-{tag}", f"ic_{tag}", t2, start_from=shop.start_from)
    assert c["interval"]["end"] == a2["interval"]["end"] and c["end"] == a2["end"]
    lake_a2, lake_b2, lake_c = (_rows(spark, f"{p}_{tag}") for p in ("ia", "ib", "ic"))
    assert lake_a2 == lake_c and lake_b2 == lake_c
    assert lake_b1 != lake_c  # the second interval changed something (else the test shows nothing)
    # both ends on the commits: the last snapshot of A's orders is from interval 2
    props = _newest_summary(spark, f"lake.ia_{tag}.orders")
    end2 = a2["interval"]["end"]
    assert props["binlog-cdc.interval-end"] == end2["position"], props
    assert props["binlog-cdc.interval-end-gtid"] == end2["gtid"]
    assert props["binlog-cdc.interval-end-time"] == end2["time"]
    assert props["binlog-cdc.interval-start"] == end1["position"]
    assert props["binlog-cdc.interval-until"] == a2["interval"]["until"]
    # re-running interval 1 from its recorded start on a fresh table gives interval 1's contents
    again = _run(spark_warehouse, f"d-{tag}", f"id_{tag}", t1, start_from=a1["interval"]["start"])
    assert again["interval"]["end"] == end1 and _rows(spark, f"id_{tag}") == lake_b1
    # and at the head the lake is the source
    _run(spark_warehouse, f"a-{tag}", f"ia_{tag}", None, stop_at="head")
    diffs = lake_verify(mariadb, spark, {f"shop.{t}": f"lake.ia_{tag}.{t}" for t in TABLE_NAMES})
    assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
