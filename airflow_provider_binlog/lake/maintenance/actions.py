"""The maintenance actions, each one Iceberg Spark procedure (``CALL <catalog>.system.<name>``),
retried when it conflicts with another writer (a load's commit: the same conflicts
:func:`..commits.commit` retries), each returning its counts."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.commits import conflict_class
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.maintenance.plan import Expiry
from airflow_provider_binlog.lake.sql import parse_name, quote, quote_parts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class MaintenanceError(LakeError):
    """A maintenance action failed (or kept conflicting with another writer)."""


@dataclass(frozen=True, slots=True)
class TableRef:
    """A table as the procedures name it: its catalog and its identifier inside the catalog."""

    display: str
    catalog: str
    identifier: str  # quoted parts below the catalog, as the procedures' ``table`` argument

    @classmethod
    def of(cls, spark: SparkSession, name: str) -> TableRef:
        parts = parse_name(name)
        if len(parts) < 2:
            raise MaintenanceError(f"{name}: not a [catalog.]namespace.table name")
        if len(parts) == 2:
            catalog = str(spark.conf.get("spark.sql.defaultCatalog", "spark_catalog"))
            parts = (catalog, *parts)
        return cls(".".join(parts), parts[0], quote_parts(parts[1:]))

    @property
    def quoted(self) -> str:
        return f"{quote(self.catalog)}.{self.identifier}"

    def call(self, procedure: str, **arguments: str) -> str:
        args = ", ".join(
            [f"table => {_literal(self.identifier)}", *(f"{k} => {v}" for k, v in arguments.items())]
        )
        return f"CALL {quote(self.catalog)}.system.{procedure}({args})"


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _options(options: dict[str, str]) -> str:
    return "map(" + ", ".join(f"{_literal(k)}, {_literal(v)}" for k, v in options.items()) + ")"


def _row(spark: SparkSession, sql: str) -> dict[str, Any]:
    rows = spark.sql(sql).collect()
    return rows[0].asDict() if rows else {}


def retried(
    table: TableRef, what: str, attempts: int, action: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """Run ``action``; a conflict with another writer is retried (``attempts`` runs at most, backing
    off 0.5 s doubling). Iceberg validates each rewrite against what committed since it read the
    table, so a retried rewrite never drops, doubles or resurrects a row a load committed meanwhile.

    :raises MaintenanceError: a conflict past ``attempts``, or any other failure (Spark's error as cause).
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            found = action()
            if attempt > 1:
                found["attempts"] = attempt
            return found
        except Exception as exc:
            conflict = conflict_class(exc)
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            if conflict is None or attempt >= attempts:
                more = f" after {attempt} attempts" if conflict is not None else ""
                raise MaintenanceError(
                    f"{what} of {table.display} failed{more}: {type(exc).__name__}: {first}; the table is as "
                    "it was before it (each action commits atomically): run the maintenance again"
                ) from exc
            pause = 0.5 * 2 ** (attempt - 1)
            log.warning(
                "%s of %s conflicted with another writer (%s), attempt %d of %d; again in %.1f s",
                what, table.display, conflict.rsplit(".", 1)[-1], attempt, attempts, pause,
            )  # fmt: skip
            time.sleep(pause)


def rewrite_data_files(spark: SparkSession, table: TableRef, sort: bool, attempts: int) -> dict[str, Any]:
    """Bin-pack (or sort, for a table with a sort order) the data files, folding their deletes in:
    any file with a delete and any group of two or more small files is rewritten. One atomic commit
    (no partial progress: a conflict retries the whole rewrite, never leaves half of it)."""
    options = {"min-input-files": "2", "delete-file-threshold": "1", "partial-progress.enabled": "false"}
    sql = table.call(
        "rewrite_data_files", strategy=_literal("sort" if sort else "binpack"), options=_options(options)
    )

    def run() -> dict[str, Any]:
        row = _row(spark, sql)
        return {
            "rewritten_data_files": int(row.get("rewritten_data_files_count") or 0),
            "added_data_files": int(row.get("added_data_files_count") or 0),
            "rewritten_bytes": int(row.get("rewritten_bytes_count") or 0),
            "removed_delete_files": int(row.get("removed_delete_files_count") or 0),
        }

    return retried(table, "rewrite_data_files", attempts, run)


def rewrite_position_delete_files(spark: SparkSession, table: TableRef, attempts: int) -> dict[str, Any]:
    """Compact the position delete files left (format-version 2) and drop dangling ones."""
    sql = table.call("rewrite_position_delete_files", options=_options({"rewrite-all": "true"}))

    def run() -> dict[str, Any]:
        row = _row(spark, sql)
        return {
            "rewritten_delete_files": int(row.get("rewritten_delete_files_count") or 0),
            "added_delete_files": int(row.get("added_delete_files_count") or 0),
            "rewritten_bytes": int(row.get("rewritten_bytes_count") or 0),
        }

    return retried(table, "rewrite_position_delete_files", attempts, run)


def rewrite_manifests(spark: SparkSession, table: TableRef, attempts: int) -> dict[str, Any]:
    sql = table.call("rewrite_manifests")

    def run() -> dict[str, Any]:
        row = _row(spark, sql)
        return {
            "rewritten_manifests": int(row.get("rewritten_manifests_count") or 0),
            "added_manifests": int(row.get("added_manifests_count") or 0),
        }

    return retried(table, "rewrite_manifests", attempts, run)


def expire_snapshots(spark: SparkSession, table: TableRef, expiry: Expiry, attempts: int) -> dict[str, Any]:
    """``expire_snapshots`` with ``older_than`` and ``retain_last`` (:func:`.plan.expiry_for`); the
    files only expired snapshots referenced are deleted (the procedure's reachability check: the
    driver-side ``Table.expireSnapshots()``, tried as a cheaper way, deleted a live deletion vector
    of a table written by the driver's merge, ``tests/lake/test_maintenance.py`` caught it). Refs
    are never touched: tags keep their snapshots, and a ref without a maximum age never expires."""
    older = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(expiry.older_than_ms / 1000))
    ms = expiry.older_than_ms % 1000
    sql = table.call(
        "expire_snapshots",
        older_than=f"TIMESTAMP '{older}.{ms:03d} UTC'",
        retain_last=str(int(expiry.retain_last)),
    )

    def run() -> dict[str, Any]:
        row = _row(spark, sql)
        return {
            "deleted_files": sum(
                int(row.get(k) or 0)
                for k in (
                    "deleted_data_files_count",
                    "deleted_position_delete_files_count",
                    "deleted_equality_delete_files_count",
                )
            ),
            "deleted_manifests": int(row.get("deleted_manifest_files_count") or 0)
            + int(row.get("deleted_manifest_lists_count") or 0),
        }

    return retried(table, "expire_snapshots", attempts, run)


def remove_orphan_files(
    spark: SparkSession, table: TableRef, older_than_ms: int, attempts: int
) -> dict[str, Any]:
    """Remove files under the table's location that no snapshot or metadata references and that
    are older than ``older_than_ms`` (the policy's ``orphan_age`` ago, at least a day: a running
    commit's new files are minutes old; staging lives outside table locations)."""
    older = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(older_than_ms / 1000))
    sql = table.call("remove_orphan_files", older_than=f"TIMESTAMP '{older} UTC'")

    def run() -> dict[str, Any]:
        rows = spark.sql(sql).collect()
        return {"orphan_files": len(rows)}

    return retried(table, "remove_orphan_files", attempts, run)
