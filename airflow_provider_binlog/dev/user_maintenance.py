"""Iceberg maintenance as a user runs it by hand on lake tables, for the fault tests (issue #43):
Iceberg's own Spark procedures, at their most aggressive, between a crash and its retry.

* ``expire``: ``expire_snapshots(older_than => now, retain_last => 1)``: every snapshot but the
  current one (and what refs hold);
* ``rewrite_data``: ``rewrite_data_files`` with ``min-input-files => 1`` (every file rewritten);
* ``rewrite_deletes``: ``rewrite_position_delete_files`` with ``rewrite-all``;
* ``rewrite_manifests``: ``rewrite_manifests``;
* ``remove_orphans``: every file no snapshot holds, however new (through the action API: the
  procedure refuses ``older_than`` under 24 hours).

:func:`random_round` runs a random few of them, in a random order, on each table, then ``expire``
with even odds (so a round can leave the compaction's snapshots for the retry to walk past).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any


def _split(table: str) -> tuple[str, str]:
    catalog, short = table.split(".", 1)
    return catalog, short


def expire(spark: Any, table: str) -> None:
    catalog, short = _split(table)
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() + 1))
    spark.sql("SET spark.sql.session.timeZone = UTC")
    spark.sql(
        f"CALL {catalog}.system.expire_snapshots(table => '{short}', "
        f"older_than => TIMESTAMP '{now}', retain_last => 1)"
    )


def rewrite_data(spark: Any, table: str) -> None:
    catalog, short = _split(table)
    spark.sql(
        f"CALL {catalog}.system.rewrite_data_files(table => '{short}', "
        "options => map('min-input-files', '1'))"
    )


def rewrite_deletes(spark: Any, table: str) -> None:
    catalog, short = _split(table)
    spark.sql(
        f"CALL {catalog}.system.rewrite_position_delete_files(table => '{short}', "
        "options => map('rewrite-all', 'true'))"
    )


def rewrite_manifests(spark: Any, table: str) -> None:
    catalog, short = _split(table)
    spark.sql(f"CALL {catalog}.system.rewrite_manifests(table => '{short}')")


def remove_orphans(spark: Any, table: str) -> None:
    from airflow_provider_binlog.lake.commits import load_iceberg_table

    actions = spark._jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    loaded = load_iceberg_table(spark, table)
    if loaded is not None:
        actions.deleteOrphanFiles(loaded).olderThan(int(time.time() * 1000) + 1000).execute()


ACTIONS: dict[str, Callable[[Any, str], None]] = {
    "expire": expire,
    "rewrite_data": rewrite_data,
    "rewrite_deletes": rewrite_deletes,
    "rewrite_manifests": rewrite_manifests,
    "remove_orphans": remove_orphans,
}


def run(spark: Any, tables: Sequence[str], names: Sequence[str]) -> None:
    """Run the actions ``names`` in order on each table (``tables``: catalog-qualified names)."""
    for name in names:
        for table in tables:
            ACTIONS[name](spark, table)


def random_round(spark: Any, tables: Sequence[str], rng: random.Random) -> str:
    """A random round (see the module docstring); returns what it ran, e.g. ``rewrite_data+expire``."""
    others = [n for n in ACTIONS if n != "expire"]
    names = rng.sample(others, rng.randint(0, 3))
    if not names or rng.random() < 0.5:
        names.append("expire")
    run(spark, tables, names)
    return "+".join(names)
