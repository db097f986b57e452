"""The randomized live model check of the source-operation contract (issue #14): the workload and
the runs of :mod:`test_contract_model`.

A seeded :class:`Workload` writes to a fresh database of the harness's MariaDB, every table of it
routed by one glob (``{db}.*`` -> ``lake.{ns}.{table}``) except the ``nr_*`` tables (``exclude=``).
Rounds of operations alternate with operator runs (:class:`Runs`, ``BinlogToSparkOperator`` in this
process, Spark shared with the test). After every run that reached the head, :meth:`Runs.check`
compares each lake table with its source table: the same columns (by name) and, value by value,
the same rows (:func:`airflow_provider_binlog.lake.verify.verify.verify_table`); a table the source no
longer has is empty or missing in the lake; no lake table exists that was never a routed source
table (excluded and shadow tables never become lake tables).

Operations (each logged as it is written, so a failure names the sequence that led to it):

* DML: multi-row inserts, updates, primary-key changes, deletes, multi-statement transactions;
* XA: commit, rollback, ``COMMIT ... ONE PHASE``, and one held prepared on a second connection
  across a run's stop point, resolved (commit or rollback) in a later round;
* DDL: ADD COLUMN (nullable, constant DEFAULT, NOT NULL without DEFAULT; AFTER/FIRST), DROP COLUMN,
  RENAME COLUMN, MODIFY to a wider type, to a type the lake rewrites by a cast and to one it
  re-snapshots, TRUNCATE TABLE, DROP TABLE + CREATE TABLE of the same name (another schema),
  TRUNCATE / DROP PARTITION of the partitioned table ``p``;
* statement-format DML (``SET SESSION binlog_format='STATEMENT'``) on a routed table: the next run
  must stop with :class:`StatementDmlError` (table, statement, ``file:pos``, remedy) and leave the
  cursor before it; then the remedy: ``on_schema_change={"statement_dml": "resnapshot"}`` when
  :data:`STATEMENT_RESNAPSHOT` is on, else what the message names today, a new destination loading
  the tables again (``snapshot="initial"``) into a new lake namespace; the same on an excluded
  table must not stop anything;
* RENAME TABLE, gh-ost and pt-osc swaps as the tools script them: only with :data:`SWAPS` on.

Crashes: a run gets a ``raise`` failpoint (:mod:`airflow_provider_binlog.faults`) at a random hit of
a random point; a crashed run is retried (as Airflow retries a task: same run, next try) until one
completes. Some rounds first run to a stop point inside the round (``stop_at=file:pos`` after one of
its operations), so statements fall on run boundaries too; the run to the head follows.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import os
import random
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql

from airflow_provider_binlog import faults
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import StatementDmlError
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.sql.operations import SourceOperationError
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.lake.sql import quote_parts
from airflow_provider_binlog.lake.verify.verify import verify_table

ENV_SEED = "BINLOG_CDC_CONTRACT_SEED"
ENV_ROUNDS = "BINLOG_CDC_CONTRACT_ROUNDS"
ENV_OPS = "BINLOG_CDC_CONTRACT_OPS"
#: RENAME TABLE / gh-ost / pt-osc swaps in the mix (on since that work landed, c92e338; "0" leaves them out).
SWAPS = os.environ.get("BINLOG_CDC_CONTRACT_SWAPS", "1") == "1"
#: the statement-DML remedy by option (off until ``on_schema_change={"statement_dml": "resnapshot"}``
#: landed): "1" uses it; otherwise the remedy is a new destination with ``snapshot="initial"``.
STATEMENT_RESNAPSHOT = os.environ.get("BINLOG_CDC_CONTRACT_STATEMENT_RESNAPSHOT", "0") == "1"

FAILPOINTS = (
    "drain", "before_commit", "merge_table", "after_commit", "ack", "after_ack", "ddl_action",
    "resnapshot_before_swap", "resnapshot_after_swap", "snapshot_before_load", "snapshot_after_load",
    "mark_tag",
)  # fmt: skip
#: Iceberg maintenance as a user runs it (a random round of full expiry, compaction, delete-file and
#: manifest rewrites, orphan removal: ``dev/user_maintenance.py``) on the lake tables after half the
#: crashes, before the retry; "0" turns it off.
MAINTENANCE = os.environ.get("BINLOG_CDC_CONTRACT_MAINTENANCE", "1") == "1"
TABLES = ("t0", "t1")  # plain tables: every column DDL, truncate, drop + create
PARTITIONED = "p"
EXCLUDED = "nr_log"  # routed by the glob, excluded by exclude=
SHADOW = re.compile(r"^_.*_(gho|ghc|del|new|old)$")
LOCK_WAIT = 15  # seconds: a lock the workload did not plan for fails fast, not the test's timeout
# operation classes every seed runs at least once (placed at seeded slots), then random ones
REQUIRED = (
    "pk_update", "transaction", "xa_commit", "xa_rollback", "xa_one_phase", "xa_hold",
    "add_nullable", "add_default", "add_not_null", "add_placed", "drop_column", "rename_column",
    "modify_wider", "modify_rewrite", "modify_resnapshot", "truncate", "recreate",
    "partition_truncate", "partition_drop", "statement", "excluded_statement",
)  # fmt: skip
SWAP_OPS = ("rename_table", "gh_ost", "pt_osc")
WEIGHTS = {
    "insert": 14, "update": 12, "delete": 6, "pk_update": 3, "transaction": 5,
    "xa_commit": 2, "xa_rollback": 2, "xa_one_phase": 2, "xa_hold": 1,
    "add_nullable": 1, "add_default": 1, "add_not_null": 1, "add_placed": 1, "drop_column": 1,
    "rename_column": 1, "modify_wider": 1, "modify_rewrite": 1, "modify_resnapshot": 1,
    "truncate": 1, "recreate": 1, "partition_truncate": 1, "partition_drop": 1,
    "statement": 1, "excluded_statement": 1,
}  # fmt: skip
TYPES = ("INT", "BIGINT", "VARCHAR(20)", "DECIMAL(8,2)", "DATE")
DEFAULTS = {
    "INT": "7",
    "BIGINT": "-9",
    "VARCHAR(20)": "'dflt é'",
    "DECIMAL(8,2)": "1.50",
    "DATE": "'2020-02-29'",
}
TEXT = "abcxyzé€ 😀"
INT_RANGE = {
    "tinyint": 7, "smallint": 15, "mediumint": 23, "int": 31, "bigint": 63,
}  # fmt: skip


def q(name: str) -> str:
    """A MySQL identifier, quoted."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class Column:
    name: str
    data_type: str
    column_type: str
    nullable: bool
    key: bool


