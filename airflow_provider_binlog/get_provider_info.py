"""The provider's self-description, read by Airflow through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_provider_binlog import __version__


def get_provider_info() -> dict[str, Any]:
    """Describe this provider to Airflow's provider manager."""
    return {
        "package-name": "airflow-provider-binlog",
        "name": "Binlog CDC",
        "description": "Change-data-capture from MySQL/MariaDB binlogs into Apache Iceberg tables with Spark.",
        "versions": [__version__],
        "connection-types": [],
    }
