"""Errors of the lake layer (Spark, type mapping, staging, merge)."""

from __future__ import annotations

from airflow_provider_binlog.errors import BinlogCdcError, ConfigurationError


class LakeError(BinlogCdcError):
    """Spark/Iceberg setup or a merge failed."""


class TypeMappingError(LakeError, ConfigurationError):
    """A MySQL column has no Iceberg type under the chosen options."""


class SchemaEvolutionError(LakeError):
    """A source schema change cannot be applied to the Iceberg table (names the column and both types)."""


class MissingKeyError(LakeError, ConfigurationError):
    """A table has no primary key and no key columns were configured."""


class LakeStatementError(LakeError):
    """A Spark statement committing changes to a lake table failed (not a conflict with another
    writer): the message names the table and the changes' ``file:pos`` range, its first line is
    ours; Spark's (Java) error is the ``__cause__``, its stack trace never in the message."""
