"""``binlog-cdc verify``: compare source tables with their lake tables.

Row counts and per-row hashes after bringing both sides to one canonical form (see
:mod:`airflow_provider_binlog.lake.verify.verify`); every differing key is listed, and for the first
``--show`` of them the differing columns with the source's and the lake's value side by side, with
per-column counts of differing rows. Rows are matched on ``--key``, else the primary key, else the
first unique key whose columns are all NOT NULL. ``--at-cursor`` compares at one binlog position
while the source is written (:mod:`airflow_provider_binlog.lake.verify.verify_cursor`). Exit status 0 when
every table is equal, 1 when any differs (or on an error)::

    binlog-cdc verify --host db --user repl --password-env DB_PASSWORD \\
        --tables 'shop.orders=lake.shop.orders,shop.customers=lake.shop.customers' \\
        --warehouse /data/warehouse [--at-cursor]

A catalog other than the embedded Hadoop one is plain Spark configuration:
``--catalog lake --conf spark.sql.catalog.lake.type=rest --conf spark.sql.catalog.lake.uri=...``.
Without either (and without ``$BINLOG_CDC_WAREHOUSE``) it refuses before anything is read or
created (:func:`check_lake`): a default warehouse would be an empty lake, every table "missing".
A lake table that does not exist is reported as such, with the catalog location it was looked for
in. PySpark is imported only through :mod:`airflow_provider_binlog.lake`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from airflow_provider_binlog.cli.common import (
    add_command,
    add_lake_arguments,
    add_source_arguments,
    parse_conf,
    source_password,
)
from airflow_provider_binlog.errors import ConfigurationError


def register(subparsers: Any) -> None:
    """Add ``verify``."""
    p = add_command(
        subparsers,
        "verify",
        "compare source tables with their lake tables (counts, per-row hashes, differing columns)",
        DESCRIPTION,
    )
    add_source_arguments(p, "a user with SELECT on the tables (and REPLICATION SLAVE for --at-cursor)")
    p.add_argument(
        "--tables",
        required=True,
        metavar="SRC=TARGET,...",
        help="source schema.table = lake catalog.namespace.table pairs, comma-separated",
    )
    add_lake_arguments(
        p,
        warehouse_help="warehouse of the embedded Hadoop catalog: the operator's warehouse= (default "
        "$BINLOG_CDC_WAREHOUSE); required unless the catalog is given by --conf",
    )
    p.add_argument(
        "--show", "--limit", dest="show", type=int, default=10, metavar="N",
        help="differing keys listed per kind, and shown column by column (default 10)",
    )  # fmt: skip
    p.add_argument(
        "--key", action="append", default=[], metavar="[SCHEMA.TABLE=]COL[,COL]",
        help="compare on these columns (repeatable; without SCHEMA.TABLE= for every table). Default: the "
        "primary key, else the first unique key whose columns are all NOT NULL",
    )  # fmt: skip
    at = p.add_argument_group("at a binlog position")
    at.add_argument(
        "--at-cursor", action="store_true",
        help="compare the source and the lake at one binlog position (see above): meaningful while the "
        "source is written",
    )  # fmt: skip
    at.add_argument(
        "--destination",
        help="with --at-cursor: use this destination's commit marks (default: each table's newest mark)",
    )
    p.set_defaults(func=run_verify)


DESCRIPTION = """\
Compare MySQL/MariaDB tables with their Iceberg tables, value by value. Differing keys are listed;
for the first --show of them, the differing columns with the source's and the lake's value side by
side, and per column the number of differing rows. Rows are matched on --key, else the primary key,
else the first unique key whose columns are all NOT NULL (the report names it).

