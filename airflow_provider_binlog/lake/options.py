"""How a target table is written (:class:`TargetOptions`), the columns the options add, and what
the merges did to a table (:class:`TableCounts`).

Target columns added by options: ``_cdc_op`` (insert/update/delete/truncate), ``_cdc_ts`` (commit
time, UTC), ``_cdc_position`` (``file:pos`` of the event) with ``metadata_columns=True``, and
``_cdc_deleted`` (boolean) with ``soft_delete=True``, and the shard column (string) with
``shard_column=`` (see :mod:`.shards`). Append-only tables get every change as a row
with the metadata columns. A staged file of a keyed target also has ``_cdc_action`` (``U`` upsert,
``D`` delete), which never reaches the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from airflow_provider_binlog.lake.sql import parse_name
from airflow_provider_binlog.lake.types import BOOLEAN, STRING, TIMESTAMP, LakeColumn, TypeOptions

OP_COLUMN = "_cdc_op"
TS_COLUMN = "_cdc_ts"
POSITION_COLUMN = "_cdc_position"
DELETED_COLUMN = "_cdc_deleted"
ACTION_COLUMN = "_cdc_action"  # staging only: U (upsert) or D (delete)

META_COLUMNS = (
    LakeColumn(OP_COLUMN, STRING),
    LakeColumn(TS_COLUMN, TIMESTAMP),
    LakeColumn(POSITION_COLUMN, STRING),
)
"""The metadata columns, in the order they are staged and written."""

WriteMode = Literal["copy-on-write", "merge-on-read"]


@dataclass(frozen=True)
class TargetOptions:
    """How one target table is written.

    :param key_columns: key for tables without a primary key (or to override it).
    :param append_only: append every change as a row (with metadata columns) instead of merging.
    :param soft_delete: mark deleted rows ``_cdc_deleted = true`` instead of deleting them.
    :param metadata_columns: add ``_cdc_op``, ``_cdc_ts`` and ``_cdc_position``.
    :param partition_by: Iceberg partition fields at creation: ``col``, ``days(col)``, ``bucket(16, col)``...
    :param write_mode: ``merge-on-read`` (default: a MERGE writes the changed rows and delete files,
        its cost follows the change, not the table) or ``copy-on-write`` (rewrites the data files it
        touches, all of an unpartitioned table, for faster reads); set at creation. Merge-on-read
        tables need Iceberg's ``rewrite_data_files`` from time to time, as every MERGE adds data
        files and deletion vectors (``format-version`` 2 tables: position delete files, which
        ``rewrite_position_delete_files`` compacts). See :mod:`.ddl` for the table properties.
    :param table_properties: more Iceberg table properties at creation.
    :param types: type-mapping choices.
    :param count_changes: make ``inserted``/``updated``/``deleted`` the lake's own counts (rows the
        MERGE inserted, updated, deleted), found by one extra key-only join of the staged keys with
        the table per merge, which costs about as much as the MERGE itself; off, they are the row
        changes as the source reported them (see :class:`TableCounts`).
    :param on_schema_change: what a DDL statement on a source table does to this target: one of
        ``evolve`` / ``resnapshot`` / ``fail`` for every class of operation, or a mapping from class
        (``add_column``, ``drop_column``, ``rename_column``, ``modify_column``, ``drop_table``,
        ``recreate_table``, ``partition``, ``rename_table``, ``unknown``) to a choice
        (``drop_column`` also ``keep``, ``drop_table`` also ``drop``); ``None``: the merger's
        (by default ``evolve`` where the lake can apply the operation exactly, else ``resnapshot``,
        and ``fail`` for statements not understood). See
        :mod:`airflow_provider_binlog.canal.sql.operations` and docs/operations.md.
    :param shard_column: a string column written into every row with the value ``shard_value``
        gives its source, and part of the lake key (``MERGE ON`` key + shard column): several
        source tables or destinations (shards) then fill one lake table without their keys
        colliding, and a TRUNCATE, partition delete, DROP TABLE, re-snapshot or column fill of one
        shard touches that shard's rows only (see :mod:`.shards`).
    :param shard_value: the shard column's value: a template of ``{destination}``,
        ``{connection}`` (the operator's ``mysql_conn_id``), ``{schema}`` and ``{table}``.
    :param unique_keys: the keys are unique across every source of this target, so several
        sources may fill it without a shard column (a TRUNCATE or a column fill of one of them
        then stops the run: it cannot be told from the others' rows).
    """

    key_columns: tuple[str, ...] = ()
    append_only: bool = False
    soft_delete: bool = False
    metadata_columns: bool = False
    partition_by: tuple[str, ...] = ()
    write_mode: WriteMode = "merge-on-read"
    table_properties: Mapping[str, str] = field(default_factory=dict)
    types: TypeOptions = field(default_factory=TypeOptions)
    count_changes: bool = False
    on_schema_change: str | Mapping[str, str] | None = None
    shard_column: str | None = None
    shard_value: str = "{destination}:{schema}.{table}"
    unique_keys: bool = False


def option_columns(opts: TargetOptions) -> list[LakeColumn]:
    """The columns ``opts`` add to a target table, after its source columns."""
    meta: list[LakeColumn] = []
    if opts.shard_column:
        meta.append(LakeColumn(opts.shard_column, STRING))
    if opts.metadata_columns or opts.append_only:
        meta += META_COLUMNS
    if opts.soft_delete and not opts.append_only:
        meta.append(LakeColumn(DELETED_COLUMN, BOOLEAN))
    return meta


def options_for(
    options: TargetOptions | Mapping[str, TargetOptions] | None, target: str, parts: tuple[str, ...] | None
) -> TargetOptions:
    """The options of one target: ``options`` itself when it is one :class:`TargetOptions`, else the
    first entry whose key names the target (its name parts are ``parts``, or the key is ``target``,
    the quoted name, itself), else the defaults. The merger's lookup, and the drain's where it must
    agree with the merger (:mod:`..drain.before_images`).

    :raises ConfigurationError: a key that is not a table name.
    """
    if options is None:
        return TargetOptions()
    if isinstance(options, TargetOptions):
        return options
    for key, value in options.items():
        if parse_name(key) == parts or key == target:
            return value
    return TargetOptions()


@dataclass
class TableCounts:
    """What merges did to one target table.

    By default (``count_changes`` off) ``inserted``/``updated``/``deleted`` count the row changes the
    source reported and that were applied (INSERT, UPDATE and DELETE row images, before collapsing to
    the last change per key: a row inserted then updated in one chunk counts once in each). With
    ``count_changes`` on they are the lake's effect instead: rows that were new to the table, rows
    that existed and were overwritten, rows that existed and were removed. Either way ``deleted``
    also counts the rows a TRUNCATE removed, ``upserted`` the rows written after collapsing, and
    ``skipped`` the entries the table already held from an earlier attempt.
    """

    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    upserted: int = 0
    appended: int = 0
    truncated: int = 0
    skipped: int = 0
    commits: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))
