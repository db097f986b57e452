"""Row events: WRITE/UPDATE/DELETE_ROWS v1 and v2, PARTIAL_UPDATE_ROWS, MariaDB's compressed rows.

Wire layout of the body::

    table_id          4 or 6 bytes LE
    flags             2 bytes (0x01 end of statement, 0x02 no foreign key checks, ...)
    v2 only:          extra_data_len u16 (counts itself), extra data: (tag u8, ...)*
                      tag 0 NDB info (len u8 counting itself, format u8, data),
                      tag 1 partition info (partition_id u16 [, source_partition_id u16 for updates])
    column_count      length-encoded int
    columns_present   (column_count + 7) / 8 bytes, LSB first (before image for updates)
    updates only:     columns_present of the after image
    rows              row images; an update is a before image then an after image

A row image is a null bitmap over the present columns then the non-NULL values (see
:mod:`.values`). In a PARTIAL_UPDATE_ROWS after image a length-encoded ``value_options`` comes first;
bit 0 (PARTIAL_JSON) adds a bitmap with one bit per JSON column of the table, and those JSON
columns hold diffs, which are applied to the before image so the after image holds the full
document. With ``binlog_row_image=MINIMAL`` the before image lacks the document; the after value
is then the :class:`~.json_binary.JsonDiffs` itself (the only exception to the value contract),
for a consumer that holds the document to apply with :func:`~.json_binary.apply_diffs`.

MariaDB's compressed row events (166-171) zlib-compress everything after the bitmaps: a header
byte ``0x80 | algorithm << 4 | n``, ``n`` bytes big-endian uncompressed length, the data. The parser
inflates them and decodes under the uncompressed code; :func:`decode_rows_body` also accepts them.

Rows decode lazily on first access of :attr:`RowsEvent.rows` (tables a consumer filters out cost
nothing) and are cached; errors then name the event type and position it was read at. A consumer
that needs only some columns of the before images (a merge by key: its key columns) asks
:meth:`RowsEvent.rows_keeping` for them: the other columns of those images are read past, no value
is made for them (with ``binlog_row_image=FULL`` they are half of an UPDATE's values).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_binlog.binlog import json_binary
from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType, EventType, event_type_name
from airflow_provider_binlog.binlog.errors import DecodeError
from airflow_provider_binlog.binlog.event import DecodeContext, register
from airflow_provider_binlog.binlog.reader import Reader
from airflow_provider_binlog.binlog.table_map import TableMapEvent
from airflow_provider_binlog.binlog.values import empty_image
from airflow_provider_binlog.errors import BinlogCdcError

E = EventType
WRITE_CODES = frozenset({E.WRITE_ROWS_EVENT_V1, E.WRITE_ROWS_EVENT_V2, E.WRITE_ROWS_COMPRESSED_EVENT_V1,
                         E.WRITE_ROWS_COMPRESSED_EVENT})  # fmt: skip
UPDATE_CODES = frozenset({E.UPDATE_ROWS_EVENT_V1, E.UPDATE_ROWS_EVENT_V2, E.PARTIAL_UPDATE_ROWS_EVENT,
                          E.UPDATE_ROWS_COMPRESSED_EVENT_V1, E.UPDATE_ROWS_COMPRESSED_EVENT})  # fmt: skip
DELETE_CODES = frozenset({E.DELETE_ROWS_EVENT_V1, E.DELETE_ROWS_EVENT_V2, E.DELETE_ROWS_COMPRESSED_EVENT_V1,
                          E.DELETE_ROWS_COMPRESSED_EVENT})  # fmt: skip
V2_CODES = frozenset({E.WRITE_ROWS_EVENT_V2, E.UPDATE_ROWS_EVENT_V2, E.DELETE_ROWS_EVENT_V2,
                      E.PARTIAL_UPDATE_ROWS_EVENT, E.WRITE_ROWS_COMPRESSED_EVENT,
                      E.UPDATE_ROWS_COMPRESSED_EVENT, E.DELETE_ROWS_COMPRESSED_EVENT})  # fmt: skip
COMPRESSED_CODES = frozenset(range(166, 172))

STMT_END_F = 0x01
PARTIAL_JSON_UPDATES = 0x01


@dataclass(frozen=True, slots=True)
class RowsExtra:
    """The v2 extra data.

    :param ndb_info: NDB cluster's extra row info (format byte + data), if present.
    :param partition_id: the partition the row is in (MySQL 8 partition info), if present.
    :param source_partition_id: for updates, the partition the row came from.
    :param raw: the extra data bytes as written.
    """

    ndb_info: bytes | None = None
    partition_id: int | None = None
    source_partition_id: int | None = None
    raw: bytes = b""


def _extra(raw: bytes, is_update: bool) -> RowsExtra:
    r = Reader(raw)
    ndb = part = src = None
    while r.remaining():
        tag = r.u8()
        if tag == 0:
            n = r.u8()
            ndb = r.bytes(n - 1) if n >= 1 else b""
        elif tag == 1:
            part = r.u16()
            if is_update:
                src = r.u16()
        else:
            break  # unknown tag: keep the raw bytes, nothing more to parse reliably
    return RowsExtra(ndb, part, src, raw)


@register(23, 24, 25, 30, 31, 32, 39)
@dataclass(frozen=True, slots=True)
class RowsEvent:
    """A row event body (one class for all row event codes; :attr:`kind` tells which).

    :param type_code: the event type code.
    :param table_id: the TABLE_MAP id.
    :param flags: row-event flags.
    :param extra: v2 extra data (``None`` for v1).
    :param column_count: columns in the table as the event says.
    :param columns_present: before-image (or only) columns-present bitmap.
    :param columns_present_after: after-image bitmap for updates, else ``None``.
    :param table_map: the TABLE_MAP it refers to (``None`` only for an empty dummy event).
    """

    type_code: int
    table_id: int
    flags: int
    extra: RowsExtra | None
    column_count: int
    columns_present: bytes
    columns_present_after: bytes | None
    table_map: TableMapEvent | None
    _body: bytes = field(repr=False, compare=False)
    _rows_at: int = field(repr=False, compare=False)
    _where: tuple[str, str | None] = field(repr=False, compare=False)
    _rows: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> RowsEvent:
        """Registry entry: the type code comes from ``ctx.header`` (the parser inflates MariaDB's
        compressed codes and decodes them under their uncompressed code)."""
        if ctx.header is None:
            raise DecodeError("row event decoded without its header in the context")
        return decode_rows_body(ctx.header.type_code, buf, ctx)

    @property
    def rows_bytes(self) -> int:
        """Bytes of row data in the event (all row images together)."""
        return len(self._body) - self._rows_at

    @property
    def kind(self) -> str:
        """``"insert"``, ``"update"`` or ``"delete"``."""
        c = self.type_code
        return "insert" if c in WRITE_CODES else "update" if c in UPDATE_CODES else "delete"

    @property
    def table_schema(self) -> TableSchema | None:
        return self.table_map.table_schema if self.table_map else None

    @property
    def schema(self) -> str:
        return self.table_map.schema if self.table_map else ""

    @property
    def table(self) -> str:
        return self.table_map.table if self.table_map else ""

    @property
    def is_statement_end(self) -> bool:
        return bool(self.flags & STMT_END_F)

    @property
    def rows(self) -> list[Any]:
        """Inserts/deletes: a list of row dicts; updates: a list of ``(before, after)`` dict pairs.
        Keys are column names (``@1``... when unknown); absent columns are absent."""
        rows = self._rows
        if rows is None:
            rows = self._located(None)
            object.__setattr__(self, "_rows", rows)
        return rows

    def rows_keeping(self, before: frozenset[int] | None) -> list[Any]:
        """:attr:`rows`, but the before images (of updates and deletes) hold only the table's
        columns whose index is in ``before`` (``None``: :attr:`rows` itself). Not cached. MySQL's
        partial JSON updates keep whole before images (their after images are applied to them).
        The columns left out are not decoded, so bytes only they hold raise no error."""
        if before is None or self._rows is not None or self.type_code == E.PARTIAL_UPDATE_ROWS_EVENT:
            return self.rows
        return self._located(before)

    def _located(self, keep: frozenset[int] | None) -> list[Any]:
        """:meth:`_decode_rows`, its errors naming the event type and position."""
        try:
            rows = self._decode_rows(keep)
            tm = self.table_map
            if tm is not None and tm.row_decoder().invalid:  # dates no Python type holds: where from
                tm.row_decoder().stamp(self._where[1])
            return rows
        except DecodeError as e:
            raise e.located(event_type=self._where[0], position=self._where[1]) from None
        except BinlogCdcError:
            raise
        except Exception as e:  # damaged bytes the checks did not catch: still a decode error
            raise DecodeError(
                f"corrupt row data ({type(e).__name__}: {str(e)[:200]})",
                event_type=self._where[0], position=self._where[1],
            ) from None  # fmt: skip

    def images(
        self, before: frozenset[int] | None = None
    ) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        """Every row as a ``(before, after)`` pair (``None`` where the kind has no such image);
        ``before`` as for :meth:`rows_keeping`."""
        return image_pairs(self.kind, self.rows_keeping(before))

    def _decode_rows(self, keep: frozenset[int] | None = None) -> list[Any]:
        body, pos, end = self._body, self._rows_at, len(self._body)
        tm = self.table_map
        if tm is None:
            if pos != end:
                raise DecodeError(f"row event for table id {self.table_id} without a TABLE_MAP")
            return []
        if self.column_count != tm.column_count:
            raise DecodeError(
                f"row event for {tm.schema}.{tm.table} has {self.column_count} columns, "
                f"its TABLE_MAP {tm.column_count}"
            )
        dec = tm.row_decoder()
        if self.type_code not in UPDATE_CODES:
            kept = None if self.type_code in WRITE_CODES else keep  # an insert has no before image
            return dec.decode_rows(body, pos, end, self.columns_present, kept)
        if self.type_code == E.PARTIAL_UPDATE_ROWS_EVENT:
            return _partial_updates(dec, tm, body, pos, end, self.columns_present, self.columns_present_after)
        present_after = self.columns_present_after or self.columns_present
        before = dec.row_function(self.columns_present)
        after = dec.row_function(present_after)
        pairs = dec.native_pairs(body, pos, end, self.columns_present, present_after, keep)
        if pairs is not None:
            return pairs
        out = []
        try:
            while pos < end:
                start = pos
                b, pos = before(body, pos)
                a, pos = after(body, pos)
                if pos == start:
                    raise empty_image(f"{tm.schema}.{tm.table}", pos, end)
                out.append((b, a))
        except DecodeError as e:
            raise dec._named(e) from None
        if pos != end:
            raise DecodeError(f"{tm.schema}.{tm.table}: row images end at {pos}, event at {end}")
        if keep is not None:  # the C plan's keep flags in Python: decoded whole, then cut
            kept = dec.kept(keep)
            return [(kept(b), a) for b, a in out]
        return out


def image_pairs(kind: str, rows: list[Any]) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    """A rows event's ``rows`` (of ``kind``) as ``(before, after)`` pairs."""
    if kind == "update":
        return list(rows)
    if kind == "insert":
        return [(None, r) for r in rows]
    return [(r, None) for r in rows]


