"""A source-table model for lake tests: random changes, the rows the source holds, and what the lake
should read back for every mapped type."""

from __future__ import annotations

import datetime
import decimal
import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_binlog.binlog.columns import JSON_NULL, ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Entry, Op, OrderKey, RowChange

UTF8 = 45
BIN = 63
UTC = datetime.timezone.utc


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


JSON_DOCS: list[tuple[Any, str]] = [
    ({"a": 1, "b": [1, 2.5, "x"]}, '{"a": 1, "b": [1, 2.5, "x"]}'),
    (JSON_NULL, "null"),
    (5, "5"),
    ('str"q', '"str\\"q"'),
    ([decimal.Decimal("1.50"), True, None], "[1.50, true, null]"),
    ({"k": {"n": False}}, '{"k": {"n": false}}'),
    ("ünï", '"ünï"'),
]


@dataclass(frozen=True)
class Col:
    """A model column: its definition, a value generator, and the value the lake reads back."""

    cdef: ColumnDef
    gen: Callable[[random.Random], Any]
    lake: Callable[[Any], Any] = lambda v: v


def _json_gen(r: random.Random) -> Any:
    return r.choice(JSON_DOCS)[0]


def _json_lake(v: Any) -> str:
    for doc, text in JSON_DOCS:
        if doc is v or (doc is not JSON_NULL and v is not JSON_NULL and doc == v and type(doc) is type(v)):
            return text
    raise AssertionError(v)


def _dt(r: random.Random) -> datetime.datetime:
    return datetime.datetime(
        r.randint(1000, 9999),
        r.randint(1, 12),
        r.randint(1, 28),
        r.randint(0, 23),
        r.randint(0, 59),
        r.randint(0, 59),
        r.choice([0, 1, 999_999, r.randint(0, 999_999)]),
    )


def _ts(r: random.Random) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(r.randint(1, 2**31 - 1), UTC).replace(
        microsecond=r.randint(0, 999_999)
    )


def _epoch_micros(v: datetime.datetime) -> int:
    return (v - datetime.datetime(1970, 1, 1, tzinfo=UTC)) // datetime.timedelta(microseconds=1)


def _time(r: random.Random) -> datetime.timedelta:
    limit = 838 * 3600 + 59 * 60 + 59
    return datetime.timedelta(
        seconds=r.randint(-limit, limit), microseconds=r.choice([0, r.randint(0, 999_999)])
    )


def _maybe_null(gen: Callable[[random.Random], Any]) -> Callable[[random.Random], Any]:
    return lambda r: None if r.random() < 0.1 else gen(r)


