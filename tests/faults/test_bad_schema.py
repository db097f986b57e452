"""Source tables the lake cannot take as they are: no primary key, a DECIMAL wider than Iceberg's 38
digits, a column type changed incompatibly after the lake table exists.

Each: the run fails naming the source table, the target, the column where there is one, the binlog
place of the first change it could not write, and the setting that fixes it; the destination's
cursor stays; the run after the fix leaves the lake equal to the source value by value.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from airflow_harness import lake_verify, make_context
from bad_input_harness import cursor, names, operator, run_fails

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.binlog.events_query import QueryEvent
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.sql.operations import SourceOperationError
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.lake.errors import MissingKeyError, TypeMappingError
from airflow_provider_binlog.lake.types import TypeOptions
from airflow_provider_binlog.lake.verify.verify import verify_tables
from airflow_provider_binlog.lake.write.merge import TargetOptions

pytestmark = [pytest.mark.integration, pytest.mark.spark]


class Table:
    """``db.t`` on the session's MariaDB, routed to ``lake.<ns>.t`` by its own destination."""

    def __init__(
        self, mariadb: MariaDbServer, prefix: str, ddl: str, warehouse: str, zookeeper: ZooKeeperServer,
        chroot: str,
    ) -> None:  # fmt: skip
        self.mariadb = mariadb
        self.zookeeper, self.chroot = zookeeper, chroot
        self.db, ns = names(prefix)
        self.destination = f"{prefix}-{ns}"
        self.source, self.target = f"{self.db}.t", f"lake.{ns}.t"
        self.tables = {self.source: self.target}
        self.warehouse = warehouse
        mariadb.execute(f"CREATE DATABASE {self.db}")
        mariadb.execute(f"CREATE TABLE {self.db}.t {ddl}")
        self.start = self.head()

    def head(self) -> str:
        (file, pos, *_), *_ = self.mariadb.execute("SHOW MASTER STATUS")
        return f"{file}:{pos}"

    def sql(self, *statements: str) -> None:
        for s in statements:
            self.mariadb.execute(s.replace("{t}", f"{self.db}.t"))

    def first_change(self, after: str) -> str:
        """``file:pos`` of the first change of ``db.t`` after ``after`` (a row event or DDL), read with
        our client."""
        m = self.mariadb
        client = ReplicationClient(ReplicationConfig(m.host, m.port, m.repl_user, m.repl_password))
        with client.dump(BinlogPosition.parse(after), stop_at=client.head_position()) as stream:
            for e in stream:
                body = e.body
                rows = hasattr(body, "images") and (body.schema, body.table) == (self.db, "t")
                if rows or (isinstance(body, QueryEvent) and f"{self.db}.t" in body.sql):
                    return f"{e.file}:{e.pos}"
        raise AssertionError(f"no change of {self.source} after {after}")

    def run(self, try_number: int = 1, **kwargs: Any) -> dict[str, Any]:
        # a snapshot run starts at its own position: the operator refuses start_from with it
        if kwargs.get("snapshot", "never") == "never":
            kwargs["start_from"] = self.start
        op = operator(self.destination, self.tables, self.warehouse, **kwargs)
        summary: dict[str, Any] = op.execute(make_context(try_number=try_number))
        return summary

    def fails(self, expected: type[Exception], message: str, cursor_at: str) -> None:
        """A run fails with ``expected``: ``message``, then the place of the first change after
        ``cursor_at``; the cursor stays at ``cursor_at``."""
        op = operator(self.destination, self.tables, self.warehouse, start_from=self.start)
        err = run_fails(op, self.mariadb.repl_password)
        assert isinstance(err, expected), f"{type(err).__name__}: {err}"
        assert f"{message} (first change at {self.first_change(cursor_at)})" in str(err), str(err)
        assert cursor(self.zookeeper, self.chroot, self.destination) == BinlogPosition.parse(cursor_at)

    def assert_equal(self, spark: Any, key_columns: tuple[str, ...] | None = None) -> None:
        if key_columns is None:
            diffs = lake_verify(self.mariadb, spark, self.tables)
        else:
            conn = self.mariadb.connect()
            try:
                diffs = verify_tables(conn, spark, self.tables, {self.source: key_columns})
            finally:
                conn.close()
        assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
        assert diffs[0].source_rows > 0


