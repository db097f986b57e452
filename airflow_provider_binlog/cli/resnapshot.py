"""``binlog-cdc resnapshot``: rebuild ONE lake table from its source table at a binlog point.

The remedy for a source operation whose effect on rows is not in the binlog (statement-format
writes, partition maintenance, a type change the lake cannot follow): the table is read in key
chunks into a staging Iceberg table, then swapped into the lake table in one commit marked at the
position ``S`` it was read at (:mod:`airflow_provider_binlog.canal.snapshot.resnapshot`); the destination's
next run skips the table's changes up to ``S`` and applies those after it. Other tables and the
cursor are untouched. Killed, it resumes when started again with the same arguments::

    binlog-cdc resnapshot --host db --user repl --password-env DB_PASSWORD \\
        --destination shop --zookeeper zk1:2181/binlog-cdc \\
        --table shop.orders --target lake.shop.orders --warehouse /data/warehouse

**Column rules.** A destination loaded with ``columns=`` / ``exclude_columns=`` keeps only some
columns of a table in the lake; give the same strings as ``--columns`` / ``--exclude-columns``
(canal's ``schema.table:col1/col2,...``; rules for other tables are ignored) and the re-snapshot
reads and swaps in those columns only. They are not read from the meta store: its ``filter`` node
holds canal's include regex only, not the column rules. Without them every column is loaded, and a
later run of the destination would leave the columns outside its selection stale.

It holds the destination's ``running`` node while it works (with ``--zookeeper``), so it never runs
alongside the destination's operator: it waits ``--running-timeout`` seconds, then fails naming the
holder. Prints a JSON summary; exit status 0 on success.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from airflow_provider_binlog.cli.common import (
    add_destination_arguments,
    add_lake_arguments,
    add_source_arguments,
    parse_conf,
    source_password,
)
from airflow_provider_binlog.errors import ConfigurationError


def register(subparsers: Any) -> None:
    """Add ``resnapshot``."""
    p = subparsers.add_parser(
        "resnapshot",
        help="rebuild one lake table from its source table at a binlog point (one atomic swap)",
        description="Re-snapshot one table of a destination, consistent with its binlog stream.",
    )
    add_source_arguments(p, "a user with SELECT and REPLICATION SLAVE/CLIENT")
    add_destination_arguments(p)
    p.add_argument("--table", required=True, metavar="SCHEMA.TABLE", help="the source table")
    p.add_argument("--target", required=True, metavar="CATALOG.NS.TABLE", help="its lake table")
    p.add_argument(
        "--key", metavar="COL/COL", help="key columns, for a table without a primary key (as its route has)"
    )
    p.add_argument(
        "--columns", default="", metavar="SCHEMA.TABLE:COL/COL,...",
        help="the destination's column filter (its columns=): the lake table keeps those columns only",
    )  # fmt: skip
    p.add_argument(
        "--exclude-columns", default="", metavar="SCHEMA.TABLE:COL/COL,...",
        help="the destination's column black-list (its exclude_columns=)",
    )  # fmt: skip
    p.add_argument("--chunk-size", type=int, default=50_000, help="rows per chunk (default 50000)")
    add_lake_arguments(p)
    p.set_defaults(func=run_resnapshot)


def run_resnapshot(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``binlog-cdc resnapshot``; return 0 when the table was swapped in."""
    from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
    from airflow_provider_binlog.canal.filter import TableFilter
    from airflow_provider_binlog.canal.meta.model import ClientIdentity
    from airflow_provider_binlog.drain.resnapshot import resnapshot
    from airflow_provider_binlog.drain.wiring import Wiring, ZooKeeperConfig, normal_chroot, source_connection
    from airflow_provider_binlog.lake.spark import session
    from airflow_provider_binlog.lake.sql import check_target
    from airflow_provider_binlog.lake.write.merge import TargetOptions

    out = out or sys.stdout
    schema, dot, table = args.table.partition(".")
    if not dot or not schema or not table or "." in table:
        raise ConfigurationError(f"--table: cannot read {args.table!r}; write schema.table")
    check_target(args.target, args.table)
    keys = tuple(c.strip() for c in (args.key or "").split("/") if c.strip())
    table_filter = TableFilter(columns=args.columns or "", exclude_columns=args.exclude_columns or "")
    conf = parse_conf(args.conf)
    source = ReplicationConfig(host=args.host, port=args.port, user=args.user, password=source_password(args))
    identity = ClientIdentity(args.destination, args.client_id)
    if args.zookeeper:
        hosts, slash, chroot = args.zookeeper.partition("/")
        wiring = Wiring(ZooKeeperConfig(hosts, chroot=normal_chroot(slash + chroot), origin="--zookeeper"))
    else:
        wiring = Wiring(meta_dir=args.meta_dir)
    running: Any = None
    try:
        meta = wiring.meta_manager()
        running = wiring.running_node(
            identity, label=f"binlog-cdc resnapshot {args.destination} {args.table}"
        )
        if running is not None:
            meta.attach_fence(identity, running)
            running.acquire(timeout=args.running_timeout)
    except BaseException:
        if running is not None:
            running.close()
        wiring.close()
        raise
    owned = not session.has_active_session()
    spark = session.create_session(
        app_name="binlog-cdc-resnapshot", master=args.spark_master, warehouse=args.warehouse,
        catalog=args.catalog, conf=conf,
    )  # fmt: skip
    try:
        result = resnapshot(
            meta, identity, ReplicationClient(source), lambda: source_connection(source), spark,
            args.table, args.target, options=TargetOptions(key_columns=keys), chunk_size=args.chunk_size,
            guard=running.check if running is not None else None, table_filter=table_filter,
        )  # fmt: skip
        out.write(json.dumps(result.as_dict(), indent=2, sort_keys=True) + "\n")
        out.flush()
        return 0
    finally:
        meta.close()
        if running is not None:
            running.close()
        wiring.close()
        if owned:
            session.stop_session(spark)
