"""Row images to Python values: a decoder generated once per table schema, no per-value dispatch.

:class:`RowDecoder` turns a :class:`~.columns.TableSchema` into straight-line Python (one function
per columns-present bitmap, compiled once and cached), so the per-row work is a null-bit test and
an inlined ``unpack_from``/slice per column; complex types call a prepared closure. Values follow
the contract table in :mod:`.columns`. When the optional C extension is built, whole row events
decode in C first (:mod:`.values_native`: same values; anything unclean goes back to this code).

Choices documented here (the contract leaves them open):

* Text columns whose collation the binlog does not give (no ``binlog_row_metadata=FULL``/MINIMAL
  and no schema resolver): CHAR/VARCHAR decode as UTF-8, BLOB/TEXT stay ``bytes`` (the binlog
  cannot tell TEXT from BLOB). Invalid UTF-8 raises :class:`DecodeError` naming the column.
* Collations whose charset has no Python codec (dec8, hp8, swe7, armscii8, keybcs2, geostd8) raise
  :class:`DecodeError` naming the column when a non-NULL value is decoded.
* MySQL ``latin1`` is Windows-1252 with the five unassigned bytes as C1 controls, as MySQL does.
* ENUM index 0 (the "invalid value" MySQL stores for bad input) decodes as ``""``, as SELECT shows.
* Zero/partial dates -> :class:`~.columns.InvalidDate` with MySQL's text; so are dates Python
  cannot hold: year 0 (``0000-01-01``) and the invalid dates ``ALLOW_INVALID_DATES`` lets in
  (``2020-02-31``). The C decoder declines an event holding one (Python decodes it); each one made
  is recorded in :attr:`RowDecoder.invalid` and the rows event stamps its ``file:pos`` on it.
* Old DECIMAL (MySQL < 5.0, type 0) carries no length in the binlog: DecodeError, as mysqlbinlog.
* MariaDB JSON is LONGTEXT: ``str``; if a schema resolver marks the column JSON, it is parsed.
"""

from __future__ import annotations

import codecs
import datetime as dt
import json
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from airflow_provider_binlog.binlog import json_binary, mariadb_types, values_native
from airflow_provider_binlog.binlog.columns import (
    BINARY_COLLATION,
    JSON_NULL,
    ColumnDef,
    InvalidDate,
    TableSchema,
    frac_text,
)
from airflow_provider_binlog.binlog.constants import ColumnType
from airflow_provider_binlog.binlog.decimal_binary import DIG2BYTES, Reader, decimal_reader
from airflow_provider_binlog.binlog.errors import DecodeError

T = ColumnType
UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
_FRAC_MULT = {0: 0, 1: 10000, 2: 100, 3: 1}

# Windows-1252 with MySQL's fill-ins for 0x81, 0x8d, 0x8f, 0x90, 0x9d.
_MYSQL_LATIN1 = "".join(
    chr(b) if b in (0x81, 0x8D, 0x8F, 0x90, 0x9D) else bytes([b]).decode("cp1252") for b in range(256)
)


def mysql_latin1(raw: bytes) -> str:
    """Decode MySQL's ``latin1`` (Windows-1252 plus C1 controls in its five holes)."""
    return codecs.charmap_decode(raw, "strict", _MYSQL_LATIN1)[0]


# --------------------------------------------------------------------------------------------------
# Complex-type readers: f(buf, pos) -> (value, new_pos)


def _time2_reader(fsp: int) -> Reader:
    n = (fsp + 1) // 2
    mult = _FRAC_MULT[n]
    size = 3 + n
    bias = 0x800000 << (8 * n)
    fbits = 8 * n
    fmask = (1 << fbits) - 1
    from_bytes = int.from_bytes
    td = dt.timedelta

    def read(b: bytes, p: int) -> tuple[Any, int]:
        v = from_bytes(b[p : p + size], "big") - bias
        a = -v if v < 0 else v
        hms = a >> fbits
        t = td(
            hours=(hms >> 12) & 0x3FF,
            minutes=(hms >> 6) & 63,
            seconds=hms & 63,
            microseconds=(a & fmask) * mult,
        )
        return (-t if v < 0 else t), p + size

    return read


