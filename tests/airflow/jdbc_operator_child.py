"""One BinlogToSparkOperator run in a process of its own (one JVM holds one SparkContext), for
``test_operator_jdbc_catalog.py``: ``python jdbc_operator_child.py CONFIG_JSON RESULT_FILE``.

CONFIG_JSON: ``{"destination", "tables", "catalog", "catalog_conn_id", "start_from", "run_id"}``; the
connections come from ``AIRFLOW_CONN_*`` in the environment. The run's summary (JSON) is written to
RESULT_FILE; the task log goes to standard output and error.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from types import SimpleNamespace


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    for noisy in ("py4j", "kazoo"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from airflow_provider_binlog.lake.options import TargetOptions
    from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

    cfg = json.loads(sys.argv[1])
    # several destinations into one table: their keys are declared unique across them
    options = TargetOptions(unique_keys=True) if cfg.get("unique_keys") else None
    op = BinlogToSparkOperator(
        task_id="load", destination=cfg["destination"], tables=cfg["tables"], catalog=cfg["catalog"],
        catalog_conn_id=cfg["catalog_conn_id"], start_from=cfg["start_from"], spark_master="local[1]",
        spark_conf={"spark.driver.memory": "512m"}, running_timeout=120, target_options=options,
    )  # fmt: skip
    ti = SimpleNamespace(dag_id="tests", task_id="load", try_number=1, run_id=cfg["run_id"])
    summary = op.execute({"ti": ti, "run_id": cfg["run_id"]})  # type: ignore[arg-type]
    Path(sys.argv[2]).write_text(json.dumps(summary, default=str))


if __name__ == "__main__":
    main()
