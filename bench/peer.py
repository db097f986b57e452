"""A peer measured beside us: the glue a Python user writes today instead of this product.

The glue (:func:`peer_drain`): python-mysql-replication (``BinLogStreamReader``) reads a binlog
range, the row changes are folded to the last change per primary key (a key change is a delete of
the old key and an upsert of the new), and pyiceberg writes each table's fold with
``table.delete(In(key, deleted keys))`` and ``table.upsert(arrow table, join_cols=key)``, in a SQL
catalog on SQLite (``<warehouse>/peer_catalog.db``) whose tables sit where the product's Hadoop catalog
puts them (``<warehouse>/<schema>/<table>``). The Iceberg schema comes from ``information_schema``
with the product's type choices for the benchmark's columns (INT UNSIGNED -> long, DATETIME ->
timestamp, TIMESTAMP -> timestamptz, DECIMAL -> decimal, ENUM/JSON/TEXT -> string); the tables are
format version 2 (pyiceberg writes no deletion vectors; the product's are version 3, merge on read).

What the glue does not do, and the product does: keep a cursor (it reads the range it is given),
exactly once across a crash between its commits (two commits per table: delete, then upsert), DDL,
the schema at each binlog position, XA, checksum errors as errors.

The benchmark (:func:`main`) is ``bench/end_to_end.py --peer`` with a modest default size: the same
MariaDB and ZooKeeper, the same workload generator, our drain (run A loads the base, run B the
measured range) and then the glue over the same two binlog ranges, each run in its own spawned
process; both lakes are compared with the source value by value (``lake.verify.verify``; the
glue's tables are read by Spark through a Hadoop catalog they are registered in)::

    PYTHONPATH=/tmp/peerlib .venv/bin/python -u bench/peer.py                    # 100k mixed changes
    PYTHONPATH=/tmp/peerlib .venv/bin/python -u bench/peer.py --changes 1000000  # 1M

pyiceberg is not a dependency of the product: ``pip install -e '.[bench]'``, or without touching
the environment ``pip install --target /tmp/peerlib 'pyiceberg[sql-sqlite,pyarrow]'`` and
``PYTHONPATH=/tmp/peerlib``. Every option of ``bench/end_to_end.py`` applies (``--peer-chunk``: row
changes the glue folds before it writes).
"""

from __future__ import annotations

import datetime as dt
import importlib
import itertools
import os
import resource
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

INSTALL = (
    "pyiceberg is not installed: the peer's glue needs it (it is not a dependency of the product). "
    "Install it with `pip install -e '.[bench]'`, or without touching the environment: "
    "`pip install --target /tmp/peerlib 'pyiceberg[sql-sqlite,pyarrow]'` and run with "
    "PYTHONPATH=/tmp/peerlib"
)
CATALOG_FILE = "peer_catalog.db"
_UTC = dt.timezone.utc
_catalogs = itertools.count()


def missing() -> str | None:
    """``None`` when pyiceberg (with its SQL catalog) can be imported, else what to install."""
    try:
        importlib.import_module("pyiceberg.catalog.sql")
    except ImportError:
        return INSTALL
    return None


# ------------------------------------------------------------------------------------ the glue


