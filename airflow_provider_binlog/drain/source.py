"""What a run asks the source before it drains: where to stop, which tables its routes match, how
far the cursor's binlog file is from being purged (:func:`retention_headroom`: the one computation
the run start, the sensor and ``binlog-cdc status`` use), and which routed tables are children of
cascading foreign keys (:func:`cascades`)."""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.errors import BinlogCdcError

if TYPE_CHECKING:
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.routing import Routes

_SYSTEM_SCHEMAS = "('mysql', 'sys', 'information_schema', 'performance_schema')"


def stop_point(client: Any, stop_at: Any) -> BinlogPosition:
    """The position a run drains to: ``head`` (or ``None``) is the server's head now; ``file:pos``,
    ``gtid:SET`` and timestamps as :func:`~..canal.positions.points.resolve_stop` reads them.

    :param client: a :class:`~..binlog.client.ReplicationClient` of the source.
    :param stop_at: the stop point (a task's ``data_interval_end`` already substituted).
    """
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.positions.points import parse_point, resolve_stop

    start = None
    if stop_at not in (None, "head") and parse_point(stop_at).gtid is not None:
        # a GTID stop is searched from the oldest binlog the server still has
        files = client.binlog_files()
        start = BinlogPosition(files[0][0], 4) if files else None
    return resolve_stop(client, stop_at, start)


def known_routes(connect: Callable[[], Any], routes: Routes) -> dict[str, str]:
    """Source -> target for every existing source table a route matches (glob routes resolved
    against ``information_schema``), so reconciliation and the marks loaded up front see every
    target.

    :param connect: opens a plain autocommit connection to the source (closed here).
    :param routes: the run's routes.
    """
    known: dict[str, str] = {}
    conn = connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                f"WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN {_SYSTEM_SCHEMAS}"
            )
            for schema, table in cur.fetchall():
                target = routes.target_for(str(schema), str(table))
                if target is not None:
                    known[f"{schema}.{table}"] = target
    finally:
        conn.close()
    return known


@dataclass(frozen=True)
class ShadowNamed:
    """An existing source table that a glob route leaves out because it is named like a shadow table
    of gh-ost or pt-online-schema-change (:meth:`~..canal.routing.Routes.shadow_skipped`).

    :param source: ``schema.table``.
    :param target: the lake table the route would give it.
    :param base: ``schema.table`` it would be the copy or parked table of, when that table exists.
    """

    source: str
    target: str
    base: str | None
    copy: bool = False
    """Named like the copy table of the routed ``base`` (read for its lake copy, see online_copy)."""

    def describe(self, destination: str) -> str:
        """The run start's warning: the table, why it is left out, and the ways to load it."""
        if self.copy:
            why = (
                f"it is read as the copy of {self.base} while an online schema change of it runs, and "
                "swapped into that table's lake table at the cut-over"
            )
        elif self.base is not None:
            why = f"{self.base} exists: while an online schema change of it runs, this table is part of it"
        else:
            why = "no table it could be the copy of exists, so it is likely a table of its own"
        return (
            f"destination {destination}: source table {self.source} gets no lake table: its name looks "
            "like a shadow table of gh-ost or pt-online-schema-change (_<table>_gho/_ghc/_del/_new/_old), "
            f"which glob routes leave out ({why}). To load it into {self.target}: shadow_tables=True on the "
            f"operator and the sensor, or the exact route {{{self.source!r}: {self.target!r}}}, with "
            "snapshot='when_needed' for the rows it has already; to silence this: "
            f"exclude=[{self.source!r}]"
        )


def shadow_named(connect: Callable[[], Any], routes: Routes) -> list[ShadowNamed]:
    """The existing source tables a glob (or regex) route would take were they not named like shadow
    tables (none when ``shadow_tables`` is set or every route is exact).

    :param connect: opens a plain autocommit connection to the source (closed here).
    """
    from airflow_provider_binlog.canal.online_copy import copy_base
    from airflow_provider_binlog.canal.routing import SHADOW_SUFFIXES, is_shadow_table

    if routes.shadow_tables or len(routes.exact) == len(routes.routes):
        return []
    conn = connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                f"WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN {_SYSTEM_SCHEMAS}"
            )
            names = [(str(schema), str(table)) for schema, table in cur.fetchall()]
    finally:
        conn.close()
    present = {(schema, table.lower()) for schema, table in names}
    found = []
    for schema, table in sorted(names):
        if not is_shadow_table(table):
            continue
        target = routes.shadow_skipped(schema, table)
        if target is None:
            continue
        base = next((table[1 : -len(s) - 1] for s in SHADOW_SUFFIXES if table.lower().endswith("_" + s)), "")
        exists = (schema, base.lower()) in present
        copy = exists and copy_base(table) is not None and routes.target_for(schema, base) is not None
        found.append(ShadowNamed(f"{schema}.{table}", target, f"{schema}.{base}" if exists else None, copy))
    return found


