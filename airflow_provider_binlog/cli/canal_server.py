"""``binlog-cdc canal-server``: serve destinations to canal clients over canal's TCP protocol.

::

    CANAL_PASSWORD=... DB_PASSWORD=... binlog-cdc canal-server --port 11111 \\
        --host db --user repl --password-env DB_PASSWORD \\
        --destination shop --filter 'shop\\..*' --destination audit --filter 'audit\\..*' \\
        --zookeeper zk1:2181/binlog-cdc --canal-user canal --canal-password-env CANAL_PASSWORD

Runs until SIGTERM/SIGINT. With ``--zookeeper`` it registers as canal servers do and a second
server started the same way is a standby (see :mod:`.canalnet.cluster`); with ``--meta-dir`` it runs
every destination alone. The account is canal's: ``--canal-password-env`` names a variable with the
password, ``--canal-passwd-env`` one with canal's stored form (``canal.passwd``: hex of
SHA1(SHA1(password))); neither: no password asked. Passwords never reach the log.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from typing import Any

from airflow_provider_binlog.cli.common import add_source_arguments, source_password
from airflow_provider_binlog.errors import ConfigurationError

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    """Add ``canal-server``."""
    p = subparsers.add_parser(
        "canal-server",
        help="serve destinations to canal clients (canal's TCP protocol)",
        description="A canal server over this provider's destinations: canal clients subscribe, get, ack "
        "and roll back as against canal's own server.",
    )  # fmt: skip
    add_source_arguments(p, "a user with REPLICATION CLIENT and REPLICATION SLAVE")
    p.add_argument("--listen", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    p.add_argument("--listen-port", "--canal-port", dest="canal_port", type=int, default=11111,
                   help="port to listen on (default 11111, canal's)")  # fmt: skip
    p.add_argument("--register-ip", help="the address written to ZooKeeper (default: this host's)")
    p.add_argument("--destination", action="append", required=True, help="a destination served (repeatable)")
    p.add_argument(
        "--filter", action="append", default=[],
        help="canal filter of the destination at the same place (default: every table)",
    )  # fmt: skip
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--meta-dir", help="file meta store directory")
    where.add_argument("--zookeeper", metavar="HOSTS", help="ZooKeeper hosts[/chroot]: meta store and HA")
    p.add_argument("--zk-timeout", type=float, default=15.0, help="ZooKeeper session timeout (default 15)")
    p.add_argument("--canal-user", default="", help="the user clients log in as (default: any)")
    p.add_argument("--canal-password-env", metavar="VAR", help="variable holding the clients' password")
    p.add_argument("--canal-passwd-env", metavar="VAR", help="variable holding canal.passwd (SHA1(SHA1) hex)")
    p.add_argument("--max-get-wait", type=float, default=30.0, help="longest wait of one GET in seconds")
    p.add_argument(
        "--idle-timeout", type=float, default=600.0, help="seconds before an idle client is closed"
    )
    p.add_argument("--running-timeout", type=float, default=60.0,
                   help="seconds to wait for a dead server's client node when taking over")  # fmt: skip
    p.set_defaults(func=run_canal_server)


def _env(var: str, option: str) -> str:
    if var not in os.environ:
        raise ConfigurationError(f"environment variable {var} ({option}) is not set")
    return os.environ[var]


def run_canal_server(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    from airflow_provider_binlog.binlog.client import ReplicationConfig
    from airflow_provider_binlog.canal.filter import TableFilter
    from airflow_provider_binlog.canal.instance import InstanceConfig
    from airflow_provider_binlog.canal.meta.zookeeper_client import (
        ZooKeeperConfig,
        connect_zookeeper,
        normal_chroot,
    )
    from airflow_provider_binlog.canalnet.protocol import scramble_gen_pass
    from airflow_provider_binlog.canalnet.server import Account, CanalServer, ServedDestination

    if len(args.filter) > len(args.destination):
        raise ConfigurationError("more --filter than --destination options")
    source = ReplicationConfig(host=args.host, port=args.port, user=args.user, password=source_password(args))
    served = []
    for i, name in enumerate(args.destination):
        flt = (
            TableFilter(include=args.filter[i]) if i < len(args.filter) and args.filter[i] else TableFilter()
        )
        served.append(ServedDestination(InstanceConfig(name, source, flt)))
    if args.canal_password_env:
        password_hash = scramble_gen_pass(_env(args.canal_password_env, "--canal-password-env").encode())
    elif args.canal_passwd_env:
        password_hash = _env(args.canal_passwd_env, "--canal-passwd-env").strip().lower()
    else:
        password_hash = ""
    zk = None
    meta: Any
    if args.zookeeper:
        from airflow_provider_binlog.canal.meta.zookeeper import ZooKeeperMetaManager

        hosts, slash, chroot = args.zookeeper.partition("/")
        zk = connect_zookeeper(
            ZooKeeperConfig(
                hosts, chroot=normal_chroot(slash + chroot), timeout=args.zk_timeout, origin="--zookeeper"
            )
        )
        meta = lambda: ZooKeeperMetaManager(zk)  # noqa: E731
    else:
        from airflow_provider_binlog.canal.meta.file import FileMetaManager

        meta = FileMetaManager(args.meta_dir)
    server = CanalServer(
        served, meta, Account(args.canal_user, password_hash), host=args.listen, port=args.canal_port,
        zookeeper=zk, register_ip=args.register_ip, idle_timeout=args.idle_timeout,
        max_get_wait=args.max_get_wait, running_timeout=args.running_timeout,
    )  # fmt: skip
    stop = stop or threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    print(f"canal server on {server.address} for {', '.join(args.destination)}", flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        server.stop()
        if zk is not None:
            zk.stop()
            zk.close()
    return 0