def all_type_columns() -> list[Col]:
    """One column per mapped MySQL type (plus the key ``id``)."""
    cols = [
        Col(ColumnDef("tiny", T.TINY), lambda r: r.randint(-128, 127)),
        Col(ColumnDef("utiny", T.TINY, unsigned=True), lambda r: r.randint(0, 255)),
        Col(ColumnDef("small", T.SHORT), lambda r: r.randint(-32768, 32767)),
        Col(ColumnDef("medium", T.INT24, unsigned=True), lambda r: r.randint(0, 2**24 - 1)),
        Col(ColumnDef("int", T.LONG), lambda r: r.randint(-(2**31), 2**31 - 1)),
        Col(
            ColumnDef("uint", T.LONG, unsigned=True),
            lambda r: r.choice([0, 2**32 - 1, r.randint(0, 2**32 - 1)]),
        ),
        Col(ColumnDef("big", T.LONGLONG), lambda r: r.randint(-(2**63), 2**63 - 1)),
        Col(
            ColumnDef("ubig", T.LONGLONG, unsigned=True),
            lambda r: r.choice([2**64 - 1, r.randint(0, 2**64 - 1)]),
            decimal.Decimal,
        ),
        Col(
            ColumnDef("dec", T.NEWDECIMAL, precision=12, scale=4),
            lambda r: decimal.Decimal(r.randint(-(10**12) + 1, 10**12 - 1)).scaleb(-4),
        ),
        Col(
            ColumnDef("dec38", T.NEWDECIMAL, precision=38, scale=0),
            lambda r: decimal.Decimal(r.choice([10**38 - 1, -(10**38) + 1, r.randint(0, 10**20)])),
        ),
        Col(ColumnDef("flt", T.FLOAT), lambda r: f32(r.uniform(-1e30, 1e30))),
        Col(ColumnDef("dbl", T.DOUBLE), lambda r: r.choice([0.1, -1e308, 5e-324, r.uniform(-1e9, 1e9)])),
        Col(ColumnDef("bit8", T.BIT, meta=1 << 8), lambda r: r.randint(0, 255)),
        Col(
            ColumnDef("bit64", T.BIT, meta=8 << 8),
            lambda r: r.choice([2**64 - 1, r.randint(0, 2**64 - 1)]),
            decimal.Decimal,
        ),
        Col(ColumnDef("yr", T.YEAR), lambda r: r.choice([0, r.randint(1901, 2155)])),
        Col(
            ColumnDef("d", T.DATE),
            lambda r: datetime.date(r.randint(1, 9999), r.randint(1, 12), r.randint(1, 28)),
        ),
        Col(ColumnDef("tm", T.TIME2, fsp=6), _time, lambda v: v // datetime.timedelta(microseconds=1)),
        Col(ColumnDef("dtm", T.DATETIME2, fsp=6), _dt),
        Col(ColumnDef("ts", T.TIMESTAMP2, fsp=6), _ts, _epoch_micros),
        Col(
            ColumnDef("vc", T.VARCHAR, collation=UTF8, charset="utf-8"),
            lambda r: "".join(r.choice("aé😀 '`\"\\;x") for _ in range(r.randint(0, 12))),
        ),
        Col(ColumnDef("txt", T.BLOB, collation=UTF8, charset="utf-8"), lambda r: "t" * r.randint(0, 300)),
        Col(ColumnDef("vbin", T.VARCHAR, collation=BIN), lambda r: r.randbytes(r.randint(0, 16))),
        Col(ColumnDef("blb", T.BLOB, collation=BIN), lambda r: r.randbytes(r.randint(0, 64))),
        Col(ColumnDef("enm", T.ENUM, enum_values=("a", "b")), lambda r: r.choice(["a", "b", ""])),
        Col(ColumnDef("st", T.SET, set_values=("x", "y")), lambda r: r.choice(["", "x", "x,y"])),
        Col(ColumnDef("js", T.JSON), _json_gen, _json_lake),
        Col(ColumnDef("geo", T.GEOMETRY), lambda r: b"\x00\x00\x00\x00" + r.randbytes(21), lambda v: v[4:]),
        Col(
            ColumnDef("vec", T.VECTOR, vector_dimensions=3),
            lambda r: [f32(r.uniform(-5, 5)) for _ in range(3)],
        ),
    ]
    return [Col(c.cdef, _maybe_null(c.gen), c.lake) for c in cols]


KEY = Col(ColumnDef("id", T.LONG, nullable=False), lambda r: 0)


@dataclass
class SourceTable:
    """A MySQL table as a dict of rows, emitting the binlog entries that its changes would produce."""

    schema_name: str
    table: str
    columns: list[Col]
    rng: random.Random
    destination: str = "dest"
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    clock: list[int] = field(default_factory=lambda: [4])
    next_id: int = 1
    added: int = 0
    _schema: TableSchema | None = None

    def __post_init__(self) -> None:
        self._rebuild_schema()

    @property
    def all_columns(self) -> list[Col]:
        return [KEY, *self.columns]

    def _rebuild_schema(self) -> None:
        self._schema = TableSchema(
            self.schema_name, self.table, tuple(c.cdef for c in self.all_columns), ("id",)
        )

    def _where(self) -> tuple[BinlogPosition, BinlogPosition, OrderKey, int]:
        pos = self.clock[0]
        self.clock[0] += 100
        return (
            BinlogPosition("mysql-bin.000001", pos),
            BinlogPosition("mysql-bin.000001", pos + 100),
            OrderKey(1, pos, -1, 0),
            1_700_000_000 + pos,
        )

    def _change(self, op: Op, before: dict[str, Any] | None, after: dict[str, Any] | None) -> RowChange:
        pos, end, key, ts = self._where()
        return RowChange(
            self.destination,
            self.schema_name,
            self.table,
            op,
            before,
            after,
            ("id",),
            pos,
            end,
            f"0-1-{pos}",
            ts,
            key,
            self._schema,
        )

    def _values(self, key: int) -> dict[str, Any]:
        row = {"id": key}
        for c in self.columns:
            row[c.cdef.name] = c.gen(self.rng)
        return row

    def insert(self) -> Entry:
        key = self.next_id
        self.next_id += 1
        row = self._values(key)
        self.rows[key] = row
        return self._change(Op.INSERT, None, dict(row))

    def update(self, change_key: bool = False) -> Entry | None:
        if not self.rows:
            return None
        key = self.rng.choice(sorted(self.rows))
        before = self.rows.pop(key)
        new_key = key
        if change_key:
            new_key = self.next_id
            self.next_id += 1
        after = self._values(new_key)
        if self.rng.random() < 0.3:  # touch only some columns
            after = {**before, "id": new_key, self.columns[0].cdef.name: after[self.columns[0].cdef.name]}
        self.rows[new_key] = after
        return self._change(Op.UPDATE, dict(before), dict(after))

    def delete(self) -> Entry | None:
        if not self.rows:
            return None
        key = self.rng.choice(sorted(self.rows))
        before = self.rows.pop(key)
        return self._change(Op.DELETE, dict(before), None)

    def truncate(self) -> Entry:
        self.rows.clear()
        pos, end, key, ts = self._where()
        return DdlEntry(
            self.destination,
            self.schema_name,
            self.table,
            DdlKind.TRUNCATE,
            f"TRUNCATE TABLE {self.table}",
            pos,
            end,
            f"0-1-{pos}",
            ts,
            key,
            self._schema,
        )

    def add_column(self) -> Entry:
        self.added += 1
        name = f"added_{self.added}"
        col = Col(
            ColumnDef(name, T.VARCHAR, collation=UTF8, charset="utf-8"),
            _maybe_null(lambda r: f"v{r.randint(0, 99)}"),
        )
        self.columns.append(col)
        for row in self.rows.values():
            row[name] = None
        self._rebuild_schema()
        pos, end, key, ts = self._where()
        return DdlEntry(
            self.destination,
            self.schema_name,
            self.table,
            DdlKind.DDL,
            f"ALTER TABLE {self.table} ADD COLUMN {name} VARCHAR(10)",
            pos,
            end,
            None,
            ts,
            key,
            self._schema,
        )

    def random_op(self, weights: Sequence[float] = (40, 25, 8, 12, 2, 2)) -> Entry | None:
        kind = self.rng.choices(["insert", "update", "keychange", "delete", "truncate", "add"], weights)[0]
        if kind == "insert":
            return self.insert()
        if kind == "update":
            return self.update()
        if kind == "keychange":
            return self.update(change_key=True)
        if kind == "delete":
            return self.delete()
        if kind == "truncate":
            return self.truncate()
        return self.add_column()

    def expected(self) -> dict[int, dict[str, Any]]:
        """The lake rows the model predicts: key -> column -> value as read back (see :func:`read_table`)."""
        out = {}
        for key, row in self.rows.items():
            out[key] = {
                c.cdef.name: (None if row.get(c.cdef.name) is None else c.lake(row[c.cdef.name]))
                for c in self.all_columns
            }
        return out


def read_table(spark: Any, name: str, columns: Sequence[str], where: str = "") -> dict[int, dict[str, Any]]:
    """Read a lake table keyed by ``id``; timestamps with zone as epoch microseconds, binaries as bytes."""
    from airflow_provider_binlog.lake.sql import quote

    df = spark.table(name)
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    select = []
    for c in columns:
        q = quote(c)
        select.append(f"unix_micros({q}) AS {q}" if types[c] == "timestamp" else q)
    rows = spark.sql(f"SELECT {', '.join(select)} FROM {name} {where}").collect()
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        values = {}
        for c, v in zip(columns, r, strict=True):
            if isinstance(v, bytearray):
                v = bytes(v)
            elif isinstance(v, list):
                v = list(v)
            values[c] = v
        assert values["id"] not in out, f"duplicate key {values['id']}"
        out[values["id"]] = values
    return out