def _read_time(b: bytes, p: int) -> tuple[Any, int]:
    v = int.from_bytes(b[p : p + 3], "little", signed=True)
    a = -v if v < 0 else v
    t = dt.timedelta(hours=a // 10000, minutes=a // 100 % 100, seconds=a % 100)
    return (-t if v < 0 else t), p + 3


def _read_datetime(b: bytes, p: int) -> tuple[Any, int]:
    v = struct.unpack_from("<Q", b, p)[0]
    d, t = divmod(v, 1000000)
    year, month, day, hh, mi, ss = d // 10000, d // 100 % 100, d % 100, t // 10000, t // 100 % 100, t % 100
    try:
        return dt.datetime(year, month, day, hh, mi, ss), p + 8
    except ValueError:
        return InvalidDate(f"{year:04d}-{month:02d}-{day:02d} {hh:02d}:{mi:02d}:{ss:02d}"), p + 8


ZERO_DATETIME = "0000-00-00 00:00:00"


def _read_timestamp(b: bytes, p: int) -> tuple[Any, int]:
    v = struct.unpack_from("<I", b, p)[0]
    return (_EPOCH + dt.timedelta(seconds=v) if v else InvalidDate(ZERO_DATETIME)), p + 4


def invalid_date(x: int) -> InvalidDate:
    """The :class:`InvalidDate` of a DATE's 3-byte value ``x`` (day, month, year bit fields)."""
    return InvalidDate(f"{x >> 9:04d}-{(x >> 5) & 15:02d}-{x & 31:02d}")


def invalid_datetime2(x: int, us: int, fsp: int) -> InvalidDate:
    """The :class:`InvalidDate` of a DATETIME2 value (``x`` its integer part, ``us`` microseconds)."""
    ym = x >> 22
    return InvalidDate(
        f"{ym // 13:04d}-{ym % 13:02d}-{(x >> 17) & 31:02d} "
        f"{(x >> 12) & 31:02d}:{(x >> 6) & 63:02d}:{x & 63:02d}{frac_text(us, fsp)}"
    )


def _declining(reader: Reader) -> Reader:
    """``reader`` raising instead of returning an :class:`InvalidDate` (the C decoder's twin: it
    then declines the event, and the Python decoder makes and records the value)."""

    def read(b: bytes, p: int) -> tuple[Any, int]:
        v, q = reader(b, p)
        if type(v) is InvalidDate:
            raise ValueError("invalid date")
        return v, q

    return read


def _length_prefixed(width: int) -> Callable[[bytes, int], tuple[int, int]]:
    if width == 1:
        return lambda b, p: (b[p], p + 1)
    if width == 2:
        u16 = struct.Struct("<H").unpack_from
        return lambda b, p: (u16(b, p)[0], p + 2)
    if width in (3, 4):
        return lambda b, p: (int.from_bytes(b[p : p + width], "little"), p + width)
    raise DecodeError(f"invalid length-prefix width {width}")


def _json_reader(width: int) -> Reader:
    length = _length_prefixed(width)
    parse = json_binary.parse

    def read(b: bytes, p: int) -> tuple[Any, int]:
        n, p = length(b, p)
        end = p + n
        if end > len(b):
            raise DecodeError("JSON value overruns the row")
        return (parse(b[p:end]) if n else JSON_NULL), end

    return read


def _vector_reader(width: int) -> Reader:
    length = _length_prefixed(width)

    def read(b: bytes, p: int) -> tuple[Any, int]:
        n, p = length(b, p)
        if n % 4:
            raise DecodeError(f"VECTOR value of {n} bytes is not a multiple of 4")
        return list(struct.unpack_from(f"<{n // 4}f", b, p)), p + n

    return read


def _enum_reader(width: int, labels: tuple[str, ...] | None) -> Reader:
    def read(b: bytes, p: int) -> tuple[Any, int]:
        v = int.from_bytes(b[p : p + width], "little")
        if labels is None:
            return v, p + width
        if v == 0:
            return "", p + width
        if v > len(labels):
            raise DecodeError(f"ENUM index {v} beyond the {len(labels)} labels")
        return labels[v - 1], p + width

    return read


def _set_reader(width: int, labels: tuple[str, ...] | None) -> Reader:
    def read(b: bytes, p: int) -> tuple[Any, int]:
        v = int.from_bytes(b[p : p + width], "little")
        if labels is None:
            return v, p + width
        if v >> len(labels):
            raise DecodeError(f"SET bitmask {v:#x} has bits beyond the {len(labels)} labels")
        return ",".join(lab for k, lab in enumerate(labels) if v >> k & 1), p + width

    return read


def _text_json_reader(width: int, codec: str) -> Reader:
    length = _length_prefixed(width)
    loads = json.loads

    def read(b: bytes, p: int) -> tuple[Any, int]:
        n, p = length(b, p)
        doc = loads(b[p : p + n].decode(codec))
        return (JSON_NULL if doc is None else doc), p + n

    return read


def _unsupported(what: str) -> Reader:
    def read(b: bytes, p: int) -> tuple[Any, int]:
        raise DecodeError(what)

    return read


# --------------------------------------------------------------------------------------------------
# Code generation


class _Gen:
    """Collects the generated source and the helper objects it refers to."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {
            "DecodeError": DecodeError,
            "from_bytes": int.from_bytes,
            "Decimal": Decimal,
            "date": dt.date,
            "datetime": dt.datetime,
            "timedelta": dt.timedelta,
            "EPOCH": _EPOCH,
            "InvalidDate": InvalidDate,
            "invalid_date": invalid_date,
            "invalid_datetime2": invalid_datetime2,
        }
        self.structs: dict[str, str] = {}

    def const(self, prefix: str, obj: Any) -> str:
        for k, v in self.ns.items():
            if v is obj and k.startswith(prefix):
                return k
        name = f"{prefix}{len(self.ns)}"
        self.ns[name] = obj
        return name

    def struct(self, fmt: str) -> str:
        name = self.structs.get(fmt)
        if name is None:
            name = self.structs[fmt] = self.const("S_", struct.Struct(fmt).unpack_from)
        return name


_FIXED = {
    (T.TINY, False): ("<b", 1), (T.TINY, True): ("<B", 1),
    (T.SHORT, False): ("<h", 2), (T.SHORT, True): ("<H", 2),
    (T.LONG, False): ("<i", 4), (T.LONG, True): ("<I", 4),
    (T.LONGLONG, False): ("<q", 8), (T.LONGLONG, True): ("<Q", 8),
    (T.FLOAT, False): ("<f", 4), (T.FLOAT, True): ("<f", 4),
    (T.DOUBLE, False): ("<d", 8), (T.DOUBLE, True): ("<d", 8),
}  # fmt: skip


def _text_expr(g: _Gen, col: ColumnDef, raw: str) -> str:
    """Expression turning the bytes expression ``raw`` into the column's value."""
    if col.collation == BINARY_COLLATION:
        return raw
    codec = col.charset
    if codec is None:
        if col.collation is None:
            if col.type in (T.STRING, T.VARCHAR, T.VAR_STRING):
                return f"{raw}.decode('utf-8')"
            return raw
        msg = f"column {col.name!r}: collation {col.collation} has no Python codec"
        fail = g.const("F_", _unsupported(msg))
        return f"{fail}(b, p)"
    if codec == "cp1252":
        return f"{g.const('L_', mysql_latin1)}({raw})"
    return f"{raw}.decode({codec!r})"


def _column_code(g: _Gen, col: ColumnDef, out: str) -> list[str]:
    """Statements that read one non-NULL value of ``col`` into ``out`` and advance ``p``."""
    t = col.type
    fixed = _FIXED.get((t, col.unsigned))
    if fixed is not None:
        fmt, size = fixed
        if fmt == "<B":
            return [f"{out} = b[p]", "p += 1"]
        return [f"{out} = {g.struct(fmt)}(b, p)[0]", f"p += {size}"]
    if t == T.INT24:
        return [f"{out} = from_bytes(b[p:p + 3], 'little', signed={not col.unsigned})", "p += 3"]
    if t == T.YEAR:
        return [f"{out} = b[p]", "p += 1", f"if {out}: {out} += 1900"]
    if t == T.BIT:
        nbytes = (col.meta >> 8) + (1 if col.meta & 0xFF else 0)
        return [f"{out} = from_bytes(b[p:p + {nbytes}], 'big')", f"p += {nbytes}"]
    if t in (T.VARCHAR, T.VAR_STRING) or t == T.STRING:
        max_len = col.max_length if col.max_length is not None else col.meta
        wide = max_len > 255
        head = [f"n = {g.struct('<H')}(b, p)[0]", "p += 2"] if wide else ["n = b[p]", "p += 1"]
        expr = _text_expr(g, col, "b[p:p + n]")
        if t == T.STRING and col.collation == BINARY_COLLATION:
            # BINARY(n) values are n bytes; the binlog drops the trailing 0x00 padding
            expr = f"{expr}.ljust({max_len}, b'\\0')"
            if col.plugin_type is not None:  # MariaDB's UUID/INET6/INET4: its text
                expr = f"{g.const('U_', mariadb_types.text_function(col.plugin_type))}({expr})"
        return [*head, f"{out} = {expr}", "p += n"]
    if t in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.GEOMETRY):
        width = col.meta
        if width == 1:
            head = ["n = b[p]", "p += 1"]
        elif width == 2:
            head = [f"n = {g.struct('<H')}(b, p)[0]", "p += 2"]
        elif width in (3, 4):
            head = [f"n = from_bytes(b[p:p + {width}], 'little')", f"p += {width}"]
        else:
            raise DecodeError(f"column {col.name!r}: invalid BLOB length width {width}")
        expr = "b[p:p + n]" if t == T.GEOMETRY else _text_expr(g, col, "b[p:p + n]")
        return [*head, f"{out} = {expr}", "p += n"]
    inline = _inline_temporal_or_decimal(g, col, out)
    if inline is not None:
        return inline
    if t == T.NULL:
        return [f"{out} = None"]
    if t in (T.DATETIME, T.TIMESTAMP):  # the old formats: an invalid date is recorded
        return [f"{out}, p = {g.const('R_', reader_for(col))}(b, p)", f"if type({out}) is InvalidDate:",
                f"    made({out})"]  # fmt: skip
    return [f"{out}, p = {g.const('R_', reader_for(col))}(b, p)"]


