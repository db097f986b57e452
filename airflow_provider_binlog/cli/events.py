"""``binlog-cdc events`` prints binlog events from a server or from files::

    binlog-cdc events --host db --user repl --password-env DB_PASSWORD --from mysql-bin.000042:4
    binlog-cdc events --host db --user repl --password-env DB_PASSWORD --gtid '0-1-100' --follow
    binlog-cdc events --file /archive/mysql-bin.000042 /archive/mysql-bin.000043 --format jsonl

JSON lines: one object per event with ``type`` (MySQL's name), ``pos`` (``file:start``), ``end_pos``
(offset just past the event), ``timestamp``, ``server_id``; row events add ``schema``, ``table``
and ``rows`` (``[{"before": {...} | null, "after": {...} | null}]`` keyed by column name, ``@1``...
when names are unknown); events inside a TRANSACTION_PAYLOAD add ``payload_index``; unknown events
keep their bytes as ``data``; other events add their decoded fields. Values: DECIMAL as a string,
temporal values in ISO form (TIME as ``[-]H:MM:SS[.ffffff]``), bytes as ``{"base64": "..."}``,
JSON columns as JSON.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime as dt
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from enum import Enum
from typing import Any, TextIO

from airflow_provider_binlog.cli.common import add_source_arguments, source_password
from airflow_provider_binlog.errors import ConfigurationError

# --------------------------------------------------------------------------- JSON values


def format_time(value: dt.timedelta) -> str:
    """A MySQL TIME as ``[-]H:MM:SS[.ffffff]`` (hours may exceed 24)."""
    us = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = "-" if us < 0 else ""
    us = abs(us)
    secs, frac = divmod(us, 1_000_000)
    hours, rem = divmod(secs, 3600)
    text = f"{sign}{hours}:{rem // 60:02d}:{rem % 60:02d}"
    return f"{text}.{frac:06d}" if frac else text


def _json_number(d: Decimal) -> Any:
    """A Decimal inside a JSON document: an int or float when exact, else its text."""
    if d == d.to_integral_value():
        return int(d)
    f = float(d)
    return f if Decimal(repr(f)) == d else str(d)


def to_json(value: Any, in_document: bool = False) -> Any:
    """A decoded column value as a JSON-compatible value (see the module docstring)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return _json_number(value) if in_document else str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return format_time(value)
    if isinstance(value, dict):
        return {str(k): to_json(v, in_document) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v, in_document) for v in value]
    if isinstance(value, Enum):
        return value.name
    if repr(value) == "JSON_NULL":
        return None
    if type(value).__name__ in _STRING_FORM:
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name), in_document) for f in dataclasses.fields(value)}
    return str(value)


_STRING_FORM = frozenset({"MysqlGtidSet", "MysqlGtid", "MariadbGtidList", "MariadbGtid", "BinlogPosition"})


def _row_json(row: dict[str, Any] | None, json_columns: frozenset[str]) -> dict[str, Any] | None:
    if row is None:
        return None
    return {k: to_json(v, k in json_columns) for k, v in row.items()}


def event_to_json(event: Any) -> dict[str, Any]:
    """One :class:`~.binlog.event.Event` as the ``--format jsonl`` object."""
    from airflow_provider_binlog.binlog.columns import ColumnType
    from airflow_provider_binlog.binlog.event import UnknownEvent

    h = event.header
    out: dict[str, Any] = {
        "type": event.type_name,
        "pos": f"{event.file}:{event.pos}",
        "end_pos": event.end_pos,
        "timestamp": h.timestamp,
        "server_id": h.server_id,
    }
    if event.payload_index is not None:
        out["payload_index"] = event.payload_index
    body = event.body
    if isinstance(body, UnknownEvent):
        out["data"] = to_json(body.data)
        return out
    if hasattr(body, "images") and hasattr(body, "table_map"):
        out["schema"] = body.schema
        out["table"] = body.table
        ts = body.table_schema
        json_cols = frozenset(c.name for c in ts.columns if c.type == ColumnType.JSON) if ts else frozenset()
        out["rows"] = [
            {"before": _row_json(b, json_cols), "after": _row_json(a, json_cols)} for b, a in body.images()
        ]
        return out
    if hasattr(body, "table_schema") and hasattr(body, "column_types"):  # TABLE_MAP
        out["table_id"] = body.table_id
        out["schema"] = body.schema
        out["table"] = body.table
        ts = body.table_schema
        if ts is not None:
            out["columns"] = [c.name for c in ts.columns]
        return out
    if dataclasses.is_dataclass(body) and not isinstance(body, type):
        for f in dataclasses.fields(body):
            if f.name.startswith("_") or f.name in out or not f.repr:
                continue
            v = getattr(body, f.name)
            if (
                dataclasses.is_dataclass(v)
                and not isinstance(v, type)
                and type(v).__name__ not in _STRING_FORM
            ):
                out[f.name] = {
                    g.name: to_json(x)
                    for g in dataclasses.fields(v)
                    if (x := getattr(v, g.name)) not in (None, "", b"")
                }
            else:
                out[f.name] = to_json(v)
        status = getattr(body, "status", None)
        if dataclasses.is_dataclass(status) and not isinstance(status, type):
            out["status"] = {
                g.name: to_json(x)
                for g in dataclasses.fields(status)
                if (x := getattr(status, g.name)) not in (None, "", b"")
            }
        if hasattr(body, "gtid") and not getattr(body, "anonymous", False):
            out["gtid"] = str(body.gtid)
    return out