--at-cursor compares at one binlog position, so it means something while the source is written:
  1. each lake table's current Iceberg snapshot is pinned, with its newest binlog-cdc commit mark
     (the lake holds the destination's changes up to that binlog point, none after);
  2. the source is read inside START TRANSACTION WITH CONSISTENT SNAPSHOT, whose binlog position P
     is exact (MariaDB's binlog_snapshot_file/position; MySQL: taken under a brief FLUSH TABLES
     WITH READ LOCK, which needs RELOAD);
  3. the binlog from the lake's mark to P is read: keys changed in between are left out, reported
     as "changed after the lake's position: N key(s), not compared";
  4. every other key is compared; its value at P is its value at the lake's mark.
The report gives both positions. Needs REPLICATION SLAVE; refused (exit 1, with the reason) when a
table has no commit mark, only the initial snapshot's, or a DDL/TRUNCATE/statement-format DML
between the two positions.

Exit status: 0 every table equal, 1 a difference or an error."""


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


def parse_keys(items: list[str], tables: dict[str, str]) -> dict[str, list[str]]:
    """``["id", "shop.t=a,b"]`` -> ``{source: key columns}`` (a bare list applies to every table)."""
    out: dict[str, list[str]] = {}
    for item in sorted(items, key=lambda k: "=" not in k):  # table-specific ones first
        where, sep, cols = item.rpartition("=")
        columns = [c.strip() for c in cols.split(",")]
        if not all(columns):
            raise ConfigurationError(
                f"--key: cannot read {item!r}; write col[,col] or schema.table=col[,col]"
            )
        if not sep:
            for source in tables:
                out.setdefault(source, columns)
            continue
        source = where.strip()
        if source not in tables:
            raise ConfigurationError(f"--key: {source} is not one of the --tables")
        out[source] = columns
    return out


def check_lake(warehouse: str | None, catalog: str, conf: dict[str, str]) -> None:
    """Refuse to verify against a lake nobody named: without ``--warehouse``, a catalog of the
    user's own in ``--conf`` (its ``type``, ``catalog-impl`` or ``warehouse``) or
    ``$BINLOG_CDC_WAREHOUSE``, Spark would create a default warehouse and find every table missing.
    A local warehouse directory that does not exist is refused too. Nothing is created either way.

    :raises ConfigurationError: naming the missing option and how the catalog is found.
    """
    from pathlib import Path

    from airflow_provider_binlog import settings
    from airflow_provider_binlog.lake.spark.session import WAREHOUSE_ENV, default_warehouse

    prefix = f"spark.sql.catalog.{catalog}"
    if {prefix, f"{prefix}.type", f"{prefix}.catalog-impl", f"{prefix}.warehouse"} & conf.keys():
        return  # the user's own catalog settings say where the lake is
    origin, where = "--warehouse", warehouse
    if where is None and settings.current().warehouse:
        origin, where = f"${WAREHOUSE_ENV}", settings.current().warehouse
    if where is None:
        default = default_warehouse()
        found = "it exists" if Path(default).is_dir() else "it does not exist"
        raise ConfigurationError(
            f"binlog-cdc verify needs to know where the lake is: give --warehouse DIR (the warehouse of "
            f"the Hadoop catalog {catalog!r} the operator writes: its warehouse=, else ${WAREHOUSE_ENV}, "
            f"else {default}, where {found}), or the catalog as Spark configuration (--conf "
            f"{prefix}.type=rest --conf {prefix}.uri=...); nothing was read or created"
        )
    local = where[len("file://") :] if where.startswith("file://") else where
    if "://" not in local and not Path(local).is_dir():
        raise ConfigurationError(
            f"{origin} {where}: no such directory, so catalog {catalog!r} has no lake table there (nothing "
            "was created); give the warehouse the operator writes (its warehouse=, else "
            f"${WAREHOUSE_ENV})"
        )


def run_verify(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``binlog-cdc verify``; return 0 when every table is equal, else 1."""
    import pymysql

    from airflow_provider_binlog.lake.spark import session
    from airflow_provider_binlog.lake.verify import verify

    out = out or sys.stdout
    tables = parse_tables(args.tables)
    conf = parse_conf(args.conf)
    keys = parse_keys(args.key, tables)
    if args.destination and not args.at_cursor:
        raise ConfigurationError("--destination is used only with --at-cursor")
    check_lake(args.warehouse, args.catalog, conf)
    password = source_password(args)
    try:
        conn = pymysql.connect(
            host=args.host, port=args.port, user=args.user, password=password,
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
        if args.at_cursor:
            from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
            from airflow_provider_binlog.lake.verify import verify_cursor

            client = ReplicationClient(ReplicationConfig(args.host, args.port, args.user, password))
            diffs = verify_cursor.verify_at_cursor(
                conn, client, spark, tables, keys, destination=args.destination, show=args.show
            )
        else:
            diffs = verify.verify_tables(conn, spark, tables, keys, show=args.show)
        equal = True
        for diff in diffs:
            out.write(diff.describe(limit=args.show) + "\n")
            equal = equal and diff.equal
        out.flush()
        return 0 if equal else 1
    finally:
        conn.close()
        if owned:
            session.stop_session(spark)
