"""What the task log shows of Spark: a merge that fails inside Spark is our error (the lake table, the
changes' ``file:pos`` range; Spark's error only as its cause), and the JVM's warnings on stderr are
no ERROR lines in a task run by Airflow's supervisor (``airflow dags test --use-executor``).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from airflow_harness import Shop, make_context

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.lake.errors import LakeStatementError
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_merge_failing_in_spark_is_our_error(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The lake table of ``shop.orders`` made unmergeable by hand (a row-level operation mode Iceberg
    does not know): the next run fails with LakeStatementError naming the table and the chunk's
    range on its first line, Spark's error as the cause and no Java stack trace in the message."""
    dest = f"tasklog-{uuid.uuid4().hex[:8]}"
    ns = dest.replace("-", "_")

    def operator() -> BinlogToSparkOperator:
        return BinlogToSparkOperator(
            task_id="load", destination=dest, tables={"shop.orders": f"lake.{ns}.orders"},
            start_from=shop.start_from, warehouse=spark_warehouse, spark_master="local[2]",
            stop_spark=False,
        )  # fmt: skip

    shop.changes(20)
    operator().execute(make_context(run_id="first"))
    spark.sql(f"ALTER TABLE lake.{ns}.orders SET TBLPROPERTIES ('write.merge.mode' = 'no-such-mode')")
    start = shop.head()
    shop.changes(20)
    end = shop.head()
    with pytest.raises(LakeStatementError) as raised:
        operator().execute(make_context(run_id="second"))
    error = raised.value
    message = str(error)
    first = message.splitlines()[0]
    table = rf"`lake`\.`{ns}`\.`orders`"
    assert re.match(rf"commit to {table} \(changes \S+:\d+ to \S+:\d+\) failed in Spark: ", first), message
    lo, hi = (BinlogPosition.parse(p) for p in re.findall(r"\(changes (\S+:\d+) to (\S+:\d+)\)", first)[0])
    assert BinlogPosition.parse(start) <= lo <= hi < BinlogPosition.parse(end), (start, lo, hi, end)
    assert "no-such-mode" in first, message  # Spark's own first line, after ours
    assert "\tat " not in message and "at org.apache" not in message and len(message) < 800, message
    cause = error.__cause__
    assert cause is not None and "no-such-mode" in str(cause), cause
