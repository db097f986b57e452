"""Binlog positions that match a read view exactly: where a snapshot hands over to the binlog.

**The race.** A transaction commits in two steps (two-phase commit between the binlog and InnoDB):
its events are written to the binlog, then InnoDB commits and the rows become visible. ``SHOW
MASTER STATUS`` can return a position ``H`` *after* a transaction ``T``'s events while ``T`` is not
yet visible in InnoDB. A snapshot that starts the binlog at ``H`` and reads rows later can then
miss ``T`` twice: the rows read do not have it if the read view was opened before ``T``'s InnoDB
commit, and the binlog read from ``H`` skips its events.

**MariaDB (and Percona Server).** ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` opens an InnoDB
read view and, in the same step, fixes the binlog position matching it, reported by the session
status variables ``binlog_snapshot_file`` / ``binlog_snapshot_position``. Group commit makes the
binlog order and the engines' commit order the same (``commit_ordered``), and the snapshot is
taken between two commit groups, so the view sees exactly the transactions whose events lie before
that position and none at or after it. No privilege is needed (SELECT suffices for the reads).
Hence :func:`consistent_start`: ``S`` = that position. Every later read view sees at least what
this one saw (an InnoDB commit is never undone), so every chunk, whenever it is read, contains
every transaction before ``S``; every transaction at or after ``S`` is read from the binlog. The
chunk watermarks use the same statement (:func:`consistent_read`): chunk ``n`` is SELECTed inside
its own consistent snapshot at ``low_n``, so it equals its key range at exactly ``low_n``, and
applying the binlog events in ``[low_n, high_n)`` (there in the binlog whether or not InnoDB has
made them visible yet) makes it equal to the range at ``high_n``. The race cannot be
reproduced deterministically on a release build (holding a transaction between its binlog write
and its InnoDB commit needs a debug build's ``DEBUG_SYNC``); the tests check the property that
closes it: the rows a consistent snapshot sees are exactly the transactions before its position.

**MySQL** has no such status variable. :func:`consistent_start` then takes ``FLUSH TABLES WITH
READ LOCK`` for the moment of one ``SHOW MASTER STATUS`` (``SHOW BINARY LOG STATUS`` on 8.4+) and
releases it: the global read lock waits for every transaction in its commit and blocks new
ones, so at the position read under it every transaction in the binlog before it is committed in
InnoDB, and every read view opened afterwards sees it. That needs the ``RELOAD`` privilege and
waits behind running statements (``lock_wait_timeout`` is set to :data:`LOCK_WAIT_SECONDS`);
without the privilege the snapshot refuses to start with an error that says so, since a start
without it could silently miss rows. ``performance_schema.log_status`` is no substitute: it
blocks log writes to report positions consistent across logs for backup tools, but a transaction
already in the binlog and not yet committed in InnoDB stays invisible to a read view. On MySQL the
chunk low watermark is the head read before the SELECT, which the same race can leave short by a
transaction ``T`` not yet visible: such a ``T`` cannot precede ``S`` (everything before ``S`` was
committed when ``S`` was read), so the binlog run from ``S`` still applies it; only the lake between
that chunk's load and the binlog run lacks it.

Not covered: XA transactions prepared before ``S`` and committed after it (their row events lie
before ``S``, their commit after) and non-transactional (MyISAM/Aria) tables, which have no read
views.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pymysql

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.snapshot.values import SnapshotError

SNAPSHOT_STATUS_SQL = "SHOW STATUS LIKE 'binlog\\_snapshot\\_%'"
LOCK_WAIT_SECONDS = 10
_NO_PRIVILEGE = (1044, 1045, 1142, 1227)
_LOCK_WAIT_TIMEOUT = 1205


def snapshot_status(cur: Any) -> BinlogPosition | None:
    """``binlog_snapshot_file:binlog_snapshot_position`` of the session, ``None`` where the server
    has no such variables (MySQL). Inside a consistent-snapshot transaction it is the position of
    the snapshot; outside, the head."""
    cur.execute(SNAPSHOT_STATUS_SQL)
    status = {str(name).lower(): value for name, value in cur.fetchall()}
    file, pos = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
    if not file or pos in (None, ""):
        return None
    return BinlogPosition(str(file), int(pos))


def consistent_read(cur: Any) -> BinlogPosition | None:
    """Start a ``WITH CONSISTENT SNAPSHOT`` transaction on ``cur``'s connection and return the binlog
    position its read view matches, or ``None`` where the server cannot say (MySQL; the
    transaction is open either way: the caller ends it)."""
    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    return snapshot_status(cur)


def head(cur: Any) -> BinlogPosition | None:
    """The binlog head on ``cur`` (``SHOW MASTER STATUS``; ``SHOW BINARY LOG STATUS`` on MySQL 8.4+,
    which removed the former); ``None`` when binary logging is off."""
    try:
        cur.execute("SHOW MASTER STATUS")
    except pymysql.err.ProgrammingError:  # a syntax error: MySQL 8.4+
        cur.execute("SHOW BINARY LOG STATUS")
    row = cur.fetchone()
    return None if row is None else BinlogPosition(str(row[0]), int(row[1]))


def consistent_start(connect: Callable[[], Any], where: str) -> BinlogPosition:
    """The snapshot start ``S``: a binlog position such that every read view opened from now on sees
    exactly the transactions before it or more (see the module docstring).

    :param connect: returns a pymysql connection to the source.
    :param where: ``user@host:port`` for error messages.
    :raises SnapshotError: binary logging is off, or MySQL without the ``RELOAD`` privilege.
    """
    conn = connect()
    try:
        with conn.cursor() as cur:
            pos = consistent_read(cur)
            cur.execute("COMMIT")
            if pos is None:
                pos = _locked_head(cur, where)
    finally:
        conn.close()
    if pos is None:
        raise SnapshotError(f"binary logging is off on {where}: a snapshot needs the binlog to hand over to")
    return pos


def _locked_head(cur: Any, where: str) -> BinlogPosition | None:
    """The head read under a brief global read lock (MySQL)."""
    remedy = (
        "Grant RELOAD to the snapshot user, or load the existing rows another way and use "
        "snapshot='never' with start_from"
    )
    with global_read_lock(cur, where, SnapshotError, "the snapshot's binlog start", remedy):
        return head(cur)


@contextmanager
def global_read_lock(
    cur: Any, where: str, error: Callable[[str], Exception], what: str, remedy: str
) -> Iterator[None]:
    """Hold ``FLUSH TABLES WITH READ LOCK`` on ``cur`` for the block (at most
    :data:`LOCK_WAIT_SECONDS` waited for it), then ``UNLOCK TABLES``: on MySQL the only way to read
    a position that no committing transaction straddles.

    :param where: ``user@host:port`` for messages.
    :param error: builds the exception raised when the lock cannot be taken, from its message.
    :param what: what the lock is for, for the messages (``"the snapshot's binlog start"``).
    :param remedy: the message's last sentence when the ``RELOAD`` privilege is missing.
    """
    cur.execute(f"SET SESSION lock_wait_timeout = {LOCK_WAIT_SECONDS}")
    try:
        cur.execute("FLUSH TABLES WITH READ LOCK")
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args else None
        if code in _NO_PRIVILEGE:
            raise error(
                f"{where} lacks the RELOAD privilege (error {code}): on MySQL {what} is read under a brief "
                "FLUSH TABLES WITH READ LOCK, the only way there to get a position that no committing "
                "transaction straddles (MariaDB and Percona Server report one without a lock). " + remedy
            ) from None
        if code == _LOCK_WAIT_TIMEOUT:
            raise error(
                f"FLUSH TABLES WITH READ LOCK on {where} waited {LOCK_WAIT_SECONDS}s behind running "
                "statements (long queries or open LOCK TABLES); try again when they end"
            ) from None
        raise
    try:
        yield
    finally:
        cur.execute("UNLOCK TABLES")


__all__ = ["consistent_read", "consistent_start", "global_read_lock", "head", "snapshot_status"]