def iceberg_schema(conn: Any, schema: str, table: str) -> tuple[Any, list[str], list[str]]:
    """``(pyiceberg Schema, key columns, timestamp columns)`` of a source table."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IcebergType,
        IntegerType,
        LongType,
        NestedField,
        StringType,
        TimestampType,
        TimestamptzType,
    )

    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, NUMERIC_PRECISION, NUMERIC_SCALE, COLUMN_KEY "
            "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "ORDER BY ORDINAL_POSITION",
            (schema, table),
        )
        rows = cur.fetchall()
    fields, key, stamps = [], [], []
    for i, (name, data_type, column_type, precision, scale, column_key) in enumerate(rows, 1):
        t, unsigned = str(data_type).lower(), "unsigned" in str(column_type).lower()
        kind: IcebergType
        if t in ("tinyint", "smallint", "mediumint", "int", "integer"):
            kind = LongType() if unsigned and t in ("int", "integer") else IntegerType()
        elif t == "bigint":
            kind = DecimalType(20, 0) if unsigned else LongType()
        elif t in ("decimal", "numeric"):
            kind = DecimalType(int(precision), int(scale))
        elif t in ("float", "double"):
            kind = FloatType() if t == "float" else DoubleType()
        elif t in ("date", "datetime", "timestamp"):
            kind = {"date": DateType(), "datetime": TimestampType(), "timestamp": TimestamptzType()}[t]
            if t == "timestamp":
                stamps.append(str(name))
        elif t in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"):
            kind = StringType()
        else:
            raise SystemExit(f"the peer's glue maps no {column_type} column ({schema}.{table}.{name})")
        fields.append(NestedField(i, str(name), kind, required=False))
        if column_key == "PRI":
            key.append(str(name))
    if not key:
        raise SystemExit(f"{schema}.{table} has no primary key: the peer's glue folds by primary key")
    return Schema(*fields), key, stamps


class PeerLake:
    """The glue's Iceberg side: a SQL catalog on SQLite, one pyiceberg table per source table."""

    def __init__(self, warehouse: str, conn: Any, sources: Sequence[str]) -> None:
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.exceptions import NoSuchTableError

        Path(warehouse).mkdir(parents=True, exist_ok=True)
        self.catalog = SqlCatalog(
            "peer", uri=f"sqlite:///{warehouse}/{CATALOG_FILE}", warehouse=f"file://{warehouse}"
        )
        self.tables: dict[str, Any] = {}
        self.keys: dict[str, list[str]] = {}
        self.stamps: dict[str, list[str]] = {}
        self.arrow: dict[str, Any] = {}
        for source in sources:
            schema, _, table = source.partition(".")
            iceberg, self.keys[source], self.stamps[source] = iceberg_schema(conn, schema, table)
            self.catalog.create_namespace_if_not_exists(schema)
            try:
                tbl = self.catalog.load_table((schema, table))
            except NoSuchTableError:
                location = f"file://{warehouse}/{schema}/{table}"  # the product's Hadoop catalog layout
                tbl = self.catalog.create_table((schema, table), iceberg, location=location)
            self.tables[source] = tbl
            self.arrow[source] = tbl.schema().as_arrow()

    def write(self, source: str, folded: Mapping[tuple[Any, ...], dict[str, Any] | None]) -> int:
        """One table's fold: a delete of the keys whose last change deleted them, then an upsert of
        the rest. Returns the commits made."""
        import pyarrow as pa
        from pyiceberg.expressions import And, EqualTo, In, Or

        tbl, key = self.tables[source], self.keys[source]
        deleted = [k for k, row in folded.items() if row is None]
        rows = [row for row in folded.values() if row is not None]
        commits = 0
        if deleted:
            if len(key) == 1:
                where: Any = In(key[0], [k[0] for k in deleted])
            else:
                where = Or(*(And(*(EqualTo(c, v) for c, v in zip(key, k, strict=True))) for k in deleted))
            tbl.delete(where)
            commits += 1
        if rows:
            for column in self.stamps[source]:  # python-mysql-replication: naive UTC datetimes
                for row in rows:
                    if row[column] is not None:
                        row[column] = row[column].replace(tzinfo=_UTC)
            tbl.upsert(pa.Table.from_pylist(rows, schema=self.arrow[source]), join_cols=key)
            commits += 1
        return commits

    def metadata(self) -> dict[str, str]:
        """Source -> the current metadata file of its table (for the verification's Spark)."""
        return {s: t.refresh().metadata_location for s, t in self.tables.items()}


def read_folded(
    settings: Mapping[str, Any], start: str, stop: str, sources: Sequence[str], keys: Mapping[str, list[str]],
    chunk: int,
) -> Iterator[tuple[int, dict[str, dict[tuple[Any, ...], dict[str, Any] | None]]]]:  # fmt: skip
    """``(row changes, fold per table)`` of the binlog from ``start`` to ``stop`` (``file:pos``), one
    fold per ``chunk`` row changes or more, cut at a transaction's end."""
    import logging

    from end_to_end import mariadb_start
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import QueryEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    logging.getLogger("pymysqlreplication").setLevel(logging.ERROR)
    file, _, pos = start.rpartition(":")
    stop_file, _, stop_pos = stop.rpartition(":")
    end = (stop_file, int(stop_pos))
    schemas = sorted({s.partition(".")[0] for s in sources})
    stream = BinLogStreamReader(
        connection_settings=dict(settings), server_id=987655, **mariadb_start(dict(settings), start),
        blocking=True, only_schemas=schemas,
        only_tables=sorted({s.partition(".")[2] for s in sources}),
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent, QueryEvent],
        enable_logging=False,
    )  # fmt: skip
    folds: dict[str, dict[tuple[Any, ...], dict[str, Any] | None]] = {s: {} for s in sources}
    n = 0
    try:
        if (file, int(pos)) >= end:
            return
        for ev in stream:
            if isinstance(ev, WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent):
                source = f"{ev.schema}.{ev.table}"
                fold, key = folds.get(source), keys.get(source)
                if fold is not None and key is not None:
                    for r in ev.rows:
                        n += 1
                        if "values" not in r:  # an update: a key change deletes the old key
                            before, after = r["before_values"], r["after_values"]
                            old, new = tuple(before[c] for c in key), tuple(after[c] for c in key)
                            if old != new:
                                fold[old] = None
                            fold[new] = after
                        elif isinstance(ev, WriteRowsEvent):
                            fold[tuple(r["values"][c] for c in key)] = r["values"]
                        else:
                            fold[tuple(r["values"][c] for c in key)] = None
            at_end = (stream.log_file, ev.packet.log_pos) >= end
            if at_end or (isinstance(ev, XidEvent) and n >= chunk):
                yield n, folds
                folds, n = {s: {} for s in sources}, 0
            if at_end:
                return
    finally:
        stream.close()


