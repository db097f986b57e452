"""Identifiers in Spark SQL: every name that reaches a statement goes through :func:`quote`."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_binlog.errors import ConfigurationError


def quote(name: str) -> str:
    """Quote one identifier part with backticks, doubling any backtick inside (``a`b`` -> ```a``b```)."""
    return "`" + name.replace("`", "``") + "`"


def quote_parts(parts: Sequence[str]) -> str:
    """Quote a multi-part name (``catalog.namespace.table``)."""
    return ".".join(quote(p) for p in parts)


def parse_name(text: str) -> tuple[str, ...]:
    """Split a dotted name into parts; a part in backticks may hold dots and doubled backticks.

    ``lake.shop.orders`` -> ``("lake", "shop", "orders")``;
    ``lake.db.`a.b``c``` -> ``("lake", "db", "a.b`c")``.
    """
    parts: list[str] = []
    i, n = 0, len(text)
    while i <= n:
        if i < n and text[i] == "`":
            buf: list[str] = []
            i += 1
            while True:
                if i >= n:
                    raise ConfigurationError(f"unbalanced backtick in table name {text!r}")
                if text[i] == "`":
                    if i + 1 < n and text[i + 1] == "`":
                        buf.append("`")
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(text[i])
                i += 1
            parts.append("".join(buf))
        else:
            j = text.find(".", i)
            j = n if j < 0 else j
            part = text[i:j].strip()
            if not part or "`" in part:
                raise ConfigurationError(f"invalid table name {text!r}: empty or stray backtick in a part")
            parts.append(part)
            i = j
        if i < n and text[i] != ".":
            raise ConfigurationError(f"invalid table name {text!r}: expected '.' at offset {i}")
        i += 1
    return tuple(parts)


def check_target(target: str, source: str) -> tuple[str, ...]:
    """Parse the target of a route (``{schema}``/``{table}`` filled with sample names) before anything
    is read, so a bad name fails at once, naming the route, rather than at its first change.

    :raises ConfigurationError: not a ``[catalog.]namespace.table`` name.
    """
    try:
        parts = parse_name(target.format(schema="schema", table="table"))
    except ConfigurationError as exc:
        problem = str(exc)
    else:
        if len(parts) >= 2:
            return parts
        problem = "a table needs a namespace"
    raise ConfigurationError(
        f"tables: the target {target!r} of {source!r} is not a valid Iceberg table name ({problem}); "
        "write it as catalog.namespace.table, e.g. 'lake.shop.orders', with any part that holds dots "
        "or backticks in backticks"
    )
