"""Sharded sources: several source tables or destinations filling one lake table. Pure Python
(the session's side: :mod:`.shard_writers`, :mod:`.shard_actions`, :mod:`.shard_swap`).

A business split over shards (``orders`` on four servers, or ``orders_00``..``orders_15`` in one)
is one lake table. Each server is a destination of its own (its connection, cursor, marks and
``running`` node); tables of one server come in through a pattern route (``shop.orders_*`` ->
``lake.shop.orders``). Their keys are usually unique per shard only, so the target gets a **shard
column** (:class:`~.options.TargetOptions` ``shard_column="_shard"``): a string written into every
row, whose value names the row's source (``shard_value``, a template of ``{destination}``,
``{connection}``, ``{schema}``, ``{table}``; default ``{destination}:{schema}.{table}``), and part
of the lake key: pieces fold by (key, shard), the MERGE matches ``ON`` key + shard column.

Whatever one shard does to its rows without row events acts on that shard's rows only: the
predicate ``shard_column = <its value>`` (:func:`scope_sql`) scopes a TRUNCATE, a TRUNCATE/DROP
PARTITION, a DROP TABLE (its rows are deleted, the shared table stays), the fill of an ADD COLUMN
with a default, a DROP COLUMN (the shard's values become NULL, the column stays for the others), a
RENAME COLUMN (the shard's values move to the new column), the clamps and NULL fills of a type
change (a rewrite that changes the column's type for every shard stops the run instead), and a
re-snapshot (:func:`swap_sql`: one ``MERGE`` deleting the shard's rows and inserting the staged
ones, one commit). A RENAME between two names routed to the table relabels the rows
(:class:`RelabelShard`). A column one shard added is added once; rows of shards that do not have it yet
hold NULL in it, as their source has no value.

Table properties (written at creation, :func:`bind`, also without a shard column; the run start
adds its own writer line to a table created before writer lines were written at creation):

==============================  =====================================================================
``binlog-cdc.shard-column``     the shard column (absent: the table has none)
``binlog-cdc.writer.<dest>``    one per destination writing to the table: its shard value template
                                with ``{destination}``/``{connection}`` filled in (``""`` without a
                                shard column)
==============================  =====================================================================

Collisions are refused before anything is written: when the DAG is parsed, two sources of one
destination routed to one target (a pattern whose target lacks ``{table}``, or two routes naming
one target) need a shard column whose value tells them apart, or ``unique_keys=True``
(:func:`check_routes`); at the run start, a second destination writing into a table that another
destination fills needs the table's shard column, and shard values distinct from the other
writers' (:func:`.shard_writers.check_merger`).

Limits: a snapshot (``snapshot="initial"``) of several source tables of ONE destination into one
lake table is refused (its chunk marks are per destination and table); take it per destination
with one source table each, or read those tables from the binlog only.
"""

from __future__ import annotations

import dataclasses
import re
import string
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.options import TargetOptions
from airflow_provider_binlog.lake.sql import quote

SHARD_COLUMN_PROPERTY = "binlog-cdc.shard-column"
WRITER_PREFIX = "binlog-cdc.writer."
FIELDS = ("destination", "connection", "schema", "table")
"""The placeholders a shard value may use."""


