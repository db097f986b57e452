"""The project's one exception hierarchy.

Everything this package raises on purpose derives from :class:`BinlogCdcError`. Only the Airflow
layer turns these into Airflow exceptions. Messages never contain credentials.
"""

from __future__ import annotations


class BinlogCdcError(Exception):
    """Root of every error raised by airflow-provider-binlog."""


class ConfigurationError(BinlogCdcError):
    """A setting, connection or argument is invalid; the message says which and how to fix it."""
