"""The run start's check of the destinations writing into one lake table (see :mod:`.shards` for
the rules and the table properties): read the table's properties, refuse what :func:`.shards.writers_problem`
refuses, record this destination as a writer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.options import TargetOptions
from airflow_provider_binlog.lake.shards.shards import WRITER_PREFIX, writers_problem
from airflow_provider_binlog.lake.spark.table_facts import table_facts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def check_writers(
    spark: SparkSession, target: str, display: str, destination: str, opts: TargetOptions
) -> None:
    """Check ``destination`` may write into the existing table ``target`` (quoted), then record it
    as a writer (a table property). Nothing when the table does not exist (its creation records it).

    :param opts: the target's options, bound (:func:`bind`).
    :raises LakeError: as :func:`writer_value`.
    """
    from airflow_provider_binlog.lake.commits import load_iceberg_table

    table = load_iceberg_table(spark, target)
    if table is None:
        return
    table.refresh()
    props = table_facts(spark, table).properties  # one py4j call
    value = writer_value(props, display, destination, opts)
    if value is not None:
        record_writer(spark, target, destination, value)


def check_created(spark: SparkSession, target: str, display: str, opts: TargetOptions) -> None:
    """After ``CREATE TABLE IF NOT EXISTS`` of ``target`` (quoted) with ``opts`` (bound: they carry
    the creating destination's writer line): :func:`check_writers` for that destination, as the
    statement did nothing when another destination created the table after this run's start read it.

    :raises LakeError: as :func:`writer_value`.
    """
    mine = [k[len(WRITER_PREFIX) :] for k in opts.table_properties if k.startswith(WRITER_PREFIX)]
    if len(mine) == 1:
        check_writers(spark, target, display, mine[0], opts)


def writer_value(props: Mapping[str, str], display: str, destination: str, opts: TargetOptions) -> str | None:
    """What to record as ``destination``'s writer property in a table with the properties ``props``
    (``None``: it is recorded already).

    :raises LakeError: another destination fills the table and this one has no shard column (nor
        ``unique_keys``), the table's shard column is not this target's, or the shard values of
        two destinations are the same.
    """
    problem = writers_problem(props, display, destination, opts)
    if problem is not None:
        raise LakeError(problem)
    value = opts.shard_value if opts.shard_column else ""
    return None if props.get(WRITER_PREFIX + destination) == value else value


def record_writer(spark: SparkSession, target: str, destination: str, value: str) -> None:
    """Set ``destination``'s writer property of the table ``target`` (quoted) to ``value``."""
    from airflow_provider_binlog.lake.commits import load_iceberg_table

    table = load_iceberg_table(spark, target)
    if table is not None:
        update: Any = table.updateProperties()
        update.set(WRITER_PREFIX + destination, value).commit()


def check_merger(merger: Any, properties: Mapping[str, Mapping[str, str] | None]) -> None:
    """:func:`writer_value` for every target a :class:`~.merge.ChangeMerger` routes to, from the
    properties its start read with the marks (:meth:`~.merge.ChangeMerger.load_marks`; ``None``:
    no table yet). Every refusal, one line per table in the targets' order, is raised at once before
    anything is recorded (a handover of many tables is fixed in one go); else this destination is
    recorded where it is not yet, several tables at once."""
    records, refused = [], []
    for target, props in properties.items():
        if props is not None:
            opts = merger.options_for(target)
            try:
                value = writer_value(props, merger.display(target), merger.destination, opts)
            except LakeError as exc:
                refused.append(str(exc))
                continue
            if value is not None:
                records.append((target, value))
    if refused:
        raise LakeError("\n".join(refused))

    def record(item: tuple[str, str]) -> None:
        record_writer(merger.spark, item[0], merger.destination, item[1])

    merger.runner.map(record, records)