def reader_for(col: ColumnDef) -> Reader:
    """The prepared reader of a column type the generated code does not inline (TIME2, the old
    temporal types, JSON, VECTOR, ENUM, SET, unsupported types)."""
    t = col.type
    reader: Reader
    if t == T.TIME2:
        reader = _time2_reader(col.fsp or 0)
    elif t == T.TIME:
        reader = _read_time
    elif t == T.DATETIME:
        reader = _read_datetime
    elif t == T.TIMESTAMP:
        reader = _read_timestamp
    elif t == T.JSON:
        if col.collation is not None and col.collation != BINARY_COLLATION:
            reader = _text_json_reader(col.meta, col.charset or "utf-8")  # MariaDB JSON as LONGTEXT
        else:
            reader = _json_reader(col.meta)
    elif t == T.VECTOR:
        reader = _vector_reader(col.meta)
    elif t == T.ENUM:
        reader = _enum_reader(col.meta & 0xFF, col.enum_values)
    elif t == T.SET:
        reader = _set_reader(col.meta & 0xFF, col.set_values)
    elif t == T.DECIMAL:
        reader = _unsupported(
            f"column {col.name!r}: old DECIMAL (MySQL 4.1 or earlier) has no length in the binlog"
        )
    else:
        reader = _unsupported(f"column {col.name!r}: values of type {t.name} are not supported")
    return reader


