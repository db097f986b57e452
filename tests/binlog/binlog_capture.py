"""Helpers for live decoder tests: run SQL on a test MariaDB, read back the binlog it wrote.

The binlog is read from the server's data directory after ``FLUSH BINARY LOGS`` (so every file read
is complete) with the file reader, which shares the decoder with the replication client.
"""

from __future__ import annotations

import base64
import datetime as dt
import struct
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

from airflow_provider_binlog.binlog.columns import InvalidDate
from airflow_provider_binlog.binlog.event import Event
from airflow_provider_binlog.binlog.files import read_binlog_file
from airflow_provider_binlog.binlog.parser import BinlogParser
from airflow_provider_binlog.binlog.position import file_number
from airflow_provider_binlog.binlog.rows import RowsEvent
from airflow_provider_binlog.binlog.table_map import TableMapEvent

GOLDEN = Path(__file__).parent / "golden"
UTC = dt.timezone.utc


def sql_statements(path: Path) -> list[str]:
    """The statements of a ``;;``-separated SQL file (comment lines dropped)."""
    text = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("--"))
    return [s.strip() for s in text.split("\n;;") if s.strip()]


def master_position(cur: Any) -> tuple[str, int]:
    cur.execute("SHOW MASTER STATUS")
    file, pos = cur.fetchone()[:2]
    return file, int(pos)


def binlog_events(datadir: Path, start: tuple[str, int], database: str) -> list[Event]:
    """TABLE_MAP and row events of ``database`` from ``start`` to the end of the last complete file
    (call after ``FLUSH BINARY LOGS``)."""
    names = sorted((p.name for p in datadir.glob("mysql-bin.[0-9]*")), key=file_number)
    first = file_number(start[0])
    files = [n for n in names if file_number(n) >= first][:-1]  # the last one is the fresh empty file
    parser = BinlogParser(files[0])
    out = []
    for name in files:
        pos = start[1] if name == start[0] else 4
        for ev in read_binlog_file(datadir / name, start=pos, parser=parser):
            body = ev.body
            if isinstance(body, (TableMapEvent, RowsEvent)) and body.schema == database:
                out.append(ev)
    return out


def statement_groups(events: Iterable[Event]) -> list[list[RowsEvent]]:
    """Row events grouped per statement (a group ends at the event with the STMT_END flag)."""
    groups: list[list[RowsEvent]] = []
    cur: list[RowsEvent] = []
    for ev in events:
        if isinstance(ev.body, RowsEvent):
            cur.append(ev.body)
            if ev.body.is_statement_end:
                groups.append(cur)
                cur = []
    assert not cur, "row events without a statement end"
    return groups


# ------------------------------------------------------------------------------------------------
# SELECT values -> the decoder's value contract (binlog/columns.py). Every normalisation is here.


def normalize_select(type_name: str, value: Any) -> Any:
    """Map what PyMySQL returns for a column to the value the binlog decoder promises.

    * BIT: PyMySQL gives big-endian bytes; the decoder gives ``int``.
    * FLOAT: PyMySQL parses MariaDB's shortest text form; the binlog holds the float32 itself.
    * TIMESTAMP: PyMySQL gives naive datetimes in the session zone (UTC here); the decoder, aware UTC.
    * zero/partial DATE/DATETIME/TIMESTAMP: PyMySQL gives the server's text; the decoder an
      :class:`InvalidDate` of the same text.
    """
    if value is None:
        return None
    t = type_name.lower()
    if t == "bit":
        return int.from_bytes(value, "big")
    if t == "float":
        return struct.unpack("<f", struct.pack("<f", value))[0]
    if t in ("date", "datetime", "timestamp") and isinstance(value, str):
        return InvalidDate(value)
    if t == "timestamp":
        return value.replace(tzinfo=UTC)
    if t in ("set",) and isinstance(value, set):
        return ",".join(sorted(value))
    return value


def select_rows(cur: Any, table: str) -> tuple[list[str], dict[int, dict[str, Any]]]:
    """All rows of ``table`` by id, normalised with the column types from information_schema."""
    cur.execute(
        "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
        (table,),
    )
    types = dict(cur.fetchall())
    cur.execute(f"SELECT * FROM `{table}` ORDER BY 1")
    names = [d[0] for d in cur.description]
    rows = {}
    for r in cur.fetchall():
        row = {n: normalize_select(types[n], v) for n, v in zip(names, r, strict=True)}
        rows[row[names[0]]] = row
    return names, rows


# ------------------------------------------------------------------------------------------------
# Tagged JSON for golden files (exact: floats by repr, Decimal by text, bytes in base64)


def to_json(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return {"$f": repr(v)}
    if isinstance(v, Decimal):
        return {"$dec": str(v)}
    if isinstance(v, dt.datetime):
        return {"$dt": v.isoformat()}
    if isinstance(v, dt.date):
        return {"$d": v.isoformat()}
    if isinstance(v, dt.timedelta):
        return {"$td": [v.days, v.seconds, v.microseconds]}
    if isinstance(v, (bytes, bytearray)):
        return {"$b64": base64.b64encode(v).decode()}
    if isinstance(v, dict):
        return {"$map": {k: to_json(x) for k, x in v.items()}}
    if isinstance(v, InvalidDate):
        return {"$invalid": v.text}
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    raise TypeError(f"cannot store {type(v).__name__}")


def from_json(v: Any) -> Any:
    if isinstance(v, list):
        return [from_json(x) for x in v]
    if not isinstance(v, dict):
        return v
    ((tag, x),) = v.items()
    if tag == "$f":
        return float(x)
    if tag == "$dec":
        return Decimal(x)
    if tag == "$dt":
        return dt.datetime.fromisoformat(x)
    if tag == "$d":
        return dt.date.fromisoformat(x)
    if tag == "$td":
        return dt.timedelta(days=x[0], seconds=x[1], microseconds=x[2])
    if tag == "$b64":
        return base64.b64decode(x)
    if tag == "$invalid":
        return InvalidDate(x)
    if tag == "$map":
        return {k: from_json(y) for k, y in x.items()}
    raise ValueError(tag)
