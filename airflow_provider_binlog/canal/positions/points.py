"""Points in the binlog as users write them: where a run starts (``start_from``) and stops (``stop_at``).

Accepted forms:

* ``mysql-bin.000042:1234``: a position;
* ``gtid:<set>`` or a MySQL GTID set (``3e11fa47-...:1-5``): a GTID set; MariaDB GTID lists
  (``0-1-100``) need the ``gtid:`` prefix, since they look like dates;
* an ISO-8601 timestamp with a zone (``2026-11-21T10:00:00Z``) or an aware ``datetime``, optionally
  ``ts:`` prefixed: the first transaction committed at or after it;
* a recorded run (the dict a run returns as XCom, or a canal LogPosition dict): its ``end``
  (for ``start_from``: resume where that run stopped; an interval run's ``interval["end"]``, after
  its last transaction) or the position it holds; an interval's ``start`` or ``end`` dict
  (``{"position", "gtid", "time"}``: its position, else its GTID set);
* for ``stop_at`` only: ``head`` (the server's head when the run starts).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from airflow_provider_binlog.binlog.client import ReplicationClient
from airflow_provider_binlog.binlog.gtid import MariadbGtidList, MysqlGtidSet
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.positions.start import StartSpec, start_at_time
from airflow_provider_binlog.errors import ConfigurationError

_POSITION = re.compile(r"^[^\s:]+\.\d+:\d+$")
_MYSQL_GTID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}:")


def _timestamp(text: str) -> dt.datetime | None:
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if value.tzinfo is None:
        raise ConfigurationError(f"timestamp {text!r} has no time zone; write e.g. {text}+00:00")
    return value


def parse_point(value: Any) -> StartSpec:
    """Turn a user's point into a :class:`StartSpec` (exactly one field set).

    :raises ConfigurationError: the value is none of the accepted forms (the message lists them).
    """
    if isinstance(value, StartSpec):
        return value
    if isinstance(value, dt.datetime):
        return StartSpec(timestamp=value)
    if isinstance(value, BinlogPosition):
        return StartSpec(position=str(value))
    if isinstance(value, Mapping):
        interval = value.get("interval")
        if isinstance(interval, Mapping) and isinstance(interval.get("end"), Mapping):
            return parse_point(interval["end"])  # an interval run: after its last transaction
        if "end" in value:
            return parse_point(value["end"])
        if "journalName" in value and "position" in value:
            return StartSpec(position=f"{value['journalName']}:{value['position']}")
        if "position" in value and "gtid" in value:  # an interval's end (.interval.CommitPoint)
            if value["position"]:
                return StartSpec(position=str(value["position"]))
            if value["gtid"]:
                return StartSpec(gtid=str(value["gtid"]))
        if "postion" in value:
            return parse_point(value["postion"])
    if isinstance(value, str):
        text = value.strip()
        low = text.lower()
        if low.startswith("gtid:"):
            return StartSpec(gtid=text[5:].strip())
        if low.startswith("ts:"):
            ts = _timestamp(text[3:].strip())
            if ts is not None:
                return StartSpec(timestamp=ts)
        elif _MYSQL_GTID.match(text):
            return StartSpec(gtid=text)
        elif _POSITION.match(text):
            return StartSpec(position=text)
        else:
            ts = _timestamp(text)
            if ts is not None:
                return StartSpec(timestamp=ts)
    raise ConfigurationError(
        f"cannot read {value!r} as a binlog point: use FILE:POS (mysql-bin.000042:1234), "
        "gtid:SET (gtid:0-1-100 or a MySQL uuid:1-5 set), an ISO timestamp with zone "
        "(2026-11-21T10:00:00+00:00), or a recorded run's summary"
    )


def position_after_gtid(client: ReplicationClient, start: BinlogPosition, gtid: str) -> BinlogPosition:
    """The position just after the transaction that completes ``gtid`` (scanning from ``start``).

    :raises ConfigurationError: the binlog up to the head never contains the whole set.
    """
    mariadb = client.server_info().is_mariadb
    target: Any = MariadbGtidList.parse(gtid) if mariadb else MysqlGtidSet.parse(gtid)
    head = client.head_position()
    with client.dump(start, stop_at=head) as stream:
        for _event in stream:
            current = stream.gtid_position
            if current is not None and _covers(current, target, mariadb):
                pos = stream.position
                assert pos is not None
                return pos
    raise ConfigurationError(f"GTID set {gtid} is not complete in the binlog up to the head {head}")


def _covers(current: Any, target: Any, mariadb: bool) -> bool:
    if mariadb:
        return bool(current.reached(target))
    return bool(target.issubset(current))


def resolve_stop(client: ReplicationClient, value: Any, start: BinlogPosition | None) -> BinlogPosition:
    """The position a drain stops at: ``head``, a position, a GTID set or a timestamp.

    :param start: where the run starts (a GTID stop is searched from there).
    """
    if value is None or value == "head":
        return client.head_position()
    spec = parse_point(value)
    if spec.position is not None:
        return BinlogPosition.parse(spec.position)
    if spec.gtid is not None:
        if start is None:
            raise ConfigurationError("a GTID stop needs a file:pos start to search from")
        return position_after_gtid(client, start, spec.gtid)
    epoch = spec.epoch
    assert epoch is not None
    return start_at_time(client, epoch)  # the interval rule, without waiting (see ..drain.interval)