@dataclass(frozen=True)
class Retention:
    """How long the server keeps a destination's cursor file (see :func:`retention_headroom`).

    :param destination: for the message.
    :param file: the binlog file the run starts reading in.
    :param retention_seconds: the server's age-based retention (``None``: it purges nothing by age).
    :param oldest: the oldest binlog file on the server.
    :param head: the file the server writes now (never purged).
    :param closed_at: unix time ``file`` was closed: when the next file began (``None``: ``file``
        is the active one, or the next file's start could not be read).
    :param headroom_seconds: seconds until ``file`` is old enough to be purged (``closed_at`` plus
        the retention, minus now; negative: it goes at the server's next rotation or purge).
    :param warn_below: the headroom under which a run warns.
    """

    destination: str
    file: str
    retention_seconds: float | None
    oldest: str | None
    head: str | None
    closed_at: float | None
    headroom_seconds: float | None
    warn_below: float | None

    @property
    def warn(self) -> bool:
        """The cursor's file is within the configured headroom of being purged."""
        if self.headroom_seconds is None or self.warn_below is None:
            return False
        return self.headroom_seconds < self.warn_below

    @property
    def metric_seconds(self) -> float | None:
        """The headroom as one number for a gauge: :attr:`headroom_seconds` when known; for the
        file the server writes now, the whole retention (a lower bound: its age starts only when
        it is closed); ``None`` when the server purges nothing by age or the age is unknown."""
        if self.headroom_seconds is not None:
            return self.headroom_seconds
        if self.retention_seconds is not None and self.file == self.head:
            return self.retention_seconds
        return None

    def as_dict(self) -> dict[str, Any]:
        """The run summary's ``retention`` entry."""

        def rounded(v: float | None) -> float | None:
            return None if v is None else round(v, 1)

        return {
            "file": self.file,
            "oldest": self.oldest,
            "head": self.head,
            "retention_seconds": rounded(self.retention_seconds),
            "closed_at": _iso(self.closed_at) if self.closed_at is not None else None,
            "headroom_seconds": rounded(self.headroom_seconds),
            "warn_below_seconds": rounded(self.warn_below),
            "warning": self.warn,
        }

    def describe(self) -> str:
        """One line for the task log: the numbers, and when :attr:`warn`, what to do."""
        head = f"destination {self.destination}: the cursor's binlog {self.file}"
        if self.retention_seconds is None:
            return f"{head}: the server purges no binlog by age (binlog_expire_logs_seconds=0)"
        if self.headroom_seconds is None:
            why = "is the one the server writes now" if self.file == self.head else "has an unknown age"
            return f"{head} {why}; retention {_span(self.retention_seconds)}"
        assert self.closed_at is not None and self.warn_below is not None
        when = (
            f"may be purged in {_span(self.headroom_seconds)}"
            if self.headroom_seconds >= 0
            else f"is {_span(-self.headroom_seconds)} past the retention and goes at the server's next "
            "rotation or purge"
        )
        line = (
            f"{head} (closed {_iso(self.closed_at)}, oldest {self.oldest}, head {self.head}) {when}; "
            f"retention {_span(self.retention_seconds)}, warning below {_span(self.warn_below)}"
        )
        if self.warn:
            line += (
                ". Runs are falling behind the server's binlog retention: run the destination more "
                "often or raise binlog_expire_logs_seconds; once the file is purged, the next run "
                'fails and needs a new snapshot (snapshot="when_needed")'
            )
        return line


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


