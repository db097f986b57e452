"""The C row decoder (``_rowdecode``, optional): loading it and describing columns to it.

:class:`~.values.RowDecoder` decodes a rows event in C when the extension is built and every
column of the image has a C reader here; otherwise, and whenever the C decoder declines an event,
it uses the generated Python decoder. Both give the same values: each spec below is the C twin of
the Python code :func:`.values._column_code` generates for that column, and the column types with
no C twin (the old TIME/DATETIME/TIMESTAMP, JSON, VECTOR, unsupported types) call the very same
Python reader from C.

The C decoder never raises: on anything but clean bytes (a read past the event, bad text, an
ENUM/SET value beyond its labels, an out-of-range DECIMAL digit group, a Python reader raising)
it returns ``None`` and the whole event is decoded again in Python, which raises its own
:class:`~.errors.DecodeError` (or returns the values for the few inputs only it accepts). Errors
are thus the Python decoder's by construction.

``BINLOG_CDC_PURE_PYTHON=1`` in the environment (read at import) turns the C decoder off.

Spec per column, ``(kind, p1, p2, p3, obj)`` (the ``K_*``/``TXT_*`` codes of ``_rowdecode.c``):

==========  ==================================================================================
kind        meaning of p1, p2, p3, obj
==========  ==================================================================================
NULL        type NULL: no bytes, ``None``
INT, UINT   p1 = width in bytes (1, 2, 3, 4, 8), little-endian
FLOAT       float32; DOUBLE: float64
YEAR        one byte, ``+1900`` unless 0
BIT         p1 = bytes (1-8), big-endian
STR         p1 = length-prefix width (1-4), p2 = TXT_* text mode, p3 = BINARY(n) pad length,
            obj = codec name (TXT_CODEC) or MySQL's latin1 decoding table (TXT_CHARMAP)
DATE        3 bytes; DATETIME2, TIMESTAMP2, TIME2: p1 = fraction bytes (0-3)
DECIMAL     p1 = precision, p2 = scale
ENUM, SET   p1 = width (1-8), obj = labels tuple or ``None``
READER      obj = the Python reader ``f(body, pos) -> (value, pos)``
==========  ==================================================================================
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from airflow_provider_binlog.binlog.columns import BINARY_COLLATION, ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType

T = ColumnType
K_NULL, K_INT, K_UINT, K_FLOAT, K_DOUBLE, K_YEAR, K_BIT, K_STR = range(8)
K_DATE, K_DATETIME2, K_TIMESTAMP2, K_TIME2, K_DECIMAL, K_ENUM, K_SET, K_READER = range(8, 16)
TXT_BYTES, TXT_UTF8, TXT_CHARMAP, TXT_CODEC, TXT_PAD = range(5)

Spec = tuple[int, int, int, int, Any]

_INTS = {T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8}
_BLOBS = (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.GEOMETRY)
_READERS = (T.TIME, T.DATETIME, T.TIMESTAMP, T.JSON, T.VECTOR, T.DECIMAL)


def c_extension(name: str) -> Any:
    """The C extension module ``name``, or ``None`` when it is not built or
    ``BINLOG_CDC_PURE_PYTHON`` is set (the C row decoder's and the C fold's switch)."""
    from airflow_provider_binlog import settings

    if settings.current().pure_python:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def load() -> Any:
    """The ``_rowdecode`` module, or ``None`` (see :func:`c_extension`)."""
    mod = c_extension("airflow_provider_binlog.binlog._rowdecode")
    if mod is not None:
        mod.setup(Decimal)
    return mod


class NoPlan(Exception):
    """A column the C decoder has no twin for (the Python decoder takes the whole image)."""


def _text(col: ColumnDef, latin1_table: str) -> tuple[int, Any]:
    """Text mode and its object for a character column (the twin of ``values._text_expr``)."""
    if col.collation == BINARY_COLLATION:
        return TXT_BYTES, None
    codec = col.charset
    if codec is None:
        if col.collation is None:
            if col.type in (T.STRING, T.VARCHAR, T.VAR_STRING):
                return TXT_UTF8, None
            return TXT_BYTES, None
        raise NoPlan("collation without a Python codec")
    if codec == "cp1252":
        return TXT_CHARMAP, latin1_table
    if codec.lower().replace("_", "-") in ("utf-8", "utf8"):
        return TXT_UTF8, None
    return TXT_CODEC, codec


def spec(col: ColumnDef, reader_for: Callable[[ColumnDef], Any], latin1_table: str) -> Spec:
    """The C spec of one column; :class:`NoPlan` when it has none.

    :param col: the column.
    :param reader_for: ``values.reader_for`` (the Python readers the C decoder may call).
    :param latin1_table: the 256-character decoding table of MySQL's ``latin1``.
    """
    t = col.type
    if col.plugin_type is not None:
        raise NoPlan(f"column {col.name!r}: MariaDB {col.plugin_type.upper()} is made text in Python")
    if t in _INTS:
        return (K_UINT if col.unsigned else K_INT), _INTS[t], 0, 0, None
    if t == T.FLOAT:
        return K_FLOAT, 4, 0, 0, None
    if t == T.DOUBLE:
        return K_DOUBLE, 8, 0, 0, None
    if t == T.YEAR:
        return K_YEAR, 1, 0, 0, None
    if t == T.BIT:
        return K_BIT, (col.meta >> 8) + (1 if col.meta & 0xFF else 0), 0, 0, None
    if t in (T.VARCHAR, T.VAR_STRING, T.STRING):
        max_len = col.max_length if col.max_length is not None else col.meta
        mode, obj = _text(col, latin1_table)
        if t == T.STRING and col.collation == BINARY_COLLATION:
            mode = TXT_PAD
        return K_STR, 2 if max_len > 255 else 1, mode, max(max_len, 0), obj
    if t in _BLOBS:
        mode, obj = (TXT_BYTES, None) if t == T.GEOMETRY else _text(col, latin1_table)
        return K_STR, col.meta, mode, 0, obj
    if t in (T.DATE, T.NEWDATE):
        return K_DATE, 3, 0, 0, None
    if t in (T.DATETIME2, T.TIMESTAMP2, T.TIME2):
        kind = {T.DATETIME2: K_DATETIME2, T.TIMESTAMP2: K_TIMESTAMP2, T.TIME2: K_TIME2}[t]
        return kind, ((col.fsp or 0) + 1) // 2, 0, 0, None
    if t == T.NEWDECIMAL:
        return K_DECIMAL, col.precision or 0, col.scale or 0, 0, None
    if t == T.ENUM:
        return K_ENUM, col.meta & 0xFF, 0, 0, col.enum_values
    if t == T.SET:
        return K_SET, col.meta & 0xFF, 0, 0, col.set_values
    if t == T.NULL:
        return K_NULL, 0, 0, 0, None
    if t in _READERS:
        return K_READER, 0, 0, 0, reader_for(col)
    raise NoPlan(f"type {t.name}")


def plan(
    native: Any,
    schema: TableSchema,
    present: tuple[int, ...],
    reader_for: Callable[[ColumnDef], Any],
    latin1_table: str,
    keep: frozenset[int] | None = None,
) -> Any:
    """The C ``Plan`` for an image of the columns ``present`` (table indexes), or ``None`` when
    some column has no C twin (or the C decoder refuses its metadata).

    :param keep: the table indexes the image keeps (``None``: all); the others are read past.
    """
    cols = schema.columns
    try:
        specs = tuple(spec(cols[i], reader_for, latin1_table) for i in present)
        names = tuple(cols[i].name for i in present)
        if keep is None:
            return native.Plan(names, specs)
        return native.Plan(names, specs, tuple(i in keep for i in present))
    except (NoPlan, ValueError, TypeError):
        return None
