"""LakeHook: the Spark session and the Iceberg catalog connection of a task (the operators hand them here,
as Airflow's Spark provider's operators hand theirs to its hook).

``catalog_conn_id`` makes ``catalog`` an Iceberg JDBC catalog
(:func:`~..lake.spark.session.jdbc_catalog_conf`), read when the task runs: type ``postgres`` (host,
port, schema = database, login, password) or ``jdbc`` (host = ``jdbc:postgresql://...``); extras
``warehouse`` (default: the task's, else ``warehouse``) and ``catalog_properties``. Its settings win over
the same keys of ``spark_conf``; they hold its password, so they never reach a log line, a rendered
field or an XCom. Without a master or warehouse the settings' ``spark_master`` and ``warehouse``
(``BINLOG_CDC_SPARK_MASTER``, ``BINLOG_CDC_WAREHOUSE``) apply.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_binlog.settings import current as switches


class LakeHook(BaseHook):
    """A task's SparkSession with its Iceberg catalog.

    :param app_name: the Spark application's name.
    :param spark_master: Spark master (default ``$BINLOG_CDC_SPARK_MASTER`` or ``local[*]``).
    :param spark_conf: more Spark configuration.
    :param catalog: the Iceberg catalog name.
    :param catalog_conn_id: the connection of a JDBC catalog (see the module docstring).
    :param warehouse: warehouse of the default Hadoop catalog (default ``$BINLOG_CDC_WAREHOUSE``).
    """

    hook_name = "Iceberg lake through Spark"

    def __init__(
        self,
        app_name: str,
        spark_master: str | None = None,
        spark_conf: dict[str, str] | None = None,
        catalog: str = "lake",
        catalog_conn_id: str | None = None,
        warehouse: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.app_name = app_name
        self.spark_master = spark_master
        self.spark_conf = spark_conf
        self.catalog = catalog
        self.catalog_conn_id = catalog_conn_id
        self.warehouse = warehouse

    def __repr__(self) -> str:
        return f"LakeHook(catalog={self.catalog!r}, catalog_conn_id={self.catalog_conn_id!r})"

    def get_conn(self) -> Any:
        """Start (or join) the SparkSession."""
        from airflow_provider_binlog.lake.spark.session import create_session

        warehouse = self.warehouse or switches().warehouse
        conf = dict(self.spark_conf or {})
        if self.catalog_conn_id:
            conf.update(self.catalog_conf(warehouse))
        return create_session(
            app_name=self.app_name,
            master=self.spark_master or switches().spark_master,
            warehouse=warehouse,
            catalog=self.catalog,
            conf=conf,
        )

    def catalog_conf(self, warehouse: str | None) -> dict[str, str]:
        """The JDBC catalog settings of ``catalog_conn_id`` (holding its password: never log them)."""
        from airflow_provider_binlog.lake.spark.session import default_warehouse, jdbc_catalog_conf, jdbc_uri

        conn_id = str(self.catalog_conn_id)
        conn = BaseHook.get_connection(conn_id)
        extra = conn.extra_dejson
        host = conn.host or ""
        try:
            if conn.conn_type == "jdbc" or host.startswith("jdbc:"):
                uri = host
            elif conn.conn_type in ("postgres", "postgresql"):
                uri = jdbc_uri(host, conn.port, conn.schema or "")
            else:
                raise ValueError(f"its type is {conn.conn_type!r}, not 'postgres' or 'jdbc'")
            return jdbc_catalog_conf(
                uri, conn.login or "", conn.password or "", extra.get("warehouse") or warehouse
                or default_warehouse(), self.catalog, dict(extra.get("catalog_properties") or {}),
            )  # fmt: skip
        except ValueError as exc:
            raise ValueError(f"catalog connection {conn_id!r}: {exc}") from None