def _partial_updates(
    dec: Any, tm: TableMapEvent, body: bytes, pos: int, end: int, present: bytes, present_after: bytes | None
) -> list[Any]:
    before = dec.row_function(present)
    after_full = dec.row_function(present_after or present)
    after_partial = dec.row_function(present_after or present, partial_json=True)
    json_cols = sum(1 for c in tm.table_schema.columns if c.type == ColumnType.JSON)
    out = []
    try:
        while pos < end:
            b, pos = before(body, pos)  # an UPDATE after image always has the options field
            r = Reader(body, pos, end)
            options = r.packed_int()
            if options & PARTIAL_JSON_UPDATES:
                partial = int.from_bytes(r.bytes((json_cols + 7) // 8), "little")
                a, pos = after_partial(body, r.pos, partial)
                for name, v in a.items():
                    if isinstance(v, json_binary.JsonDiffs) and name in b:
                        a[name] = json_binary.apply_diffs(b[name], v)
            else:
                a, pos = after_full(body, r.pos)
            out.append((b, a))
    except DecodeError as e:
        raise dec._named(e) from None
    if pos != end:
        raise DecodeError(f"{tm.schema}.{tm.table}: row images end at {pos}, event at {end}")
    return out


def decode_rows_body(code: int, buf: bytes | memoryview, ctx: DecodeContext) -> RowsEvent:
    """Decode the body of any row event code (23-25, 30-32, 39, 166-171).

    For MariaDB's compressed codes ``buf`` is the body as written (this function inflates the row
    data). Rows decode lazily (see :attr:`RowsEvent.rows`).

    :raises DecodeError: on a malformed header or a table id without a TABLE_MAP.
    """
    where = (event_type_name(code), ctx.position)
    try:
        return _decode(code, buf, ctx, where)
    except DecodeError as e:
        raise e.located(event_type=where[0], position=where[1]) from None


def _decode(
    code: int, buf: bytes | memoryview, ctx: DecodeContext, where: tuple[str, str | None]
) -> RowsEvent:
    body = bytes(buf)
    r = Reader(body)
    table_id = r.uint(ctx.table_id_size(code))
    flags = r.u16()
    is_update = code in UPDATE_CODES
    extra = None
    if code in V2_CODES:
        n = r.u16()
        if n < 2:
            raise DecodeError(f"row event extra-data length {n} < 2")
        extra = _extra(r.bytes(n - 2), is_update)
    count = r.packed_int()
    nb = (count + 7) // 8
    present = r.bytes(nb)
    present_after = r.bytes(nb) if is_update else None
    rows_at = r.pos
    if code in COMPRESSED_CODES:
        body = body[:rows_at] + _inflate(body[rows_at:])
    tm = ctx.tables.get(table_id)
    if tm is None and rows_at != len(body):
        raise DecodeError(f"row event for table id {table_id} without a preceding TABLE_MAP")
    if tm is not None and not isinstance(tm, TableMapEvent):
        raise DecodeError(f"ctx.tables[{table_id}] is not a TableMapEvent")
    return RowsEvent(code, table_id, flags, extra, count, present, present_after, tm, body, rows_at, where)


def _inflate(data: bytes) -> bytes:
    if not data:
        return data
    head = data[0]
    if not head & 0x80:
        raise DecodeError(f"compressed row data has a bad header byte {head:#x}")
    alg, lenlen = (head >> 4) & 0x07, head & 0x07
    if alg != 0:
        raise DecodeError(f"compressed row data uses unknown algorithm {alg}")
    if len(data) < 1 + lenlen:
        raise DecodeError("compressed row data truncated")
    expect = int.from_bytes(data[1 : 1 + lenlen], "big")
    try:
        out = zlib.decompress(data[1 + lenlen :])
    except zlib.error as e:
        raise DecodeError(f"compressed row data does not inflate: {e}") from None
    if len(out) != expect:
        raise DecodeError(f"compressed row data inflates to {len(out)} bytes, header says {expect}")
    return out
