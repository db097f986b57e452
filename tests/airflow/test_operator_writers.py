"""Two destinations into one lake table without a shard column, through BinlogToSparkOperator against
the real MariaDB, ZooKeeper and Spark: the second is refused from the creator's first run on (before
the creator's second run), naming the table, both destinations and the remedies; nothing of it is
written, by the binlog or by a snapshot; the remedy ``unique_keys=True`` then lets it in."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from airflow_harness import Shop, lake_verify, make_context

from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.write.merge import TargetOptions
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_second_destination_is_refused_after_the_creators_first_run(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer
) -> None:
    shop.changes(120)
    ns = f"writers_{uuid.uuid4().hex[:8]}"
    tables = {"shop.orders": f"lake.{ns}.orders"}

    def op(destination: str, **kw: Any) -> BinlogToSparkOperator:
        return BinlogToSparkOperator(
            task_id="load", destination=f"{ns}-{destination}", tables=tables, warehouse=spark_warehouse,
            spark_master="local[2]", stop_spark=False, **kw,
        )  # fmt: skip

    def history() -> int:
        return int(spark.sql(f"SELECT count(*) FROM lake.{ns}.orders.snapshots").collect()[0][0])

    op("a", start_from=shop.start_from).execute(make_context(run_id="a1"))
    assert all(d.equal for d in lake_verify(mariadb, spark, tables))
    before = history()
    after_create = shop.head()  # b starts after the CREATE TABLE (several sources cannot take it)
    shop.changes(20)  # something for b to write
    for kw in ({"start_from": after_create}, {"snapshot": "initial"}):
        with pytest.raises(LakeError) as refused:
            op("b", **kw).execute(make_context(run_id="b1"))
        text = str(refused.value)
        assert f"destinations {ns}-b and {ns}-a both write into the lake table lake.{ns}.orders" in text, text
        assert "unique_keys=True" in text and 'shard_column="_shard"' in text, text
        assert history() == before, kw  # nothing written, nothing emptied

    # the remedy for keys unique across the destinations (here: the same source, the same rows)
    shop.changes(40)
    op("b", target_options=TargetOptions(unique_keys=True)).execute(make_context(run_id="b2"))
    with pytest.raises(LakeError, match=f"{ns}-a and {ns}-b both write"):  # both need it
        op("a").execute(make_context(run_id="a2"))
    op("a", target_options=TargetOptions(unique_keys=True)).execute(make_context(run_id="a3"))
    assert all(d.equal for d in lake_verify(mariadb, spark, tables))
