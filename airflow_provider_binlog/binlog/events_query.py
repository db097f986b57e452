"""QUERY_EVENT and its status variables (MySQL 0-20, MariaDB 128-131); layout in :mod:`.events`."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from airflow_provider_binlog.binlog.compression import mariadb_uncompress
from airflow_provider_binlog.binlog.constants import EventType, event_type_name
from airflow_provider_binlog.binlog.errors import DecodeError
from airflow_provider_binlog.binlog.event import DecodeContext, register
from airflow_provider_binlog.binlog.events import decode_text
from airflow_provider_binlog.binlog.reader import Reader

QUERY_POST = struct.Struct("<IIBH")  # thread_id, exec_time, db_len, error_code (then u16 status_len)
U16 = struct.Struct("<H")
LOAD_POST = struct.Struct("<IIIB")  # file_id, start_pos, end_pos, dup_handling

# --------------------------------------------------------------------------- QUERY


class QueryStatusCode(IntEnum):
    """Status variable codes of QUERY_EVENT (MySQL 0-20, MariaDB 128-)."""

    Q_FLAGS2_CODE = 0
    Q_SQL_MODE_CODE = 1
    Q_CATALOG_CODE = 2
    Q_AUTO_INCREMENT = 3
    Q_CHARSET_CODE = 4
    Q_TIME_ZONE_CODE = 5
    Q_CATALOG_NZ_CODE = 6
    Q_LC_TIME_NAMES_CODE = 7
    Q_CHARSET_DATABASE_CODE = 8
    Q_TABLE_MAP_FOR_UPDATE_CODE = 9
    Q_MASTER_DATA_WRITTEN_CODE = 10
    Q_INVOKER = 11
    Q_UPDATED_DB_NAMES = 12
    Q_MICROSECONDS = 13
    Q_COMMIT_TS = 14
    Q_COMMIT_TS2 = 15
    Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP = 16
    Q_DDL_LOGGED_WITH_XID = 17
    Q_DEFAULT_COLLATION_FOR_UTF8MB4 = 18
    Q_SQL_REQUIRE_PRIMARY_KEY = 19
    Q_DEFAULT_TABLE_ENCRYPTION = 20
    Q_HRNOW = 128
    Q_XID = 129
    Q_GTID_FLAGS3 = 130
    Q_CHARACTER_SET_COLLATIONS = 131


OVER_MAX_DBS_IN_EVENT_MTS = 254
GTID_FLAGS3_ALTER_SEQ = 0x04 | 0x08  # FL_COMMIT_ALTER_E1 | FL_ROLLBACK_ALTER_E1


@dataclass(frozen=True, slots=True)
class QueryStatus:
    """QUERY_EVENT status variables; ``None`` where the event did not carry one.

    :param charset: ``(character_set_client, collation_connection, collation_server)`` ids.
    :param microseconds: MySQL's Q_MICROSECONDS or MariaDB's Q_HRNOW (sub-second part of the
        statement's start time).
    :param unparsed: status bytes after a code this decoder does not know (the layout gives no
        length, so parsing stops there), else empty.
    """

    flags2: int | None = None
    sql_mode: int | None = None
    catalog: str | None = None
    auto_increment_increment: int | None = None
    auto_increment_offset: int | None = None
    charset: tuple[int, int, int] | None = None
    time_zone: str | None = None
    lc_time_names: int | None = None
    charset_database: int | None = None
    table_map_for_update: int | None = None
    master_data_written: int | None = None
    invoker_user: str | None = None
    invoker_host: str | None = None
    updated_db_names: tuple[str, ...] | None = None
    microseconds: int | None = None
    explicit_defaults_for_timestamp: bool | None = None
    ddl_xid: int | None = None
    default_collation_for_utf8mb4: int | None = None
    sql_require_primary_key: bool | None = None
    default_table_encryption: bool | None = None
    mariadb_xid: int | None = None
    gtid_flags3: int | None = None
    start_alter_seq_no: int | None = None
    character_set_collations: tuple[tuple[int, int], ...] | None = None
    unparsed: bytes = b""

    @classmethod
    def decode(cls, buf: memoryview) -> QueryStatus:
        r = Reader(buf)
        v: dict[str, object] = {}
        C = QueryStatusCode
        while r.remaining():
            code = r.u8()
            if code == C.Q_FLAGS2_CODE:
                v["flags2"] = r.u32()
            elif code == C.Q_SQL_MODE_CODE:
                v["sql_mode"] = r.u64()
            elif code == C.Q_CATALOG_CODE:
                v["catalog"] = decode_text(r.bytes(r.u8()))
                r.skip(1)
            elif code == C.Q_AUTO_INCREMENT:
                v["auto_increment_increment"] = r.u16()
                v["auto_increment_offset"] = r.u16()
            elif code == C.Q_CHARSET_CODE:
                v["charset"] = (r.u16(), r.u16(), r.u16())
            elif code == C.Q_TIME_ZONE_CODE:
                v["time_zone"] = decode_text(r.bytes(r.u8()))
            elif code == C.Q_CATALOG_NZ_CODE:
                v["catalog"] = decode_text(r.bytes(r.u8()))
            elif code == C.Q_LC_TIME_NAMES_CODE:
                v["lc_time_names"] = r.u16()
            elif code == C.Q_CHARSET_DATABASE_CODE:
                v["charset_database"] = r.u16()
            elif code == C.Q_TABLE_MAP_FOR_UPDATE_CODE:
                v["table_map_for_update"] = r.u64()
            elif code == C.Q_MASTER_DATA_WRITTEN_CODE:
                v["master_data_written"] = r.u32()
            elif code == C.Q_INVOKER:
                v["invoker_user"] = decode_text(r.bytes(r.u8()))
                v["invoker_host"] = decode_text(r.bytes(r.u8()))
            elif code == C.Q_UPDATED_DB_NAMES:
                count = r.u8()
                names: list[str] = []
                if count != OVER_MAX_DBS_IN_EVENT_MTS:
                    names = [decode_text(r.cstring()) for _ in range(count)]
                v["updated_db_names"] = tuple(names)
            elif code == C.Q_MICROSECONDS or code == C.Q_HRNOW:
                v["microseconds"] = r.u24()
            elif code == C.Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP:
                v["explicit_defaults_for_timestamp"] = bool(r.u8())
            elif code == C.Q_DDL_LOGGED_WITH_XID:
                v["ddl_xid"] = r.u64()
            elif code == C.Q_DEFAULT_COLLATION_FOR_UTF8MB4:
                v["default_collation_for_utf8mb4"] = r.u16()
            elif code == C.Q_SQL_REQUIRE_PRIMARY_KEY:
                v["sql_require_primary_key"] = bool(r.u8())
            elif code == C.Q_DEFAULT_TABLE_ENCRYPTION:
                v["default_table_encryption"] = bool(r.u8())
            elif code == C.Q_XID:
                v["mariadb_xid"] = r.u64()
            elif code == C.Q_GTID_FLAGS3:
                flags3 = r.u8()
                v["gtid_flags3"] = flags3
                if flags3 & GTID_FLAGS3_ALTER_SEQ:
                    v["start_alter_seq_no"] = r.u64()
            elif code == C.Q_CHARACTER_SET_COLLATIONS:
                n = r.u8()
                v["character_set_collations"] = tuple((r.u16(), r.u16()) for _ in range(n))
            else:
                r.pos -= 1
                v["unparsed"] = r.rest()
        return cls(**v)  # type: ignore[arg-type]


@register(EventType.QUERY_EVENT, EventType.QUERY_COMPRESSED_EVENT)
@dataclass(frozen=True, slots=True)
class QueryEvent:
    """A statement: DDL, ``BEGIN``, ``COMMIT``, or DML in statement format.

    Also the body of MariaDB's QUERY_COMPRESSED_EVENT (the statement is inflated while decoding).

    :param schema: the default database the statement ran in (may be empty).
    :param sql: the statement text (decoded as UTF-8; invalid bytes kept as surrogate escapes).
    :param error_code: the error the statement raised on the source (0 normally).
    :param exec_time: seconds the statement took on the source.
    """

    thread_id: int
    exec_time: int
    error_code: int
    schema: str
    sql: str
    status_vars: bytes = field(default=b"", repr=False)
    _where: tuple[int, str | None] = field(default=(EventType.QUERY_EVENT, None), repr=False, compare=False)
    _status: QueryStatus | None = field(default=None, repr=False, compare=False)

    @property
    def status(self) -> QueryStatus:
        """The status variables, decoded on first access (most consumers never look)."""
        status = self._status
        if status is None:
            try:
                status = QueryStatus.decode(memoryview(self.status_vars))
            except DecodeError as exc:
                name = event_type_name(self._where[0])
                raise exc.located(event_type=name, position=self._where[1]) from None
            object.__setattr__(self, "_status", status)
        return status

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> QueryEvent:
        compressed = ctx.header is not None and ctx.header.type_code == EventType.QUERY_COMPRESSED_EVENT
        return cls._decode(buf, ctx, mariadb_uncompress if compressed else None)

    @classmethod
    def _decode(
        cls, buf: memoryview, ctx: DecodeContext, inflate: Callable[[bytes], bytes] | None
    ) -> QueryEvent:
        """Decode; ``inflate`` (MariaDB QUERY_COMPRESSED) turns the stored statement into its text."""
        post = ctx.post_header_len.get(EventType.QUERY_EVENT, 13)
        return cls._decode_at(buf, ctx, inflate, post)

    @classmethod
    def _decode_at(
        cls, buf: memoryview, ctx: DecodeContext, inflate: Callable[[bytes], bytes] | None, post: int
    ) -> QueryEvent:
        """Decode with a post-header of ``post`` bytes (EXECUTE_LOAD_QUERY's is longer)."""
        if post < 11:
            raise DecodeError(f"QUERY_EVENT post-header too short ({post})")
        if len(buf) < post:
            raise DecodeError(f"truncated: QUERY_EVENT of {len(buf)} bytes, post-header {post}")
        thread_id, exec_time, db_len, error_code = QUERY_POST.unpack_from(buf, 0)
        status_len = U16.unpack_from(buf, 11)[0] if post >= 13 else 0
        status_end = post + status_len
        sql_start = status_end + db_len + 1
        if sql_start > len(buf):
            raise DecodeError(f"truncated: QUERY_EVENT of {len(buf)} bytes, statement starts at {sql_start}")
        raw = bytes(buf[sql_start:])
        if inflate is not None:
            raw = inflate(raw)
        h = ctx.header
        where = (h.type_code if h is not None else EventType.QUERY_EVENT, ctx.position)
        return cls(
            thread_id,
            exec_time,
            error_code,
            decode_text(buf[status_end : status_end + db_len]),
            decode_text(raw),
            bytes(buf[post:status_end]),
            where,
        )


@register(EventType.EXECUTE_LOAD_QUERY_EVENT)
@dataclass(frozen=True, slots=True)
class ExecuteLoadQueryEvent:
    """``LOAD DATA`` in statement format: the statement, and where in it the file name was replaced.

    Layout: the QUERY_EVENT post-header, then u32 file_id, u32 start_pos, u32 end_pos,
    u8 dup_handling (post-header 26 bytes), then status variables, schema and statement as in
    QUERY_EVENT. The file's bytes come in BEGIN_LOAD_QUERY / APPEND_BLOCK events before it.
    """

    query: QueryEvent
    file_id: int
    start_pos: int
    end_pos: int
    dup_handling: int

    @property
    def schema(self) -> str:
        return self.query.schema

    @property
    def sql(self) -> str:
        return self.query.sql

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> ExecuteLoadQueryEvent:
        post = ctx.post_header_len.get(EventType.EXECUTE_LOAD_QUERY_EVENT, 26)
        if post < 26 or len(buf) < 26:
            raise DecodeError(f"EXECUTE_LOAD_QUERY_EVENT post-header too short ({post}, {len(buf)} bytes)")
        file_id, start_pos, end_pos, dup = LOAD_POST.unpack_from(buf, 13)
        return cls(QueryEvent._decode_at(buf, ctx, None, post), file_id, start_pos, end_pos, dup)
