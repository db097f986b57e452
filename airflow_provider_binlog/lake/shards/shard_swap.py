"""The re-snapshot swap of one shard of a lake table that several sources fill (see :mod:`.shards`):
its rows replaced by the staging table's in ONE commit, the other shards' rows untouched.

The staging table's columns the target lacks are added first (an ``ALTER TABLE``; a column of NULLs
for the rows already there, which a retry finds added); then one ``MERGE INTO target USING staging
ON false`` inserts every staged row and deletes every target row of the shard (``WHEN NOT MATCHED
BY SOURCE AND shard = <value>``), the commit :func:`..commits.commit` marks. Columns the target has
and the staging table lacks (other shards' columns, or this shard's dropped ones) are NULL in the
shard's new rows, as its source has no value for them. A staging column whose type the target
cannot widen to stops the swap with the target unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_binlog.lake.errors import SchemaEvolutionError
from airflow_provider_binlog.lake.options import TargetOptions
from airflow_provider_binlog.lake.shards.shards import scope_sql, swap_sql
from airflow_provider_binlog.lake.sql import quote
from airflow_provider_binlog.lake.types import widening

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def shard_swap(spark: SparkSession, target: str, staging: str, source: str, opts: TargetOptions) -> None:
    """Replace the rows of ``source``'s shard of ``target`` (quoted) by the rows of ``staging``
    (quoted), in one commit (run it inside :func:`..commits.commit`).

    :param opts: the target's options, bound (:func:`.shards.bind`), with a shard column.
    :raises SchemaEvolutionError: a staging column's type that the target's column cannot take.
    """
    schema, table = source.split(".", 1)
    scope = scope_sql(opts, schema, table, 1, "a re-snapshot", target)
    assert scope is not None
    spark.catalog.refreshTable(target)
    have = {f.name.lower(): f.dataType.simpleString() for f in spark.table(target).schema.fields}
    staged = [(f.name, f.dataType.simpleString()) for f in spark.table(staging).schema.fields]
    for name, type_sql in staged:
        old = have.get(name.lower())
        if old is None:
            spark.sql(f"ALTER TABLE {target} ADD COLUMN {quote(name)} {type_sql}")
        elif old != type_sql:
            verdict = widening(old, type_sql)
            if verdict == "widen":
                spark.sql(f"ALTER TABLE {target} ALTER COLUMN {quote(name)} TYPE {type_sql}")
            elif verdict == "incompatible":
                raise SchemaEvolutionError(
                    f"re-snapshot of {source} into {target}: its column {name!r} is {type_sql} and the "
                    f"lake table's (shared with other shards) is {old}; make the shards' column types "
                    "agree, or load the shards into a new lake table"
                )
    spark.catalog.refreshTable(target)
    spark.sql(swap_sql(target, staging, [n for n, _t in staged], scope))


__all__ = ["shard_swap"]
