"""The provider's self-description, read by Airflow through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_provider_binlog import __version__


def get_provider_info() -> dict[str, Any]:
    """Describe this provider to Airflow's provider manager."""
    return {
        "package-name": "airflow-provider-binlog",
        "name": "Binlog CDC",
        "description": "Change-data-capture from MySQL/MariaDB binlogs into Apache Iceberg with Spark.",
        "versions": [__version__],
        "connection-types": [
            {
                "connection-type": "zookeeper",
                "hook-class-name": "airflow_provider_binlog.hooks.zookeeper.ZooKeeperHook",
            },
        ],
        "integrations": [
            {"integration-name": "MySQL binlog CDC", "tags": ["software"]},
        ],
        "hooks": [
            {
                "integration-name": "MySQL binlog CDC",
                "python-modules": [
                    "airflow_provider_binlog.hooks.binlog",
                    "airflow_provider_binlog.hooks.zookeeper",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": "MySQL binlog CDC",
                "python-modules": ["airflow_provider_binlog.operators.binlog_to_spark"],
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
