"""MySqlSourceHook: an Airflow ``mysql`` connection as a binlog source, and its check.

Connection: host, port, login, password (the schema field is not used); TLS through the extras
``ssl`` (a dict, or its JSON text, of pymysql ``ssl`` options, as the official MySQL provider
writes it) or ``ssl_ca`` / ``ssl_cert`` / ``ssl_key``; ``server_id`` (the replica id to register
with) and ``heartbeat_period`` as optional extras. Other extras of the official provider
(``charset``, ``cursor``, ``local_infile``...) are ignored: a binlog reader needs none of them.

**The ``mysql`` connection type.** The official ``apache-airflow-providers-mysql`` is not a
dependency: it pins ``pymysql<1.2`` and needs a C build of ``mysqlclient`` (system headers and a
compiler). This provider registers the ``mysql`` type with this hook itself, *unless* the official
provider is installed: then the type is its own (:func:`.forms.official_mysql_provider`; Airflow keeps
the first registration of a type, and ``airflow-provider-binlog`` sorts before
``apache-airflow-providers-mysql``, so ours would otherwise replace its hook for every DAG). Either
way this provider's hooks and operators read ``mysql`` connections as described above; with the
official provider, ``airflow connections test`` runs its ``SELECT 1`` and the binlog check is
:meth:`MySqlSourceHook.test_connection` (``BinlogHook(...).test_connection()``).

:meth:`MySqlSourceHook.check_source` asks the server what a CDC reader needs: binary logging on,
``binlog_format=ROW``, ``binlog_row_image=FULL``, a nonzero ``server_id`` different from the
replica id configured, and the privileges (``REPLICATION SLAVE``; ``REPLICATION CLIENT``, shown as
``BINLOG MONITOR`` on MariaDB 10.5+; ``SELECT``), each with how to fix it.

Secrets never leave the connection: reprs, logs and messages name the connection id, host and user.
"""

from __future__ import annotations

import json
import re
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.hooks import forms
from airflow_provider_binlog.hooks.forms import given, official_mysql_provider

__all__ = ["MySqlSourceHook", "official_mysql_provider", "replication_config", "source_problems"]


def replication_config(conn: Any, server_id: int | None = None) -> ReplicationConfig:
    """A :class:`ReplicationConfig` from an Airflow ``mysql`` connection (see the module docstring).

    :param conn: the connection.
    :param server_id: replica server id; overrides the connection's ``server_id`` extra.
    """
    if not conn.host:
        raise ConfigurationError(f"MySQL connection {conn.conn_id!r} has no host")
    extra = conn.extra_dejson
    ssl = given(extra, "ssl")
    if isinstance(ssl, str):
        try:
            ssl = json.loads(ssl)
        except ValueError:
            raise ConfigurationError(
                f"MySQL connection {conn.conn_id!r}: the extra 'ssl' is neither a JSON object nor a dict"
            ) from None
    if ssl is None:
        ssl = {k[4:]: extra[k] for k in ("ssl_ca", "ssl_cert", "ssl_key") if given(extra, k) is not None}
    kwargs: dict[str, Any] = {}
    if server_id is None:
        server_id = given(extra, "server_id")
    if server_id is not None:
        kwargs["server_id"] = int(server_id)
    if given(extra, "heartbeat_period") is not None:
        kwargs["heartbeat_period"] = float(extra["heartbeat_period"])
    return ReplicationConfig(
        host=conn.host, port=int(conn.port or 3306), user=conn.login or "root",
        password=conn.password or "", ssl=ssl or None, origin=f"connection {conn.conn_id!r}", **kwargs,
    )  # fmt: skip


# ``GRANT <privileges> ON <object> TO ...`` (roles granted to the user, ``GRANT role TO user``, do not match)
_GRANT = re.compile(r"^GRANT\s+(?P<privs>.+?)\s+ON\s+(?P<on>\S+)\s+TO\s", re.IGNORECASE | re.DOTALL)
_REPLICA = ("REPLICATION SLAVE", "REPLICATION REPLICA")
_CLIENT = ("REPLICATION CLIENT", "BINLOG MONITOR")


def grant_privileges(rows: list[str]) -> tuple[set[str], set[str], bool]:
    """The privileges of ``SHOW GRANTS`` rows: (global ones, those on any object, whether roles are
    granted too), upper case, with ``ALL PRIVILEGES`` kept as such."""
    on_all: set[str] = set()
    anywhere: set[str] = set()
    roles = False
    for row in rows:
        m = _GRANT.match(row.strip())
        if m is None:
            roles = roles or bool(re.match(r"^GRANT\s", row.strip(), re.IGNORECASE))
            continue
        # column lists (``SELECT (a, b)``) hold commas: drop them before splitting
        privs = {p.strip().upper() for p in re.sub(r"\([^)]*\)", "", m["privs"]).split(",") if p.strip()}
        anywhere |= privs
        if m["on"] == "*.*":
            on_all |= privs
    return on_all, anywhere, roles


