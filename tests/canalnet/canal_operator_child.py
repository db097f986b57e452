"""One BinlogToSparkOperator run with ``canal_conn_id`` in a process of its own (a failpoint may
SIGKILL it): ``python canal_operator_child.py WAREHOUSE SOURCE_TABLE TARGET``. The ``canal_default``
connection comes from ``AIRFLOW_CONN_CANAL_DEFAULT``. Prints one JSON line: the summary, the
target's rows and its snapshot count."""

from __future__ import annotations

import json
import logging
import sys
from types import SimpleNamespace


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

    warehouse, source, target = sys.argv[1], sys.argv[2], sys.argv[3]
    op = BinlogToSparkOperator(
        task_id="load", destination="shop", tables={source: target}, canal_conn_id="canal_default",
        zookeeper_conn_id=None, meta_dir=warehouse + "-meta", warehouse=warehouse, spark_master="local[1]",
        spark_conf={"spark.driver.memory": "512m"},
    )  # fmt: skip
    ti = SimpleNamespace(dag_id="tests", task_id="load", try_number=1, run_id="r")
    summary = op.execute({"ti": ti, "run_id": "r"})  # type: ignore[arg-type]
    spark = op._spark()  # the run's session (started in the committer thread)
    rows = [r.asDict() for r in spark.sql(f"SELECT * FROM {target} ORDER BY id").collect()]
    snapshots = spark.sql(f"SELECT count(*) AS n FROM {target}.snapshots").collect()[0]["n"]
    print(json.dumps({"summary": summary, "rows": rows, "snapshots": snapshots}, default=str), flush=True)


if __name__ == "__main__":
    main()
