"""What several ``binlog-cdc`` subcommands share: the source, destination and lake options, ``--conf``
and the password."""

from __future__ import annotations

import argparse
import os
from typing import Any

from airflow_provider_binlog.errors import ConfigurationError


def add_command(subparsers: Any, name: str, help: str, description: str) -> Any:
    """Add the subcommand ``name`` whose ``description`` is printed as written (its line breaks and
    examples kept); return its parser."""
    return subparsers.add_parser(
        name, help=help, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def add_source_arguments(parser: Any, user_help: str, required: bool = True, title: str = "source") -> Any:
    """Add ``--host --port --user --password-env`` in an argument group and return the group."""
    group = parser.add_argument_group(title)
    group.add_argument("--host", required=required, help="server host")
    group.add_argument("--port", type=int, default=3306, help="server port (default 3306)")
    group.add_argument("--user", default="root", help=user_help)
    group.add_argument(
        "--password-env", metavar="VAR", help="name of the environment variable holding the password"
    )
    return group


def add_destination_arguments(parser: Any) -> Any:
    """The destination, its client id, its meta store (``--meta-dir`` or ``--zookeeper``) and the
    wait for another consumer: what the subcommands that hold a destination share."""
    dest = parser.add_argument_group("destination")
    dest.add_argument("--destination", required=True, help="the destination (subscription) name")
    dest.add_argument("--client-id", type=int, default=1001, help="canal client id (default 1001)")
    where = dest.add_mutually_exclusive_group(required=True)
    where.add_argument("--meta-dir", help="file meta store directory")
    where.add_argument("--zookeeper", metavar="HOSTS", help="ZooKeeper hosts[/chroot] of the meta store")
    dest.add_argument(
        "--running-timeout", type=float, default=60.0,
        help="with --zookeeper: seconds to wait for another consumer of the destination (default 60)",
    )  # fmt: skip
    return dest


def add_lake_arguments(
    parser: Any,
    warehouse_help: str = "warehouse of the embedded Hadoop catalog",
    catalog_help: str = "Iceberg catalog name used in targets (default lake)",
) -> Any:
    """``--warehouse --catalog --spark-master --conf`` in the group ``lake``; return the group
    (``--conf`` is read by :func:`parse_conf`)."""
    lake = parser.add_argument_group("lake")
    lake.add_argument("--warehouse", help=warehouse_help)
    lake.add_argument("--catalog", default="lake", help=catalog_help)
    lake.add_argument("--spark-master", default="local[2]", help="Spark master (default local[2])")
    lake.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="more Spark configuration (repeatable)",
    )
    return lake


def parse_conf(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{k: v}``."""
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"--conf: cannot read {item!r}; write key=value")
        conf[key.strip()] = value
    return conf


def source_password(args: argparse.Namespace) -> str:
    """The password from the variable ``--password-env`` names ("" without the option)."""
    var = args.password_env
    if not var:
        return ""
    if var not in os.environ:
        raise ConfigurationError(f"environment variable {var} (--password-env) is not set")
    return os.environ[var]
