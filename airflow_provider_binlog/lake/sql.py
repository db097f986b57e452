"""Identifiers in Spark SQL: every name that reaches a statement goes through :func:`quote`.

The quoting and parsing of multi-part names live in :mod:`..canal.names` (routing fills targets
with them below Spark); they are re-exported here for the lake layer.
"""

from __future__ import annotations

from airflow_provider_binlog.canal.names import name_text, parse_name, quote, quote_parts
from airflow_provider_binlog.canal.routing import InvalidTargetError, invalid_target, target_parts
from airflow_provider_binlog.errors import ConfigurationError

__all__ = ["check_target", "name_text", "parse_name", "quote", "quote_parts"]


def check_target(target: str, source: str) -> tuple[str, ...]:
    """Parse the target of a route (``{schema}``/``{table}`` filled with sample names) before anything
    is read, so a bad name fails at once, naming the route, rather than at its first change.

    :raises ConfigurationError: not a ``[catalog.]namespace.table`` name.
    """
    try:
        parts = tuple(p.format(schema="schema", table="table") for p in target_parts(target, source))
    except InvalidTargetError:
        raise
    except ConfigurationError as exc:
        problem = str(exc)
    else:
        if len(parts) >= 2:
            return parts
        problem = "a table needs a namespace"
    raise invalid_target(target, source, problem)
