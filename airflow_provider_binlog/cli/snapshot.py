"""``binlog-cdc snapshot``: load the existing rows of tables into the lake, consistent with the binlog.

Reads each table in key chunks with low/high watermarks (see
:mod:`airflow_provider_binlog.canal.snapshot.initial`), writes them into the Iceberg tables, keeps its
progress in the destination's meta store (a killed run continues from the last finished chunk
when started again with the same arguments) and, when done, sets the destination's cursor to the
snapshot's start if it has none, so the next binlog run continues with no gap and no double::

    binlog-cdc snapshot --host db --user repl --password-env DB_PASSWORD \\
        --destination shop --meta-dir /data/meta \\
        --tables 'shop.orders=lake.shop.orders,shop.log=lake.shop.log' --key shop.log=id/ts \\
        --warehouse /data/warehouse

``--zookeeper host:2181[/chroot]`` keeps the progress and cursor in ZooKeeper instead of
``--meta-dir``, and the run holds the destination's ``running`` node throughout (as the operator
does), so it never runs alongside an operator or another snapshot of the same destination: it
waits ``--running-timeout`` seconds, then fails naming the holder. Prints a JSON summary; exit
status 0 on success.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any, TextIO

from airflow_provider_binlog.cli.common import (
    add_destination_arguments,
    add_lake_arguments,
    add_source_arguments,
    parse_conf,
    source_password,
)
from airflow_provider_binlog.cli.verify import parse_tables
from airflow_provider_binlog.errors import ConfigurationError


def register(subparsers: Any) -> None:
    """Add ``snapshot``."""
    p = subparsers.add_parser(
        "snapshot",
        help="load tables' existing rows into the lake in chunks, resumable, then hand over to the binlog",
        description="Initial snapshot of MySQL/MariaDB tables into Iceberg tables (no global lock).",
    )
    add_source_arguments(p, "a user with SELECT and REPLICATION SLAVE/CLIENT")
    add_destination_arguments(p)
    p.add_argument(
        "--tables",
        required=True,
        metavar="SRC=TARGET,...",
        help="source schema.table = lake catalog.namespace.table pairs, comma-separated",
    )
    p.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="SRC=COL/COL",
        help="key columns of a table without a primary key (repeatable)",
    )
    p.add_argument("--chunk-size", type=int, default=50_000, help="rows per chunk (default 50000)")
    add_lake_arguments(p)
    p.set_defaults(func=run_snapshot)


def parse_keys(items: list[str], tables: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """``["shop.log=id/ts"]`` -> ``{"shop.log": ("id", "ts")}``."""
    out: dict[str, tuple[str, ...]] = {}
    for item in items:
        source, sep, cols = item.partition("=")
        names = tuple(c.strip() for c in cols.split("/") if c.strip())
        if not sep or not names:
            raise ConfigurationError(f"--key: cannot read {item!r}; write schema.table=col1/col2")
        if source.strip() not in tables:
            raise ConfigurationError(f"--key: {source.strip()} is not one of --tables")
        out[source.strip()] = names
    return out


def run_snapshot(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``binlog-cdc snapshot``; return 0 when every table was loaded."""
    import pymysql

    from airflow_provider_binlog.binlog.client import ReplicationConfig
    from airflow_provider_binlog.canal.filter import TableFilter
    from airflow_provider_binlog.canal.instance import InstanceConfig
    from airflow_provider_binlog.canal.snapshot.initial import Snapshot
    from airflow_provider_binlog.drain.wiring import Wiring, ZooKeeperConfig, normal_chroot
    from airflow_provider_binlog.lake.snapshot import LakeChunkLoader
    from airflow_provider_binlog.lake.spark import session
    from airflow_provider_binlog.lake.write.merge import TargetOptions

    out = out or sys.stdout
    tables = parse_tables(args.tables)
    keys = parse_keys(args.key, tables)
    conf = parse_conf(args.conf)
    password = source_password(args)
    source = ReplicationConfig(host=args.host, port=args.port, user=args.user, password=password)
    include = ",".join(re.escape(s) for s in sorted(tables))
    config = InstanceConfig(args.destination, source, TableFilter(include=include), client_id=args.client_id)

    def connect() -> Any:
        try:
            return pymysql.connect(
                host=args.host, port=args.port, user=args.user, password=password,
                autocommit=True, charset="utf8mb4", connect_timeout=10,
            )  # fmt: skip
        except pymysql.err.MySQLError as exc:
            raise ConfigurationError(
                f"cannot connect to {args.host}:{args.port} as {args.user!r}: "
                f"{exc.args[-1] if exc.args else exc}"
            ) from None

    if args.zookeeper:
        hosts, slash, chroot = args.zookeeper.partition("/")
        wiring = Wiring(ZooKeeperConfig(hosts, chroot=normal_chroot(slash + chroot), origin="--zookeeper"))
    else:
        wiring = Wiring(meta_dir=args.meta_dir)
    running: Any = None
    try:
        meta = wiring.meta_manager()
        running = wiring.running_node(config.identity, label=f"binlog-cdc snapshot {args.destination}")
        if running is not None:
            meta.attach_fence(config.identity, running)
            running.acquire(timeout=args.running_timeout)
    except BaseException:
        if running is not None:
            running.close()
        wiring.close()
        raise
    owned = not session.has_active_session()
    spark = session.create_session(
        app_name="binlog-cdc-snapshot", master=args.spark_master, warehouse=args.warehouse,
        catalog=args.catalog, conf=conf,
    )  # fmt: skip
    options = {t: TargetOptions(key_columns=keys[s]) for s, t in tables.items() if s in keys}
    loader = LakeChunkLoader(spark, args.destination, tables, options)
    try:
        from airflow_provider_binlog.binlog.client import ReplicationClient

        result = Snapshot(
            meta, config.identity, ReplicationClient(source), connect,
            {s: keys.get(s) for s in tables}, loader, args.chunk_size,
            guard=running.check if running is not None else None,
        ).run()  # fmt: skip
        out.write(json.dumps(result.as_dict(), indent=2, sort_keys=True) + "\n")
        out.flush()
        return 0
    finally:
        loader.close()
        meta.close()
        if running is not None:
            running.close()
        wiring.close()
        if owned:
            session.stop_session(spark)
