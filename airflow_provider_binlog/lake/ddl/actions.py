"""The lake actions of a DDL statement, run at its place among a target's pieces (see
:mod:`airflow_provider_binlog.canal.sql.operations` for what each statement becomes).

Exactly once across crashes: an ``ALTER TABLE`` is an Iceberg metadata commit that carries no
snapshot properties, so every action is written to converge from whatever state a crash left:
each looks at the table's current schema first (a column already added, renamed or dropped is not
touched again; a column rewrite resumes from its temporary column), and its data statements
(``UPDATE`` filling a new column, ``DELETE`` of every row) give the same table when run again
before the statement's mark is written. The mark comes last: one empty Iceberg append carrying the
statement's snapshot properties (:mod:`.commits`), so a retry that finds it skips the statement, and
a retry that does not runs the actions again, to the same result.

A column rewrite (a type change Iceberg cannot apply in place) runs::

    ALTER TABLE t ADD COLUMN `c__cdc_new` <new type>
    UPDATE t SET `c__cdc_new` = <cast of c>
    ALTER TABLE t DROP COLUMN `c`
    ALTER TABLE t RENAME COLUMN `c__cdc_new` TO `c`

and resumes at the step the table's schema shows (the temporary column present: from the UPDATE;
``c`` gone: the RENAME).

Failpoint ``ddl_action``: after each action of a statement, before its mark.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.binlog.columns import ColumnDef, InvalidDate
from airflow_provider_binlog.canal.sql import operations as ops
from airflow_provider_binlog.canal.sql import partitions
from airflow_provider_binlog.faults import failpoint
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.ddl.ddl import TargetTables
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.options import DELETED_COLUMN, META_COLUMNS, TargetOptions, option_columns
from airflow_provider_binlog.lake.sql import quote
from airflow_provider_binlog.lake.types import LakeColumn, LakeType, map_column, map_columns, widening
from airflow_provider_binlog.lake.write import merge_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TEMP_SUFFIX = "__cdc_new"
"""The temporary column of a rewrite is the column's name with this suffix."""


def sql_literal(value: Any, lake: LakeType, column: str = "") -> str:
    """A Spark SQL literal of the lake type for a value in the decoder's contract (``NULL`` for None).

    :raises InvalidDateError: an invalid date (a zero date default) under ``zero_dates="error"``;
        under ``"null"`` it is ``NULL``.
    """
    if value is None:
        return "NULL"
    if type(value) is InvalidDate:
        if lake.invalid_dates is None:
            raise LakeError(f"column {column!r}: the date {value.text!r} for lake type {lake.sql}")
        lake.invalid_dates.resolve(column, [value])  # raises unless NULL is chosen
        return "NULL"
    converted = lake.convert(value) if lake.convert is not None else value
    if isinstance(converted, bool):
        return "true" if converted else "false"
    if isinstance(converted, int | float | decimal.Decimal):
        text = format(converted, "f") if isinstance(converted, decimal.Decimal) else repr(converted)
        return f"CAST({merge_sql.sql_string(text)} AS {lake.sql})"
    if isinstance(converted, str):
        return f"CAST({merge_sql.sql_string(converted)} AS {lake.sql})"
    if isinstance(converted, bytes):
        return f"X'{converted.hex()}'"
    if isinstance(converted, datetime.datetime):
        return f"CAST({merge_sql.sql_string(converted.isoformat(sep=' '))} AS {lake.sql})"
    if isinstance(converted, datetime.date):
        return f"DATE {merge_sql.sql_string(converted.isoformat())}"
    raise LakeError(f"no SQL literal for a {type(converted).__name__} of lake type {lake.sql}")


def bound_literal(value: Any, col: ColumnDef, opts: TargetOptions, target: str) -> str:
    """A partition bound as a typed Spark SQL literal: integers as BIGINT (DECIMAL(20,0) beyond it:
    a bound may lie outside the column's own range), dates and datetimes as the column's lake type."""
    if isinstance(value, int) and not isinstance(value, bool):
        wide = "BIGINT" if -(2**63) <= value < 2**63 else "DECIMAL(20,0)"
        return f"CAST({merge_sql.sql_string(str(value))} AS {wide})"
    if isinstance(value, datetime.date):
        return sql_literal(value, map_column(col, opts.types, target))
    raise LakeError(f"no bound literal for a {type(value).__name__} ({col.name!r} of {target})")


