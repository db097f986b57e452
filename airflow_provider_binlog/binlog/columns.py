"""Column and table definitions as the decoder knows them (TABLE_MAP plus optional metadata or schema).

Python values the decoder produces, per column type (the contract for every layer above):

============================  ===============================================================
MySQL type                    Python value
============================  ===============================================================
TINY/SHORT/INT24/LONG/LONGLONG ``int`` (unsigned when the column is unsigned)
FLOAT, DOUBLE                 ``float``
DECIMAL, NEWDECIMAL           ``decimal.Decimal`` (exact, up to 65 digits)
YEAR                          ``int`` (``0`` for the zero year)
DATE                          ``datetime.date``; a date Python cannot hold (zero or partial,
                              ``0000-00-00``, ``2020-00-10``, year 0, ``2020-02-31``) is an
                              :class:`InvalidDate` with MySQL's text
TIME, TIME2                   ``datetime.timedelta`` (negative and over 24 h as stored)
DATETIME, DATETIME2           naive ``datetime.datetime``; zero/partial: :class:`InvalidDate`
TIMESTAMP, TIMESTAMP2         ``datetime.datetime`` in UTC (tz-aware); zero: :class:`InvalidDate`
CHAR/VARCHAR/TEXT             ``str`` decoded with the column's charset
BINARY/VARBINARY/BLOB         ``bytes``
ENUM                          ``str`` label when labels are known, else ``int`` index
SET                           ``str`` of comma-joined labels (MySQL's text form) when known,
                              else ``int`` bitmask
BIT                           ``int``
JSON                          Python object (``dict``/``list``/``str``/``int``/``float``/
                              ``Decimal``/``bool``/``None``); a top-level JSON ``null``
                              document is :data:`JSON_NULL`, so it differs from SQL NULL
GEOMETRY                      ``bytes``: 4-byte SRID then WKB, as MySQL stores it
MariaDB UUID, INET6, INET4    ``str``: MariaDB's text form (:mod:`.mariadb_types`), when
                              :attr:`ColumnDef.plugin_type` names the type; else ``bytes``
VECTOR                        ``list[float]`` (float32 values)
============================  ===============================================================

SQL NULL is ``None``. A column absent from a MINIMAL/NOBLOB row image is absent from the row dict.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_binlog.binlog.constants import ColumnType

BINARY_COLLATION = 63


class _JsonNull:
    """The JSON ``null`` document (as opposed to SQL NULL, which is ``None``)."""

    _instance: _JsonNull | None = None

    def __new__(cls) -> _JsonNull:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "JSON_NULL"

    def __reduce__(self) -> str:
        return "JSON_NULL"


JSON_NULL = _JsonNull()


class InvalidDate:
    """A DATE, DATETIME or TIMESTAMP value no Python date type holds: MySQL's zero date, a partial
    date (month or day 0), year 0, or an invalid day ``ALLOW_INVALID_DATES`` let in.

    The binlog decoder and the snapshot's SELECT make the same one (the lake decides what becomes
    of it: ``TypeOptions.zero_dates``). Equal, and hashed, by :attr:`text`.

    :param text: the value as MySQL prints it (``0000-00-00``, ``2020-00-10 01:02:03.000004``; the
        fraction with the column's digits).
    :param position: ``file:pos`` of the row event it came from (set by the binlog decoder), or of
        the snapshot that read it; ``None`` when unknown.
    """

    __slots__ = ("position", "text")

    def __init__(self, text: str, position: str | None = None) -> None:
        self.text = text
        self.position = position

    def __eq__(self, other: object) -> bool:
        return type(other) is InvalidDate and other.text == self.text

    def __hash__(self) -> int:
        return hash(("InvalidDate", self.text))

    def __repr__(self) -> str:
        return f"InvalidDate({self.text!r})"

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple[type[InvalidDate], tuple[str, str | None]]:
        return InvalidDate, (self.text, self.position)


def frac_text(us: int, fsp: int) -> str:
    """``.ffffff`` cut to ``fsp`` digits as MySQL prints a fraction (``""`` for ``fsp`` 0)."""
    return f".{us:06d}"[: fsp + 1] if fsp else ""


@dataclass(frozen=True, slots=True)
class ColumnDef:
    """One column as far as the binlog (and, when needed, ``information_schema``) tells.

    :param name: column name, or ``@N`` (1-based) when unknown.
    :param type: the real type (ENUM/SET resolved from STRING metadata, etc.).
    :param meta: the raw per-type metadata from the TABLE_MAP, as the row decoder needs it.
    :param nullable: from the TABLE_MAP null bitmap.
    :param unsigned: numeric signedness (``False`` when unknown).
    :param collation: collation id for character columns (63 = binary), ``None`` when unknown.
    :param charset: Python codec name for character columns, ``None`` for binary/unknown.
    :param precision: DECIMAL precision.
    :param scale: DECIMAL scale.
    :param fsp: fractional-seconds precision of temporal types.
    :param max_length: declared maximum length in bytes for string/blob types, when known.
    :param enum_values: ENUM labels, when known.
    :param set_values: SET labels, when known.
    :param geometry_type: geometry subtype code, when known.
    :param vector_dimensions: VECTOR dimensionality, when known.
    :param visible: ``False`` for invisible columns.
    :param plugin_type: MariaDB's ``uuid``, ``inet6`` or ``inet4`` for a column of that type
        (the TABLE_MAP says ``BINARY(16)``/``BINARY(4)``; the schema history names the type), else
        ``None`` (see :mod:`.mariadb_types`).
    :param zerofill: an integer declared ``ZEROFILL`` (known from the schema history only; the
        binlog holds the number, a conversion to a string keeps the zero padding).
    """

    name: str
    type: ColumnType
    meta: int = 0
    nullable: bool = True
    unsigned: bool = False
    collation: int | None = None
    charset: str | None = None
    precision: int | None = None
    scale: int | None = None
    fsp: int | None = None
    max_length: int | None = None
    enum_values: tuple[str, ...] | None = None
    set_values: tuple[str, ...] | None = None
    geometry_type: int | None = None
    vector_dimensions: int | None = None
    visible: bool = True
    plugin_type: str | None = None
    zerofill: bool = False

    @property
    def is_binary(self) -> bool:
        return self.collation == BINARY_COLLATION


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A table's columns at one point of the binlog.

    :param schema: database name.
    :param table: table name.
    :param columns: columns in table order.
    :param primary_key: names of the primary-key columns (empty if the table has none or it is unknown).
        Without a ``PRIMARY KEY`` the server makes its first unique key on NOT NULL columns (no
        prefix) the primary key, in the TABLE_MAP and in ``information_schema``; so does the schema
        history.
    :param unique_keys: the schema history's unique keys that may be the primary key, in the
        server's key order: ``(name, columns, made on NOT NULL columns)``, ``PRIMARY`` for a
        declared primary key (empty when not known). The server decides whether a unique key has
        NULL columns when the key is made (``CREATE``, ``ADD UNIQUE``, ``LIKE``): a later ``MODIFY
        ... NOT NULL`` does not make it the primary key.
    """

    schema: str
    table: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[str, ...] = ()
    unique_keys: tuple[tuple[str, tuple[str, ...], bool], ...] = ()

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)
