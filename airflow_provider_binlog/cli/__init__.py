"""``binlog-cdc``: command-line tools, one module per subcommand.

Each module in :data:`SUBCOMMAND_MODULES` exposes ``register(subparsers)``; it adds its parser and
sets ``func`` (``(args) -> int``) as the parser default. To add a subcommand, write its module here
and append its name to the list. What several subcommands share (the source, destination and lake
options, ``--conf``, the password) is in :mod:`.common`.

* :mod:`.events`: ``events``, print binlog events from a server or from files
* :mod:`.verify`: ``verify``, compare source tables with their lake tables
* :mod:`.snapshot`: ``snapshot``, load the existing rows of tables into the lake
* :mod:`.resnapshot`: ``resnapshot``, rebuild one lake table from its source at a binlog point
* :mod:`.status`: ``status``, where a destination stands, read without taking it
* :mod:`.canal_server`: ``canal-server``, serve destinations to canal clients
* :mod:`.maintain`: ``maintain``, maintain lake tables (when due)
* :mod:`.read_point`: ``read-point``, each lake table's snapshot at a destination's read point

``python -m airflow_provider_binlog.cli`` runs the same command as ``binlog-cdc``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from airflow_provider_binlog.errors import BinlogCdcError

SUBCOMMAND_MODULES: list[str] = [
    "airflow_provider_binlog.cli.events",
    "airflow_provider_binlog.cli.verify",
    "airflow_provider_binlog.cli.snapshot",
    "airflow_provider_binlog.cli.resnapshot",
    "airflow_provider_binlog.cli.status",
    "airflow_provider_binlog.cli.canal_server",
    "airflow_provider_binlog.cli.maintain",
    "airflow_provider_binlog.cli.read_point",
]
"""Modules whose ``register(subparsers)`` adds a subcommand (see the module docstring)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="binlog-cdc", description="airflow-provider-binlog tools")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``binlog-cdc``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except BinlogCdcError as exc:
        print(f"binlog-cdc {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # output closed early (e.g. piped into head): not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130
