"""``binlog-cdc status``: where a destination stands, read without taking it.

Prints the committed cursor (and its GTID set), the server's head, the lag (binlog bytes and files
from the cursor to the head, and the age of the oldest unread transaction), the server's binlog
retention and the cursor file's headroom (time until the server may purge it), whether a run holds
the destination now (its ``running`` node, with ZooKeeper), and the stored filter; then a
``WARNING:`` line, with the remedy, for a cursor file within ``--headroom`` of being purged or
already gone::

    binlog-cdc status --host db --user repl --password-env DB_PASSWORD \\
        --destination shop --zookeeper zk1:2181/binlog-cdc [--json]

It writes nothing and waits for nobody (``--running-timeout`` is not used). Every wait is bounded:
connecting to the source or ZooKeeper and ZooKeeper's answers by ``--timeout`` (ZooKeeper's retries
by twice that), the source's answers within 30 s. The source user needs REPLICATION CLIENT and
REPLICATION SLAVE (the file times come from short dumps). Exit status: 0, or 3 when a warning was
printed (1: the status could not be read).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from airflow_provider_binlog.cli.common import (
    add_destination_arguments,
    add_source_arguments,
    source_password,
)

WARNING_EXIT = 3
"""The exit status when the report holds a warning."""


def register(subparsers: Any) -> None:
    """Add ``status``."""
    p = subparsers.add_parser(
        "status",
        help="print a destination's cursor, the server's head, the lag and the binlog retention headroom",
        description="Where a destination stands: cursor, head, lag, retention headroom, running, filter.",
    )
    add_source_arguments(p, "a user with REPLICATION CLIENT and REPLICATION SLAVE")
    add_destination_arguments(p)
    p.add_argument(
        "--headroom", type=float, default=0.25, metavar="FRACTION",
        help="warn when the cursor's binlog may be purged within this fraction of the server's retention "
        "(default 0.25, as the operator's retention_headroom)",
    )  # fmt: skip
    p.add_argument(
        "--timeout", type=float, default=10.0,
        help="seconds to wait for a connection to the source or ZooKeeper and for ZooKeeper's answers "
        "(default 10)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    p.set_defaults(func=run_status)


def run_status(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``binlog-cdc status``; return 0, or :data:`WARNING_EXIT` when it warns."""
    from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
    from airflow_provider_binlog.canal.meta.model import ClientIdentity
    from airflow_provider_binlog.drain.status import read_status
    from airflow_provider_binlog.drain.wiring import Wiring, ZooKeeperConfig, normal_chroot
    from airflow_provider_binlog.errors import ConfigurationError

    out = out or sys.stdout
    if not 0 <= args.headroom <= 1:
        raise ConfigurationError(f"--headroom is a fraction of the retention (0..1), not {args.headroom:g}")
    if args.timeout <= 0:
        raise ConfigurationError(f"--timeout must be positive, not {args.timeout:g}")
    source = ReplicationConfig(
        host=args.host, port=args.port, user=args.user, password=source_password(args),
        connect_timeout=args.timeout,
    )  # fmt: skip
    client = ReplicationClient(source)
    if args.zookeeper:
        hosts, slash, chroot = args.zookeeper.partition("/")
        zookeeper = ZooKeeperConfig(
            hosts, chroot=normal_chroot(slash + chroot), timeout=args.timeout, origin="--zookeeper"
        )
        wiring = Wiring(zookeeper)
    else:
        wiring = Wiring(meta_dir=args.meta_dir)
    try:
        meta = wiring.meta_manager()
        try:
            status = read_status(
                meta, ClientIdentity(args.destination, args.client_id), client,
                lambda: client.connect(read_timeout=args.timeout), args.headroom, zk=wiring.client,
                timeout=args.timeout,
            )  # fmt: skip
        finally:
            meta.close()
    finally:
        wiring.close()
    if args.json:
        out.write(json.dumps(status.as_dict(), indent=2, sort_keys=True) + "\n")
    else:
        out.write("\n".join(status.lines()) + "\n")
    out.flush()
    return WARNING_EXIT if status.warnings() else 0
