"""TABLE_MAP_EVENT: a table's id, name, column types, per-type metadata and optional metadata.

Wire layout of the body (post-header, then payload)::

    table_id        4 or 6 bytes LE (width from the FORMAT_DESCRIPTION post-header length)
    flags           2 bytes
    schema          1-byte length, name, NUL
    table           1-byte length, name, NUL
    column_count    length-encoded int
    column_types    column_count bytes (MYSQL_TYPE_*)
    metadata        length-encoded block: per-column metadata (0, 1 or 2 bytes by type)
    null_bitmap     (column_count + 7) / 8 bytes, LSB first: 1 = nullable
    optional meta   MySQL 8.0.1+ / MariaDB 10.5+: repeated (type u8, length-encoded len, value)

Per-type metadata as kept in :attr:`ColumnDef.meta`: FLOAT/DOUBLE pack length, BLOB/JSON/GEOMETRY/
VECTOR length-prefix width, TIME2/DATETIME2/TIMESTAMP2 fsp (1 byte); VARCHAR/VAR_STRING max
length and BIT ``bytes << 8 | bits`` (2 bytes LE); NEWDECIMAL ``precision << 8 | scale`` and
STRING ``real_type << 8 | length`` (2 bytes, big end first).

Optional-metadata bitmaps (signedness, visibility) are MSB first. Charset lists count only the
"character" columns (CHAR, VARCHAR, BLOB/TEXT; on MariaDB also GEOMETRY), respectively only the
ENUM/SET columns; signedness counts only numeric columns (integers, FLOAT, DOUBLE, NEWDECIMAL, and
on MariaDB also YEAR).

When the server writes no column names, signedness or charsets (``binlog_row_metadata`` MINIMAL or
NO_LOG, MySQL < 8.0, MariaDB < 10.5), :attr:`DecodeContext.schema_resolver` (if set) is asked for
the table's schema, which is checked against the TABLE_MAP (column count and type families) and
fills in only what the binlog does not say; a mismatch raises :class:`DecodeError`. On MariaDB a
complete TABLE_MAP with BINARY(16)/BINARY(4) columns asks it too, only for which of them are
UUID/INET6/INET4 (:meth:`TableMapEvent.with_plugin_types`).

A decoded TABLE_MAP registers itself in ``ctx.tables[table_id]``, so row events that follow find it.
Identical TABLE_MAP bodies (the server repeats one per transaction) are decoded once and shared,
so the row decoder built for one (see :mod:`.values`) serves them all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any

from airflow_provider_binlog.binlog.columns import BINARY_COLLATION, ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType
from airflow_provider_binlog.binlog.errors import DecodeError, SchemaMismatchDecodeError
from airflow_provider_binlog.binlog.event import DecodeContext, register
from airflow_provider_binlog.binlog.mariadb_types import PLUGIN_TYPES
from airflow_provider_binlog.binlog.reader import Reader

T = ColumnType


class OptionalMetadataType(IntEnum):
    """``Table_map_event::Optional_metadata_field_type``."""

    SIGNEDNESS = 1
    DEFAULT_CHARSET = 2
    COLUMN_CHARSET = 3
    COLUMN_NAME = 4
    SET_STR_VALUE = 5
    ENUM_STR_VALUE = 6
    GEOMETRY_TYPE = 7
    SIMPLE_PRIMARY_KEY = 8
    PRIMARY_KEY_WITH_PREFIX = 9
    ENUM_AND_SET_DEFAULT_CHARSET = 10
    ENUM_AND_SET_COLUMN_CHARSET = 11
    COLUMN_VISIBILITY = 12
    VECTOR_DIMENSIONALITY = 13


# --------------------------------------------------------------------------------------------------
# Collations

# MySQL/MariaDB character set name -> Python codec. ``None``: no Python codec (decoding a value
# raises DecodeError naming the column). MySQL's latin1 is cp1252 with the five unassigned bytes
# mapped to C1 controls; the row decoder handles "cp1252" that way (see values.py).
CHARSET_CODECS: dict[str, str | None] = {
    "big5": "big5", "dec8": None, "cp850": "cp850", "hp8": None, "koi8r": "koi8_r",
    "latin1": "cp1252", "latin2": "iso8859_2", "swe7": None, "ascii": "ascii", "ujis": "euc_jp",
    "sjis": "shift_jis", "hebrew": "iso8859_8", "tis620": "tis_620", "euckr": "cp949",
    "koi8u": "koi8_u", "gb2312": "gb2312", "greek": "iso8859_7", "cp1250": "cp1250", "gbk": "gbk",
    "latin5": "iso8859_9", "armscii8": None, "utf8mb3": "utf-8", "utf8": "utf-8", "ucs2": "utf-16-be",
    "cp866": "cp866", "keybcs2": None, "macce": "mac_latin2", "macroman": "mac_roman",
    "cp852": "cp852", "latin7": "iso8859_13", "utf8mb4": "utf-8", "cp1251": "cp1251",
    "utf16": "utf-16-be", "utf16le": "utf-16-le", "cp1256": "cp1256", "cp1257": "cp1257",
    "utf32": "utf-32-be", "binary": None, "geostd8": None, "cp932": "cp932", "eucjpms": "euc_jp",
    "gb18030": "gb18030",
}  # fmt: skip

# Collation id -> character set, as ranges (MariaDB 10.11's information_schema.COLLATIONS and
# COLLATION_CHARACTER_SET_APPLICABILITY, plus the ids only MySQL 8 uses: 76, 248-250 and 255-323).
_COLLATION_RANGES = (
    "1:big5 2:latin2 3:dec8 4:cp850 5:latin1 6:hp8 7:koi8r 8:latin1 9:latin2 10:swe7 11:ascii "
    "12:ujis 13:sjis 14:cp1251 15:latin1 16:hebrew 18:tis620 19:euckr 20:latin7 21:latin2 22:koi8u "
    "23:cp1251 24:gb2312 25:greek 26:cp1250 27:latin2 28:gbk 29:cp1257 30:latin5 31:latin1 "
    "32:armscii8 33:utf8mb3 34:cp1250 35:ucs2 36:cp866 37:keybcs2 38:macce 39:macroman 40:cp852 "
    "41-42:latin7 43:macce 44:cp1250 45-46:utf8mb4 47-49:latin1 50-52:cp1251 53:macroman "
    "54-55:utf16 56:utf16le 57:cp1256 58-59:cp1257 60-61:utf32 62:utf16le 63:binary 64:armscii8 "
    "65:ascii 66:cp1250 67:cp1256 68:cp866 69:dec8 70:greek 71:hebrew 72:hp8 73:keybcs2 74:koi8r "
    "75:koi8u 76:utf8mb3 77:latin2 78:latin5 79:latin7 80:cp850 81:cp852 82:swe7 83:utf8mb3 "
    "84:big5 85:euckr 86:gb2312 87:gbk 88:sjis 89:tis620 90:ucs2 91:ujis 92-93:geostd8 94:latin1 "
    "95-96:cp932 97-98:eucjpms 99:cp1250 101-124:utf16 128-151:ucs2 159:ucs2 160-183:utf32 "
    "192-215:utf8mb3 223:utf8mb3 224-247:utf8mb4 248-250:gb18030 255-323:utf8mb4 576-578:utf8mb3 "
    "608-610:utf8mb4 640-642:ucs2 672-674:utf16 736-738:utf32 1025:big5 1027:dec8 1028:cp850 "
    "1030:hp8 1031:koi8r 1032:latin1 1033:latin2 1034:swe7 1035:ascii 1036:ujis 1037:sjis "
    "1040:hebrew 1042:tis620 1043:euckr 1046:koi8u 1048:gb2312 1049:greek 1050:cp1250 1052:gbk "
    "1054:latin5 1056:armscii8 1057:utf8mb3 1059:ucs2 1060:cp866 1061:keybcs2 1062:macce "
    "1063:macroman 1064:cp852 1065:latin7 1067:macce 1069-1070:utf8mb4 1071:latin1 1074-1075:cp1251 "
    "1077:macroman 1078-1079:utf16 1080:utf16le 1081:cp1256 1082-1083:cp1257 1084-1085:utf32 "
    "1086:utf16le 1088:armscii8 1089:ascii 1090:cp1250 1091:cp1256 1092:cp866 1093:dec8 1094:greek "
    "1095:hebrew 1096:hp8 1097:keybcs2 1098:koi8r 1099:koi8u 1101:latin2 1102:latin5 1103:latin7 "
    "1104:cp850 1105:cp852 1106:swe7 1107:utf8mb3 1108:big5 1109:euckr 1110:gb2312 1111:gbk "
    "1112:sjis 1113:tis620 1114:ucs2 1115:ujis 1116-1117:geostd8 1119-1120:cp932 1121-1122:eucjpms "
    "1125:utf16 1147:utf16 1152:ucs2 1174:ucs2 1184:utf32 1206:utf32 1216:utf8mb3 1238:utf8mb3 "
    "1248:utf8mb4 1270:utf8mb4 "
    # MariaDB 10.10+ UCA 14.0.0 collations: 2048 + (charset << 8) + (tailoring << 3) + flags
    "2048-2303:utf8mb3 2304-2559:utf8mb4 2560-2815:ucs2 2816-3071:utf16 3072-3327:utf32"
)


def _collation_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for item in _COLLATION_RANGES.split():
        ids, name = item.split(":")
        lo, _, hi = ids.partition("-")
        for i in range(int(lo), int(hi or lo) + 1):
            table[i] = name
    return table


COLLATION_CHARSETS: dict[int, str] = _collation_table()


def collation_charset(collation: int) -> str | None:
    """MySQL character set name of a collation id (``255`` -> ``utf8mb4``), ``None`` if unknown."""
    return COLLATION_CHARSETS.get(collation)


def collation_codec(collation: int | None) -> str | None:
    """Python codec for a collation id; ``None`` for binary, unknown ids or charsets without a codec."""
    if collation is None or collation == BINARY_COLLATION:
        return None
    name = COLLATION_CHARSETS.get(collation)
    return CHARSET_CODECS.get(name) if name else None


# --------------------------------------------------------------------------------------------------
# Column type classes

_ONE_BYTE_META = frozenset(
    {T.FLOAT, T.DOUBLE, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.GEOMETRY, T.JSON,
     T.TIME2, T.DATETIME2, T.TIMESTAMP2, T.VECTOR}
)  # fmt: skip
_TWO_BYTE_LE_META = frozenset({T.VARCHAR, T.VAR_STRING, T.BIT})
_TWO_BYTE_BE_META = frozenset({T.NEWDECIMAL, T.STRING, T.ENUM, T.SET})
NUMERIC_TYPES = frozenset({T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.NEWDECIMAL, T.FLOAT, T.DOUBLE})
_BLOBS = frozenset({T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB})
_CHARACTER_TYPES = frozenset({T.STRING, T.VAR_STRING, T.VARCHAR}) | _BLOBS

# Types that the schema resolver may name differently from the binlog for the same storage.
_FAMILY: dict[int, int] = {
    T.TINY_BLOB: T.BLOB, T.MEDIUM_BLOB: T.BLOB, T.LONG_BLOB: T.BLOB,
    T.TIMESTAMP2: T.TIMESTAMP, T.DATETIME2: T.DATETIME, T.TIME2: T.TIME, T.NEWDATE: T.DATE,
    T.VAR_STRING: T.VARCHAR, T.DECIMAL: T.NEWDECIMAL,
}  # fmt: skip


def type_family(t: int) -> int:
    """Group binlog types that describe the same kind of column (``DATETIME2`` -> ``DATETIME``)."""
    return _FAMILY.get(t, t)


def real_type(binlog_type: int, meta: int) -> tuple[ColumnType, int]:
    """The real column type and length of a column: STRING columns may really be ENUM or SET, or a
    CHAR longer than 255 bytes (MySQL bug #37426 packs the high length bits into the type byte).

    :return: ``(type, length)``; length is the CHAR byte length or the ENUM/SET pack length, else 0.
    """
    if binlog_type != T.STRING:
        return _column_type(binlog_type), 0
    if meta < 256:
        return T.STRING, meta
    b0, b1 = meta >> 8, meta & 0xFF
    if b0 & 0x30 != 0x30:
        return _column_type(b0 | 0x30), b1 | (((b0 & 0x30) ^ 0x30) << 4)
    return _column_type(b0), b1


def _column_type(code: int) -> ColumnType:
    try:
        return ColumnType(code)
    except ValueError:
        raise DecodeError(f"unknown column type {code} in TABLE_MAP") from None


# --------------------------------------------------------------------------------------------------
# The event


@dataclass(frozen=True, slots=True)
class OptionalMetadata:
    """The optional-metadata fields as written (``None``: field absent). Indexes are 0-based column
    indexes (primary keys) or positions in the sub-list the field covers (charsets)."""

    signedness: tuple[bool, ...] | None = None
    default_charset: tuple[int, tuple[tuple[int, int], ...]] | None = None
    column_charset: tuple[int, ...] | None = None
    column_names: tuple[str, ...] | None = None
    set_str_values: tuple[tuple[str, ...], ...] | None = None
    enum_str_values: tuple[tuple[str, ...], ...] | None = None
    geometry_types: tuple[int, ...] | None = None
    simple_primary_key: tuple[int, ...] | None = None
    primary_key_with_prefix: tuple[tuple[int, int], ...] | None = None
    enum_and_set_default_charset: tuple[int, tuple[tuple[int, int], ...]] | None = None
    enum_and_set_column_charset: tuple[int, ...] | None = None
    column_visibility: tuple[bool, ...] | None = None
    vector_dimensionality: tuple[int, ...] | None = None
    unknown: tuple[tuple[int, bytes], ...] = ()


SchemaResolver = Callable[["TableMapEvent"], "TableSchema | None"]


@register(19)
@dataclass(frozen=True, slots=True)
class TableMapEvent:
    """A TABLE_MAP_EVENT body.

    :param table_id: the id row events refer to.
    :param flags: table-map flags.
    :param schema: database name.
    :param table: table name.
    :param column_types: binlog type code per column (STRING also for ENUM/SET).
    :param column_meta: raw per-type metadata per column (see the module docstring).
    :param nullable: per column, from the null bitmap.
    :param optional: the optional-metadata fields.
    :param table_schema: the columns as the decoder uses them (binlog plus resolver, if any).
    :param resolved: ``True`` when a schema resolver supplied part of :attr:`table_schema`.
    """

    table_id: int
    flags: int
    schema: str
    table: str
    column_types: tuple[int, ...]
    column_meta: tuple[int, ...]
    nullable: tuple[bool, ...]
    optional: OptionalMetadata
    table_schema: TableSchema
    resolved: bool = False
    # the row decoder built for this table map (values.RowDecoder), created on first use
    _decoder: Any = field(default=None, compare=False, repr=False)

    @property
    def column_count(self) -> int:
        return len(self.column_types)

    @property
    def has_column_names(self) -> bool:
        return self.optional.column_names is not None

    def row_decoder(self) -> Any:
        """The :class:`~airflow_provider_binlog.binlog.values.RowDecoder` for this table map (built once)."""
        dec = self._decoder
        if dec is None:
            from airflow_provider_binlog.binlog.values import RowDecoder

            dec = RowDecoder(self.table_schema)
            object.__setattr__(self, "_decoder", dec)
        return dec

    @classmethod
    def decode(cls, buf: memoryview, ctx: DecodeContext) -> TableMapEvent:
        id_size = ctx.table_id_size()
        key = (id_size, ctx.flavor, bytes(buf))
        bare = _CACHE.get(key)
        if bare is None:
            bare = _decode_bare(buf, id_size, ctx.flavor)
            if len(_CACHE) >= _CACHE_MAX:
                _CACHE.clear()
            _CACHE[key] = bare
        event = bare
        resolver = getattr(ctx, "schema_resolver", None)
        if resolver is not None:
            if bare.needs_resolver():
                event = bare.with_resolved(resolver(bare))
            elif ctx.flavor == "mariadb" and bare.may_hold_plugin_types():
                event = bare.with_plugin_types(resolver(bare))
        ctx.tables[event.table_id] = event
        return event

    def needs_resolver(self) -> bool:
        """Whether the binlog leaves out names, signedness or charsets this table needs."""
        o = self.optional
        if o.column_names is None:
            return True
        cols = self.table_schema.columns
        if o.signedness is None and any(c.type in NUMERIC_TYPES for c in cols):
            return True
        has_text = any(c.type in _CHARACTER_TYPES for c in cols)
        if has_text and o.default_charset is None and o.column_charset is None:
            return True
        has_enum_set = any(c.type in (T.ENUM, T.SET) for c in cols)
        return has_enum_set and (o.enum_str_values is None and o.set_str_values is None)

    def may_hold_plugin_types(self) -> bool:
        """Whether a column looks like MariaDB's UUID/INET6/INET4 (BINARY(16)/BINARY(4)), which only
        the schema history can tell from a BINARY column (:mod:`.mariadb_types`)."""
        return any(_plugin_shaped(c, None) for c in self.table_schema.columns)

    def with_plugin_types(self, resolved: TableSchema | None) -> TableMapEvent:
        """This (complete) table map with :attr:`ColumnDef.plugin_type` set on the BINARY columns
        that ``resolved`` names UUID/INET6/INET4 (matched by name, of the same length); the binlog
        says everything else, so nothing is checked or raised here."""
        if resolved is None:
            return self
        memo = _RESOLVED.get(id(self))
        if memo is not None and memo[0] is self and memo[1] is resolved:
            return memo[2]
        known = {c.name: c.plugin_type for c in resolved.columns if c.plugin_type is not None}
        cols = tuple(
            replace(c, plugin_type=known[c.name]) if _plugin_shaped(c, known.get(c.name, "")) else c
            for c in self.table_schema.columns
        )
        merged = self
        if cols != self.table_schema.columns:
            ts = replace(self.table_schema, columns=cols)
            merged = replace(self, table_schema=ts, resolved=True, _decoder=None)
        if len(_RESOLVED) >= _CACHE_MAX:
            _RESOLVED.clear()
        _RESOLVED[id(self)] = (self, resolved, merged)
        return merged

    def with_resolved(self, resolved: TableSchema | None) -> TableMapEvent:
        """This table map with the gaps filled from ``resolved`` (cached per resolved schema object).

        :raises DecodeError: when ``resolved`` does not match the TABLE_MAP (count or type family).
        """
        if resolved is None:
            return self
        memo = _RESOLVED.get(id(self))
        if memo is not None and memo[0] is self and memo[1] is resolved:
            return memo[2]
        merged = replace(self, table_schema=merge_schema(self, resolved), resolved=True, _decoder=None)
        if len(_RESOLVED) >= _CACHE_MAX:
            _RESOLVED.clear()
        _RESOLVED[id(self)] = (self, resolved, merged)
        return merged


_CACHE_MAX = 4096
_UTF8MB4_BIN = 46
_CACHE: dict[tuple[int, str, bytes], TableMapEvent] = {}
_RESOLVED: dict[int, tuple[TableMapEvent, TableSchema, TableMapEvent]] = {}


def _plugin_shaped(col: ColumnDef, plugin_type: str | None) -> bool:
    """Whether ``col`` (from a TABLE_MAP) has the row-image shape of ``plugin_type`` (``None``: of
    any of MariaDB's UUID/INET6/INET4)."""
    if col.type != T.STRING or col.collation != BINARY_COLLATION:
        return False
    if plugin_type is None:
        return col.max_length in PLUGIN_TYPES.values()
    return plugin_type in PLUGIN_TYPES and col.max_length == PLUGIN_TYPES[plugin_type]


def merge_schema(event: TableMapEvent, resolved: TableSchema) -> TableSchema:
    """Fill what the TABLE_MAP lacks from ``resolved``; the binlog's own facts always win.

    :raises DecodeError: if column count or any column's type family differ.
    """
    cols = event.table_schema.columns
    where = f"{event.schema}.{event.table}"
    if len(resolved.columns) != len(cols):
        extra = len(cols) - len(resolved.columns)
        hint = ""
        if extra > 0 and all(c.type == T.LONGLONG for c in cols[-extra:]):
            hint = (
                f"; the {extra} trailing BIGINT column(s) look like MariaDB's hidden DB_ROW_HASH_n columns "
                "(a UNIQUE key on a whole TEXT/BLOB column, or USING HASH), which the server does not "
                "list for this table now (its keys changed since?)"
            )
        raise SchemaMismatchDecodeError(
            f"schema for {where} has {len(resolved.columns)} columns but the TABLE_MAP has {len(cols)}{hint}"
        )
    o = event.optional
    merged = []
    for i, (b, s) in enumerate(zip(cols, resolved.columns, strict=True)):
        ok = type_family(b.type) == type_family(s.type)
        # MariaDB's JSON is LONGTEXT: a resolver may say JSON where the binlog says BLOB (text).
        text_json = s.type == T.JSON and b.type in _BLOBS and b.collation != BINARY_COLLATION
        if not ok and not text_json:
            raise SchemaMismatchDecodeError(
                f"schema for {where} column {i + 1} ({s.name}) is {s.type.name} but the TABLE_MAP "
                f"says {b.type.name}; refusing to decode with a mismatched schema"
            )
        if o.column_names is not None and s.name != b.name:
            raise SchemaMismatchDecodeError(
                f"schema for {where} column {i + 1} is named {s.name!r}, TABLE_MAP says {b.name!r}"
            )
        col = replace(b, name=s.name)
        if text_json and s.collation is None:
            # kept as the LONGTEXT it is, so its text reaches the lake as written (as with FULL
            # metadata); MariaDB's JSON is utf8mb4_bin unless declared otherwise
            col = replace(col, collation=_UTF8MB4_BIN, charset=collation_codec(_UTF8MB4_BIN))
        if o.signedness is None and b.type in NUMERIC_TYPES:
            col = replace(col, unsigned=s.unsigned)
        if b.collation is None and s.collation is not None:
            col = replace(col, collation=s.collation, charset=collation_codec(s.collation))
        if b.enum_values is None and s.enum_values is not None:
            col = replace(col, enum_values=s.enum_values)
        if b.set_values is None and s.set_values is not None:
            col = replace(col, set_values=s.set_values)
        if b.geometry_type is None and s.geometry_type is not None:
            col = replace(col, geometry_type=s.geometry_type)
        if s.plugin_type is not None and _plugin_shaped(col, s.plugin_type):
            col = replace(col, plugin_type=s.plugin_type)
        merged.append(col)
    pk = event.table_schema.primary_key or resolved.primary_key
    return TableSchema(event.schema, event.table, tuple(merged), pk)


def _name(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DecodeError(f"TABLE_MAP name {raw!r} is not UTF-8") from None


def _decode_bare(buf: memoryview, id_size: int, flavor: str) -> TableMapEvent:
    r = Reader(buf)
    table_id = r.uint(id_size)
    flags = r.u16()
    schema = _name(r.bytes(r.u8()))
    r.skip(1)
    table = _name(r.bytes(r.u8()))
    r.skip(1)
    count = r.packed_int()
    types = tuple(r.bytes(count))
    meta_len = r.packed_int()
    meta_end = r.pos + meta_len
    if meta_end > r.end:
        raise DecodeError(f"TABLE_MAP metadata block of {meta_len} bytes overruns the event")
    mr = Reader(r.buf, r.pos, meta_end)
    metas = []
    for t in types:
        if t in _ONE_BYTE_META:
            metas.append(mr.u8())
        elif t in _TWO_BYTE_LE_META:
            metas.append(mr.u16())
        elif t in _TWO_BYTE_BE_META:
            metas.append(mr.u8() << 8 | mr.u8())
        elif t == T.TYPED_ARRAY:
            inner = mr.u8()
            metas.append(inner << 16 | _inner_meta(mr, inner))
        else:
            metas.append(0)
    r.pos = meta_end
    nb = r.bytes((count + 7) // 8)
    nullable = tuple(bool(nb[i >> 3] >> (i & 7) & 1) for i in range(count))
    optional = _decode_optional(r, count)
    columns = _build_columns(types, metas, nullable, optional, flavor)
    if optional.enum_str_values is not None or optional.set_str_values is not None:
        optional = replace(
            optional,
            enum_str_values=tuple(c.enum_values or () for c in columns if c.type == T.ENUM),
            set_str_values=tuple(c.set_values or () for c in columns if c.type == T.SET),
        )
    pk_idx: tuple[int, ...] = ()
    if optional.simple_primary_key is not None:
        pk_idx = optional.simple_primary_key
    elif optional.primary_key_with_prefix is not None:
        pk_idx = tuple(i for i, _ in optional.primary_key_with_prefix)
    for i in pk_idx:
        if i >= count:
            raise DecodeError(f"TABLE_MAP primary key column {i} out of range ({count} columns)")
    ts = TableSchema(schema, table, columns, tuple(columns[i].name for i in pk_idx))
    return TableMapEvent(table_id, flags, schema, table, types, tuple(metas), nullable, optional, ts)


def _inner_meta(mr: Reader, t: int) -> int:
    if t in _ONE_BYTE_META:
        return mr.u8()
    if t in _TWO_BYTE_LE_META:
        return mr.u16()
    if t in _TWO_BYTE_BE_META:
        return mr.u8() << 8 | mr.u8()
    return 0


def _msb_bits(raw: bytes) -> tuple[bool, ...]:
    return tuple(bool(byte >> (7 - k) & 1) for byte in raw for k in range(8))


def _packed_list(r: Reader) -> tuple[int, ...]:
    out = []
    while r.remaining():
        out.append(r.packed_int())
    return tuple(out)


def _default_charset(r: Reader) -> tuple[int, tuple[tuple[int, int], ...]]:
    default = r.packed_int()
    pairs = []
    while r.remaining():
        idx = r.packed_int()
        pairs.append((idx, r.packed_int()))
    return default, tuple(pairs)


def _str_values(r: Reader) -> tuple[tuple[bytes, ...], ...]:
    out = []
    while r.remaining():
        n = r.packed_int()
        out.append(tuple(r.packed_bytes() for _ in range(n)))
    return tuple(out)


def _decode_optional(r: Reader, count: int) -> OptionalMetadata:
    f: dict[str, Any] = {}
    raw_sets: tuple[tuple[bytes, ...], ...] | None = None
    raw_enums: tuple[tuple[bytes, ...], ...] | None = None
    unknown = []
    M = OptionalMetadataType
    while r.remaining():
        kind = r.u8()
        length = r.packed_int()
        start = r.need(length)
        sub = Reader(r.buf, start, start + length)
        if kind == M.SIGNEDNESS:
            f["signedness"] = _msb_bits(sub.rest())
        elif kind == M.DEFAULT_CHARSET:
            f["default_charset"] = _default_charset(sub)
        elif kind == M.COLUMN_CHARSET:
            f["column_charset"] = _packed_list(sub)
        elif kind == M.COLUMN_NAME:
            names = []
            while sub.remaining():
                names.append(_name(sub.packed_bytes()))
            f["column_names"] = tuple(names)
        elif kind == M.SET_STR_VALUE:
            raw_sets = _str_values(sub)
        elif kind == M.ENUM_STR_VALUE:
            raw_enums = _str_values(sub)
        elif kind == M.GEOMETRY_TYPE:
            f["geometry_types"] = _packed_list(sub)
        elif kind == M.SIMPLE_PRIMARY_KEY:
            f["simple_primary_key"] = _packed_list(sub)
        elif kind == M.PRIMARY_KEY_WITH_PREFIX:
            flat = _packed_list(sub)
            if len(flat) % 2:
                raise DecodeError("TABLE_MAP PRIMARY_KEY_WITH_PREFIX has an odd number of values")
            f["primary_key_with_prefix"] = tuple(zip(flat[::2], flat[1::2], strict=True))
        elif kind == M.ENUM_AND_SET_DEFAULT_CHARSET:
            f["enum_and_set_default_charset"] = _default_charset(sub)
        elif kind == M.ENUM_AND_SET_COLUMN_CHARSET:
            f["enum_and_set_column_charset"] = _packed_list(sub)
        elif kind == M.COLUMN_VISIBILITY:
            f["column_visibility"] = _msb_bits(sub.rest())[:count]
        elif kind == M.VECTOR_DIMENSIONALITY:
            f["vector_dimensionality"] = _packed_list(sub)
        else:
            unknown.append((kind, sub.rest()))
    f["unknown"] = tuple(unknown)
    # Labels are kept raw until the ENUM/SET charsets are known (_build_columns decodes them).
    f["set_str_values"] = raw_sets
    f["enum_str_values"] = raw_enums
    return OptionalMetadata(**f)


def _charset_list(
    default: tuple[int, tuple[tuple[int, int], ...]] | None, per_column: tuple[int, ...] | None, n: int
) -> list[int | None]:
    if per_column is not None:
        out: list[int | None] = list(per_column[:n])
        return out + [None] * (n - len(out))
    if default is not None:
        lst: list[int | None] = [default[0]] * n
        for idx, coll in default[1]:
            if idx < n:
                lst[idx] = coll
        return lst
    return [None] * n


def _labels(raw: tuple[bytes, ...], collation: int | None, where: str) -> tuple[str, ...]:
    codec = collation_codec(collation) or "utf-8"
    try:
        if codec == "cp1252":  # MySQL's latin1, as the row decoder reads it
            from airflow_provider_binlog.binlog.values import mysql_latin1

            return tuple(mysql_latin1(v) for v in raw)
        return tuple(v.decode(codec) for v in raw)
    except UnicodeDecodeError:
        raise DecodeError(f"ENUM/SET labels of {where} do not decode as {codec}") from None


def _build_columns(
    types: tuple[int, ...],
    metas: list[int],
    nullable: tuple[bool, ...],
    o: OptionalMetadata,
    flavor: str,
) -> tuple[ColumnDef, ...]:
    count = len(types)
    reals = [real_type(t, m) for t, m in zip(types, metas, strict=True)]
    char_types = _CHARACTER_TYPES | ({T.GEOMETRY} if flavor == "mariadb" else frozenset())
    # MariaDB's YEAR is an unsigned TINYINT underneath and takes a signedness bit; MySQL's does not
    numeric_types = NUMERIC_TYPES | ({T.YEAR} if flavor == "mariadb" else frozenset())
    numeric = [i for i, (rt, _) in enumerate(reals) if rt in numeric_types]
    chars = [i for i, (rt, _) in enumerate(reals) if rt in char_types]
    enum_set = [i for i, (rt, _) in enumerate(reals) if rt in (T.ENUM, T.SET)]
    enums = [i for i in enum_set if reals[i][0] == T.ENUM]
    sets = [i for i in enum_set if reals[i][0] == T.SET]
    geoms = [i for i, (rt, _) in enumerate(reals) if rt == T.GEOMETRY]
    vectors = [i for i, (rt, _) in enumerate(reals) if rt == T.VECTOR]

    unsigned = [False] * count
    if o.signedness is not None:
        for k, i in enumerate(numeric):
            if k < len(o.signedness):
                unsigned[i] = o.signedness[k]
    collation: list[int | None] = [None] * count
    for i, c in zip(chars, _charset_list(o.default_charset, o.column_charset, len(chars)), strict=True):
        collation[i] = c
    es_colls = _charset_list(o.enum_and_set_default_charset, o.enum_and_set_column_charset, len(enum_set))
    for i, c in zip(enum_set, es_colls, strict=True):
        collation[i] = c
    names = list(o.column_names or ())
    if len(names) != count:
        if o.column_names is not None:
            raise DecodeError(f"TABLE_MAP has {len(names)} column names for {count} columns")
        names = [f"@{i + 1}" for i in range(count)]
    enum_values: dict[int, tuple[str, ...]] = {}
    set_values: dict[int, tuple[str, ...]] = {}
    raw_enums: Any = o.enum_str_values
    raw_sets: Any = o.set_str_values
    for idxs, raw, out in ((enums, raw_enums, enum_values), (sets, raw_sets, set_values)):
        if raw is not None:
            for i, labels in zip(idxs, raw, strict=False):
                out[i] = _labels(labels, collation[i], names[i])
    geo = dict(zip(geoms, o.geometry_types or (), strict=False))
    vec = dict(zip(vectors, o.vector_dimensionality or (), strict=False))
    visible = o.column_visibility or ()

    columns = []
    for i, (t, m) in enumerate(zip(types, metas, strict=True)):
        rt, length = reals[i]
        kw: dict[str, Any] = {}
        if rt == T.NEWDECIMAL:
            kw.update(precision=m >> 8, scale=m & 0xFF)
        elif rt in (T.TIME2, T.DATETIME2, T.TIMESTAMP2):
            kw["fsp"] = m
        elif rt in (T.TIME, T.DATETIME, T.TIMESTAMP):
            kw["fsp"] = 0
        elif rt == T.STRING:
            kw["max_length"] = length
        elif rt in (T.VARCHAR, T.VAR_STRING):
            kw["max_length"] = m
        elif rt in _BLOBS:
            kw["max_length"] = (1 << (8 * m)) - 1 if 1 <= m <= 4 else None
        coll = collation[i]
        columns.append(
            ColumnDef(
                name=names[i],
                type=rt,
                meta=m if t != T.STRING or rt not in (T.ENUM, T.SET) else m & 0xFF,
                nullable=nullable[i],
                unsigned=unsigned[i],
                collation=coll,
                charset=collation_codec(coll),
                enum_values=enum_values.get(i),
                set_values=set_values.get(i),
                geometry_type=geo.get(i),
                vector_dimensions=vec.get(i),
                visible=visible[i] if i < len(visible) else True,
                **kw,
            )
        )
    return tuple(columns)