def random_value(rng: random.Random, col: Column) -> Any:
    """A value ``col`` holds (NULL now and then when it may)."""
    if col.nullable and rng.random() < 0.15:
        return None
    t, ct = col.data_type, col.column_type
    if t in INT_RANGE:
        bits = INT_RANGE[t]
        lo, hi = (0, (1 << (bits + 1)) - 1) if "unsigned" in ct else (-(1 << bits), (1 << bits) - 1)
        return rng.choice([rng.randint(max(lo, -1000), min(hi, 1000)), lo, hi, rng.randint(lo, hi)])
    size = [int(x) for x in re.findall(r"\d+", ct)]
    if t in ("varchar", "char"):
        return "".join(rng.choice(TEXT) for _ in range(rng.randint(0, min(size[0], 12))))
    if t == "decimal":
        p, s = size
        return decimal.Decimal(rng.randint(-(10**p) + 1, 10**p - 1)).scaleb(-s)
    if t == "date":
        return dt.date(1990, 1, 1) + dt.timedelta(days=rng.randint(0, 15000))
    if t == "datetime":
        return dt.datetime(1990, 1, 1) + dt.timedelta(seconds=rng.randint(0, 1_200_000_000))
    raise AssertionError(f"no values for {ct}")


@dataclass
class Held:
    """An XA transaction prepared on its own connection, resolved in a later round."""

    conn: pymysql.Connection
    xid: str
    table: str
    keys: set[int]
    prepared_round: int


