"""A canal-source run in its own process (so a failpoint can SIGKILL it): reads destination ``shop``
from the canal server at 127.0.0.1:PORT into TARGET, then prints one JSON line: the summary, the
target's rows and its snapshot count.

    python canal_drain_child.py PORT WAREHOUSE SOURCE_TABLE TARGET
"""

import json
import logging
import sys

from airflow_provider_binlog.canal.routing import Routes
from airflow_provider_binlog.canalnet.client import CanalClient
from airflow_provider_binlog.drain.canal_source import CanalDrain
from airflow_provider_binlog.lake.spark.session import create_session

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
port, warehouse, source, target = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
spark = create_session(app_name="canal-drain-child", master="local[1]", warehouse=warehouse)
client = CanalClient("127.0.0.1", int(port), "shop", filter="", user="canal", password="pw", timeout=30)
summary = CanalDrain(client, Routes({source: target}), spark=lambda: spark, idle_wait=3.0).run()
rows = [r.asDict() for r in spark.sql(f"SELECT * FROM {target} ORDER BY id").collect()]
snapshots = spark.sql(f"SELECT count(*) AS n FROM {target}.snapshots").collect()[0]["n"]
print(json.dumps({"summary": summary, "rows": rows, "snapshots": snapshots}, default=str), flush=True)
spark.stop()
