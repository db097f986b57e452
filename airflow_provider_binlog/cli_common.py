"""What several ``binlog-cdc`` subcommands share: the source connection options and the password."""

from __future__ import annotations

import argparse
import os
from typing import Any

from airflow_provider_binlog.errors import ConfigurationError


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


def source_password(args: argparse.Namespace) -> str:
    """The password from the variable ``--password-env`` names ("" without the option)."""
    var = args.password_env
    if not var:
        return ""
    if var not in os.environ:
        raise ConfigurationError(f"environment variable {var} (--password-env) is not set")
    return os.environ[var]