def event_to_text(event: Any) -> str:
    """One event as readable text: a header line, then one line per row."""
    data = event_to_json(event)
    head = f"{data['pos']} {data['type']}"
    if event.payload_index is not None:
        head += f" [payload {event.payload_index}]"
    head += f" end={data['end_pos']} ts={data['timestamp']} server_id={data['server_id']}"
    skip = {"type", "pos", "end_pos", "timestamp", "server_id", "payload_index", "rows"}
    extras = []
    for key, value in data.items():
        if key in skip or key == "post_header_len":
            continue
        extras.append(f"{key}={json.dumps(value, ensure_ascii=False)}")
    lines = [head + ("  " + " ".join(extras) if extras else "")]
    for row in data.get("rows", ()):
        b, a = row["before"], row["after"]
        if b is not None and a is not None:
            lines.append(
                f"    update {json.dumps(b, ensure_ascii=False)} -> {json.dumps(a, ensure_ascii=False)}"
            )
        elif a is not None:
            lines.append(f"    insert {json.dumps(a, ensure_ascii=False)}")
        else:
            lines.append(f"    delete {json.dumps(b, ensure_ascii=False)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- events


def register(subparsers: Any) -> None:
    """Add ``events``."""
    p = subparsers.add_parser(
        "events",
        help="print binlog events from a server or from binlog files",
        description="Print binlog events from a server (as a replica) or from binlog files.",
    )
    src = add_source_arguments(p, "replication user", required=False, title="server")
    src.add_argument("--server-id", type=int, help="replica server id to register with (default random)")
    start = src.add_mutually_exclusive_group()
    start.add_argument("--from", dest="start", metavar="FILE:POS", help="start position")
    start.add_argument("--gtid", metavar="SET", help="start after this GTID set / MariaDB GTID position")
    src.add_argument(
        "--follow", action="store_true", help="keep waiting for new events (default: stop at the head)"
    )
    src.add_argument("--stop-at", metavar="FILE:POS", help="stop once this position is reached")
    p.add_argument("--file", nargs="+", metavar="PATH", help="read these binlog files instead of a server")
    p.add_argument("--format", choices=("text", "jsonl"), default="text", help="output format (default text)")
    p.add_argument("--limit", type=int, help="stop after this many events")
    p.set_defaults(func=run_events)


def _server_events(args: argparse.Namespace) -> Iterator[Any]:
    from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
    from airflow_provider_binlog.binlog.position import BinlogPosition

    password = source_password(args)
    kwargs: dict[str, Any] = {}
    if args.server_id is not None:
        kwargs["server_id"] = args.server_id
    client = ReplicationClient(ReplicationConfig(args.host, args.port, args.user, password, **kwargs))
    stop_at = BinlogPosition.parse(args.stop_at) if args.stop_at else None
    if not args.follow and stop_at is None:
        stop_at = client.head_position()
    if args.gtid is not None:
        stream = client.dump(gtid=args.gtid, stop_at=stop_at, blocking=True)
    else:
        if args.start:
            from airflow_provider_binlog.canal.positions.start import check_event_start

            start = BinlogPosition.parse(args.start)
            check_event_start(client, start, "--from")  # else the server's error 1236 misleads
        else:
            start = BinlogPosition(client.binlog_files()[0][0], 4)
        stream = client.dump(start, stop_at=stop_at, blocking=True)
    with stream:
        yield from stream


def _file_events(args: argparse.Namespace) -> Iterator[Any]:
    from airflow_provider_binlog.binlog.files import read_binlog_file
    from airflow_provider_binlog.binlog.parser import BinlogParser
    from airflow_provider_binlog.binlog.position import BinlogPosition

    start = BinlogPosition.parse(args.start) if args.start else None
    parser: BinlogParser | None = None
    started = start is None
    for path in args.file:
        name = os.path.basename(path)
        if parser is None:
            parser = BinlogParser(name)
        offset = 4
        if not started and start is not None:
            if name != start.file:
                continue
            started, offset = True, start.pos
        yield from read_binlog_file(path, start=offset, parser=parser)
    if not started:
        raise ConfigurationError(f"--from names {start.file if start else ''}, which is not among --file")


def run_events(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``binlog-cdc events``; return the exit code."""
    out = out or sys.stdout
    if args.file and (args.host or args.gtid):
        raise ConfigurationError("give either --file or --host, not both")
    if not args.file and not args.host:
        raise ConfigurationError("give --host (read from a server) or --file (read binlog files)")
    events: Iterable[Any] = _file_events(args) if args.file else _server_events(args)
    render: Callable[[Any], str]
    if args.format == "jsonl":
        render = lambda e: json.dumps(event_to_json(e), ensure_ascii=False)  # noqa: E731
    else:
        render = event_to_text
    for count, event in enumerate(events, start=1):
        out.write(render(event) + "\n")
        if args.limit is not None and count >= args.limit:
            break
    out.flush()
    return 0
