"""What a drain needs of the before images: the key columns of the table's target, nothing else.

A merge by key folds an update to the after image under its key, and a delete to its key alone
(:mod:`..lake.collapse`): of the before image it reads only the key, to see an update that changes
its key and to know which key a delete removes. So the run's instance decodes only those columns of
the before images (:data:`~..canal.convert.BeforeColumns`), about half of an UPDATE's values under
``binlog_row_image=FULL``. The key is the one the fold uses: the target's ``key_columns``, else the
table's primary key as its rows carry it.

Whole before images stay where anything else may read them:

* an append-only target writes a delete's before image as its row;
* a table that is not routed, or not to a known target, or without a key (the fold then stops with
  its own error, which names the table);
* a table whose name starts with ``_``: the shadow tables of online schema-change tools, and the
  copy rows they become (:mod:`..canal.online_copy`), are folded under the options of another
  target.

A before image that lacks a key column all the same stops the fold with
:class:`~..lake.errors.MissingKeyError`, never a wrong key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_provider_binlog.binlog.columns import TableSchema

if TYPE_CHECKING:
    from airflow_provider_binlog.canal.convert import BeforeColumns
    from airflow_provider_binlog.lake.options import TargetOptions


def key_columns_only(
    target_for: Callable[[str, str], str | None],
    target_options: TargetOptions | Mapping[str, TargetOptions] | None,
) -> BeforeColumns:
    """The drain's :data:`~..canal.convert.BeforeColumns` (see the module docstring).

    :param target_for: ``(schema, table) -> target or None`` (the routes).
    :param target_options: the run's options, for all targets or per target.
    """
    from airflow_provider_binlog.lake.options import options_for
    from airflow_provider_binlog.lake.sql import parse_name, quote_parts

    def before_columns(schema: str, table: str, table_schema: TableSchema) -> Sequence[str] | None:
        if table.startswith("_"):
            return None
        try:
            target = target_for(schema, table)
            if target is None:
                return None
            parts = parse_name(target)  # as the merger routes it (lake/routes.py:TargetRoutes.add)
            opts = options_for(target_options, quote_parts(parts), parts)
        except Exception:  # a name the merger refuses: whole images, and the merger says what is wrong
            return None
        if opts.append_only:
            return None
        return tuple(opts.key_columns or table_schema.primary_key) or None

    return before_columns