def source_problems(cur: Any, configured_server_id: int | None) -> list[str]:
    """What is wrong with the source for CDC, each with its fix (empty when all is well).

    :param cur: a cursor on the source, as the connection's user.
    :param configured_server_id: the replica id the connection or the hook sets (``None``: random).
    """
    problems = []
    cur.execute("SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@server_id, CURRENT_USER()")
    log_bin, fmt, image, server_id, current = cur.fetchone()
    if not int(log_bin):
        problems.append(
            "binary logging is off: start the server with log_bin (e.g. --log-bin=mysql-bin, "
            "or log_bin = mysql-bin in its configuration)"
        )
    if str(fmt).upper() != "ROW":
        problems.append(
            f"binlog_format is {fmt}, needs ROW: SET GLOBAL binlog_format = 'ROW' and binlog_format = ROW "
            "in the server's configuration (sessions started before keep theirs)"
        )
    if str(image).upper() != "FULL":
        problems.append(
            f"binlog_row_image is {image}, needs FULL: SET GLOBAL binlog_row_image = 'FULL' and "
            "binlog_row_image = FULL in the server's configuration"
        )
    if not int(server_id):
        problems.append(
            "the server's server_id is 0, and a source with server_id 0 refuses replicas: set "
            "server_id = 1 (any id unique among the servers) in its configuration"
        )
    elif configured_server_id is not None and int(configured_server_id) == int(server_id):
        problems.append(
            f"the replica server_id {configured_server_id} is the source's own server_id: set the "
            "connection's server_id extra to an id no other server or replica uses"
        )
    user, _, host = str(current).partition("@")
    cur.execute("SHOW GRANTS")
    on_all, anywhere, roles = grant_privileges([str(r[0]) for r in cur.fetchall()])
    # privileges of roles granted to the user (MySQL 8 lists only the role) are not looked into
    via_roles = " (unless a role granted to the user holds it: privileges of roles are not checked here)"
    if "ALL PRIVILEGES" not in on_all:
        missing = []
        if not on_all.intersection(_REPLICA):
            missing.append("REPLICATION SLAVE")
        if not on_all.intersection(_CLIENT):
            missing.append("REPLICATION CLIENT")
        if missing:
            problems.append(
                f"user {user!r} lacks {' and '.join(missing)} (MariaDB 10.5+ shows REPLICATION CLIENT as "
                f"BINLOG MONITOR): GRANT {', '.join(missing)} ON *.* TO '{user}'@'{host}'"
                + (via_roles if roles else "")
            )
        if not anywhere.intersection(("SELECT", "ALL PRIVILEGES")):
            problems.append(
                f"user {user!r} lacks SELECT (table definitions and snapshots read the source tables): "
                f"GRANT SELECT ON schema.* TO '{user}'@'{host}' for each source schema"
                + (via_roles if roles else "")
            )
    return problems


class MySqlSourceHook(BaseHook):
    """A MySQL or MariaDB server read as a binlog source (see the module docstring).

    :param mysql_conn_id: the ``mysql`` connection (a user with REPLICATION SLAVE, REPLICATION
        CLIENT and SELECT).
    :param server_id: replica server id to register with (overrides the connection's extra).
    """

    conn_name_attr = "mysql_conn_id"
    default_conn_name = "mysql_default"
    conn_type = "mysql"
    hook_name = "MySQL (binlog CDC source)"

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """The extra fields for Airflow 3 versions before 3.2 (later ones read the provider info)."""
        return forms.legacy_widgets(forms.MYSQL)

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Labels, placeholders and hidden fields for Airflow 3 versions before 3.2."""
        return forms.legacy_behaviour(forms.MYSQL)

    def __init__(
        self, mysql_conn_id: str = default_conn_name, server_id: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.mysql_conn_id = mysql_conn_id
        self.server_id = server_id

    def __repr__(self) -> str:
        return f"MySqlSourceHook(mysql_conn_id={self.mysql_conn_id!r})"

    @cached_property
    def replication_config(self) -> ReplicationConfig:
        """The source as the core wants it (its repr hides the password)."""
        return replication_config(self.get_connection(self.mysql_conn_id), self.server_id)

    def get_conn(self) -> Any:
        """A plain autocommit pymysql connection to the source (for SELECTs); failures name the
        connection id and the address."""
        return ReplicationClient(self.replication_config).connect()

    def check_source(self) -> list[str]:
        """What is wrong with the source for CDC, each with its fix (empty when all is well)."""
        configured = self.server_id
        if configured is None:
            configured = given(self.get_connection(self.mysql_conn_id).extra_dejson, "server_id")
        conn = self.get_conn()
        try:
            with conn.cursor() as cur:
                return source_problems(cur, configured)
        finally:
            conn.close()

    def test_connection(self) -> tuple[bool, str]:
        """Connect, check the binlog settings and privileges (:meth:`check_source`) and read the
        head position; the message names what is wrong and how to fix it, never the password."""
        try:
            problems = self.check_source()
            where = f"source {self.replication_config.address} (connection {self.mysql_conn_id!r})"
            if problems:
                return forms.tested(
                    False, f"{where} is not ready for binlog CDC: " + "; ".join(problems), self.mysql_conn_id
                )
            head = ReplicationClient(self.replication_config).head_position()
            return forms.tested(True, f"{where} ready for binlog CDC, head {head}", self.mysql_conn_id)
        except Exception as exc:  # the id left out: the UI's Test button runs under a random one
            return forms.tested(False, str(exc), self.mysql_conn_id)