def peer_drain(
    settings: Mapping[str, Any], start: str, stop: str, warehouse: str, sources: Sequence[str], chunk: int
) -> dict[str, Any]:
    """The glue's run: read ``start`` .. ``stop``, fold, write every ``chunk`` changes. Returns its
    summary: changes, commits, the seconds spent reading (and folding) and writing, the metadata
    files."""
    import pymysql

    conn = pymysql.connect(
        host=settings["host"], port=settings["port"], user=settings["user"], password=settings["passwd"]
    )
    try:
        lake = PeerLake(warehouse, conn, sources)
    finally:
        conn.close()
    changes = commits = 0
    read_s = write_s = 0.0
    t0 = time.perf_counter()
    for n, folds in read_folded(settings, start, stop, sources, lake.keys, chunk):
        t1 = time.perf_counter()
        read_s += t1 - t0
        changes += n
        for source, fold in folds.items():
            commits += lake.write(source, fold)
        t0 = time.perf_counter()
        write_s += t0 - t1
    read_s += time.perf_counter() - t0
    return {
        "changes": changes, "commits": commits, "read": read_s, "write": write_s,
        "metadata": lake.metadata(),
    }  # fmt: skip


# ------------------------------------------------------------------------------------ the bench's side


def peer_run(params: dict[str, Any], result: Any) -> None:
    """Child process (as ``end_to_end.operator_run``): one run of the glue, timed from its first
    connection (imports before the clock) to its last commit."""
    import pyarrow  # noqa: F401
    import pyiceberg.catalog.sql
    import pyiceberg.io.pyarrow  # noqa: F401
    import pymysqlreplication  # noqa: F401

    cpu0 = os.times()
    t0 = time.perf_counter()
    summary = peer_drain(
        params["settings"], params["start"], params["stop"], params["warehouse"], params["sources"],
        params["chunk"],
    )  # fmt: skip
    wall = time.perf_counter() - t0
    cpu1 = os.times()
    result.put({
        "summary": summary, "wall": wall,
        "cpu": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
        "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    })  # fmt: skip


def verify_peer(conn: Any, spark: Any, check_dir: str, metadata: Mapping[str, str]) -> list[Any]:
    """Every glue table against its source (``lake.verify.verify.verify_tables``), read by Spark:
    each current metadata file registered (``register_table``) in a Hadoop catalog of its own on
    ``check_dir``, which gets a copy of the metadata file; the glue's lake is left as it is."""
    from airflow_provider_binlog.lake.verify.verify import verify_tables

    catalog = f"peer_{os.getpid()}_{next(_catalogs)}"
    warehouse = Path(check_dir) / catalog
    warehouse.mkdir(parents=True)
    prefix = f"spark.sql.catalog.{catalog}"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(prefix + ".type", "hadoop")
    spark.conf.set(prefix + ".warehouse", str(warehouse))
    targets = {}
    for source, location in metadata.items():
        schema, _, table = source.partition(".")
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{catalog}`.`{schema}`")
        quoted = location.replace("'", "''")
        spark.sql(
            f"CALL `{catalog}`.system.register_table("
            f"table => '{schema}.{table}', metadata_file => '{quoted}')"
        )
        targets[source] = f"{catalog}.{schema}.{table}"
    return verify_tables(conn, spark, targets)


def main(argv: list[str] | None = None) -> int:
    """``bench/end_to_end.py --peer`` with 100k changes and no parse-only baseline by default."""
    why = missing()
    if why:
        print(why, file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import end_to_end

    return end_to_end.main(
        ["--changes", "100000", "--no-baseline", "--peer", *(sys.argv[1:] if argv is None else argv)]
    )


if __name__ == "__main__":
    raise SystemExit(main())
