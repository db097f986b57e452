"""Where a destination stands, read without taking it: its cursor against the server's head, the
lag, the binlog retention headroom of the cursor's file, who consumes it now, and the warnings
that follow (``binlog-cdc status`` prints it).

Everything is read, nothing written: the meta store's cursor and filter, the ``running`` node (with
ZooKeeper), the server's binlog list, head and retention, and two short non-blocking side dumps
(the next file's start time for the headroom, :func:`.source.retention_headroom`; the first
transaction after the cursor for the lag in seconds, :func:`first_unread`). Every call is bounded.

The lag in seconds is the destination's own: the age of the oldest unread transaction that changes
a table its filter passes (a row event, a DDL or a statement-format DML naming one); transactions
of other schemas and tables are read past (they are no lag of this destination, though their bytes
count in ``lag_bytes``, which is the binlog's distance).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.drain.source import Retention, _iso, _span, retention_headroom

if TYPE_CHECKING:
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.meta.base import MetaManager
    from airflow_provider_binlog.canal.meta.model import ClientIdentity, LogPosition

CURSOR_FILE_STATES = ("present", "purged", "beyond_head", "none")
"""Where the cursor's binlog file is: on the server, purged (older than the oldest file), newer
than the newest (a reset binlog or another server), or there is no file cursor."""

_NOT_A_TRANSACTION = frozenset(
    {
        1, 3, 4, 15,  # START_EVENT_V3, STOP, ROTATE, FORMAT_DESCRIPTION
        27, 28, 35, 41,  # HEARTBEAT, IGNORABLE, PREVIOUS_GTIDS, HEARTBEAT_V2
        161, 163, 164,  # MariaDB BINLOG_CHECKPOINT, GTID_LIST, START_ENCRYPTION
    }
)  # fmt: skip
"""Event type codes that open no transaction: a file's frame and the server's bookkeeping."""

_ENDS_A_TRANSACTION = frozenset({16, 38})  # XID, XA_PREPARE
FILTERED_MAX_EVENTS = 50_000
"""How many events :func:`first_unread` reads at most past the cursor when it looks for a
destination's own transactions among other tables' (then the age is unknown, never a wrong one)."""

Matches = Callable[[str, "str | None"], bool]
"""``(schema, table or None) -> bool``: a destination's filter
(:meth:`..canal.filter.TableFilter.matches`)."""


def _touches(body: Any, matches: Matches) -> bool:
    """Whether a decoded event changes a table ``matches`` passes: a row event of one, a DDL
    naming one (or, naming none, its default schema), or a statement-format DML writing one."""
    from airflow_provider_binlog.binlog.events_query import ExecuteLoadQueryEvent, QueryEvent
    from airflow_provider_binlog.binlog.rows import RowsEvent

    if isinstance(body, RowsEvent):
        return body.table_map is not None and matches(body.schema, body.table)
    if not isinstance(body, QueryEvent | ExecuteLoadQueryEvent):
        return False
    from airflow_provider_binlog.canal.sql.ddl import parse_ddl
    from airflow_provider_binlog.canal.sql.statement import statement_changes

    if statement_changes(body, matches):
        return True
    query = body.query if isinstance(body, ExecuteLoadQueryEvent) else body
    stmt = parse_ddl(query.sql, query.schema)
    if stmt is None:
        return False
    names: list[tuple[str, str | None]] = [*stmt.tables, *(new for _, new in stmt.renames)]
    return any(matches(schema, table) for schema, table in names or [(query.schema, None)])


def _ends_transaction(event: Any) -> bool:
    """Whether ``event`` closes the transaction it is in (XID, XA PREPARE, COMMIT, ROLLBACK, a DDL)."""
    if event.header.type_code in _ENDS_A_TRANSACTION:
        return True
    from airflow_provider_binlog.binlog.events_query import QueryEvent

    body = event.body
    if not isinstance(body, QueryEvent):
        return False
    sql = body.sql.lstrip().upper()
    if sql.startswith(("COMMIT", "XA PREPARE", "XA COMMIT", "XA ROLLBACK")):
        return True
    if sql.startswith("ROLLBACK"):
        return not sql.startswith("ROLLBACK TO")  # a savepoint's rollback stays in the transaction
    from airflow_provider_binlog.canal.sql.ddl import parse_ddl

    return parse_ddl(body.sql, body.schema) is not None  # a DDL is a transaction of its own


def first_unread(
    client: Any,
    position: BinlogPosition,
    included: bool = False,
    max_events: int | None = None,
    matches: Matches | None = None,
) -> tuple[bool, float | None]:
    """Whether a transaction follows the cursor at ``position``, and the unix time of the first
    event that opens one; read with a non-blocking dump of a server id of its own, at most
    ``max_events`` events (default 100, or :data:`FILTERED_MAX_EVENTS` with ``matches``).

    :param included: the event at ``position`` is still to be read (a pinned start), not consumed.
    :param matches: the destination's filter: only a transaction that changes a table it passes
        counts (see the module docstring); ``None``: every transaction.
    :return: ``(False, None)``: nothing after the cursor but the binlog's frame, or only other
        tables' transactions (caught up); ``(True, t)``: the oldest unread transaction began at
        ``t``; ``(True, None)``: not found within ``max_events`` events, or the dump failed (unknown).
    """
    from airflow_provider_binlog.binlog.position import file_number
    from airflow_provider_binlog.canal.positions.start import side_client

    if max_events is None:
        max_events = 100 if matches is None else FILTERED_MAX_EVENTS
    after = (file_number(position.file), position.pos - (1 if included else 0))
    began: float | None = None  # the first event of the transaction being read (with ``matches``)
    with contextlib.suppress(Exception), side_client(client).dump(position, blocking=False) as stream:
        for n, event in enumerate(stream):
            if n >= max_events:
                return True, None
            if (file_number(event.file), event.pos) <= after:
                continue
            if event.header.type_code in _NOT_A_TRANSACTION:
                continue
            if matches is None:
                return True, float(event.header.timestamp)
            if began is None:
                began = float(event.header.timestamp)
            if _touches(event.body, matches):
                return True, began
            if _ends_transaction(event):
                began = None
        return False, None
    return True, None


def read_holder(zk: Any, identity: ClientIdentity, timeout: float) -> dict[str, Any] | None:
    """The payload of a destination client's ``running`` node (see :mod:`..canal.ha`), ``None``
    when nobody holds it; one read bounded by ``timeout``.

    :param zk: a started kazoo client on the meta store's chroot.
    """
    import json

    from kazoo.exceptions import KazooException, NoAuthError, NoNodeError

    from airflow_provider_binlog.canal.errors import MetaAuthError, MetaError
    from airflow_provider_binlog.canal.meta.base import client_path

    path = client_path(identity) + "/running"
    try:
        data, _ = zk.get_async(path).get(timeout=timeout)
    except NoNodeError:
        return None
    except NoAuthError:
        raise MetaAuthError(f"ZooKeeper refused access to {path} (ACL / digest credentials)") from None
    except zk.handler.timeout_exception:
        raise MetaError(f"ZooKeeper did not answer on {path} within {timeout:g} s") from None
    except KazooException as exc:
        raise MetaError(f"ZooKeeper error on {path}: {type(exc).__name__}") from None
    try:
        value = json.loads(data)
    except ValueError:
        return {"address": data.decode(errors="replace")}
    return value if isinstance(value, dict) else {"address": str(value)}


@dataclass(frozen=True)
class DestinationStatus:
    """A destination client's position against its source, as :func:`read_status` found it.

    :param destination: the destination.
    :param client_id: its canal client id.
    :param source: the source's ``host:port``.
    :param subscribed: the client node exists (a run or a sensor has started it).
    :param filter: the stored include filter (canal's regexes on ``schema.table``).
    :param cursor: the committed cursor (``None``: none stored).
    :param head: the server's head (``SHOW BINARY LOG STATUS`` / ``SHOW MASTER STATUS``).
    :param head_gtid: the server's GTID position (``None``: none).
    :param oldest: the oldest binlog file on the server.
    :param cursor_file: one of :data:`CURSOR_FILE_STATES`.
    :param lag_bytes: binlog bytes from the cursor's event to the head (``None``: no file cursor
        on the server).
    :param lag_files: binlog files from the cursor's to the head's.
    :param unread: a transaction follows the cursor (``None``: unknown).
    :param unread_since: unix time of the first unread transaction (``None``: none or unknown).
    :param retention: the cursor file's headroom (``None``: no file cursor, or it is gone).
    :param running: the ``running`` node's holder (``None``: nobody, or not known).
    :param running_known: whether the meta store has a ``running`` node (ZooKeeper only).
    :param fraction: the headroom under which it warns, as a fraction of the retention.
    :param checked_at: unix time of the check.
    """

    destination: str
    client_id: int
    source: str
    subscribed: bool
    filter: str | None
    cursor: LogPosition | None
    head: BinlogPosition
    head_gtid: str | None
    oldest: str | None
    cursor_file: str
    lag_bytes: int | None
    lag_files: int | None
    unread: bool | None
    unread_since: float | None
    retention: Retention | None
    running: dict[str, Any] | None
    running_known: bool
    fraction: float
    checked_at: float = field(default_factory=time.time)

    @property
    def never_ran(self) -> bool:
        """No cursor is stored: the destination never ran (or its cursor was deleted)."""
        return self.cursor is None

    @property
    def lag_seconds(self) -> float | None:
        """Age of the oldest unread transaction (0: caught up; ``None``: unknown)."""
        if self.unread is False:
            return 0.0
        if self.unread_since is None:
            return None
        return max(self.checked_at - self.unread_since, 0.0)

    @property
    def cursor_time(self) -> float | None:
        """Unix time of the cursor's event (``None``: a pinned start, which has none)."""
        if self.cursor is None or not self.cursor.timestamp:
            return None
        return self.cursor.timestamp / 1000.0

    def warnings(self) -> list[str]:
        """What needs doing, each with its remedy (empty: nothing)."""
        out = []
        cursor = self.cursor
        if cursor is not None and self.cursor_file == "purged":
            out.append(
                f"destination {self.destination}: the cursor's binlog {cursor.journal_name} was purged "
                f"from {self.source} (the oldest binlog there is {self.oldest}), so the changes after the "
                "cursor cannot be read any more and the next run fails. Remedy: a new snapshot of the "
                'destination: run its operator once with snapshot="when_needed" (it re-snapshots every '
                "table, then continues from the snapshot's position); then run the destination more "
                "often or raise binlog_expire_logs_seconds"
            )
        elif cursor is not None and self.cursor_file == "beyond_head":
            out.append(
                f"destination {self.destination}: the cursor's binlog {cursor.journal_name} is newer than "
                f"the newest binlog on {self.source} ({self.head.file}): was the server's binlog reset, or "
                "is this another server? Check the source; a new snapshot of the destination "
                '(snapshot="when_needed") starts it again'
            )
        if self.retention is not None and self.retention.warn:
            out.append(self.retention.describe())
        return out

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` document."""
        cursor = self.cursor

        def rounded(v: float | None) -> float | None:
            return None if v is None else round(v, 1)

        return {
            "destination": self.destination,
            "client_id": self.client_id,
            "source": self.source,
            "checked_at": _iso(self.checked_at),
            "subscribed": self.subscribed,
            "never_ran": self.never_ran,
            "filter": self.filter,
            "cursor": None
            if cursor is None
            else {
                "position": str(cursor.binlog_position) if cursor.binlog_position else None,
                "gtid": cursor.gtid or None,
                "time": _iso(self.cursor_time) if self.cursor_time is not None else None,
                "file": self.cursor_file,
            },
            "head": {"position": str(self.head), "gtid": self.head_gtid, "oldest": self.oldest},
            "lag": {
                "bytes": self.lag_bytes,
                "files": self.lag_files,
                "seconds": rounded(self.lag_seconds),
                "unread_since": _iso(self.unread_since) if self.unread_since is not None else None,
            },
            "retention": self.retention.as_dict() if self.retention is not None else None,
            "running": self.running,
            "running_known": self.running_known,
            "warn_below_fraction": self.fraction,
            "warnings": self.warnings(),
        }

    def lines(self) -> list[str]:
        """The plain-text report: one fact a line, then a ``WARNING:`` line per warning."""
        cursor = self.cursor
        out = [f"destination {self.destination} (client {self.client_id}) on {self.source}"]
        if cursor is None:
            state = "subscribed, no cursor stored" if self.subscribed else "no client node in the meta store"
            out.append(f"cursor:    none: the destination never ran ({state})")
        else:
            where = str(cursor.binlog_position) if cursor.binlog_position else "(no file position)"
            if cursor.gtid:
                where += f" gtid {cursor.gtid}"
            when = (
                f", event at {_iso(self.cursor_time)}"
                if self.cursor_time is not None
                else ", pinned start (no run committed yet)"
            )
            gone = {"purged": " [file purged]", "beyond_head": " [file newer than the head]"}
            out.append(f"cursor:    {where}{when}{gone.get(self.cursor_file, '')}")
        head = f"head:      {self.head}" + (f" gtid {self.head_gtid}" if self.head_gtid else "")
        out.append(head + (f" (oldest binlog {self.oldest})" if self.oldest else ""))
        if cursor is not None:
            if self.lag_bytes is None:
                out.append("lag:       unknown (the cursor's file is not on the server)")
            else:
                secs = self.lag_seconds
                age = (
                    "caught up"
                    if self.unread is False
                    else "unknown age"
                    if secs is None
                    else f"oldest unread transaction {_span(secs)} old"
                )
                out.append(f"lag:       {self.lag_bytes} bytes, {self.lag_files} file(s); {age}")
        if self.retention is not None:
            out.append(f"retention: {_retention_line(self.retention)}")
        elif cursor is not None and self.cursor_file == "purged":
            out.append("retention: the cursor's binlog is gone")
        if not self.running_known:
            out.append("running:   unknown (a file meta store has no running node)")
        elif self.running is None:
            out.append("running:   no run active")
        else:
            from airflow_provider_binlog.canal.ha import describe_holder

            out.append(f"running:   {describe_holder(self.running)}")
        out.append(f"filter:    {self.filter or '(none stored)'}")
        out.extend(f"WARNING: {w}" for w in self.warnings())
        return out


def _retention_line(r: Retention) -> str:
    """The retention's numbers (the remedy goes to the warning)."""
    if r.retention_seconds is None:
        return "the server purges no binlog by age (binlog_expire_logs_seconds=0)"
    text = f"{_span(r.retention_seconds)} (warning below {_span(r.warn_below or 0)}); "
    if r.headroom_seconds is None or r.closed_at is None:
        why = "is the one the server writes now" if r.file == r.head else "has an unknown age"
        return text + f"the cursor's binlog {r.file} {why}"
    text += f"the cursor's binlog {r.file} was closed {_iso(r.closed_at)}; headroom "
    if r.headroom_seconds >= 0:
        return text + f"{_span(r.headroom_seconds)}"
    return text + f"-{_span(-r.headroom_seconds)} (past the retention: it goes at the next rotation or purge)"


def _cursor_file_state(cursor: LogPosition | None, names: list[str]) -> str:
    from airflow_provider_binlog.binlog.position import file_number

    if cursor is None or cursor.binlog_position is None:
        return "none"
    if cursor.journal_name in names or not names:
        return "present"
    if file_number(cursor.journal_name or "") > file_number(names[-1]):
        return "beyond_head"
    return "purged"


def _lag(cursor: BinlogPosition, head: BinlogPosition, files: list[tuple[str, int]]) -> tuple[int, int]:
    """Bytes and files from ``cursor`` (its event's start) to ``head``; both files on the server."""
    names = [name for name, _ in files]
    first, last = names.index(cursor.file), names.index(head.file) if head.file in names else len(names) - 1
    if first >= last:
        return max(head.pos - cursor.pos, 0), 0
    size = dict(files)
    between = sum(size[name] for name in names[first + 1 : last])
    return size[cursor.file] - cursor.pos + between + head.pos, last - first


def read_status(
    meta: MetaManager,
    identity: ClientIdentity,
    client: Any,
    connect: Callable[[], Any],
    fraction: float = 0.25,
    zk: Any = None,
    timeout: float = 10.0,
) -> DestinationStatus:
    """Read where ``identity`` stands (see the module docstring).

    :param meta: the destination's meta store.
    :param identity: the destination and client id.
    :param client: a :class:`~..binlog.client.ReplicationClient` of the source.
    :param connect: opens a plain autocommit connection to the source (closed after use).
    :param fraction: warn when the cursor file's headroom is below this fraction of the retention.
    :param zk: the meta store's kazoo client, to read the ``running`` node (``None``: a file store).
    :param timeout: bound of the ``running`` node's read.

    The lag in seconds counts only transactions of tables the stored filter passes (none stored:
    every transaction).
    """
    if not 0 <= fraction <= 1:
        raise ValueError(f"the headroom is a fraction of the retention (0..1), not {fraction!r}")
    subscribed = meta.has_subscribed(identity)
    clients = meta.subscriptions(identity.destination)
    stored = next((s for s in clients if s.client_id == identity.client_id), None)
    cursor = meta.get_cursor(identity).value
    running = read_holder(zk, identity, timeout) if zk is not None else None
    head = client.head_position()  # before the list, so the list holds the head's file
    files = client.binlog_files()
    gtid = str(client.head_gtid()) or None
    names = [name for name, _ in files]
    state = _cursor_file_state(cursor, names)
    lag_bytes = lag_files = None
    unread: bool | None = None
    unread_since = retention = None
    position = cursor.binlog_position if cursor is not None else None
    if position is not None and state == "present" and position.file in names:
        lag_bytes, lag_files = _lag(position, head, files)
        matches = None
        if stored is not None and stored.filter:
            from airflow_provider_binlog.canal.filter import TableFilter

            matches = TableFilter(include=stored.filter).matches
        unread, unread_since = first_unread(client, position, included=cursor.included, matches=matches)
        retention = retention_headroom(
            client, connect, identity.destination, position.file, fraction, files=files
        )
    return DestinationStatus(
        destination=identity.destination, client_id=identity.client_id, source=client.config.address,
        subscribed=subscribed, filter=stored.filter if stored is not None else None, cursor=cursor,
        head=head, head_gtid=gtid, oldest=names[0] if names else None, cursor_file=state,
        lag_bytes=lag_bytes, lag_files=lag_files, unread=unread, unread_since=unread_since,
        retention=retention, running=running, running_known=zk is not None, fraction=fraction,
    )  # fmt: skip