def predicate_sql(action: partitions.DeleteRows, opts: TargetOptions, target: str) -> str:
    """Spark SQL of :attr:`~..canal.sql.partitions.DeleteRows.where`: every comparison two-valued
    (NULL sorts below every value in a range, equals only NULL in a list), identifiers quoted, bounds
    typed literals (:func:`bound_literal`)."""
    cols = action.columns

    def render(p: partitions.Pred) -> str:
        if isinstance(p, partitions.Const):
            return "true" if p.value else "false"
        if isinstance(p, partitions.Less | partitions.Equal):
            col = cols[p.col]
            name = quote(col.name)
            if p.value is None:
                return f"({name} IS NULL)"
            lit = bound_literal(p.value, col, opts, target)
            if isinstance(p, partitions.Less):
                return f"({name} IS NULL OR {name} < {lit})"
            return f"({name} IS NOT NULL AND {name} = {lit})"
        if isinstance(p, partitions.And):
            return "(" + " AND ".join(render(i) for i in p.items) + ")"
        if isinstance(p, partitions.Or):
            return "(" + " OR ".join(render(i) for i in p.items) + ")"
        return f"(NOT {render(p.item)})"

    return render(action.where)


def describe_action(action: Any) -> str:
    """One lake action as the task log names it: ``added column `note```, ``renamed column `a` to
    `b```, ``dropped column `c```, ``changed the type of `n```, ``emptied the table``..."""
    if isinstance(action, ops.AddColumn):
        filled = "" if action.fill is None else f", existing rows set to {action.fill!r}"
        return f"added column {quote(action.name)}{filled}"
    if isinstance(action, ops.RenameColumn):
        return f"renamed column {quote(action.old)} to {quote(action.new)}"
    if isinstance(action, ops.DropColumn):
        return f"dropped column {quote(action.name)}"
    if isinstance(action, ops.ChangeColumn):
        how = "" if action.cast == "same" else f", values converted ({action.cast})"
        return f"changed the type of {quote(action.name)} to {action.column.type.name}{how}"
    if isinstance(action, ops.EmptyTable):
        return "deleted every row"
    if isinstance(action, ops.DropTable):
        return "dropped the table"
    if isinstance(action, ops.RestartTable):
        return "deleted every row and took the source table's new columns"
    if isinstance(action, partitions.DeleteRows):
        return f"deleted the rows of partitions {', '.join(action.partitions)}"
    return type(action).__name__