def native_reader_for(col: ColumnDef) -> Reader:
    """:func:`reader_for` as the C decoder calls it: the old DATETIME/TIMESTAMP readers raise on an
    invalid date (so C declines the event and the Python decoder records the value)."""
    reader = reader_for(col)
    return _declining(reader) if col.type in (T.DATETIME, T.TIMESTAMP) else reader


def _inline_temporal_or_decimal(g: _Gen, col: ColumnDef, out: str) -> list[str] | None:
    """Straight-line code for the hot temporal and DECIMAL types (same results as the readers above;
    dates Python cannot hold, i.e. zero, partial or invalid ones, become an :class:`InvalidDate`,
    passed to ``made``: the decoder's record of them)."""
    t = col.type
    if t in (T.DATE, T.NEWDATE):
        return [
            "x = from_bytes(b[p:p + 3], 'little')",
            "p += 3",
            "try:",
            f"    {out} = date(x >> 9, (x >> 5) & 15, x & 31)",
            "except ValueError:",
            f"    {out} = made(invalid_date(x))",
        ]
    if t == T.DATETIME2:
        n = ((col.fsp or 0) + 1) // 2
        lines = [f"x = from_bytes(b[p:p + {5 + n}], 'big')", f"p += {5 + n}"]
        if n:
            lines += [f"us = (x & {(1 << 8 * n) - 1}) * {_FRAC_MULT[n]}"]
            lines += [f"x = (x >> {8 * n}) - 0x8000000000"]
        else:
            lines += ["us = 0", "x -= 0x8000000000"]
        return [
            *lines,
            "ym = x >> 22",
            "try:",
            f"    {out} = datetime(ym // 13, ym % 13, (x >> 17) & 31,"
            " (x >> 12) & 31, (x >> 6) & 63, x & 63, us)",
            "except ValueError:",
            f"    {out} = made(invalid_datetime2(x, us, {col.fsp or 0}))",
        ]
    if t == T.TIMESTAMP2:
        n = ((col.fsp or 0) + 1) // 2
        lines = [f"x = from_bytes(b[p:p + {4 + n}], 'big')", f"p += {4 + n}"]
        zero = repr(ZERO_DATETIME + frac_text(0, col.fsp or 0))
        lines += ["if not x:", f"    {out} = made(InvalidDate({zero}))", "else:"]
        if n:
            secs, us = f"x >> {8 * n}", f"(x & {(1 << 8 * n) - 1}) * {_FRAC_MULT[n]}"
            return [*lines, f"    {out} = EPOCH + timedelta(seconds={secs}, microseconds={us})"]
        return [*lines, f"    {out} = EPOCH + timedelta(seconds=x)"]
    if t == T.NEWDECIMAL:
        precision, scale = col.precision or 0, col.scale or 0
        reader, size = decimal_reader(precision, scale)
        intg = precision - scale
        top = 1 << (size * 8 - 1)
        neg = ((1 << (size * 8)) - 1) ^ top
        simple = intg <= 9 and scale <= 9  # one digit group on each side of the point
        if not simple:
            return [f"{out}, p = {g.const('R_', reader)}(b, p)"]
        fbits = 8 * DIG2BYTES[scale] if scale < 9 else 32
        lines = [
            f"x = from_bytes(b[p:p + {size}], 'big')",
            f"p += {size}",
            f"if x & {top}:",
            "    s = ''",
            f"    x ^= {top}",
            "else:",
            "    s = '-'",
            f"    x ^= {neg}",
        ]
        if scale:
            return [*lines, f"{out} = Decimal(f'{{s}}{{x >> {fbits}}}.{{x & {(1 << fbits) - 1}:0{scale}d}}')"]
        return [*lines, f"{out} = Decimal(f'{{s}}{{x}}')"]
    return None