class Workload:
    """The seeded operations on database ``db`` (see the module docstring)."""

    def __init__(self, server: MariaDbServer, db: str, seed: int, log: Callable[[str], None]) -> None:
        self.server, self.db, self.log = server, db, log
        self.rng = random.Random(seed)
        self.conn = self._connect()
        self.next_id = 10_000
        self.next_name = 0
        self.held: Held | None = None
        self.statement_pending: tuple[str, str] | None = None  # (table, statement) not yet stopped at
        # tables a statement of this round makes the lake re-snapshot: the re-snapshot is taken when a
        # run reaches it, after every write of the round, so it holds a later statement's effect too
        self.resnapshotted: set[str] = set()
        self.partitions = ["p0", "p1", "p2", "p3"]
        self.counts: dict[str, int] = {}
        self.round = 0
        self.modified = ""
        self.ops_log: list[str] = []

    # ---- plumbing

    def _connect(self) -> pymysql.Connection:
        conn = self.server.connect(self.db)
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT}")
            cur.execute(f"SET SESSION lock_wait_timeout = {LOCK_WAIT}")
        return conn

    def sql(self, statement: str, args: Any = None, conn: pymysql.Connection | None = None) -> int:
        shown = statement if args is None else f"{statement} -- {args!r}"
        self.ops_log.append(f"  r{self.round}: {shown[:300]}")
        with (conn or self.conn).cursor() as cur:
            return int(cur.execute(statement, args))

    def head(self) -> str:
        with self.conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos, *_ = cur.fetchone()
        return f"{file}:{pos}"

    def columns(self, table: str) -> list[Column]:
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY "
                "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                "ORDER BY ORDINAL_POSITION",
                (self.db, table),
            )
            return [Column(n, d, c, isn == "YES", k == "PRI") for n, d, c, isn, k in cur.fetchall()]

    def keys(self, table: str) -> list[int]:
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT id FROM {q(table)} ORDER BY id")
            found = [int(r[0]) for r in cur.fetchall()]
        held = self.held.keys if self.held is not None and self.held.table == table else set()
        return [k for k in found if k not in held]

    def source_tables(self) -> list[str]:
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (self.db,)
            )
            return sorted(str(r[0]) for r in cur.fetchall())

    def name(self) -> str:
        self.next_name += 1
        return f"c{self.next_name}"

    def new_key(self, table: str) -> int:
        if table == PARTITIONED:  # anywhere in the partitions' ranges, so rows land in each
            taken = set(self.keys(table)) | (self.held.keys if self.held else set())
            while True:
                key = self.rng.randint(1, 4999)
                if key not in taken:
                    return key
        self.next_id += 1
        return self.next_id

    # ---- setup

    def create(self) -> None:
        self.sql(
            f"CREATE TABLE {q('t0')} (id INT PRIMARY KEY, a INT, b VARCHAR(20), d DECIMAL(10,2)) "
            "DEFAULT CHARSET=utf8mb4"
        )
        self.sql(
            f"CREATE TABLE {q('t1')} (id INT PRIMARY KEY, n BIGINT NOT NULL, s VARCHAR(40), dd DATE) "
            "DEFAULT CHARSET=utf8mb4"
        )
        self.sql(
            f"CREATE TABLE {q(PARTITIONED)} (id INT NOT NULL, v VARCHAR(20), k INT, PRIMARY KEY (id)) "
            "DEFAULT CHARSET=utf8mb4 PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (1000), "
            "PARTITION p1 VALUES LESS THAN (2000), PARTITION p2 VALUES LESS THAN (3000), "
            "PARTITION p3 VALUES LESS THAN (4000), PARTITION pmax VALUES LESS THAN MAXVALUE)"
        )
        self.sql(f"CREATE TABLE {q(EXCLUDED)} (id INT PRIMARY KEY, v VARCHAR(20)) DEFAULT CHARSET=utf8mb4")
        for table in (*TABLES, PARTITIONED):
            self.insert(table, 12)

    # ---- the schedule

    def schedule(self, rounds: int, ops: int) -> list[list[str]]:
        """Operation names per round: each of :data:`REQUIRED` (and the swaps when on) at a seeded
        slot of rounds 1..rounds-1 (the last round only writes, so the last check follows a plain
        round), the other slots drawn by :data:`WEIGHTS`."""
        names, weights = list(WEIGHTS), list(WEIGHTS.values())
        if SWAPS:
            names += list(SWAP_OPS)
            weights += [1] * len(SWAP_OPS)
        plan = [[self.rng.choices(names, weights)[0] for _ in range(ops)] for _ in range(rounds)]
        required = list(REQUIRED) + (list(SWAP_OPS) if SWAPS else [])
        slots = [(r, i) for r in range(max(1, rounds - 1)) for i in range(ops)]
        for name, (r, i) in zip(
            required, self.rng.sample(slots, min(len(slots), len(required))), strict=False
        ):
            plan[r][i] = name
        return plan

    def do(self, op: str) -> None:
        """Write one operation (one that cannot apply now writes an insert instead)."""
        self.counts[op] = self.counts.get(op, 0) + 1
        if not getattr(self, "op_" + op)():
            self.counts[op] -= 1
            self.counts["insert"] = self.counts.get("insert", 0) + 1
            self.insert(self.pick_table(), self.rng.randint(1, 4))

    def pick_table(self, ddl: bool = False, plain: bool = False) -> str:
        """A routed table; for DDL not the one a held XA transaction locks."""
        choices = [t for t in (TABLES if plain else (*TABLES, PARTITIONED))]
        if ddl and self.held is not None:
            choices = [t for t in choices if t != self.held.table]
        return self.rng.choice(choices)

    # ---- DML

    def insert(self, table: str, n: int, conn: pymysql.Connection | None = None) -> list[int]:
        if n == 0:
            return []
        cols = self.columns(table)
        rows, keys = [], []
        for _ in range(n):
            key = self.new_key(table)
            while key in keys:
                key = self.new_key(table)
            keys.append(key)
            rows.append([key if c.key else random_value(self.rng, c) for c in cols])
        names = ", ".join(q(c.name) for c in cols)
        marks = ", ".join(["(" + ", ".join(["%s"] * len(cols)) + ")"] * n)
        self.sql(f"INSERT INTO {q(table)} ({names}) VALUES {marks}", [v for r in rows for v in r], conn)
        return keys

    def update(
        self, table: str, conn: pymysql.Connection | None = None, keys: list[int] | None = None
    ) -> bool:
        keys = keys if keys is not None else self.keys(table)
        cols = [c for c in self.columns(table) if not c.key]
        if not keys or not cols:
            return False
        chosen = self.rng.sample(keys, min(len(keys), self.rng.randint(1, 4)))
        for key in chosen:
            set_cols = self.rng.sample(cols, self.rng.randint(1, len(cols)))
            assigns = ", ".join(f"{q(c.name)} = %s" for c in set_cols)
            self.sql(f"UPDATE {q(table)} SET {assigns} WHERE id = %s",
                     [random_value(self.rng, c) for c in set_cols] + [key], conn)  # fmt: skip
        return True

    def delete(self, table: str, conn: pymysql.Connection | None = None) -> bool:
        keys = self.keys(table)
        if len(keys) < 3:
            return False
        chosen = self.rng.sample(keys, self.rng.randint(1, min(3, len(keys) - 2)))
        # one key per statement: a point lookup locks only its row; an IN list on the partitioned
        # table may be read by a scan, whose locks wait for a held XA transaction's rows (seed 1048548)
        for key in chosen:
            self.sql(f"DELETE FROM {q(table)} WHERE id = %s", [key], conn)
        return True

    def op_insert(self) -> bool:
        self.insert(self.pick_table(), self.rng.randint(1, 6))
        return True

    def op_update(self) -> bool:
        return self.update(self.pick_table())

    def op_delete(self) -> bool:
        return self.delete(self.pick_table())

    def op_pk_update(self) -> bool:
        table = self.pick_table()
        keys = self.keys(table)
        if not keys:
            return False
        self.sql(f"UPDATE {q(table)} SET id = %s WHERE id = %s", (self.new_key(table), self.rng.choice(keys)))
        return True

    def _some_dml(
        self, conn: pymysql.Connection | None = None, tables: tuple[str, ...] | None = None
    ) -> None:
        for _ in range(self.rng.randint(2, 5)):
            table = self.rng.choice(tables or (*TABLES, PARTITIONED))
            kind = self.rng.random()
            if kind < 0.45:
                self.insert(table, self.rng.randint(1, 3), conn)
            elif kind < 0.8:
                self.update(table, conn)
            else:
                self.delete(table, conn)

    def op_transaction(self) -> bool:
        self.sql("BEGIN")
        self._some_dml()
        self.sql("COMMIT")
        return True

    def _xa(self, end: str) -> bool:
        xid = f"x{uuid.uuid4().hex[:10]}"
        self.sql(f"XA START '{xid}'")
        self._some_dml()
        self.sql(f"XA END '{xid}'")
        if end == "one_phase":
            self.sql(f"XA COMMIT '{xid}' ONE PHASE")
            return True
        self.sql(f"XA PREPARE '{xid}'")
        self.sql(f"XA {end} '{xid}'")
        return True

    def op_xa_commit(self) -> bool:
        return self._xa("COMMIT")

    def op_xa_rollback(self) -> bool:
        return self._xa("ROLLBACK")

    def op_xa_one_phase(self) -> bool:
        return self._xa("one_phase")

    def op_xa_hold(self) -> bool:
        """An XA transaction prepared on a second connection and left so: over the next run's stop
        point; :meth:`resolve_held` commits or rolls it back in a later round. It inserts new keys
        and updates existing ones of one table, which no other operation touches meanwhile."""
        if self.held is not None:
            return False
        table = self.pick_table()
        conn = self._connect()
        xid = f"held{uuid.uuid4().hex[:8]}"
        existing = self.keys(table)
        self.sql(f"XA START '{xid}'", conn=conn)
        keys = set(self.insert(table, self.rng.randint(1, 3), conn))
        if existing:
            chosen = self.rng.sample(existing, min(2, len(existing)))
            self.update(table, conn, chosen)
            keys |= set(chosen)
        self.sql(f"XA END '{xid}'", conn=conn)
        self.sql(f"XA PREPARE '{xid}'", conn=conn)
        self.held = Held(conn, xid, table, keys, self.round)
        return True

    def resolve_held(self, end: str | None = None) -> None:
        """At the start of a round after the one that prepared it (now or later): XA COMMIT or XA
        ROLLBACK (``end`` given: that one, now)."""
        held = self.held
        if held is None:
            return
        if end is None:
            if held.prepared_round >= self.round or self.rng.random() < 0.3:
                return  # held over one stop point at least, often more
            end = self.rng.choice(["COMMIT", "COMMIT", "ROLLBACK"])
        self.counts[f"xa_held_{end.lower()}"] = self.counts.get(f"xa_held_{end.lower()}", 0) + 1
        self.sql(f"XA {end} '{held.xid}'", conn=held.conn)
        held.conn.close()
        self.held = None

    # ---- DDL

    def _add(self, placement: str, kind: str) -> bool:
        table = self.pick_table(ddl=True)
        typ = self.rng.choice(TYPES)
        spec = {"nullable": "NULL", "default": f"DEFAULT {DEFAULTS[typ]}", "not_null": "NOT NULL"}[kind]
        if kind == "default" and self.rng.random() < 0.5:
            spec = f"NOT NULL DEFAULT {DEFAULTS[typ]}"
        if placement:
            cols = self.columns(table)
            placement = "FIRST" if self.rng.random() < 0.3 else f"AFTER {q(self.rng.choice(cols).name)}"
        self.sql(f"ALTER TABLE {q(table)} ADD COLUMN {q(self.name())} {typ} {spec} {placement}".rstrip())
        return True

    def op_add_nullable(self) -> bool:
        return self._add("", "nullable")

    def op_add_default(self) -> bool:
        return self._add("", "default")

    def op_add_not_null(self) -> bool:
        return self._add("", "not_null")

    def op_add_placed(self) -> bool:
        return self._add("placed", self.rng.choice(["nullable", "default", "not_null"]))

    def _non_key(self, table: str, pred: Callable[[Column], bool] = lambda c: True) -> list[Column]:
        return [c for c in self.columns(table) if not c.key and pred(c)]

    def op_drop_column(self) -> bool:
        table = self.pick_table(ddl=True)
        cols = self._non_key(table)
        if len(cols) < 2:
            return False
        self.sql(f"ALTER TABLE {q(table)} DROP COLUMN {q(self.rng.choice(cols).name)}")
        return True

    def op_rename_column(self) -> bool:
        table = self.pick_table(ddl=True)
        cols = self._non_key(table)
        if not cols:
            return False
        self.sql(f"ALTER TABLE {q(table)} RENAME COLUMN {q(self.rng.choice(cols).name)} TO {q(self.name())}")
        return True

    def _modify(self, targets: Callable[[Column], list[str]], lenient: bool = False) -> bool:
        held = self.held.table if self.held is not None else None
        cols = [
            (table, c, types)
            for table in (*TABLES, PARTITIONED) if table != held
            for c in self._non_key(table) if (types := targets(c))
        ]  # fmt: skip
        if not cols:
            return False
        table, col, types = self.rng.choice(cols)
        self.modified = table
        null = "NULL" if col.nullable else "NOT NULL"
        if lenient:  # MySQL clamps / cuts what no longer fits (strict mode would refuse the ALTER)
            self.sql("SET SESSION sql_mode = ''")
        try:
            self.sql(f"ALTER TABLE {q(table)} MODIFY {q(col.name)} {self.rng.choice(types)} {null}")
        finally:
            if lenient:
                self.sql("SET SESSION sql_mode = DEFAULT")
        return True

    def op_modify_wider(self) -> bool:
        def wider(c: Column) -> list[str]:
            size = [int(x) for x in re.findall(r"\d+", c.column_type)]
            if c.data_type in ("tinyint", "smallint", "mediumint", "int") and "unsigned" not in c.column_type:
                return ["BIGINT"]
            if c.data_type == "varchar":
                return [f"VARCHAR({size[0] + 20})"]
            if c.data_type == "decimal" and size[0] < 30:
                return [f"DECIMAL({size[0] + 4},{size[1]})"]
            return []

        return self._modify(wider)

    def op_modify_rewrite(self) -> bool:
        def rewritten(c: Column) -> list[str]:
            size = [int(x) for x in re.findall(r"\d+", c.column_type)]
            if c.data_type == "int" and "unsigned" not in c.column_type:
                return ["BIGINT UNSIGNED", "VARCHAR(30)", "DECIMAL(15,2)"]
            if c.data_type == "bigint":
                return ["VARCHAR(40)"]
            if c.data_type == "decimal" and size[0] < 30:
                return [f"DECIMAL({size[0] + 3},{size[1] + 1})"]
            return []

        return self._modify(rewritten, lenient=True)

    def op_modify_resnapshot(self) -> bool:
        def narrowed(c: Column) -> list[str]:
            size = [int(x) for x in re.findall(r"\d+", c.column_type)]
            if c.data_type == "varchar" and size[0] > 6:
                return ["VARCHAR(6)"]
            if c.data_type == "decimal" and size[1] > 0:
                return [f"DECIMAL({size[0]},{size[1] - 1})"]
            if c.data_type == "date":
                return ["DATETIME"]
            return []

        if not self._modify(narrowed, lenient=True):
            return False
        self.resnapshotted.add(self.modified)
        return True

    def op_truncate(self) -> bool:
        self.sql(f"TRUNCATE TABLE {q(self.pick_table(ddl=True))}")
        return True

    def op_recreate(self) -> bool:
        """DROP TABLE, some writes elsewhere, CREATE TABLE of the same name with other columns."""
        table = self.pick_table(ddl=True, plain=True)
        self.sql(f"DROP TABLE {q(table)}")
        if self.rng.random() < 0.5:
            self.insert(PARTITIONED, 1)
        key = self.rng.choice(["INT", "BIGINT"])
        cols = ", ".join(f"{q(self.name())} {self.rng.choice(TYPES)}" for _ in range(self.rng.randint(1, 3)))
        self.sql(f"CREATE TABLE {q(table)} (id {key} PRIMARY KEY, {cols}) DEFAULT CHARSET=utf8mb4")
        self.insert(table, self.rng.randint(0, 5)) if self.rng.random() < 0.7 else None
        return True

    def op_partition_truncate(self) -> bool:
        if self.held is not None and self.held.table == PARTITIONED:
            return False
        part = self.rng.choice([*self.partitions, "pmax"])
        self.sql(f"ALTER TABLE {q(PARTITIONED)} TRUNCATE PARTITION {q(part)}")
        self.resnapshotted.add(PARTITIONED)
        return True

    def op_partition_drop(self) -> bool:
        if (self.held is not None and self.held.table == PARTITIONED) or not self.partitions:
            return False
        part = self.partitions.pop(self.rng.randrange(len(self.partitions)))
        self.sql(f"ALTER TABLE {q(PARTITIONED)} DROP PARTITION {q(part)}")
        self.resnapshotted.add(PARTITIONED)
        return True

    # ---- statement-format DML

    def _statement(self, table: str) -> str | None:
        keys = self.keys(table)
        cols = [c for c in self.columns(table) if not c.key]
        if not keys or not cols:
            return None
        col = self.rng.choice(cols)
        value = random_value(self.rng, col)
        chosen = self.rng.sample(keys, min(len(keys), 3))
        conn = self._connect()
        try:
            self.sql("SET SESSION binlog_format = 'STATEMENT'", conn=conn)
            literal = conn.escape(value)
            statement = (
                f"UPDATE {q(table)} SET {q(col.name)} = {literal} WHERE id IN ({', '.join(map(str, chosen))})"
            )
            self.sql(statement, conn=conn)
        finally:
            conn.close()
        return statement

    def op_statement(self) -> bool:
        """A statement-format UPDATE of a routed table (the next run must stop at it)."""
        if self.statement_pending is not None:
            return False
        table = self.pick_table(ddl=True)
        statement = self._statement(table)
        if statement is None:
            return False
        self.statement_pending = (table, statement)
        return True

    def op_excluded_statement(self) -> bool:
        """Statement-format DML and a DDL on the excluded table: nothing stops, no lake table."""
        self.insert(EXCLUDED, 2)
        self._statement(EXCLUDED)
        self.sql(f"ALTER TABLE {q(EXCLUDED)} ADD COLUMN {q(self.name())} INT DEFAULT 3")
        return True

    # ---- RENAME TABLE and the online schema-change tools (only with SWAPS)

    def op_rename_table(self) -> bool:
        table = self.pick_table(ddl=True, plain=True)
        other = "t0" if table == "t1" else "t1"
        if self.held is not None and self.held.table == other:
            return False
        # t0 <-> t1 swap by names, one atomic statement
        self.sql(f"RENAME TABLE {q(table)} TO {q('_tmp_swap')}, {q(other)} TO {q(table)}, "
                 f"{q('_tmp_swap')} TO {q(other)}")  # fmt: skip
        return True

    def op_gh_ost(self) -> bool:
        """gh-ost's sequence: ghost and changelog tables, the copy, the atomic swap, the drops."""
        table = self.pick_table(ddl=True, plain=True)
        gho, ghc, old = f"_{table}_gho", f"_{table}_ghc", f"_{table}_del"
        self.sql(
            f"CREATE TABLE {q(ghc)} (id BIGINT AUTO_INCREMENT PRIMARY KEY, hint VARCHAR(64), value TEXT)"
        )
        self.sql(f"INSERT INTO {q(ghc)} (hint, value) VALUES ('state', 'GhostTableMigrated')")
        self.sql(f"CREATE TABLE {q(gho)} LIKE {q(table)}")
        added = self.name()
        self.sql(f"ALTER TABLE {q(gho)} ADD COLUMN {q(added)} INT NOT NULL DEFAULT 5")
        names = ", ".join(q(c.name) for c in self.columns(table))
        self.sql(f"INSERT INTO {q(gho)} ({names}) SELECT {names} FROM {q(table)}")
        self._some_dml(tables=(table,))  # the application writes; gh-ost replays them to the ghost
        self.sql(f"REPLACE INTO {q(gho)} ({names}) SELECT {names} FROM {q(table)}")
        self.sql(f"DELETE FROM {q(gho)} WHERE id NOT IN (SELECT id FROM {q(table)})")
        self.sql(f"RENAME TABLE {q(table)} TO {q(old)}, {q(gho)} TO {q(table)}")
        self.sql(f"DROP TABLE {q(old)}")
        self.sql(f"DROP TABLE {q(ghc)}")
        return True

    def op_pt_osc(self) -> bool:
        """pt-online-schema-change's sequence: the new table, triggers, the copy, the swap."""
        table = self.pick_table(ddl=True, plain=True)
        new, old = f"_{table}_new", f"_{table}_old"
        self.sql(f"CREATE TABLE {q(new)} LIKE {q(table)}")
        self.sql(f"ALTER TABLE {q(new)} ADD COLUMN {q(self.name())} VARCHAR(10) DEFAULT 'osc'")
        cols = [c.name for c in self.columns(table)]
        names = ", ".join(q(c) for c in cols)
        new_values = ", ".join(f"NEW.{q(c)}" for c in cols)
        trig = f"pt_osc_{self.db}_{table}"
        self.sql(f"CREATE TRIGGER {q(trig + '_del')} AFTER DELETE ON {q(table)} FOR EACH ROW "
                 f"DELETE IGNORE FROM {q(new)} WHERE id = OLD.id")  # fmt: skip
        self.sql(f"CREATE TRIGGER {q(trig + '_upd')} AFTER UPDATE ON {q(table)} FOR EACH ROW BEGIN "
                 f"DELETE IGNORE FROM {q(new)} WHERE id = OLD.id; "
                 f"REPLACE INTO {q(new)} ({names}) VALUES ({new_values}); END")  # fmt: skip
        self.sql(f"CREATE TRIGGER {q(trig + '_ins')} AFTER INSERT ON {q(table)} FOR EACH ROW "
                 f"REPLACE INTO {q(new)} ({names}) VALUES ({new_values})")  # fmt: skip
        self.sql(f"INSERT LOW_PRIORITY IGNORE INTO {q(new)} ({names}) SELECT {names} FROM {q(table)}")
        self._some_dml(tables=(table,))
        self.sql(f"RENAME TABLE {q(table)} TO {q(old)}, {q(new)} TO {q(table)}")
        self.sql(f"DROP TABLE {q(old)}")  # its triggers go with it
        return True

    def close(self) -> None:
        if self.held is not None:
            with contextlib.suppress(pymysql.err.MySQLError):
                self.sql(f"XA ROLLBACK '{self.held.xid}'", conn=self.held.conn)
            self.held.conn.close()
        self.conn.close()


