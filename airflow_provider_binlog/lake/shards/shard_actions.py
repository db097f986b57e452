"""The lake actions of one shard's DDL statement on a lake table that several sources fill (see
:mod:`.shards`): each data statement of :mod:`.actions` acts on that shard's rows only, and what
would change the other shards' columns is done for this shard's rows instead.

=====================  ============================================================================
action                 on a shared table
=====================  ============================================================================
ADD COLUMN             the column added once (whoever comes first); its fill ``UPDATE ... WHERE
                       shard``: rows of shards that have not added it yet keep NULL, as their
                       source has no such column
DROP COLUMN            ``UPDATE t SET c = NULL WHERE shard``: the column stays for the others
RENAME TABLE a TO b    (both routed to the target, shard value naming the table) the shard's rows
                       relabelled: ``UPDATE t SET shard = 'b' WHERE shard = 'a'``; names swapped
                       between such tables stop the run
RENAME COLUMN          the new column added with the old one's type, then
                       ``UPDATE t SET new = coalesce(old, new), old = NULL WHERE shard`` (the same
                       table when run again)
type change            an in-place widening as before (it holds every shard's values); its clamp
                       and NULL fill scoped; a rewrite through a temporary column stops the run
TRUNCATE, DROP TABLE,  ``DELETE ... WHERE shard`` (soft deletes: ``UPDATE ... WHERE shard``); the
the table recreated    shared table is never dropped, and a recreated table's columns are only
                       added, never dropped
TRUNCATE/DROP          ``DELETE ... WHERE shard AND (partition bounds)``
PARTITION
=====================  ============================================================================

Every statement converges from whatever a crash left, as in :mod:`.actions`; the mark comes last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_provider_binlog.canal.sql import operations as ops
from airflow_provider_binlog.canal.sql import partitions
from airflow_provider_binlog.faults import failpoint
from airflow_provider_binlog.lake.ddl.actions import DdlActions, predicate_sql, sql_literal
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.options import DELETED_COLUMN, TargetOptions, option_columns
from airflow_provider_binlog.lake.shards.shards import RelabelShard, string_literal
from airflow_provider_binlog.lake.sql import quote
from airflow_provider_binlog.lake.types import LakeColumn, map_column, map_columns, widening
from airflow_provider_binlog.lake.write import merge_sql


class ScopedActions(DdlActions):
    """:class:`~.actions.DdlActions` acting on one shard's rows (see the module docstring)."""

    def run_scoped(
        self,
        target: str,
        actions: Sequence[ops.LakeAction],
        opts: TargetOptions,
        props: Mapping[str, str],
        scope: str | None,
        problem: str | None,
    ) -> None:
        """Run ``actions`` on the rows ``scope`` selects, then write the mark.

        :param scope: the shard's predicate (:func:`.shards.scope_sql`); ``None`` with ``problem``:
            the rows cannot be told apart, and an action that touches rows raises ``problem``.
        """
        try:
            if not self._exists(target):
                return
            for action in actions:
                self._scoped(target, action, opts, scope, problem)
                failpoint("ddl_action")
            self._mark(target, props)
        finally:
            self.tables.forget(target)

    def _need(self, scope: str | None, problem: str | None) -> str:
        if scope is None:
            raise LakeError(problem or "no shard scope")
        return scope

    def _scoped(
        self,
        target: str,
        action: ops.LakeAction | RelabelShard,
        opts: TargetOptions,
        scope: str | None,
        problem: str | None,
    ) -> None:
        sql = self.spark.sql
        if isinstance(action, RelabelShard):  # a table renamed within the target (lake.shards.shards)
            column = quote(str(opts.shard_column))
            to_value, from_value = string_literal(action.new), string_literal(action.old)
            sql(f"UPDATE {target} SET {column} = {to_value} WHERE {column} = {from_value}")
            return
        if isinstance(action, ops.AddColumn):
            lake = map_column(action.column, opts.types, target)
            if self._column(target, action.name) is None:
                sql(merge_sql.add_column_sql(target, LakeColumn(action.name, lake)))
            if action.fill is not None:  # the shard's rows were all written before the column
                where = self._need(scope, problem)
                value = sql_literal(action.fill, lake)
                sql(f"UPDATE {target} SET {quote(action.name)} = {value} WHERE {where}")
        elif isinstance(action, ops.DropColumn):
            name = self._column(target, action.name)
            if name is not None:
                sql(f"UPDATE {target} SET {quote(name)} = NULL WHERE {self._need(scope, problem)}")
        elif isinstance(action, ops.RenameColumn):
            where = self._need(scope, problem)
            old, new = self._column(target, action.old), self._column(target, action.new)
            if old is None:
                return  # not in the lake: the next piece adds the new column
            if new is None:
                type_sql = self._column_type(target, old)
                sql(f"ALTER TABLE {target} ADD COLUMN {quote(action.new)} {type_sql}")
                new = action.new
            sql(
                f"UPDATE {target} SET {quote(new)} = coalesce({quote(old)}, {quote(new)}), "
                f"{quote(old)} = NULL WHERE {where}"
            )
        elif isinstance(action, ops.ChangeColumn):
            self._change_scoped(target, action, opts, self._need(scope, problem))
        elif isinstance(action, ops.EmptyTable | ops.DropTable):
            self._empty_scoped(target, opts, self._need(scope, problem))
        elif isinstance(action, partitions.DeleteRows):
            where = f"{self._need(scope, problem)} AND ({predicate_sql(action, opts, target)})"
            self._check_dates(target, action, opts)
            if opts.soft_delete:
                deleted = quote(DELETED_COLUMN)
                sql(f"UPDATE {target} SET {deleted} = true WHERE {deleted} IS DISTINCT FROM true AND {where}")
            else:
                sql(f"DELETE FROM {target} WHERE {where}")
        elif isinstance(action, ops.RestartTable):
            self._empty_scoped(target, opts, self._need(scope, problem))
            if action.schema is not None:  # columns only added: the other shards keep theirs
                existing = self._columns(target)
                for col in [*map_columns(action.schema.columns, opts.types, target), *option_columns(opts)]:
                    if col.name.lower() not in existing:
                        sql(merge_sql.add_column_sql(target, col))
        else:  # pragma: no cover - every action is handled above
            raise LakeError(f"unknown lake action {action!r}")

    def _empty_scoped(self, target: str, opts: TargetOptions, where: str) -> None:
        _count, statement = merge_sql.truncate_sql(target, opts.soft_delete, None, where)
        self.spark.sql(statement)

    def _change_scoped(self, target: str, action: ops.ChangeColumn, opts: TargetOptions, where: str) -> None:
        lake = map_column(action.column, opts.types, target)
        current = self._column_type(target, action.name)
        if current is None:
            return  # not in the lake (the next piece adds it)
        if not (
            current == lake.sql or (action.cast == "same" and widening(current, lake.sql) != "incompatible")
        ):
            raise LakeError(
                f"{action.name!r} of {target}: one shard changes its type from {current} to {lake.sql}, "
                "which the lake can only apply by rewriting the column of every shard, whose sources "
                "still hold the old type; stop at it with on_schema_change={'modify_column': 'fail'} "
                "until every shard has the change, then re-snapshot each shard (binlog-cdc resnapshot)"
            )
        sql = self.spark.sql
        if widening(current, lake.sql) == "widen":
            sql(merge_sql.alter_column_type_sql(target, LakeColumn(action.name, lake)))
        column = quote(action.name)
        if action.cast == "unsigned":
            sql(f"UPDATE {target} SET {column} = 0 WHERE {column} < 0 AND {where}")
        if action.null_fill is not None:
            fill = sql_literal(action.null_fill, lake)
            sql(f"UPDATE {target} SET {column} = {fill} WHERE {column} IS NULL AND {where}")