def _generate(
    schema: TableSchema,
    present: tuple[int, ...],
    partial_json: bool,
    made: Callable[[Any], Any] = lambda v: v,
) -> Callable[..., Any]:
    """Compile ``decode_row(b, p) -> (dict, p)`` for the columns in ``present`` (table indexes).

    With ``partial_json`` the function is ``decode_row(b, p, partial)`` and JSON columns whose bit
    is set in ``partial`` (one bit per JSON column of the table) are read as JSON diffs (a
    :class:`json_binary.JsonDiffs`), to be applied to the before image by the caller. ``made`` is
    called with every :class:`InvalidDate` made (and returns it).
    """
    g = _Gen()
    g.ns["made"] = made
    cols = schema.columns
    nbytes = (len(present) + 7) // 8
    json_index = {i: k for k, i in enumerate(i for i, c in enumerate(cols) if c.type == T.JSON)}
    args = "b, p, partial" if partial_json else "b, p"
    body = [f"def decode_row({args}):", "    c = -1", "    try:"]
    ind = " " * 8
    if nbytes == 1:
        body += [f"{ind}nulls = b[p]", f"{ind}p += 1"]
    elif nbytes:
        body += [f"{ind}nulls = from_bytes(b[p:p + {nbytes}], 'little')", f"{ind}p += {nbytes}"]
    else:
        body += [f"{ind}nulls = 0"]
    names = [(cols[i].name, f"v{bit}") for bit, i in enumerate(present)]
    runs = _fixed_runs(cols, present)
    bit = 0
    while bit < len(present):
        run = runs.get(bit)
        if run is not None:
            # consecutive fixed-width numbers: one unpack_from when none of them is NULL
            mask = sum(1 << (bit + k) for k in range(len(run)))
            fmt = "<" + "".join(_FIXED[(cols[i].type, cols[i].unsigned)][0][1] for i in run)
            outs = ", ".join(f"v{bit + k}" for k in range(len(run)))
            body.append(f"{ind}if not nulls & {mask}:")
            body.append(f"{ind}    c = {run[0]}")
            body.append(f"{ind}    {outs} = {g.struct(fmt)}(b, p)")
            body.append(f"{ind}    p += {struct.calcsize(fmt)}")
            body.append(f"{ind}else:")
            for k, i in enumerate(run):
                body += [f"{ind}    {line}" for line in _one_column(g, cols[i], i, bit + k, None)]
            bit += len(run)
            continue
        i = present[bit]
        jbit = json_index.get(i) if partial_json and cols[i].type == T.JSON else None
        body += [f"{ind}{line}" for line in _one_column(g, cols[i], i, bit, jbit)]
        bit += 1
    body.append(f"{ind}row = {{{', '.join(f'{name!r}: {out}' for name, out in names)}}}")
    body.append("    except Exception as e:")
    body.append(f"        raise {g.const('E_', _fail)}(c, e) from None")
    body.append("    return row, p")
    g.ns["COLUMNS"] = cols
    src = "\n".join(body)
    code = compile(src, f"<row decoder {schema.schema}.{schema.table}>", "exec")
    exec(code, g.ns)
    fn: Callable[..., Any] = g.ns["decode_row"]
    fn.__source__ = src  # type: ignore[attr-defined]
    return fn


