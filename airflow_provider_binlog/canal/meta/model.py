"""canal's position objects and their JSON, byte for byte as canal (fastjson) writes them.

``LogPosition`` (the cursor)::

    {"@type":"com.alibaba.otter.canal.protocol.position.LogPosition",
     "identity":{"slaveId":-1,"sourceAddress":{"address":"10.0.0.1","port":3306}},
     "postion":{"gtid":"","included":false,"journalName":"mysql-bin.000023","position":43893,
                "serverId":1,"timestamp":1536312619000}}

``postion`` is canal's own spelling and is kept. Keys are sorted as fastjson sorts them, ``null``
fields are left out, ``@type`` comes first (and is absent in ``meta.dat``). ``position`` is the
start offset of the ack-point event (XID, COMMIT or DDL) and ``included`` is ``false``: that event
was already consumed, reading resumes after it.

``PositionRange`` (a mark: one batch in flight)::

    {"@type":"com.alibaba.otter.canal.protocol.position.PositionRange",
     "ack":LogPosition,"end":LogPosition,"endSeq":N,"start":LogPosition}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import MetaError

LOG_POSITION_TYPE = "com.alibaba.otter.canal.protocol.position.LogPosition"
POSITION_RANGE_TYPE = "com.alibaba.otter.canal.protocol.position.PositionRange"


def dumps(obj: Any) -> str:
    """JSON in canal's compact form (no spaces, insertion order, non-ASCII kept)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class LogPosition:
    """canal's ``LogPosition``: a binlog position plus the identity of the server it was read from.

    :param journal_name: binlog file name.
    :param position: start offset of the ack-point event.
    :param timestamp: that event's time in milliseconds.
    :param server_id: server id in that event's header.
    :param gtid: executed GTID set up to there; ``""`` when GTID mode is off, ``None`` when unset.
    :param included: whether the event at ``position`` still has to be consumed (``False`` in cursors).
    :param slave_id: the ``identity.slaveId`` (-1 when unset).
    :param address: the MySQL server's address.
    :param port: the MySQL server's port.
    """

    journal_name: str | None
    position: int | None
    timestamp: int | None = None
    server_id: int | None = None
    gtid: str | None = None
    included: bool = False
    slave_id: int = -1
    address: str | None = None
    port: int | None = None

    @property
    def binlog_position(self) -> BinlogPosition | None:
        """The ack-point event's position (``None`` for a GTID/timestamp-only position)."""
        if not self.journal_name or self.position is None:
            return None
        return BinlogPosition(self.journal_name, self.position)

    def __str__(self) -> str:
        where = str(self.binlog_position) if self.binlog_position else "?"
        return f"{where}" + (f" gtid={self.gtid}" if self.gtid else "")

    # -- canal JSON -------------------------------------------------------------------------

    def to_canal_dict(self, with_type: bool = True) -> dict[str, Any]:
        """The dict fastjson would write for this position (``@type`` only in the ZooKeeper form)."""
        out: dict[str, Any] = {}
        if with_type:
            out["@type"] = LOG_POSITION_TYPE
        source: dict[str, Any] = {}
        if self.address is not None:
            source["address"] = self.address
        if self.port is not None:
            source["port"] = self.port
        identity: dict[str, Any] = {"slaveId": self.slave_id}
        if source:
            identity["sourceAddress"] = source
        out["identity"] = identity
        postion: dict[str, Any] = {}
        if self.gtid is not None:
            postion["gtid"] = self.gtid
        postion["included"] = self.included
        if self.journal_name is not None:
            postion["journalName"] = self.journal_name
        if self.position is not None:
            postion["position"] = self.position
        if self.server_id is not None:
            postion["serverId"] = self.server_id
        if self.timestamp is not None:
            postion["timestamp"] = self.timestamp
        out["postion"] = postion
        return out

    def to_json(self, with_type: bool = True) -> str:
        return dumps(self.to_canal_dict(with_type))

    @classmethod
    def from_canal_dict(cls, data: dict[str, Any]) -> LogPosition:
        """Read canal's dict form (with or without ``@type``; ``position`` accepted for ``postion``)."""
        kind = data.get("@type")
        if kind is not None and kind != LOG_POSITION_TYPE:
            raise MetaError(f"stored position has type {kind!r}, expected {LOG_POSITION_TYPE}")
        try:
            identity = data.get("identity") or {}
            source = identity.get("sourceAddress") or {}
            pos = data.get("postion")
            if pos is None:
                pos = data.get("position") or {}
            return cls(
                journal_name=pos.get("journalName"),
                position=None if pos.get("position") is None else int(pos["position"]),
                timestamp=None if pos.get("timestamp") is None else int(pos["timestamp"]),
                server_id=None if pos.get("serverId") is None else int(pos["serverId"]),
                gtid=pos.get("gtid"),
                included=bool(pos.get("included", False)),
                slave_id=int(identity.get("slaveId", -1)),
                address=source.get("address"),
                port=None if source.get("port") is None else int(source["port"]),
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise MetaError(f"malformed canal LogPosition: {exc}") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> LogPosition:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise MetaError(f"stored position is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise MetaError("stored position is not a JSON object")
        return cls.from_canal_dict(data)


@dataclass(frozen=True, slots=True)
class PositionRange:
    """canal's ``PositionRange``: what one in-flight batch covers.

    :param start: the batch's first entry.
    :param end: the batch's last entry.
    :param ack: the batch's ack point (last transaction end or DDL), ``None`` when it has none.
    :param end_seq: the store sequence of the batch's last entry.
    """

    start: LogPosition
    end: LogPosition
    ack: LogPosition | None = None
    end_seq: int | None = None

    def to_json(self) -> str:
        out: dict[str, Any] = {"@type": POSITION_RANGE_TYPE}
        if self.ack is not None:
            out["ack"] = self.ack.to_canal_dict()
        out["end"] = self.end.to_canal_dict()
        if self.end_seq is not None:
            out["endSeq"] = self.end_seq
        out["start"] = self.start.to_canal_dict()
        return dumps(out)

    @classmethod
    def from_json(cls, text: str | bytes) -> PositionRange:
        try:
            data = json.loads(text)
            kind = data.get("@type")
            if kind is not None and kind != POSITION_RANGE_TYPE:
                raise MetaError(f"stored mark has type {kind!r}, expected {POSITION_RANGE_TYPE}")
            ack = data.get("ack")
            return cls(
                start=LogPosition.from_canal_dict(data["start"]),
                end=LogPosition.from_canal_dict(data["end"]),
                ack=LogPosition.from_canal_dict(ack) if ack else None,
                end_seq=data.get("endSeq"),
            )
        except (ValueError, KeyError, AttributeError, TypeError) as exc:
            raise MetaError(f"malformed canal PositionRange: {exc}") from None


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """canal's ``ClientIdentity``: who consumes a destination.

    :param destination: the destination name.
    :param client_id: the client id (canal's default is 1001).
    :param filter: the subscription's include filter string.
    """

    destination: str
    client_id: int = 1001
    filter: str = ""

    def to_canal_dict(self) -> dict[str, Any]:
        return {"clientId": self.client_id, "destination": self.destination, "filter": self.filter}