class DdlActions:
    """Runs one target's DDL steps.

    :param spark: the session.
    :param tables: the merger's DDL state of its targets (told when a table's schema changed).
    """

    def __init__(self, spark: SparkSession, tables: TargetTables) -> None:
        self.spark = spark
        self.tables = tables
        self._position: str | None = None
        """``file:pos`` of the statement whose actions run (for an invalid date's error)."""

    def run(
        self,
        target: str,
        actions: Sequence[ops.LakeAction],
        opts: TargetOptions,
        props: Mapping[str, str],
    ) -> None:
        """Run ``actions`` on ``target`` (quoted name), then write the statement's mark (``props``).

        Nothing is done to a table that does not exist (its first piece creates it as the source
        table is then).
        """
        self._position = props.get(commits.POSITION)
        try:
            if not self._exists(target):
                return
            for action in actions:
                if isinstance(action, ops.DropTable):
                    self.spark.sql(f"DROP TABLE IF EXISTS {target}")
                    self.tables.existing.discard(target)
                    return  # no table, no mark: a retry converges to the same (dropped) table
                self._run(target, action, opts)
                failpoint("ddl_action")  # the crash tests stop here: an action done, no mark yet
            self._mark(target, props)
        finally:
            self.tables.forget(target)

    # ---- one action ------------------------------------------------------------------------------

    def _run(self, target: str, action: ops.LakeAction, opts: TargetOptions) -> None:
        sql = self.spark.sql
        if isinstance(action, ops.AddColumn):
            lake = map_column(action.column, opts.types, target)
            if self._column(target, action.name) is None:
                sql(merge_sql.add_column_sql(target, LakeColumn(action.name, lake)))
            if action.fill is not None:  # every row there is was written before the column
                fill = action.fill
                if type(fill) is InvalidDate:  # the zero date the server gave every row
                    fill = InvalidDate(fill.text, f"{self._position} (the default the ALTER gives every row)")
                sql(f"UPDATE {target} SET {quote(action.name)} = {sql_literal(fill, lake, action.name)}")
        elif isinstance(action, ops.RenameColumn):
            old, new = self._column(target, action.old), self._column(target, action.new)
            if old is not None and new is not None:
                raise LakeError(
                    f"cannot rename column {action.old!r} of {target} to {action.new!r}: the lake table "
                    f"has both (a lake column {new!r} kept from before); drop the lake column {new!r} "
                    f"(ALTER TABLE {target} DROP COLUMN {quote(new)}) and run again: the rename then "
                    f"carries {action.old!r}'s values to it, as the source holds them"
                )
            if old is not None:
                sql(f"ALTER TABLE {target} RENAME COLUMN {quote(old)} TO {quote(action.new)}")
        elif isinstance(action, ops.DropColumn):
            name = self._column(target, action.name)
            if name is not None:
                sql(f"ALTER TABLE {target} DROP COLUMN {quote(name)}")
        elif isinstance(action, ops.ChangeColumn):
            self._change(target, action, opts)
        elif isinstance(action, ops.EmptyTable):
            self._empty(target, opts)
        elif isinstance(action, partitions.DeleteRows):
            self._delete_rows(target, action, opts)
        elif isinstance(action, ops.RestartTable):
            self._empty(target, opts)
            if action.schema is not None:
                self._reshape(target, map_columns(action.schema.columns, opts.types, target), opts)
        else:  # pragma: no cover - every action is handled above
            raise LakeError(f"unknown lake action {action!r}")

    def _change(self, target: str, action: ops.ChangeColumn, opts: TargetOptions) -> None:
        sql = self.spark.sql
        lake = map_column(action.column, opts.types, target)
        temp = action.name + TEMP_SUFFIX
        current = self._column_type(target, action.name)
        if self._column(target, temp) is None:
            if current is None:
                return  # not in the lake (the next piece adds it)
            fill = action.null_fill
            if current == lake.sql or (
                action.cast == "same" and widening(current, lake.sql) != "incompatible"
            ):
                if widening(current, lake.sql) == "widen":
                    sql(merge_sql.alter_column_type_sql(target, LakeColumn(action.name, lake)))
                column = quote(action.name)
                if action.cast == "unsigned":
                    sql(f"UPDATE {target} SET {column} = 0 WHERE {column} < 0")
                if fill is not None:
                    literal = sql_literal(fill, lake, action.name)
                    sql(f"UPDATE {target} SET {column} = {literal} WHERE {column} IS NULL")
                return
            sql(merge_sql.add_column_sql(target, LakeColumn(temp, lake)))
        if self._column(target, action.name) is not None:
            sql(f"UPDATE {target} SET {quote(temp)} = {self._cast(action, lake)}")
            sql(f"ALTER TABLE {target} DROP COLUMN {quote(action.name)}")
        sql(f"ALTER TABLE {target} RENAME COLUMN {quote(temp)} TO {quote(action.name)}")

    @staticmethod
    def _cast(action: ops.ChangeColumn, lake: LakeType) -> str:
        value = quote(action.name)
        if action.cast == "unsigned":
            value = f"CASE WHEN {value} < 0 THEN 0 ELSE {value} END"  # GREATEST skips NULLs
        if action.cast == "text":
            value = f"CAST({value} AS STRING)"
        value = f"CAST({value} AS {lake.sql})"
        if action.null_fill is not None:
            value = f"COALESCE({value}, {sql_literal(action.null_fill, lake, action.name)})"
        return value

    def _empty(self, target: str, opts: TargetOptions) -> None:
        _count, statement = merge_sql.truncate_sql(target, opts.soft_delete, None)
        self.spark.sql(statement)

    def _delete_rows(self, target: str, action: partitions.DeleteRows, opts: TargetOptions) -> None:
        """Delete (or, with soft deletes, mark deleted) the rows of the partitions; the same table
        when run again."""
        where = predicate_sql(action, opts, target)
        self._check_dates(target, action, opts)
        if opts.soft_delete:
            deleted = quote(DELETED_COLUMN)
            self.spark.sql(
                f"UPDATE {target} SET {deleted} = true WHERE {deleted} IS DISTINCT FROM true AND ({where})"
            )
        else:
            self.spark.sql(f"DELETE FROM {target} WHERE {where}")

    def _check_dates(self, target: str, action: partitions.DeleteRows, opts: TargetOptions) -> None:
        """Stop when a DATE/DATETIME partitioning column is NULL in a lake row: a zero, partial or
        invalid source date (NULL in the lake) lies in a partition this cannot tell."""
        for i in action.ambiguous:
            name = action.columns[i].name
            live = f" AND {quote(DELETED_COLUMN)} IS DISTINCT FROM true" if opts.soft_delete else ""
            rows = self.spark.sql(
                f"SELECT 1 FROM {target} WHERE {quote(name)} IS NULL{live} LIMIT 1"
            ).collect()
            if rows:
                raise LakeError(
                    f"{action.source} (lake table {target}): a TRUNCATE/DROP PARTITION of "
                    f"{', '.join(action.partitions)} cannot be applied by the partitions' bounds: lake rows "
                    f"have NULL in the partitioning column {name!r} (NULL, or a zero, partial or invalid "
                    "date, which MySQL places by its value), so their partition is not known. Remedy: "
                    'on_schema_change={"partition": "resnapshot"} (the run re-snapshots the table at the '
                    "statement), or binlog-cdc resnapshot --table " + action.source
                )

    def _reshape(self, target: str, columns: list[LakeColumn], opts: TargetOptions) -> None:
        """Make the (emptied) table's columns ``columns`` plus the option columns."""
        sql = self.spark.sql
        wanted = {c.name.lower(): c for c in [*columns, *option_columns(opts)]}
        keep = {c.name.lower() for c in META_COLUMNS} | {DELETED_COLUMN}
        existing = self._columns(target)
        for low, (name, type_sql) in existing.items():
            col = wanted.get(low)
            if col is None and low not in keep:
                sql(f"ALTER TABLE {target} DROP COLUMN {quote(name)}")
            elif col is not None and type_sql != col.type.sql:
                if widening(type_sql, col.type.sql) == "widen":
                    sql(merge_sql.alter_column_type_sql(target, col))
                else:  # the table is empty (soft deletes: its old rows lose this column's values)
                    sql(f"ALTER TABLE {target} DROP COLUMN {quote(name)}")
                    sql(merge_sql.add_column_sql(target, col))
        existing = self._columns(target)
        for low, col in wanted.items():
            if low not in existing:
                sql(merge_sql.add_column_sql(target, col))

    # ---- the table as it is ----------------------------------------------------------------------

    def _exists(self, target: str) -> bool:
        return commits.load_iceberg_table(self.spark, target) is not None

    def _columns(self, target: str) -> dict[str, tuple[str, str]]:
        """Lower-case name -> (name, Spark type) of the table's columns now."""
        self.spark.catalog.refreshTable(target)
        return {
            f.name.lower(): (f.name, f.dataType.simpleString())
            for f in self.spark.table(target).schema.fields
        }

    def _column(self, target: str, name: str) -> str | None:
        found = self._columns(target).get(name.lower())
        return found[0] if found else None

    def _column_type(self, target: str, name: str) -> str | None:
        found = self._columns(target).get(name.lower())
        return found[1] if found else None

    def _mark(self, target: str, props: Mapping[str, str]) -> None:
        """Commit an empty append carrying the statement's snapshot properties (its mark)."""
        table = commits.load_iceberg_table(self.spark, target)
        if table is None:
            return
        table.refresh()

        def build(transaction: Any) -> None:
            append = transaction.newAppend()
            for key, value in props.items():
                append.set(key, value)
            append.commit()

        commits.commit_tagged(self.spark, table, build, props)  # the mark's tag in the same commit
        self.spark.catalog.refreshTable(target)
