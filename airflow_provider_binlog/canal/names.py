"""Names of lake tables: multi-part names whose parts may be quoted with backticks.

A lake table name is written as in Spark SQL: parts separated by ``.``, a part in backticks may hold
dots, spaces and doubled backticks (``lake.db.`z.w``` is the three parts ``lake``, ``db``, ``z.w``).
:func:`parse_name` reads that form, :func:`quote_parts` writes it (every part quoted, for SQL) and
:func:`name_text` writes it for people and keys (only the parts that need it quoted), so that
``parse_name(name_text(parts)) == parts`` for any parts.

No Spark here: the canal layer fills route targets with these functions, the lake layer re-exports
them from :mod:`..lake.sql`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from airflow_provider_binlog.errors import ConfigurationError

_PLAIN = re.compile(r"[A-Za-z0-9_$]+")


def quote(name: str) -> str:
    """Quote one identifier part with backticks, doubling any backtick inside (``a`b`` -> ```a``b```)."""
    return "`" + name.replace("`", "``") + "`"


def quote_parts(parts: Sequence[str]) -> str:
    """Quote a multi-part name (``catalog.namespace.table``), every part in backticks."""
    return ".".join(quote(p) for p in parts)


def name_text(parts: Sequence[str]) -> str:
    """A multi-part name with only the parts that need it in backticks (``lake.db.`z.w```): letters,
    digits, ``_`` and ``$`` stay bare, anything else (dots, spaces, backticks, braces...) is quoted."""
    return ".".join(p if _PLAIN.fullmatch(p) else quote(p) for p in parts)


def parse_name(text: str) -> tuple[str, ...]:
    """Split a dotted name into parts; a part in backticks may hold dots and doubled backticks.

    ``lake.shop.orders`` -> ``("lake", "shop", "orders")``;
    ``lake.db.`a.b``c``` -> ``("lake", "db", "a.b`c")``. A bare part is stripped of surrounding
    blanks; a quoted part is kept exactly.

    :raises ConfigurationError: an empty part, a stray or unbalanced backtick.
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
