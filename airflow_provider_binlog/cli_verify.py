"""``binlog-cdc verify``: compare source tables with their lake tables.

Row counts and per-row hashes after bringing both sides to one canonical form (see
:mod:`airflow_provider_binlog.lake.verify`); every differing key is listed. Exit status 0 when
every table is equal, 1 when any differs (or on an error)::

    binlog-cdc verify --host db --user repl --password-env DB_PASSWORD \\
        --tables 'shop.orders=lake.shop.orders,shop.customers=lake.shop.customers' \\
        --warehouse /data/warehouse

A catalog other than the embedded Hadoop one is plain Spark configuration:
``--catalog lake --conf spark.sql.catalog.lake.type=rest --conf spark.sql.catalog.lake.uri=...``.
PySpark is imported only through :mod:`airflow_provider_binlog.lake`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from airflow_provider_binlog.cli_common import add_source_arguments, source_password
from airflow_provider_binlog.errors import ConfigurationError


def register(subparsers: Any) -> None:
    """Add ``verify``."""
    p = subparsers.add_parser(
        "verify",
        help="compare source tables with their lake tables (counts, per-row hashes, differing keys)",
        description="Compare MySQL/MariaDB tables with their Iceberg tables, value by value.",
    )
    add_source_arguments(p, "a user with SELECT on the tables")
    p.add_argument(
        "--tables",
        required=True,
        metavar="SRC=TARGET,...",
        help="source schema.table = lake catalog.namespace.table pairs, comma-separated",
    )
    lake = p.add_argument_group("lake")
    lake.add_argument("--warehouse", help="warehouse of the embedded Hadoop catalog")
    lake.add_argument("--catalog", default="lake", help="Iceberg catalog name used in targets (default lake)")
    lake.add_argument("--spark-master", default="local[2]", help="Spark master (default local[2])")
    lake.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="more Spark configuration (repeatable)",
    )
    p.add_argument("--limit", type=int, default=10, help="differing keys shown per kind (default 10)")
    p.set_defaults(func=run_verify)


def parse_tables(text: str) -> dict[str, str]:
    """``'shop.orders=lake.shop.orders, shop.x=lake.s.x'`` -> ``{source: target}``."""
    out: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        source, sep, target = item.partition("=")
        source, target = source.strip(), target.strip()
        if not sep or source.count(".") != 1 or not all(source.split(".")) or not target:
            raise ConfigurationError(
                f"--tables: cannot read {item!r}; write schema.table=catalog.namespace.table"
            )
        if source in out:
            raise ConfigurationError(f"--tables: {source} is given twice")
        out[source] = target
    if not out:
        raise ConfigurationError("--tables: no tables given")
    return out


def parse_conf(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{k: v}``."""
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"--conf: cannot read {item!r}; write key=value")
        conf[key.strip()] = value
    return conf


def run_verify(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``binlog-cdc verify``; return 0 when every table is equal, else 1."""
    import pymysql

    from airflow_provider_binlog.lake import session, verify

    out = out or sys.stdout
    tables = parse_tables(args.tables)
    conf = parse_conf(args.conf)
    try:
        conn = pymysql.connect(
            host=args.host, port=args.port, user=args.user, password=source_password(args),
            autocommit=True, charset="utf8mb4", connect_timeout=10,
        )  # fmt: skip
    except pymysql.err.MySQLError as exc:
        raise ConfigurationError(
            f"cannot connect to {args.host}:{args.port} as {args.user!r}: {exc.args[-1] if exc.args else exc}"
        ) from None
    owned = not session.has_active_session()
    spark = session.create_session(
        app_name="binlog-cdc-verify", master=args.spark_master, warehouse=args.warehouse,
        catalog=args.catalog, conf=conf,
    )  # fmt: skip
    try:
        equal = True
        for diff in verify.verify_tables(conn, spark, tables):
            out.write(diff.describe(limit=args.limit) + "\n")
            equal = equal and diff.equal
        out.flush()
        return 0 if equal else 1
    finally:
        conn.close()
        if owned:
            spark.stop()