def test_table_without_primary_key(
    mariadb: MariaDbServer, conns: dict[str, str], spark: Any, spark_warehouse: str,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """No primary key and no key_columns: fails naming the table and both fixes; with
    ``key_columns`` the same changes merge exactly."""
    t = Table(mariadb, "nopk", "(id INT NOT NULL, v VARCHAR(20))", spark_warehouse, zookeeper, zk_chroot)
    t.sql("INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')", "UPDATE {t} SET v = 'B' WHERE id = 2",
          "DELETE FROM {t} WHERE id = 3")  # fmt: skip
    t.fails(
        MissingKeyError,
        f"table {t.source} (target {t.target}) has no primary key: give it one and then re-snapshot the "
        f"table (binlog-cdc resnapshot --destination {t.destination} --table {t.source} --target "
        f"{t.target}: the changes logged before the key have none), or set target_options "
        "TargetOptions(key_columns=(...)) for it, or TargetOptions(append_only=True)",
        t.start,
    )

    t.run(try_number=2, target_options=TargetOptions(key_columns=("id",)))
    t.assert_equal(spark, key_columns=("id",))


def test_decimal_wider_than_the_lake(
    mariadb: MariaDbServer, conns: dict[str, str], spark: Any, spark_warehouse: str,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """DECIMAL(65,4) exceeds Iceberg's 38 digits: fails naming the column and the option; with
    ``decimal_overflow='string'`` the exact digits land as text."""
    t = Table(mariadb, "widedec", "(id INT PRIMARY KEY, amount DECIMAL(65,4))", spark_warehouse, zookeeper,
              zk_chroot)  # fmt: skip
    t.sql("INSERT INTO {t} VALUES (1, 12345678901234567890123456789012345678901234567890.1234), "
          "(2, -0.0001), (3, NULL)")  # fmt: skip
    t.fails(
        TypeMappingError,
        f"column 'amount' of {t.source}: DECIMAL(65,4) exceeds Iceberg's maximum precision 38; set "
        "TargetOptions(types=TypeOptions(decimal_overflow='string')) to store it as text",
        t.start,
    )

    t.run(try_number=2, target_options=TargetOptions(types=TypeOptions(decimal_overflow="string")))
    t.assert_equal(spark)


def test_column_type_changed_incompatibly(
    mariadb: MariaDbServer, conns: dict[str, str], spark: Any, spark_warehouse: str,
    zookeeper: ZooKeeperServer, zk_chroot: str,
) -> None:  # fmt: skip
    """A VARCHAR column becomes INT after the lake table holds it as string. By default the run
    re-snapshots the table at that point and the lake equals the source. With
    ``on_schema_change={"modify_column": "fail"}`` the next such change stops the run naming the
    table, the statement, its ``file:pos`` and the remedies; the cursor stays before it; the
    re-snapshot the message names then lets the run through."""
    t = Table(mariadb, "retype", "(id INT PRIMARY KEY, code VARCHAR(10))", spark_warehouse, zookeeper,
              zk_chroot)  # fmt: skip
    t.sql("INSERT INTO {t} VALUES (1, '10'), (2, '20')")
    first = t.run()
    t.assert_equal(spark)
    assert cursor(zookeeper, zk_chroot, t.destination) == BinlogPosition.parse(first["end"])

    t.sql(
        "ALTER TABLE {t} MODIFY code INT",
        "INSERT INTO {t} VALUES (3, 30)",
        "UPDATE {t} SET code = 11 WHERE id = 1",
    )
    second = t.run(try_number=2)
    assert second["resnapshots"], second
    t.assert_equal(spark)

    t.sql("ALTER TABLE {t} MODIFY code VARCHAR(4)", "UPDATE {t} SET code = 'x' WHERE id = 2")
    op = operator(t.destination, t.tables, t.warehouse, on_schema_change={"modify_column": "fail"})
    err = run_fails(op, mariadb.repl_password)
    assert isinstance(err, SourceOperationError), f"{type(err).__name__}: {err}"
    text = str(err)
    assert t.source in text and "MODIFY code VARCHAR(4)" in text, text
    assert re.search(r"at mysql-bin\.\d+:\d+", text), text
    assert "binlog-cdc resnapshot" in text and "on_schema_change" in text, text
    assert cursor(zookeeper, zk_chroot, t.destination) == BinlogPosition.parse(second["end"])

    t.run(try_number=3)  # the default policy: the re-snapshot the message names
    t.assert_equal(spark)
