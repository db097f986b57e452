"""Batch change-data-capture from MySQL and MariaDB binlogs into Apache Iceberg, for Apache Airflow."""

from __future__ import annotations

__version__ = "0.1.0"
