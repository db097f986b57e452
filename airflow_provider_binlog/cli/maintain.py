"""``binlog-cdc maintain``: maintain lake tables (:mod:`airflow_provider_binlog.lake.maintenance`).

One metadata read per table, then only the actions due (compaction, delete files, manifests,
snapshot expiry that keeps every destination's mark, orphan files); the summary is printed as JSON.
``--dry-run`` prints what is due without running it. Exit status 0, or 1 on an error::

    binlog-cdc maintain --tables lake.shop.orders,lake.shop.customers --warehouse /data/warehouse \\
        [--policy keep_snapshots=100,snapshot_age=3600] [--dry-run]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any, TextIO

from airflow_provider_binlog.cli.common import add_command, add_lake_arguments, parse_conf
from airflow_provider_binlog.errors import ConfigurationError


def register(subparsers: Any) -> None:
    """Add ``maintain``."""
    p = add_command(
        subparsers,
        "maintain",
        "maintain lake tables: compaction, delete files, manifests, snapshot expiry, orphans (when due)",
        __doc__ or "",
    )
    p.add_argument(
        "--tables", required=True, metavar="TABLE,...", help="lake tables (catalog.namespace.table)"
    )
    p.add_argument(
        "--policy", default="", metavar="FIELD=VALUE,...",
        help="MaintenancePolicy fields that differ from the defaults (see the package docstring)",
    )  # fmt: skip
    p.add_argument(
        "--dry-run", action="store_true", help="print each table's state and what is due; change nothing"
    )
    add_lake_arguments(p, catalog_help="Iceberg catalog name used in the tables (default lake)")
    p.set_defaults(func=run_maintain)


def run_maintain(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``binlog-cdc maintain``; print the summary (or the plan) as JSON; return 0."""
    from airflow_provider_binlog.lake.maintenance import maintain
    from airflow_provider_binlog.lake.maintenance.policy import MaintenancePolicy
    from airflow_provider_binlog.lake.spark import session

    out = out or sys.stdout
    tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    if not tables:
        raise ConfigurationError("--tables: no tables given")
    try:
        policy = MaintenancePolicy.parse(args.policy)
    except ValueError as exc:
        raise ConfigurationError(f"--policy: {exc}") from None
    owned = not session.has_active_session()
    spark = session.create_session(
        app_name="binlog-cdc-maintain", master=args.spark_master, warehouse=args.warehouse,
        catalog=args.catalog, conf=parse_conf(args.conf),
    )  # fmt: skip
    try:
        result = _plans(spark, tables, policy) if args.dry_run else maintain(spark, tables, policy)
        out.write(json.dumps(result, indent=2, default=str) + "\n")
        out.flush()
        return 0
    finally:
        if owned:
            session.stop_session(spark)


def _plans(spark: Any, tables: list[str], policy: Any) -> dict[str, Any]:
    from airflow_provider_binlog.lake.commits import load_iceberg_table
    from airflow_provider_binlog.lake.maintenance.actions import TableRef
    from airflow_provider_binlog.lake.maintenance.health import read_health
    from airflow_provider_binlog.lake.maintenance.plan import plan

    found: dict[str, Any] = {}
    for name in tables:
        ref = TableRef.of(spark, name)
        table = load_iceberg_table(spark, ref.quoted)
        if table is None:
            found[name] = {"missing": True}
            continue
        health = read_health(spark, table)
        due = plan(health, policy, int(time.time() * 1000))
        found[name] = {"state": health.as_dict(), "due": {**dataclasses.asdict(due), "empty": due.empty}}
    return {"tables": found, "dry_run": True}
