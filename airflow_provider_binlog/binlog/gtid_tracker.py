"""Follow transactions through an event stream: which GTID is open, when it commits.

A transaction starts at a GTID event (MySQL GTID/ANONYMOUS_GTID/GTID_TAGGED, MariaDB GTID) and
ends at:

* an XID_EVENT (or XA_PREPARE_LOG_EVENT), or a ``COMMIT``/``ROLLBACK``/``XA PREPARE`` QUERY after
  ``BEGIN``/``XA START``;
* the statement itself when it is not wrapped in ``BEGIN`` (DDL: a QUERY right after the GTID;
  MariaDB marks such groups FL_STANDALONE).

At each end the committed GTID joins the position: MySQL's executed set grows, MariaDB's position
moves on in the GTID's domain. Anonymous GTIDs end transactions but add nothing.
"""

from __future__ import annotations

from airflow_provider_binlog.binlog.constants import EventType
from airflow_provider_binlog.binlog.event import Event
from airflow_provider_binlog.binlog.events_gtid import GtidEvent
from airflow_provider_binlog.binlog.events_mariadb import MariadbGtidEvent
from airflow_provider_binlog.binlog.events_query import QueryEvent
from airflow_provider_binlog.binlog.gtid import MariadbGtid, MariadbGtidList, MysqlGtid, MysqlGtidSet

_ENDS = frozenset({EventType.XID_EVENT, EventType.XA_PREPARE_LOG_EVENT})
_RELEVANT = frozenset(
    int(c)
    for c in (
        EventType.GTID_LOG_EVENT,
        EventType.ANONYMOUS_GTID_LOG_EVENT,
        EventType.GTID_TAGGED_LOG_EVENT,
        EventType.GTID_EVENT,
        EventType.QUERY_EVENT,
        EventType.QUERY_COMPRESSED_EVENT,
        *_ENDS,
    )
)
_CLOSING = ("COMMIT", "ROLLBACK", "XA PREPARE", "XA COMMIT", "XA ROLLBACK")


class GtidTracker:
    """Track the open transaction's GTID and the GTID position after the last committed one.

    :param position: the position to start from (``None``: empty, of the flavor the stream shows).
    """

    __slots__ = ("_open", "current", "position")

    def __init__(self, position: MysqlGtidSet | MariadbGtidList | None = None) -> None:
        self.position = position
        self.current: MysqlGtid | MariadbGtid | None = None
        self._open = False  # inside BEGIN ... COMMIT

    def update(self, event: Event) -> bool:
        """Account for one event; return ``True`` if it ended a transaction."""
        if event.header.type_code not in _RELEVANT:
            return False
        body = event.body
        if isinstance(body, GtidEvent):
            self.current = None if body.anonymous else body.gtid
            self._open = False
            return False
        if isinstance(body, MariadbGtidEvent):
            self.current = body.gtid
            self._open = False
            return False
        if isinstance(body, QueryEvent):
            sql = body.sql.lstrip()[:12].upper()
            if sql == "BEGIN" or sql.startswith("XA START"):
                self._open = True
                return False
            if not self._open or sql.startswith(_CLOSING):
                return self._commit()
            return False
        if event.header.type_code in _ENDS:
            return self._commit()
        return False

    def _commit(self) -> bool:
        g, self.current = self.current, None
        self._open = False
        if isinstance(g, MariadbGtid):
            base = self.position if isinstance(self.position, MariadbGtidList) else MariadbGtidList()
            self.position = base.advance(g)
        elif isinstance(g, MysqlGtid):
            base_set = self.position if isinstance(self.position, MysqlGtidSet) else MysqlGtidSet()
            self.position = base_set.add(g)
        return True
