"""``maintain(spark, tables, policy)``: per table, one metadata read, then only the actions due."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.commits import load_iceberg_table
from airflow_provider_binlog.lake.maintenance import actions, bounded
from airflow_provider_binlog.lake.maintenance.actions import MaintenanceError, TableRef
from airflow_provider_binlog.lake.maintenance.health import Health, read_health
from airflow_provider_binlog.lake.maintenance.plan import plan
from airflow_provider_binlog.lake.maintenance.policy import (
    DEFAULT_POLICY,
    ORPHANS_CHECKED,
    PROTECTED_REF_PREFIX,
    MaintenancePolicy,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
Report = Callable[[int, str], None]


def _log_report(level: int, line: str) -> None:
    log.log(level, "%s", line)


def _protected(health: Health) -> set[str]:
    """The destinations' refs no maintenance may lose (the read points' tags are not among them: a
    load's end removes its older ones, maybe while another process maintains the table)."""
    from airflow_provider_binlog.lake.read_point import READ_TAG_PREFIX

    return {
        name
        for name in health.refs
        if name.startswith(PROTECTED_REF_PREFIX) and not name.startswith(READ_TAG_PREFIX)
    }


def _timed(action: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """``action(*args)``'s counts with its wall time (``seconds``)."""
    started = time.monotonic()
    found = action(*args)
    found["seconds"] = round(time.monotonic() - started, 3)
    return found


def maintain_table(
    spark: SparkSession,
    name: str,
    policy: MaintenancePolicy = DEFAULT_POLICY,
    now_ms: int | None = None,
    report: Report = _log_report,
) -> dict[str, Any]:
    """Maintain one table (see :func:`maintain`); return its summary."""
    from airflow_provider_binlog.lake.spark.session import activate

    activate(spark)
    started = time.monotonic()
    ref = TableRef.of(spark, name)
    table = load_iceberg_table(spark, ref.quoted)
    if table is None:
        return {"missing": True, "ran": [], "seconds": round(time.monotonic() - started, 3)}
    now = int(time.time() * 1000) if now_ms is None else now_ms
    before = read_health(spark, table)
    out: dict[str, Any] = {"ran": [], "before": before.as_dict()}
    ran: list[str] = out["ran"]
    props = bounded.missing(before.properties, policy)
    if props:
        bounded.set_properties(spark, ref.quoted, props)
        ran.append("bounded_metadata")
        report(logging.INFO, f"{ref.display}: brought under the bounded metadata policy ({props})")
    due = plan(before, policy, now, ref.display)
    if due.reasons:
        out["reasons"] = due.reasons
    attempts = policy.attempts
    if due.compact:
        out["rewrite_data_files"] = _timed(actions.rewrite_data_files, spark, ref, before.sorted, attempts)
        ran.append("rewrite_data_files")
    if due.rewrite_deletes:
        out["rewrite_position_delete_files"] = _timed(
            actions.rewrite_position_delete_files, spark, ref, attempts
        )
        ran.append("rewrite_position_delete_files")
    if due.rewrite_manifests and due.compact:  # the rewrite wrote few manifests: still due?
        due = dataclasses.replace(
            due, rewrite_manifests=read_health(spark, table).manifests > policy.max_manifests
        )
    if due.rewrite_manifests:
        out["rewrite_manifests"] = _timed(actions.rewrite_manifests, spark, ref, attempts)
        ran.append("rewrite_manifests")
    if due.expiry is not None:
        pre = read_health(spark, table) if due.compact or due.rewrite_manifests else before
        expiry = due.expiry
        for mark in pre.marks.values():  # the rewrites' own snapshots moved the marks deeper
            expiry = type(expiry)(expiry.older_than_ms, max(expiry.retain_last, mark.depth + 1))
        result = _timed(actions.expire_snapshots, spark, ref, expiry, attempts)
        post = read_health(spark, table)
        result["snapshots_expired"] = max(0, pre.snapshots - post.snapshots)
        result["retain_last"] = expiry.retain_last
        out["expire_snapshots"] = result
        ran.append("expire_snapshots")
    if due.orphans_older_than_ms is not None:
        # never younger than orphan_age by the clock, whatever now_ms says
        older = min(due.orphans_older_than_ms, int((time.time() - policy.orphan_age) * 1000))
        out["remove_orphan_files"] = _timed(actions.remove_orphan_files, spark, ref, older, attempts)
        bounded.set_properties(spark, ref.quoted, {ORPHANS_CHECKED: str(now)})
        ran.append("remove_orphan_files")
    if ran:
        after = read_health(spark, table)
        out["after"] = after.as_dict()
        lost = sorted(_protected(before) - _protected(after))
        if lost:
            raise MaintenanceError(
                f"{ref.display}: the refs {', '.join(lost)} were there before maintenance and are gone "
                "after it: a destination's exactly-once mark may be lost. Stop its loads and check the "
                "table's refs (SELECT * FROM <table>.refs) before the next run"
            )
    out["seconds"] = round(time.monotonic() - started, 3)
    if ran:
        report(logging.INFO, f"{ref.display}: maintenance ran {', '.join(ran)} in {out['seconds']} s: {out}")
    return out


def maintain(
    spark: SparkSession,
    tables: Iterable[str],
    policy: MaintenancePolicy = DEFAULT_POLICY,
    now_ms: int | None = None,
    report: Report = _log_report,
) -> dict[str, Any]:
    """Maintain each lake table of ``tables`` (``catalog.namespace.table`` names) by ``policy``.

    :return: ``{"tables": {name: per table summary}, "seconds": total}``; a table's summary holds
        ``ran`` (the actions that ran, in order; empty for a healthy table), ``reasons``, each
        action's counts (files rewritten and added, bytes, snapshots expired, orphan files),
        ``before``/``after`` (:meth:`~.health.Health.as_dict`) and ``seconds``; ``missing`` for a
        table that does not exist.
    :raises MaintenanceError: an action failed; the tables before it are maintained, the failing one
        is as it was before that action.
    """
    started = time.monotonic()
    done: dict[str, Any] = {}
    for name in dict.fromkeys(tables):
        done[name] = maintain_table(spark, name, policy, now_ms, report)
    return {"tables": done, "seconds": round(time.monotonic() - started, 3)}
