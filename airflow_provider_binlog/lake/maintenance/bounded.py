"""Bounded metadata: old ``metadata.json`` versions deleted after each commit, a bounded number kept.

New tables get the properties at creation (:func:`..ddl.new_table_properties`); an existing table
that lacks them gets them at the start of the next run that commits to it
(:func:`bring_under`, from the properties the run start read with the marks), logged once: the
table has them from then on. A property the table's owner set (either key, any value) is left as
it is."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.maintenance.policy import MaintenancePolicy

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Report = Callable[[int, str], None]


def missing(properties: Mapping[str, str], policy: MaintenancePolicy) -> dict[str, str]:
    """The bounded-metadata properties ``properties`` lacks (empty when the owner set either key)."""
    wanted = policy.bounded_properties()
    if not wanted or any(k in properties for k in wanted):
        return {}
    return wanted


def set_properties(spark: SparkSession, target: str, properties: Mapping[str, str]) -> bool:
    """Set ``properties`` on the existing table ``target`` (quoted) in one metadata commit; ``False``
    when there is no such table."""
    from airflow_provider_binlog.lake.commits import load_iceberg_table

    table = load_iceberg_table(spark, target)
    if table is None:
        return False
    update: Any = table.updateProperties()
    for key, value in properties.items():
        update = update.set(key, value)
    update.commit()
    return True


def bring_under(
    spark: SparkSession,
    tables: Mapping[str, Mapping[str, str] | None],
    policy: MaintenancePolicy,
    report: Report,
    display: Callable[[str], str] = str,
    map_: Callable[[Callable[[str], Any], list[str]], Any] | None = None,
) -> list[str]:
    """Give every table of ``tables`` (quoted name -> its properties; ``None``: no table yet) that
    lacks them the bounded-metadata properties; return the tables changed. A table that cannot be
    changed is reported (a warning) and the run goes on.

    :param map_: runs the updates (several tables at once: the merger's ``runner.map``).
    """
    todo = {t: missing(p, policy) for t, p in tables.items() if p is not None}
    todo = {t: p for t, p in todo.items() if p}
    if not todo:
        return []

    def one(target: str) -> str | None:
        props = todo[target]
        try:
            set_properties(spark, target, props)
        except Exception as exc:
            report(
                logging.WARNING,
                f"{display(target)}: cannot set {props} to bound its metadata: {type(exc).__name__}: {exc}",
            )
            return None
        text = ", ".join(f"{k}={v}" for k, v in props.items())
        report(logging.INFO, f"{display(target)}: brought under the bounded metadata policy ({text})")
        return target

    names = list(todo)
    done = list(map_(one, names)) if map_ is not None else [one(t) for t in names]
    return [t for t in done if t is not None]
