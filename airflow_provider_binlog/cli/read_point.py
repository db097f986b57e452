"""``binlog-cdc read-point``: every lake table of a destination at one binlog position
(:mod:`airflow_provider_binlog.lake.read_point`).

Prints, as JSON, the position, the point tag that names it on every table and each table's snapshot
id; read every table ``VERSION AS OF`` that tag or id. Without ``--position``: the newest read point
every table holds; with it: the one at that recorded run end (a point tag, else the snapshot
summaries). Exit status 0, or 1 with the reason::

    binlog-cdc read-point --destination shop --tables lake.shop.orders,lake.shop.customers \\
        --warehouse /data/warehouse [--position mysql-bin.000042:1234]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from airflow_provider_binlog.cli.common import add_lake_arguments, parse_conf
from airflow_provider_binlog.errors import ConfigurationError


def register(subparsers: Any) -> None:
    """Add ``read-point``."""
    p = subparsers.add_parser(
        "read-point",
        help="each lake table's snapshot id at a destination's newest (or a recorded) read point",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--destination", required=True, help="the destination whose read point to give")
    p.add_argument(
        "--tables", required=True, metavar="TABLE,...", help="its lake tables (catalog.namespace.table)"
    )
    p.add_argument(
        "--position", metavar="FILE:POS", help="a recorded run end (default: the newest read point)"
    )
    add_lake_arguments(p, catalog_help="Iceberg catalog name used in the tables (default lake)")
    p.set_defaults(func=run_read_point)


def run_read_point(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``binlog-cdc read-point``; print the read point as JSON; return 0."""
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.lake.read_point import read_point
    from airflow_provider_binlog.lake.spark import session

    out = out or sys.stdout
    tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    if not tables:
        raise ConfigurationError("--tables: no tables given")
    position = BinlogPosition.parse(args.position) if args.position else None
    owned = not session.has_active_session()
    spark = session.create_session(
        app_name="binlog-cdc-read-point", master=args.spark_master, warehouse=args.warehouse,
        catalog=args.catalog, conf=parse_conf(args.conf),
    )  # fmt: skip
    try:
        found = read_point(spark, args.destination, tables, position)
        out.write(json.dumps(found.as_dict(), indent=2) + "\n")
        out.flush()
        return 0
    finally:
        if owned:
            session.stop_session(spark)
