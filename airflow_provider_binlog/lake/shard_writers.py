"""The run start's check of the destinations writing into one lake table (see :mod:`.shards` for
the rules and the table properties): read the table's properties, refuse what :func:`.shards.writers_problem`
refuses, record this destination as a writer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.options import TargetOptions
from airflow_provider_binlog.lake.shards import WRITER_PREFIX, writers_problem
from airflow_provider_binlog.lake.table_facts import table_facts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def check_writers(
    spark: SparkSession, target: str, display: str, destination: str, opts: TargetOptions
) -> None:
    """Check ``destination`` may write into the existing table ``target`` (quoted), then record it
    as a writer (a table property). Nothing when the table does not exist (its creation records it).

    :param opts: the target's options, bound (:func:`bind`).
    :raises LakeError: another destination fills the table and this one has no shard column (nor
        ``unique_keys``), the table's shard column is not this target's, or the shard values of
        two destinations are the same.
    """
    from airflow_provider_binlog.lake.commits import load_iceberg_table

    table = load_iceberg_table(spark, target)
    if table is None:
        return
    table.refresh()
    props = table_facts(spark, table).properties  # one py4j call
    problem = writers_problem(props, display, destination, opts)
    if problem is not None:
        raise LakeError(problem)
    mine = WRITER_PREFIX + destination
    value = opts.shard_value if opts.shard_column else ""
    if props.get(mine) != value:
        update: Any = table.updateProperties()
        update.set(mine, value).commit()


def check_merger(merger: Any) -> None:
    """:func:`check_writers` for every target a :class:`~.merge.ChangeMerger` routes to (the run
    start: the drain calls it once the merger is made), several tables at once; the first refusal
    in the targets' order is raised once every table was checked."""

    def check(target: str) -> None:
        opts = merger.options_for(target)
        check_writers(merger.spark, target, merger.display(target), merger.destination, opts)

    merger.runner.map(check, merger._routes.targets())
