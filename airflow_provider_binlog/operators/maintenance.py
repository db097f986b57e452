"""BinlogLakeMaintenanceOperator: maintain lake tables as :mod:`..lake.maintenance` says.

Thin: parameters, the Spark session (as the load operator starts it), the summary as XCom and in the
task log, metrics through ``Stats`` (:func:`.metrics.emit_maintenance`).

**Assets.** The tables are the task's ``inlets`` (``iceberg://catalog/namespace/table``, the load's
names: :mod:`.assets`). No outlets by default: maintenance changes no row, so a consumer scheduled on
a table must not run again for it, and a maintenance DAG scheduled on the tables' assets (as
``dags/example_binlog_lake_maintenance.py``) would otherwise schedule itself.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


def lake_tables(tables: Any) -> list[str]:
    """The lake tables of ``tables``: a list of names, or a load's mapping (its targets)."""
    if isinstance(tables, str):
        return [t.strip() for t in tables.split(",") if t.strip()]
    if isinstance(tables, Mapping):
        return list(dict.fromkeys(tables.values()))
    return list(dict.fromkeys(tables))


class BinlogLakeMaintenanceOperator(BaseOperator):
    """Maintain lake tables: bounded history, compaction, manifests, orphans, when due.

    :param tables: lake tables (``catalog.namespace.table``), or a load's ``tables`` mapping.
    :param policy: a :class:`~..lake.maintenance.MaintenancePolicy`, a mapping of its fields, or its
        text form (``keep_snapshots=100,snapshot_age=3600``); default: the default policy.
    :param spark_master: Spark master (default ``$BINLOG_CDC_SPARK_MASTER`` or ``local[*]``).
    :param spark_conf: more Spark configuration.
    :param catalog: the Iceberg catalog name used in the tables.
    :param catalog_conn_id: as the load operator's (a JDBC catalog from an Airflow connection).
    :param warehouse: warehouse of the default Hadoop catalog (default ``$BINLOG_CDC_WAREHOUSE``).
    :param stop_spark: stop the SparkSession at the end.
    """

    template_fields: Sequence[str] = ("tables", "spark_master", "spark_conf", "warehouse")
    ui_color = "#e0f2fe"

    def __init__(
        self,
        *,
        tables: Any,
        policy: Any = True,
        spark_master: str | None = None,
        spark_conf: dict[str, str] | None = None,
        catalog: str = "lake",
        catalog_conn_id: str | None = None,
        warehouse: str | None = None,
        stop_spark: bool = True,
        **kwargs: Any,
    ) -> None:
        declare = "inlets" not in kwargs
        super().__init__(**kwargs)
        self.tables = tables
        from airflow_provider_binlog.lake.maintenance.policy import policy_of

        self.policy = policy_of(policy, light=False)
        if self.policy is None:
            raise ValueError("policy: a maintenance task needs a policy (True for the default)")
        if declare and "{{" not in str(tables):
            from airflow_provider_binlog.operators.assets import table_asset

            self.inlets = [table_asset(t) for t in lake_tables(tables)]
        self.spark_master = spark_master
        self.spark_conf = spark_conf
        self.catalog = catalog
        self.catalog_conn_id = catalog_conn_id
        self.warehouse = warehouse
        self.stop_spark = stop_spark

    def _spark(self) -> Any:
        from airflow_provider_binlog.hooks.lake import LakeHook

        return LakeHook(  # the load's catalog connection handling (its password never logged)
            "binlog-cdc-maintenance",
            self.spark_master,
            self.spark_conf,
            self.catalog,
            self.catalog_conn_id,
            self.warehouse,
        ).get_conn()

    def _report(self, level: int, line: str) -> None:
        self.log.log(level, "%s", line)

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_binlog.lake.maintenance import maintain
        from airflow_provider_binlog.lake.spark.session import stop_session
        from airflow_provider_binlog.operators.metrics import emit_maintenance

        assert self.policy is not None
        tables = lake_tables(self.tables)
        self.log.info("maintaining %s with %s", tables, self.policy)
        spark = self._spark()
        try:
            summary = maintain(spark, tables, self.policy, report=self._report)
        finally:
            if self.stop_spark:
                stop_session(spark)
        summary["policy"] = dataclasses.asdict(self.policy)
        self.log.info("maintenance summary: %s", json.dumps(summary, default=str))
        emit_maintenance(summary)
        return summary