def _fixed_runs(cols: tuple[ColumnDef, ...], present: tuple[int, ...]) -> dict[int, list[int]]:
    """Runs of two or more consecutive present fixed-width numeric columns, by first image bit."""
    runs: dict[int, list[int]] = {}
    cur: list[int] = []
    start = 0
    for bit, i in enumerate([*present, -1]):
        if i >= 0 and (cols[i].type, cols[i].unsigned) in _FIXED:
            if not cur:
                start = bit
            cur.append(i)
            continue
        if len(cur) >= 2:
            runs[start] = cur
        cur = []
    return runs


def _one_column(g: _Gen, col: ColumnDef, i: int, bit: int, json_bit: int | None) -> list[str]:
    """Source lines reading table column ``i`` (image bit ``bit``) into ``v<bit>``."""
    out = f"v{bit}"
    lines = [f"c = {i}", f"if nulls >> {bit} & 1:", f"    {out} = None", "else:"]
    stmts = _column_code(g, col, out)
    if json_bit is not None:
        diff = g.const("J_", _json_diff_reader(col.meta))
        lines += [f"    if partial >> {json_bit} & 1:", f"        {out}, p = {diff}(b, p)", "    else:"]
        return lines + [f"        {s}" for s in stmts]
    return lines + [f"    {s}" for s in stmts]


