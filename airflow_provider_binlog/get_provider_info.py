"""The provider's self-description, read by Airflow through the ``apache_airflow_provider`` entry point.

Connection types: ``zookeeper`` and ``canal`` (a canal server to read from) always; ``mysql`` only
while the official MySQL provider is not installed (see :mod:`.hooks.mysql`: Airflow keeps the first
registration of a type and would give ours to every ``mysql`` connection). The forms
(``conn-fields``, ``ui-field-behaviour``) come from :mod:`.hooks.forms`; this module imports no Airflow
and no hook.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_binlog import __version__
from airflow_provider_binlog.hooks import forms


def connection_types() -> list[dict[str, Any]]:
    """The ``connection-types`` entries (``mysql`` left to the official provider when it is installed)."""
    types: list[dict[str, Any]] = [
        {
            "connection-type": "zookeeper",
            "hook-class-name": "airflow_provider_binlog.hooks.zookeeper.ZooKeeperHook",
            "hook-name": "ZooKeeper (binlog CDC meta store)",
            **forms.ZOOKEEPER,
        },
        {
            "connection-type": "canal",
            "hook-class-name": "airflow_provider_binlog.hooks.canal.CanalHook",
            "hook-name": "canal server (binlog CDC source)",
            **forms.CANAL,
        },
    ]
    if not forms.official_mysql_provider():
        types.append(
            {
                "connection-type": "mysql",
                "hook-class-name": "airflow_provider_binlog.hooks.mysql.MySqlSourceHook",
                "hook-name": "MySQL (binlog CDC source)",
                **forms.MYSQL,
            }
        )
    return types


def get_provider_info() -> dict[str, Any]:
    """Describe this provider to Airflow's provider manager."""
    return {
        "package-name": "airflow-provider-binlog",
        "name": "Binlog CDC",
        "description": "Change-data-capture from MySQL/MariaDB binlogs into Apache Iceberg with Spark.",
        "versions": [__version__],
        "connection-types": connection_types(),
        "integrations": [
            {"integration-name": "MySQL binlog CDC", "tags": ["software"]},
        ],
        "hooks": [
            {
                "integration-name": "MySQL binlog CDC",
                "python-modules": [
                    "airflow_provider_binlog.hooks.binlog",
                    "airflow_provider_binlog.hooks.canal",
                    "airflow_provider_binlog.hooks.mysql",
                    "airflow_provider_binlog.hooks.zookeeper",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": "MySQL binlog CDC",
                "python-modules": [
                    "airflow_provider_binlog.operators.binlog_to_spark",
                    "airflow_provider_binlog.operators.maintenance",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": "MySQL binlog CDC",
                "python-modules": ["airflow_provider_binlog.sensors.binlog"],
            }
        ],
        "triggers": [
            {
                "integration-name": "MySQL binlog CDC",
                "python-modules": ["airflow_provider_binlog.triggers.binlog"],
            }
        ],
    }
