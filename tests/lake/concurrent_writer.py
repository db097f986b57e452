"""A writer process for ``test_concurrent_writers.py``: one destination's merges into an Iceberg JDBC
catalog, one batch per line of standard input (one JVM holds one SparkContext, so each writer is a
process of its own).

Run as ``python concurrent_writer.py CONFIG_JSON`` with CONFIG_JSON
``{"destination", "catalog", "uri", "user", "password", "warehouse", "target"}``; prints ``READY``,
then per input line ``{"round": r, "ops": [[op, id, value], ...]}`` (op ``i``/``u``/``d``) merges those
changes of source ``db.t`` into ``target`` and prints ``DONE {"round", "counts", "retried"}``; ``quit``
stops. Logging (the commit retries' warnings) goes to standard error.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.spark.session import create_session, jdbc_catalog_conf
from airflow_provider_binlog.lake.write.merge import merge_batch

SCHEMA = TableSchema("db", "t", (ColumnDef("id", T.LONG), ColumnDef("v", T.VARCHAR, collation=45)), ("id",))
OPS = {"i": Op.INSERT, "u": Op.UPDATE, "d": Op.DELETE}


def changes(destination: str, round_no: int, ops: list[list[Any]]) -> list[RowChange]:
    """The row changes of one round; positions grow with the round (each destination its own binlog)."""
    out = []
    for i, (op, key, value) in enumerate(ops):
        pos = BinlogPosition("mysql-bin.000001", 1000 + round_no * 10_000 + i * 10)
        end = BinlogPosition(pos.file, pos.pos + 10)
        row = {"id": key, "v": value}
        before = None if op == "i" else {"id": key, "v": "?"}
        after = None if op == "d" else row
        out.append(
            RowChange(destination, "db", "t", OPS[op], before, after, ("id",), pos, end, None,
                      1_700_000_000, OrderKey(1, pos.pos, -1, 0), SCHEMA)
        )  # fmt: skip
    return out


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    cfg = json.loads(sys.argv[1])
    conf = jdbc_catalog_conf(cfg["uri"], cfg["user"], cfg["password"], cfg["warehouse"], cfg["catalog"])
    conf.update({"spark.driver.memory": "512m", "spark.sql.shuffle.partitions": "1"})
    app = f"binlog-cdc-writer-{cfg['destination']}"
    spark = create_session(app, master="local[1]", catalog=cfg["catalog"], conf=conf)
    print("READY", flush=True)
    target = cfg["target"]
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd == "quit":
            break
        batch = changes(cfg["destination"], cmd["round"], cmd["ops"])
        counts = merge_batch(spark, cfg["destination"], {"db.t": target}, batch, batch[-1].end_position)
        result = {
            "round": cmd["round"],
            "counts": counts[target].as_dict(),
            "retried": commits.conflicts_retried,
        }
        print("DONE " + json.dumps(result), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