def empty_image(table: str, pos: int, end: int) -> DecodeError:
    """A row image of no bytes (no column present) with bytes left: the loop would never end."""
    return DecodeError(
        f"{table}: a row image at {pos} has no columns present but the event has {end - pos} more "
        "bytes (corrupted columns-present bitmap)"
    )


def _fail(c: int, e: Exception) -> DecodeError:
    if c < 0:
        return DecodeError(f"row image truncated before its null bitmap ({type(e).__name__})")
    if isinstance(e, DecodeError):
        return DecodeError(f"column {c + 1}: {e.reason}")
    if isinstance(e, (IndexError, struct.error)):
        return DecodeError(f"column {c + 1}: value truncated (row image ends early)")
    return DecodeError(f"column {c + 1}: {type(e).__name__}: {e}")


def _json_diff_reader(width: int) -> Reader:
    length = _length_prefixed(width)

    def read(b: bytes, p: int) -> tuple[Any, int]:
        n, p = length(b, p)
        end = p + n
        if end > len(b):
            raise DecodeError("JSON diff overruns the row")
        return json_binary.parse_diffs(b[p:end]), end

    return read


_native: Any = values_native.load()
_NO_PLAN = object()


def native_available() -> bool:
    """Whether row images decode through the C extension (see :mod:`.values_native`)."""
    return _native is not None


def native_module() -> Any:
    """The C extension (``_rowdecode``) when row images decode through it, else ``None``."""
    return _native