# ---------------------------------------------------------------------------------------- runs


def failpoint_in(exc: BaseException) -> bool:
    """``exc`` (or one it was raised from) is an injected fault."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, faults.InjectedFault) or "failpoint " in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@dataclass
class RunStats:
    runs: int = 0  # operator executions, crashed ones included
    completed: int = 0
    crashes: int = 0
    crash_points: dict[str, int] = field(default_factory=dict)
    not_reached: int = 0  # failpoints set but not hit before the run completed
    checks: int = 0
    stops: int = 0  # statement-DML stops asserted
    missing_empty: int = 0  # checks of an empty source table that found no lake table
    covered: int = 0  # statement-DML writes a re-snapshot of their table after them covered
    generations: int = 1  # destinations used (a new one per statement-DML remedy without the option)
    maintenance: int = 0  # maintenance rounds run between a crash and its retry


class Runs:
    """Operator runs on the workload's database, their crashes and retries, and the checks."""

    def __init__(
        self, workload: Workload, spark: Any, warehouse: str, zookeeper: ZooKeeperServer, zk_chroot: str,
        start: str, tag: str, log: Callable[[str], None],
    ) -> None:  # fmt: skip
        self.w, self.spark, self.warehouse = workload, spark, warehouse
        self.zookeeper, self.zk_chroot, self.start, self.tag, self.log = zookeeper, zk_chroot, start, tag, log
        self.rng = random.Random(workload.rng.random())
        self.maintenance_rng = random.Random(f"{tag}-maintenance")  # the seed's other draws stay
        self.stats = RunStats()
        self.generation = 1
        self.routed: set[str] = set()  # every table that was a routed source table in this generation
        self.try_number = 0

    @property
    def dest(self) -> str:
        return f"cm-{self.tag}-g{self.generation}"

    @property
    def namespace(self) -> str:
        return f"{self.w.db}_g{self.generation}"

    def target(self, table: str) -> str:
        return quote_parts(("lake", self.namespace, table))

    def operator(self, **kwargs: Any) -> Any:
        from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

        kwargs.setdefault("start_from", self.start)
        return BinlogToSparkOperator(
            task_id="load", destination=self.dest,
            tables={f"{self.w.db}.*": f"lake.{self.namespace}.{{table}}"},
            exclude=[f"{self.w.db}.{EXCLUDED}"], warehouse=self.warehouse, spark_master="local[2]",
            stop_spark=False, batch_size=self.rng.choice([7, 50, 500]),
            max_rows_per_commit=self.rng.choice([10, 40, 100_000]), **kwargs,
        )  # fmt: skip

    def execute(self, failpoint: str | None, **kwargs: Any) -> dict[str, Any]:
        from airflow_harness import make_context

        self.try_number += 1
        self.stats.runs += 1
        faults.reset()
        if failpoint:
            os.environ[faults.ENV] = failpoint
        try:
            return dict(
                self.operator(**kwargs).execute(make_context(try_number=self.try_number, run_id="cm"))
            )
        finally:
            os.environ.pop(faults.ENV, None)
            faults.reset()

    def complete(self, first_failpoint: bool = True, **kwargs: Any) -> dict[str, Any]:
        """Run until one completes: each try may get a ``raise`` failpoint (the last of at most 6
        none); a crash is retried, anything else raised is the test's failure."""
        for attempt in range(6):
            chance = 0.7 if attempt == 0 else 0.4
            point = None
            if attempt < 5 and (first_failpoint or attempt) and self.rng.random() < chance:
                point = f"{self.rng.choice(FAILPOINTS)}=raise@{self.rng.randint(1, 2)}"
            started = time.monotonic()
            try:
                summary = self.execute(point, **kwargs)
            except Exception as exc:
                if point is None or not failpoint_in(exc):
                    raise
                self.stats.crashes += 1
                name = point.split("=")[0]
                self.stats.crash_points[name] = self.stats.crash_points.get(name, 0) + 1
                self.log(f"    crashed at {point} after {time.monotonic() - started:.1f} s; retrying")
                if MAINTENANCE and self.maintenance_rng.random() < 0.5:
                    self.maintain()
                continue
            if point is not None:
                self.stats.not_reached += 1
            self.stats.completed += 1
            self.log(f"    run completed ({point or 'no failpoint'}) in {time.monotonic() - started:.1f} s: "
                     f"{summary.get('changes', '?')} changes")  # fmt: skip
            return summary
        raise AssertionError("unreachable: the sixth try has no failpoint")

    def maintain(self) -> None:
        """A random round of a user's Iceberg maintenance on every lake table of a routed table."""
        from airflow_provider_binlog.dev import user_maintenance
        from airflow_provider_binlog.lake.commits import load_iceberg_table

        found = [t for t in sorted(self.routed) if load_iceberg_table(self.spark, self.target(t)) is not None]
        tables = [f"lake.{self.namespace}.{t}" for t in found]
        done = user_maintenance.random_round(self.spark, tables, self.maintenance_rng)
        self.stats.maintenance += 1
        self.log(f"    maintenance before the retry: {done} on {len(tables)} tables")

    def cursor(self) -> BinlogPosition | None:
        from airflow_harness import meta_manager

        meta = meta_manager(self.zookeeper, self.zk_chroot)
        try:
            cursor = meta.get_cursor(ClientIdentity(self.dest, 1001)).value
            return None if cursor is None else cursor.binlog_position
        finally:
            meta.client.stop()
            meta.client.close()

    def statement_stop(self) -> None:
        """The run after a statement-format write to a routed table: it must stop there, naming the
        table, the statement, its ``file:pos`` and the remedy, with the cursor before it; then the
        remedy, until a run completes. A held XA transaction stays prepared over the remedy: the new
        destination's snapshot starts after its PREPARE, and its rows come at its later COMMIT."""
        pending = self.w.statement_pending
        assert pending is not None
        table, statement = pending
        before = self.cursor()
        try:
            self.execute(None)
        except (StatementDmlError, SourceOperationError) as exc:  # canal's stop, or the lake's fold's
            err = exc
        else:
            self.w.statement_pending = None
            if table in self.w.resnapshotted:  # the check tells whether the re-snapshot holds it
                self.stats.covered += 1
                self.stats.completed += 1
                self.log(f"    passed the statement: {table} was re-snapshotted after it in this run")
                return
            raise AssertionError(f"the run passed the statement-format write {statement!r} to {table}")
        message, position = " ".join(str(err).split()), str(err.position)
        assert err.table == f"{self.w.db}.{table}", (err.table, message)
        assert statement[:60] in message, message
        assert position in message and "binlog_format=ROW" in message, message
        assert "binlog-cdc resnapshot" in message or 'snapshot="initial"' in message, message
        after = self.cursor()
        assert after is not None and after < BinlogPosition.parse(position), (before, after, position)
        assert before is None or before <= after, (before, after)
        self.stats.stops += 1
        self.w.statement_pending = None
        if STATEMENT_RESNAPSHOT:
            self.log(f"    stopped at {position} as expected; remedy: on_schema_change statement_dml")
            self.complete(on_schema_change={"statement_dml": "resnapshot"})
            return
        # the remedy the message names today: load the tables again under a new destination
        self.generation += 1
        self.stats.generations += 1
        self.routed = set()
        self.log(f"    stopped at {position} as expected; remedy: destination {self.dest}, "
                 'snapshot="initial"')  # fmt: skip
        self.complete(start_from=None, snapshot="initial")

    def routed_now(self) -> list[str]:
        return [t for t in self.w.source_tables() if t != EXCLUDED and not t.startswith("nr_")]

    def check(self) -> list[str]:
        """Differences between the lake and the source after a run that reached the head."""
        self.stats.checks += 1
        problems: list[str] = []
        now = self.routed_now()
        self.routed |= {t for t in now if not SHADOW.match(t)}
        conn = self.w.server.connect()
        try:
            for table in now:
                target = self.target(table)
                if SHADOW.match(table):
                    if self._exists(target):
                        problems.append(f"a lake table exists for the shadow table {table}: {target}")
                    continue
                if not self._exists(target):
                    with self.w.conn.cursor() as cur:
                        cur.execute(f"SELECT count(*) FROM {q(table)}")
                        rows = int(cur.fetchone()[0])
                    if rows:  # an empty table a snapshot loaded gets no lake table (noted, not wrong)
                        problems.append(f"{self.w.db}.{table}: no lake table {target}, {rows} source rows")
                    else:
                        self.stats.missing_empty += 1
                    continue
                self.spark.catalog.refreshTable(target)
                lake_cols = sorted(c.lower() for c in self.spark.table(target).columns)
                source_cols = sorted(c.name.lower() for c in self.w.columns(table))
                if lake_cols != source_cols:
                    problems.append(f"{self.w.db}.{table}: columns {source_cols}, lake {target} {lake_cols}")
                    continue
                diff = verify_table(conn, self.spark, f"{self.w.db}.{table}", target)
                if not diff.equal:
                    problems.append(diff.describe() + self._rows(table, target, diff))
            for table in sorted(self.routed - set(now)):  # dropped (or renamed away) in the source
                target = self.target(table)
                if self._exists(target):
                    self.spark.catalog.refreshTable(target)
                    n = self.spark.table(target).count()
                    if n:
                        problems.append(
                            f"{self.w.db}.{table} no longer exists, its lake table {target} has {n} rows"
                        )
            shown = self.spark.sql(f"SHOW TABLES IN lake.{quote_parts((self.namespace,))}").collect()
            lake_tables = {r["tableName"] for r in shown}
            for name in sorted(lake_tables - self.routed):
                base, infix, attempt = name.rpartition("__resnapshot_")
                if infix and len(attempt) == 12 and ({f"_{base}_gho", f"_{base}_new"} & set(now)):
                    continue  # the lake copy of an online schema change under way (canal.online_copy)
                problems.append(f"lake table {self.namespace}.{name} was never a routed source table")
        finally:
            conn.close()
        return problems

    def _exists(self, target: str) -> bool:
        try:
            self.spark.sql(f"DESCRIBE TABLE {target}").collect()
            return True
        except Exception:
            return False

    def _rows(self, table: str, target: str, diff: Any) -> str:
        """The differing rows of both sides (a few), for the report."""
        keys = [k[0] for k in (diff.missing + diff.extra + diff.different)[:4]]
        if not keys:
            return ""
        with self.w.conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {q(table)} WHERE id IN ({', '.join(['%s'] * len(keys))})", keys)
            names = [d[0] for d in cur.description]
            source = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        lake = [
            r.asDict()
            for r in self.spark.table(target).where(f"id IN ({', '.join(map(str, keys))})").collect()
        ]
        return f"\n  source rows: {source}\n  lake rows:   {lake}"


@contextlib.contextmanager
def database(server: MariaDbServer) -> Iterator[tuple[str, str]]:
    """A fresh database and the binlog point before its creation; dropped afterwards."""
    tag = uuid.uuid4().hex[:8]
    db = f"cm_{tag}"
    (file, pos, *_), *_ = server.execute("SHOW MASTER STATUS")
    server.execute(f"CREATE DATABASE {q(db)}")
    try:
        yield db, f"{file}:{pos}"
    finally:
        server.execute(f"DROP DATABASE IF EXISTS {q(db)}")