def _span(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _variable(conn: Any, name: str) -> Any:
    """``@@name``, or ``None`` where the server has no such variable."""
    import pymysql

    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT @@{name}")  # name: one of the constants below
            row = cur.fetchone()
    except pymysql.err.MySQLError:
        return None
    return row[0] if row else None


def retention_seconds(connect: Callable[[], Any]) -> float | None:
    """The server's age-based binlog retention in seconds (``None``: it purges nothing by age):
    ``binlog_expire_logs_seconds`` (MySQL 8, MariaDB 10.6+), else ``expire_logs_days``; MySQL's
    ``binlog_expire_logs_auto_purge=OFF`` turns it off.

    :param connect: opens a plain autocommit connection to the source (closed here).
    """
    conn = connect()
    try:
        if str(_variable(conn, "binlog_expire_logs_auto_purge")) in ("0", "OFF"):
            return None
        seconds = _variable(conn, "binlog_expire_logs_seconds")
        if seconds is not None and float(seconds) > 0:
            return float(seconds)
        days = _variable(conn, "expire_logs_days")
        if days is not None and float(days) > 0:
            return float(days) * 86400
        return None
    finally:
        conn.close()


def _file_start(client: Any, file: str) -> float | None:
    """Unix time ``file`` began: its FORMAT_DESCRIPTION event's timestamp (read by a short
    non-blocking dump with a server id of its own); ``None`` when it cannot be read."""
    from airflow_provider_binlog.binlog.constants import EventType
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.positions.start import side_client

    fde, start = EventType.FORMAT_DESCRIPTION_EVENT, BinlogPosition(file, 4)
    with contextlib.suppress(Exception), side_client(client).dump(start, blocking=False) as s:
        for n, event in enumerate(s):
            if event.header.type_code == fde and event.header.timestamp:
                return float(event.header.timestamp)
            if n >= 4:
                break
    return None


def retention_headroom(
    client: Any,
    connect: Callable[[], Any],
    destination: str,
    file: str,
    fraction: float = 0.25,
    now: float | None = None,
    files: list[tuple[str, int]] | None = None,
) -> Retention:
    """How long until the binlog ``file`` (the cursor's) may be purged by age.

    A file is purged by age once it is older than the retention; its age counts from its last
    write, i.e. from when the next file began (the next file's FORMAT_DESCRIPTION timestamp). The
    file the server writes now is never purged.

    :param client: a :class:`~..binlog.client.ReplicationClient` of the source.
    :param connect: opens a plain autocommit connection to the source.
    :param destination: for the message.
    :param file: the cursor's binlog file.
    :param fraction: warn when the headroom is below this fraction of the retention.
    :param now: the current unix time (default: the clock).
    :param files: the server's binlog list as the caller read it (default: read here).
    """
    retention = retention_seconds(connect)
    names = [name for name, _ in (client.binlog_files() if files is None else files)]
    oldest, head = (names[0], names[-1]) if names else (None, None)
    closed_at = headroom = warn_below = None
    if retention is not None:
        warn_below = fraction * retention
        later = names[names.index(file) + 1 :] if file in names else []
        if later:
            closed_at = _file_start(client, later[0])
            if closed_at is not None:
                headroom = closed_at + retention - (time.time() if now is None else now)
    return Retention(destination, file, retention, oldest, head, closed_at, headroom, warn_below)


def check_retention(
    client: Any,
    connect: Callable[[], Any],
    destination: str,
    file: str,
    fraction: float,
    report: Callable[[int, str], None],
) -> Retention | None:
    """:func:`retention_headroom` for a check at the start of work (a run, a sensor): the line of
    :meth:`Retention.describe` reported at WARNING when :attr:`Retention.warn`, else INFO; a check
    that fails is reported at WARNING and returns ``None`` (it never stops the caller).

    :param report: ``report(level, line)``, e.g. the task log.
    """
    try:
        retention = retention_headroom(client, connect, destination, file, fraction)
    except Exception as exc:
        report(
            logging.WARNING,
            f"destination {destination}: cannot check the binlog retention: {type(exc).__name__}: {exc}",
        )
        return None
    report(logging.WARNING if retention.warn else logging.INFO, retention.describe())
    return retention


CASCADE_MODES = ("warn", "fail", "ignore")
_CASCADING = ("CASCADE", "SET NULL")


class CascadeError(BinlogCdcError):
    """A routed table is the child of a cascading foreign key and the run was told to stop."""


@dataclass(frozen=True)
class Cascade:
    """A foreign key whose ``ON DELETE`` / ``ON UPDATE`` changes a routed child table.

    InnoDB applies such changes itself: they are not in the ROW binlog (MariaDB; MySQL where InnoDB
    enforces the key), so the child's lake table silently misses them.

    :param child: the routed ``schema.table`` holding the foreign key.
    :param target: its lake table.
    :param constraint: the foreign key's name.
    :param parent: the referenced ``schema.table``.
    :param on_delete: ``CASCADE``, ``SET NULL``, or another rule.
    :param on_update: likewise.
    """

    child: str
    target: str
    constraint: str
    parent: str
    on_delete: str
    on_update: str

    @property
    def rules(self) -> str:
        """``ON DELETE CASCADE, ON UPDATE SET NULL`` (only the cascading ones)."""
        rules = (("DELETE", self.on_delete), ("UPDATE", self.on_update))
        return ", ".join(f"ON {what} {rule}" for what, rule in rules if rule in _CASCADING)

    def as_dict(self) -> dict[str, str]:
        return {
            "table": self.child, "target": self.target, "constraint": self.constraint,
            "parent": self.parent, "on_delete": self.on_delete, "on_update": self.on_update,
        }  # fmt: skip

    def describe(self, destination: str) -> str:
        """The warning: the constraint, why the lake diverges, the remedies."""
        return (
            f"destination {destination}: {self.child} is the child of foreign key `{self.constraint}` "
            f"({self.rules}) on {self.parent}: the server changes its rows for a change of "
            f"{self.parent} without writing them to the ROW binlog, so {self.target} misses them. "
            f"Remedies: re-snapshot the table now and then (binlog-cdc resnapshot --destination "
            f"{destination} --table {self.child} --target {self.target}), or change the child rows in "
            "the application before the parent's (then the binlog has them); on_cascade='ignore' "
            "silences this, on_cascade='fail' stops the run"
        )


_FK_TAIL = re.compile(
    r"\) REFERENCES .*\)((?: ON (?:DELETE|UPDATE) (?:CASCADE|SET NULL|SET DEFAULT|NO ACTION|RESTRICT))*),?$"
)
_FK_RULE = re.compile(r" ON (DELETE|UPDATE) (CASCADE|SET NULL|SET DEFAULT|NO ACTION|RESTRICT)")


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _foreign_key_rules(create: str) -> dict[str, tuple[str, str]]:
    """Constraint name -> (ON DELETE, ON UPDATE) rules from a ``SHOW CREATE TABLE`` text (one
    constraint a line, as MySQL and MariaDB print it; a rule not given is ``RESTRICT``)."""
    rules = {}
    for line in create.splitlines():
        line = line.strip()
        if not line.startswith("CONSTRAINT `") or " FOREIGN KEY " not in line:
            continue
        name_end = 12
        while True:  # the name ends at a backtick that is not doubled
            name_end = line.index("`", name_end)
            if line[name_end : name_end + 2] != "``":
                break
            name_end += 2
        name = line[12:name_end].replace("``", "`")
        tail = _FK_TAIL.search(line)
        found = dict(_FK_RULE.findall(tail.group(1))) if tail else {}
        rules[name] = (found.get("DELETE", "RESTRICT"), found.get("UPDATE", "RESTRICT"))
    return rules


def cascades(connect: Callable[[], Any], known: dict[str, str]) -> list[Cascade]:
    """The cascading foreign keys (``CASCADE`` or ``SET NULL`` on delete or update) whose child is
    one of the routed tables ``known`` (source ``schema.table`` -> target, as :func:`known_routes`).

    The keys come from ``information_schema.KEY_COLUMN_USAGE`` and their rules from ``SHOW CREATE
    TABLE`` of each routed child: both need only SELECT (``REFERENTIAL_CONSTRAINTS``, which holds
    the rules, shows a user with SELECT alone nothing on MariaDB).

    :param connect: opens a plain autocommit connection to the source (closed here).
    """
    if not known:
        return []
    conn = connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT DISTINCT TABLE_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, REFERENCED_TABLE_SCHEMA, "
                "REFERENCED_TABLE_NAME FROM information_schema.KEY_COLUMN_USAGE "
                f"WHERE REFERENCED_TABLE_NAME IS NOT NULL AND TABLE_SCHEMA NOT IN {_SYSTEM_SCHEMAS} "
                "ORDER BY TABLE_SCHEMA, TABLE_NAME, CONSTRAINT_NAME"
            )
            keys = [tuple(str(v) for v in row) for row in cur.fetchall()]
            creates: dict[str, str] = {}
            found = []
            for schema, table, name, parent_schema, parent in keys:
                child = f"{schema}.{table}"
                if child not in known:
                    continue
                if child not in creates:
                    cur.execute(f"SHOW CREATE TABLE {_quote(schema)}.{_quote(table)}")
                    creates[child] = str(cur.fetchone()[1])
                on_delete, on_update = _foreign_key_rules(creates[child]).get(name, ("?", "?"))
                if on_delete in _CASCADING or on_update in _CASCADING:
                    found.append(
                        Cascade(child, known[child], name, f"{parent_schema}.{parent}", on_delete, on_update)
                    )
    finally:
        conn.close()
    return found