class RowDecoder:
    """Decodes row images of one table; built once per TABLE_MAP and reused for every row.

    :param schema: the table's columns (from :class:`~.table_map.TableMapEvent.table_schema`).

    ``decode_rows(body, pos, end, present)`` returns the list of row dicts in ``body[pos:end]``.
    Rows are dicts keyed by column name; columns absent from the image (``present`` bitmap) are
    absent from the dict.
    """

    __slots__ = ("_fns", "_made", "_plans", "invalid", "names", "schema")

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.names = schema.column_names
        self._fns: dict[tuple[bytes, bool], Callable[..., Any]] = {}
        self._plans: dict[tuple[bytes, frozenset[int] | None], Any] = {}
        self.invalid: list[InvalidDate] = []
        """The :class:`InvalidDate` values made since the caller last emptied it (see :meth:`stamp`)."""
        append = self.invalid.append

        def made(v: InvalidDate) -> InvalidDate:
            append(v)
            return v

        self._made = made

    def stamp(self, position: str | None) -> None:
        """Set ``position`` (the rows event's ``file:pos``) on the invalid dates made, and forget them."""
        for v in self.invalid:
            v.position = position
        self.invalid.clear()

    def row_function(self, present: bytes, partial_json: bool = False) -> Callable[..., Any]:
        """The compiled ``decode_row(b, p[, partial]) -> (row, p)`` for a columns-present bitmap."""
        key = (present, partial_json)
        fn = self._fns.get(key)
        if fn is None:
            n = len(self.schema.columns)
            idx = tuple(i for i in range(n) if present[i >> 3] >> (i & 7) & 1)
            fn = self._fns[key] = _generate(self.schema, idx, partial_json, self._made)
        return fn

    def native_plan(self, present: bytes, keep: frozenset[int] | None = None) -> Any:
        """The C decoder's plan for a columns-present bitmap, ``None`` when the C decoder is off or
        cannot take every column. Builds the Python decoder first (its errors come first).

        :param keep: the table's column indexes the images keep (``None``: every present column);
            the others are read past, and no value is made for them.
        """
        if _native is None:
            return None
        plan = self._plans.get((present, keep), _NO_PLAN)
        if plan is _NO_PLAN:
            self.row_function(present)
            n = len(self.schema.columns)
            idx = tuple(i for i in range(n) if present[i >> 3] >> (i & 7) & 1)
            plan = self._plans[(present, keep)] = values_native.plan(
                _native, self.schema, idx, native_reader_for, _MYSQL_LATIN1, keep
            )
        return plan

    def native_pairs(
        self, body: bytes, pos: int, end: int, before: bytes, after: bytes, keep: frozenset[int] | None = None
    ) -> list[Any] | None:
        """UPDATE row images in ``body[pos:end]`` as ``(before, after)`` dicts, decoded in C; ``None``
        when the C decoder is off, cannot take the columns or declines the bytes (the caller then
        decodes in Python, which raises the error if there is one).

        :param keep: the column indexes the before images keep (``None``: all).
        """
        pb = self.native_plan(before, keep)
        pa = self.native_plan(after)
        if pb is None or pa is None:
            return None
        pairs: list[Any] | None = _native.decode_pairs(pb, pa, body, pos, end)
        return pairs

    def kept(self, keep: frozenset[int]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """``image -> image`` with only the columns ``keep`` names (the Python decoder's twin of a
        C plan's keep flags)."""
        names = [self.names[i] for i in sorted(keep) if i < len(self.names)]

        def project(row: dict[str, Any]) -> dict[str, Any]:
            return {n: row[n] for n in names if n in row}

        return project

    def _named(self, e: DecodeError) -> DecodeError:
        reason = e.reason
        if reason.startswith("column "):
            num, _, rest = reason[7:].partition(":")
            if num.isdigit():
                col = self.schema.columns[int(num) - 1]
                reason = f"{self.schema.qualified_name} column {num} ({col.name}, {col.type.name}):{rest}"
        return DecodeError(reason, event_type=e.event_type, position=e.position)

    def decode_row(self, body: bytes, pos: int, present: bytes) -> tuple[dict[str, Any], int]:
        """Decode one row image at ``pos``; return it and the position after it."""
        try:
            row, p = self.row_function(present)(body, pos)
        except DecodeError as e:
            raise self._named(e) from None
        if p > len(body):
            raise DecodeError(f"{self.schema.qualified_name}: row image overruns the event")
        return row, p

    def decode_rows(
        self, body: bytes, pos: int, end: int, present: bytes, keep: frozenset[int] | None = None
    ) -> list[dict[str, Any]]:
        """Decode consecutive row images in ``body[pos:end]`` (WRITE/DELETE rows).

        :param keep: the column indexes the images keep (``None``: all).
        """
        plan = self.native_plan(present, keep)
        if plan is not None:
            out: list[dict[str, Any]] | None = _native.decode_rows(plan, body, pos, end)
            if out is not None:
                return out
        fn = self.row_function(present)
        rows: list[dict[str, Any]] = []
        append = rows.append
        try:
            while pos < end:
                row, after = fn(body, pos)
                if after == pos:
                    raise empty_image(self.schema.qualified_name, pos, end)
                pos = after
                append(row)
        except DecodeError as e:
            raise self._named(e) from None
        if pos != end:
            raise DecodeError(f"{self.schema.qualified_name}: row images end at {pos}, event at {end}")
        if keep is not None:  # the C plan's keep flags in Python: decoded whole, then cut
            return list(map(self.kept(keep), rows))
        return rows