def _parse(template: str) -> list[tuple[str, str | None]]:
    """``[(literal text, field or None)]`` of a template; only :data:`FIELDS`, no format spec."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ConfigurationError(f"shard_value {template!r}: {exc}") from None
    out = []
    for text, name, spec, conversion in parsed:
        if name is not None and (name not in FIELDS or spec or conversion):
            raise ConfigurationError(
                f"shard_value {template!r} may only use {', '.join('{' + f + '}' for f in FIELDS)}"
            )
        out.append((text, name))
    return out


def fields(template: str) -> set[str]:
    """The placeholders ``template`` uses."""
    return {name for _text, name in _parse(template) if name is not None}


def fill(template: str, **values: str) -> str:
    """Fill the placeholders named in ``values``; others stay as they are (braces of values escaped)."""
    out = []
    for text, name in _parse(template):
        out.append(text.replace("{", "{{").replace("}", "}}"))
        if name is None:
            continue
        if name in values:
            out.append(values[name].replace("{", "{{").replace("}", "}}"))
        else:
            out.append("{" + name + "}")
    return "".join(out)


def bind(opts: TargetOptions, destination: str, connection: str | None = None) -> TargetOptions:
    """``opts`` with ``{destination}`` (and ``{connection}`` when given) filled into the shard value,
    and the table properties a new table records (:data:`SHARD_COLUMN_PROPERTY`, this
    destination's writer line; without a shard column the writer line alone, value ``""``, so a
    second destination is refused from the creator's first commit on). The same options again when
    already bound."""
    if not opts.shard_column:
        if WRITER_PREFIX + destination in opts.table_properties:
            return opts
        plain = {**opts.table_properties, WRITER_PREFIX + destination: ""}
        return dataclasses.replace(opts, table_properties=plain)
    values = {"destination": destination}
    if connection is not None:
        values["connection"] = connection
    value = fill(opts.shard_value, **values)
    props = dict(opts.table_properties)
    props[SHARD_COLUMN_PROPERTY] = opts.shard_column
    props[WRITER_PREFIX + destination] = value
    if value == opts.shard_value and props == dict(opts.table_properties):
        return opts
    return dataclasses.replace(opts, shard_value=value, table_properties=props)


def shard_keys(keys: Iterable[str], opts: TargetOptions) -> tuple[str, ...]:
    """The lake key of a target: the source key, then the shard column when there is one."""
    keys = tuple(keys)
    return (*keys, opts.shard_column) if opts.shard_column and keys else keys


class Shard:
    """The shard value of each source table of one target (cached per table).

    :param column: the shard column.
    :param template: the shard value with ``{destination}``/``{connection}`` filled in (:func:`bind`).
    :raises ConfigurationError: ``{connection}`` not filled in (only the operator knows it).
    """

    __slots__ = ("_values", "column", "template")

    def __init__(self, column: str, template: str) -> None:
        left = fields(template) - {"schema", "table"}
        if left:
            raise ConfigurationError(
                f"shard_value {template!r}: {', '.join(sorted('{' + f + '}' for f in left))} is not known "
                "here (the operator fills {connection} and the merger {destination})"
            )
        self.column = column
        self.template = template
        self._values: dict[tuple[str, str], str] = {}

    def value(self, schema: str, table: str) -> str:
        key = (schema, table)
        found = self._values.get(key)
        if found is None:
            found = self._values[key] = self.template.format(schema=schema, table=table)
        return found

    def __call__(self, schema: str, table: str) -> str:
        return self.value(schema, table)


def shard_of(opts: TargetOptions) -> Shard | None:
    """The target's :class:`Shard` (``None``: no shard column)."""
    return Shard(opts.shard_column, opts.shard_value) if opts.shard_column else None


def string_literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def scope_sql(
    opts: TargetOptions, schema: str, table: str | None, sources: int, what: str, target: str
) -> str | None:
    """The predicate of the rows of source ``schema.table`` in its target (``None``: every row is
    that source's), for a statement that acts on the rows of one source without row events.

    :param sources: how many source tables of this destination are routed to the target.
    :param what: the statement, for the error.
    :raises LakeError: the target's rows cannot be told apart by source (no shard column with
        several sources or ``unique_keys``; a shard value without ``{table}`` with several tables).
    """
    shard = shard_of(opts)
    source = f"{schema}.{table}"
    if shard is None:
        if sources <= 1 and not opts.unique_keys:
            return None
        raise LakeError(
            f"{what} of {source} cannot be applied to the lake table {target}: other sources fill it too "
            "(unique_keys=True or several routed tables) and it has no shard column to tell their rows "
            "apart; give the target TargetOptions(shard_column=...) (a new lake table), or exclude= the "
            "table and re-snapshot"
        )
    if sources > 1 and "table" not in fields(shard.template):
        raise LakeError(
            f"{what} of {source} cannot be applied to the lake table {target}: its shard value "
            f"{shard.template!r} is the same for the {sources} tables of this destination routed to it; "
            "put {table} into shard_value"
        )
    return f"{quote(shard.column)} = {string_literal(shard.value(schema, table or ''))}"


@dataclasses.dataclass(frozen=True)
class RelabelShard:
    """A lake action: the rows of shard value ``old`` now have ``new`` (a table renamed within one
    target whose shard value names the table): ``UPDATE ... SET shard = new WHERE shard = old``, the
    same table when run again."""

    old: str
    new: str


def shard_rename(
    stmt: Any, table: tuple[str, str], shard: Shard | None, route: Any, source: str
) -> RelabelShard | None:
    """The relabelling of a RENAME (``RENAME TABLE``, ``ALTER TABLE ... RENAME TO``) that gives
    ``table`` the rows of a table routed to the same target, when their shard values differ
    (``None``: nothing to relabel).

    :param stmt: the parsed statement (:func:`..canal.sql.ddl.parse_ddl`).
    :param route: ``(schema, table) -> target or None``.
    :raises LakeError: two such tables swap names (a relabel could not be run twice to the same table).
    """
    from airflow_provider_binlog.canal.sql.operations import rename_origins

    renames = getattr(stmt, "renames", None)
    if shard is None or not renames or route is None:
        return None
    origins = rename_origins(renames)
    came_from = origins.get(table)
    if came_from is None or route(*came_from) is None or route(*came_from) != route(*table):
        return None
    old, new = shard.value(*came_from), shard.value(*table)
    if old == new:
        return None
    if any(origins.get(other) == table for other in origins) or any(
        shard.value(*o) == new for n, o in origins.items() if n != table and route(*n) == route(*table)
    ):
        raise LakeError(
            f"{source}: a RENAME swaps the names of tables that fill one lake table with a shard value "
            f"naming the table ({shard.template!r}); their rows cannot be relabelled exactly. Re-snapshot "
            "both tables (binlog-cdc resnapshot), or use a shard value without {table}"
        )
    return RelabelShard(old, new)


# ---- parse time: the routes of one destination ----------------------------------------------------


def _options_for(options: TargetOptions | Mapping[str, TargetOptions] | None, target: str) -> TargetOptions:
    if options is None:
        return TargetOptions()
    if isinstance(options, TargetOptions):
        return options
    from airflow_provider_binlog.lake.sql import parse_name

    try:
        parts = parse_name(target)
    except Exception:
        parts = ()
    for key, value in options.items():
        if key == target:
            return value
        try:
            if parse_name(key) == parts:
                return value
        except Exception:
            continue
    return TargetOptions()


def check_routes(
    routes: Mapping[str, str], options: TargetOptions | Mapping[str, TargetOptions] | None
) -> None:
    """Refuse routes under which two source tables of one destination would fill one lake table
    with keys that may collide (see the module docstring); also a bad ``shard_value``.

    :raises ConfigurationError: naming the sources, the target and the remedies.
    """
    from airflow_provider_binlog.canal.routing import shared_targets

    opts_list = [options] if isinstance(options, TargetOptions) else list((options or {}).values())
    for opts in opts_list:
        if opts.shard_column:
            _parse(opts.shard_value)
    for target, sources in shared_targets(routes).items():
        opts = _options_for(options, target)
        if opts.append_only:
            continue  # a log of changes: rows never collide
        names = ", ".join(repr(s) for s in sources)
        if not opts.shard_column:
            if opts.unique_keys:
                continue
            raise ConfigurationError(
                f"tables: {names} all fill the lake table {target!r}, so rows of different source tables "
                "with the same key would overwrite each other; give the target a shard column, "
                f"target_options={{{target!r}: "
                'TargetOptions(shard_column="_shard", shard_value="{table}")} (part of the lake key), '
                "or TargetOptions(unique_keys=True) when the keys are unique across "
                "those tables"
            )
        used = fields(opts.shard_value)
        needed = {"table"} | ({"schema"} if _schemas_differ(sources) else set())
        if not needed <= used and not opts.unique_keys:
            raise ConfigurationError(
                f"tables: {names} all fill the lake table {target!r}, whose shard_value "
                f"{opts.shard_value!r} does not tell their tables apart; use "
                + " and ".join("{" + n + "}" for n in sorted(needed))
                + " in it, or TargetOptions(unique_keys=True) when the keys are unique across those tables"
            )


def _schemas_differ(sources: list[str]) -> bool:
    from airflow_provider_binlog.canal.routing import is_regex_source, source_parts

    schemas = set()
    for source in sources:
        if is_regex_source(source):  # a literal schema before the dot, else any
            found = re.match(r"\^?([A-Za-z0-9_$]+)(?:\\\.|\.)", source)
            schemas.add(found.group(1).lower() if found else "*")
        else:
            schemas.add(source_parts(source)[0].lower())
    return len(schemas) > 1 or any(c in s for s in schemas for c in "*?")


# ---- run start: the destinations writing to one table ----------------------------------------------


def writers_problem(
    props: Mapping[str, str], display: str, destination: str, opts: TargetOptions
) -> str | None:
    """Why ``destination`` may not write into a table with these properties (``None``: it may)."""
    recorded = props.get(SHARD_COLUMN_PROPERTY) or None
    others = {k[len(WRITER_PREFIX) :]: v for k, v in props.items() if k.startswith(WRITER_PREFIX)}
    others.pop(destination, None)
    names = ", ".join(sorted(others))
    if opts.shard_column and recorded is None:
        return (
            f"destination {destination}: the lake table {display} has no shard column (it was created "
            f"without one{', filled by ' + names if names else ''}), so its rows carry no shard value and "
            f"shard_column={opts.shard_column!r} cannot be keyed on; load it into a new table, or drop the "
            "lake table and snapshot every shard again"
        )
    if recorded is not None and opts.shard_column != recorded:
        return (
            f"destination {destination}: the lake table {display} has the shard column {recorded!r} "
            f"(writers: {names or 'none other'}); give this target TargetOptions(shard_column={recorded!r}) "
            "with a shard_value of its own"
        )
    if not others:
        return None
    if not opts.shard_column:
        if opts.unique_keys:
            return None
        from airflow_provider_binlog.lake.write.merge_sql import sql_string

        unset = ", ".join(sql_string(WRITER_PREFIX + d) for d in sorted(others))
        return (
            f"destinations {destination} and {names} both write into the lake table {display}, which has "
            "no shard column: rows of different destinations with the same key would overwrite each other. "
            'Load the shards into a table with TargetOptions(shard_column="_shard", '
            'shard_value="{destination}"), or give both destinations TargetOptions(unique_keys=True) for it '
            "when the keys are unique across them. "
            f"If {names} no longer write{'s' if len(others) == 1 else ''} to it (the table was handed "
            f"over to {destination}): ALTER TABLE {display} UNSET TBLPROPERTIES ({unset})"
        )
    same = sorted(d for d, v in others.items() if v == opts.shard_value)
    if same:
        return (
            f"destinations {destination} and {', '.join(same)} write the same shard values "
            f"({opts.shard_value!r}) into the lake table {display}: their rows would collide; put "
            "{destination} or {connection} into shard_value"
        )
    return None


# ---- re-snapshot of one shard ------------------------------------------------------------------------


def swap_sql(target: str, staging: str, columns: Iterable[str], scope: str) -> str:
    """One ``MERGE`` replacing the rows of one shard (``scope``) with the staging table's rows, in one
    commit: every staged row inserted, every target row of the shard deleted, other shards untouched.

    :param columns: the staging table's columns (all in the target).
    """
    cols = [quote(c) for c in columns]
    return (
        f"MERGE INTO {target} t USING {staging} s ON false "
        f"WHEN NOT MATCHED THEN INSERT ({', '.join(cols)}) VALUES ({', '.join('s.' + c for c in cols)}) "
        f"WHEN NOT MATCHED BY SOURCE AND t.{scope} THEN DELETE"
    )


def bind_options(
    options: TargetOptions | Mapping[str, TargetOptions] | None, destination: str, connection: str | None
) -> TargetOptions | Mapping[str, TargetOptions] | None:
    """:func:`bind` for the operator's ``target_options`` (one for all targets, or per target)."""
    if options is None:
        return None
    if isinstance(options, TargetOptions):
        return bind(options, destination, connection)
    return {k: bind(v, destination, connection) for k, v in options.items()}
