"""Errors of the canal layer: store order, meta-store conflicts, HA, start positions."""

from __future__ import annotations

from airflow_provider_binlog.errors import BinlogCdcError


class CanalError(BinlogCdcError):
    """Root of the canal layer's errors."""


class BatchOrderError(CanalError):
    """An ack named a batch that is not the oldest outstanding one (canal: "batchId:X is not the firstly:Y").

    :param batch_id: the id the caller named.
    :param oldest: the oldest outstanding batch id, ``None`` when no batch is outstanding.
    """

    def __init__(self, batch_id: int, oldest: int | None) -> None:
        self.batch_id = batch_id
        self.oldest = oldest
        if oldest is None:
            msg = f"batch {batch_id} is not outstanding: no batch is outstanding"
        else:
            msg = f"batch {batch_id} is not the oldest outstanding batch, {oldest} is"
        super().__init__(msg)


class StoreClosedError(CanalError):
    """The event store was closed while a caller waited on it."""


class MetaError(CanalError):
    """The meta store failed (I/O, ZooKeeper, malformed stored data)."""


class MetaConflictError(MetaError):
    """A compare-and-set write lost: someone else changed the value since it was read."""


class MetaAuthError(MetaError):
    """The meta store refused access (ZooKeeper ACL / digest authentication)."""


class RunningHeldError(CanalError):
    """Another consumer holds the destination's ``running`` node.

    :param holder: the holder's identity as stored in the node (host, pid, label).
    """

    def __init__(self, message: str, holder: dict[str, object] | None = None) -> None:
        self.holder = holder or {}
        super().__init__(message)


class SessionLostError(CanalError):
    """The ZooKeeper session behind the ``running`` node was suspended or lost; no ack is allowed."""


class FencedError(SessionLostError):
    """A cursor or mark write of a consumer that no longer holds the destination: another consumer
    acquired the ``running`` node since (the epoch moved on), so the write was refused as a whole.

    :param destination: the destination whose write was refused.
    """

    def __init__(self, message: str, destination: str) -> None:
        self.destination = destination
        super().__init__(message)


class StartPositionError(CanalError):
    """The start position cannot be used (purged, not found, inside nothing the server has)."""


class PurgedPositionError(StartPositionError):
    """The binlog holding the position was purged: the changes since cannot be read; a new snapshot
    of the tables is the way on."""


class SchemaMismatchError(CanalError):
    """The known columns of a table do not fit a TABLE_MAP; decoding would misassign values."""


class UnreadableBinlogError(CanalError):
    """The binlog cannot be read past a point: damaged bytes, a file cut short, or an event type that
    may not be skipped. Nothing from that point on is handed out, so no cursor moves past it.

    :param message: what is wrong, where, and what to do.
    :param position: ``file:pos`` of the event that cannot be read, when known.
    :param event_type: MySQL's name of that event's type, when known.
    """

    def __init__(self, message: str, position: str | None = None, event_type: str | None = None) -> None:
        self.position = position
        self.event_type = event_type
        super().__init__(message)


class StatementDmlError(CanalError):
    """A statement logged in statement format (``binlog_format=STATEMENT`` or ``MIXED`` in some
    session, ``LOAD DATA`` in statement form) changes rows, and the tables it writes cannot be named
    from its text, so it may write a routed table. Reading stops before it, so no cursor moves past
    it. (A statement whose tables are named becomes a ``STATEMENT_DML`` entry instead, which the
    lake stops at or re-snapshots the table for: :mod:`.convert`, :mod:`.operations`.)

    :param table: what the statement writes, as far as known.
    :param statement: the statement text (kept whole here; the message shows its start only).
    :param position: ``file:pos`` of the event holding it.
    """

    def __init__(self, table: str, statement: str, position: str) -> None:
        self.table = table
        self.statement = statement
        self.position = position
        shown = " ".join(statement.split())
        if len(shown) > 160:
            shown = shown[:160] + "..."
        super().__init__(
            f"{table} was changed by a statement logged in statement format at {position}: {shown!r}, "
            "whose tables could not be named. The binlog holds no row images for it, so the lake "
            f"cannot apply it; nothing at or after {position} was applied and the cursor stays before "
            "it. Remedy: make the source log rows (SET GLOBAL binlog_format=ROW, and SET SESSION "
            "binlog_format=ROW in the sessions or applications that set STATEMENT or MIXED), then load "
            "the tables again under a new destination started after "
            f'{position} (destination=<new name>, snapshot="initial").'
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.table, self.statement, self.position))


class XaError(CanalError):
    """An XA transaction cannot be followed (e.g. its rows were handed out before its PREPARE was
    recognised as one)."""


class XaPrepareUnseenError(XaError):
    """An ``XA COMMIT`` names an XA transaction whose ``XA PREPARE`` (where the server logged its
    rows) lies before the point this reader started at, and that PREPARE could not be read (the
    binlog holding it is purged, or none of the server's binlogs holds it). Its rows may have
    changed routed tables; the lake would miss them, so reading stops before the commit.

    :param xid: the XID as the server writes it (``X'61',X'',1``).
    :param position: ``file:pos`` of the ``XA COMMIT`` event.
    :param reason: why the PREPARE could not be read.
    """

    def __init__(self, xid: str, position: str, reason: str) -> None:
        self.xid = xid
        self.position = position
        self.reason = reason
        super().__init__(
            f"XA COMMIT of XA transaction {xid} at {position}: its XA PREPARE, where the server logged "
            f"its rows, lies before this reader's start point and {reason}, so its rows cannot be "
            f"applied; nothing at or after {position} was applied and the cursor stays before it "
            "(every run stops here again: a re-snapshot of single tables with binlog-cdc resnapshot "
            "leaves the cursor where it is). Remedy: load the routed tables again under a new "
            f"destination whose snapshot is taken after {position} (destination=<new name>, "
            'snapshot="initial"), and keep the binlogs until its runs pass the open XA transactions '
            "(XA RECOVER lists them)."
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.xid, self.position, self.reason))


class SourceUnavailableError(CanalError):
    """The source stayed unreachable for longer than the reader's reconnect bound; reading stopped.

    :param position: where a reconnect would have resumed (the end of the last complete transaction
        read); no ack point lies after it, so the cursor stays before it.
    """

    def __init__(self, message: str, position: str | None = None) -> None:
        self.position = position
        super().__init__(message)
