"""Remedies executed as written: a stop's message names a way forward, the test takes it and the lake
equals the source afterwards, value by value (the list of remedies and their tests:
``docs/remedies.md``).

* A schema-change stop (``on_schema_change={"add_column": "fail"}``) names
  ``binlog-cdc resnapshot --destination D --table T ...``: that command, taken from the message and
  given only where the source, the meta store and the lake are, rebuilds the table after the
  statement, and the next run with the same options goes on past it.
* A table without a key names: give it one and then re-snapshot it (the command), ``key_columns``,
  or ``append_only``; the first and the last are taken here.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import shlex
import uuid
from typing import Any

import pytest
from airflow_harness import make_context, mysql_uri
from test_operator_ddl import Harness, harness  # noqa: F401  (the fixture)

from airflow_provider_binlog.canal.errors import (
    SchemaMismatchError,
    StartPositionError,
    UnreadableBinlogError,
)
from airflow_provider_binlog.canal.sql.operations import ResnapshotNeeded, SourceOperationError
from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.drain.source import CascadeError
from airflow_provider_binlog.lake.errors import LakeError, MissingKeyError, SchemaEvolutionError
from airflow_provider_binlog.lake.options import TargetOptions
from airflow_provider_binlog.lake.sql import quote_parts
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture
def server(mariadb: MariaDbServer) -> MariaDbServer:
    """One server (FULL metadata) is enough here: the remedy, not the decoding, is under test."""
    return mariadb


def _named_command(message: str) -> list[str]:
    """The ``binlog-cdc resnapshot ...`` command a message names, as argv without the program."""
    found = re.search(r"\((binlog-cdc resnapshot [^):]*)[):]", message)
    assert found, message
    argv = shlex.split(found.group(1))
    assert argv[:2] == ["binlog-cdc", "resnapshot"], argv
    return argv[1:]


def test_a_schema_change_stop_then_the_resnapshot_command_it_names(
    harness: Harness,  # noqa: F811
    server: MariaDbServer,
    zookeeper: ZooKeeperServer,
    zk_chroot: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from airflow_provider_binlog import cli

    h, db = harness, harness.db
    fail = {"add_column": "fail"}
    h.sql(
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT)",
        f"INSERT INTO {db}.t VALUES (1, 1), (2, 2)",
    )
    h.run(on_schema_change=fail)
    h.assert_equal("t")
    h.sql(
        f"ALTER TABLE {db}.t ADD COLUMN n INT DEFAULT 5",
        f"INSERT INTO {db}.t VALUES (3, 3, 30)",
        f"UPDATE {db}.t SET n = 7, a = 10 WHERE id = 1",
        f"DELETE FROM {db}.t WHERE id = 2",
    )
    with pytest.raises(SourceOperationError) as stopped:
        h.run(on_schema_change=fail)
    err = stopped.value
    assert not isinstance(err, ResnapshotNeeded) and err.table == f"{db}.t", str(err)
    argv = _named_command(str(err))

    # the command as the message writes it; only where things are is added
    monkeypatch.setenv("REMEDY_PASSWORD", server.repl_password)
    argv += [
        "--host", server.host, "--port", str(server.port), "--user", server.repl_user,
        "--password-env", "REMEDY_PASSWORD", "--zookeeper", zookeeper.hosts + zk_chroot,
        "--warehouse", h.warehouse, "--spark-master", "local[1]",
    ]  # fmt: skip
    capsys.readouterr()
    assert cli.main(argv) == 0, capsys.readouterr()
    done = json.loads(capsys.readouterr().out)
    assert done["source"] == f"{db}.t" and done["rows"] == 2, done
    h.assert_equal("t")

    # the same options again: the table's lake state is after the statement, so the run goes on
    h.sql(f"INSERT INTO {db}.t VALUES (4, 4, 40)", f"UPDATE {db}.t SET n = NULL WHERE id = 3")
    h.run(on_schema_change=fail)
    h.assert_equal("t")


def test_a_table_without_a_key_stops_then_each_remedy_it_names(
    harness: Harness,  # noqa: F811
    server: MariaDbServer,
    zookeeper: ZooKeeperServer,
    zk_chroot: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A keyless table's stop names three ways: give it a key and then re-snapshot it (the command
    is in the message: the changes logged before the key still have none), ``key_columns``, or
    ``append_only``. The first and the last are taken here (``key_columns`` in
    ``tests/faults/test_bad_schema.py``)."""
    from airflow_provider_binlog import cli

    h, db = harness, harness.db
    h.sql(f"CREATE TABLE {db}.p (id INT PRIMARY KEY, v INT)", f"INSERT INTO {db}.p VALUES (1, 1)")
    h.run()  # a destination that runs, then tables without a key join it
    h.sql(
        f"CREATE TABLE {db}.k (id INT NOT NULL, v VARCHAR(10))",
        f"CREATE TABLE {db}.a (id INT NOT NULL, v VARCHAR(10))",
        f"INSERT INTO {db}.k VALUES (1, 'one'), (2, 'two')",
        f"INSERT INTO {db}.a VALUES (1, 'one'), (2, 'two')",
    )
    with pytest.raises(MissingKeyError) as stopped:
        h.run()
    message = str(stopped.value)
    assert f"table {db}.k (target lake.{db}.k) has no primary key: give it one" in message, message

    # give it one (on the source), then the re-snapshot the message names; the other table as an
    # append-only log
    h.sql(f"ALTER TABLE {db}.k ADD PRIMARY KEY (id)", f"UPDATE {db}.k SET v = 'uno' WHERE id = 1")
    argv = _named_command(message)
    assert argv[-2:] == ["--target", f"lake.{db}.k"], argv
    monkeypatch.setenv("REMEDY_PASSWORD", server.repl_password)
    argv += [
        "--host", server.host, "--port", str(server.port), "--user", server.repl_user,
        "--password-env", "REMEDY_PASSWORD", "--zookeeper", zookeeper.hosts + zk_chroot,
        "--warehouse", h.warehouse, "--spark-master", "local[1]",
    ]  # fmt: skip
    capsys.readouterr()
    assert cli.main(argv) == 0, capsys.readouterr()
    h.sql(f"INSERT INTO {db}.a VALUES (3, 'three')", f"INSERT INTO {db}.k VALUES (3, 'three')")
    h.run(target_options={f"lake.{db}.a": TargetOptions(append_only=True)})
    h.assert_equal("k")
    h.assert_equal("p")
    log = h.spark.table(quote_parts(("lake", db, "a"))).select("id", "v").collect()
    assert sorted(tuple(r) for r in log) == [(1, "one"), (2, "two"), (3, "three")], log


def test_a_lake_column_type_that_cannot_change_then_drop_and_when_needed(harness: Harness) -> None:  # noqa: F811
    """A lake type that cannot change ("string cannot change to int ... drop it and run with
    snapshot='when_needed'"): a lake table left by an earlier load holds ``v`` as text, the source
    has it as INT. Dropped, and the run with ``snapshot="when_needed"`` (without ``start_from``, as
    the operator asks when both are given) loads the table whole, the later changes on top."""
    h, db = harness, harness.db
    lake = quote_parts(("lake", db, "t"))
    h.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quote_parts(('lake', db))}")
    h.spark.sql(f"CREATE TABLE {lake} (id INT, v STRING) USING iceberg")
    h.sql(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    (file, pos, *_), *_ = h.server.execute("SHOW MASTER STATUS")
    h.start = f"{file}:{pos}"  # after the CREATE (one in the stream would restart the lake table)
    h.sql(f"INSERT INTO {db}.t VALUES (1, 10), (2, 20)")
    with pytest.raises(SchemaEvolutionError) as stopped:
        h.run()
    message = str(stopped.value)
    assert (
        "string cannot change to int" in message and "drop it and run with snapshot='when_needed'" in message
    )
    with pytest.raises(ValueError, match="Remove start_from to take the snapshot"):
        h.run(snapshot="when_needed")
    h.spark.sql(f"DROP TABLE {lake}")
    h.sql(f"UPDATE {db}.t SET v = 11 WHERE id = 1", f"INSERT INTO {db}.t VALUES (3, 30)")
    h.start = ""
    h.run(snapshot="when_needed")
    h.assert_equal("t")
    h.sql(f"DELETE FROM {db}.t WHERE id = 2")
    h.run(snapshot="when_needed")  # the table exists again: the binlog from the cursor
    h.assert_equal("t")


def _resnapshot_as_named(
    h: Harness,
    message: str,
    server: MariaDbServer,
    zookeeper: ZooKeeperServer,
    zk_chroot: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> dict[str, object]:
    """Run the ``binlog-cdc resnapshot`` command ``message`` names; only where things are is added."""
    from airflow_provider_binlog import cli

    argv = _named_command(message)
    monkeypatch.setenv("REMEDY_PASSWORD", server.repl_password)
    argv += [
        "--host", server.host, "--port", str(server.port), "--user", server.repl_user,
        "--password-env", "REMEDY_PASSWORD", "--zookeeper", zookeeper.hosts + zk_chroot,
        "--warehouse", h.warehouse, "--spark-master", "local[1]",
    ]  # fmt: skip
    capsys.readouterr()
    assert cli.main(argv) == 0, capsys.readouterr()
    done: dict[str, object] = json.loads(capsys.readouterr().out)
    return done


def test_a_statement_not_understood_then_the_resnapshot_it_names(
    harness: Harness,  # noqa: F811
    server: MariaDbServer,
    zookeeper: ZooKeeperServer,
    zk_chroot: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A transportable tablespace (``DISCARD`` / ``IMPORT TABLESPACE``) replaces a table's rows
    with no row in the binlog: the statement is not understood, the run stops and names the
    re-snapshot command; taken as written, the lake holds the imported rows and later runs go on."""
    h, db = harness, harness.db
    h.exclude = [f"{db}.x"]
    h.sql(
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))",
        f"CREATE TABLE {db}.x LIKE {db}.t",
        f"INSERT INTO {db}.t VALUES (1, 'one'), (2, 'two')",
        f"INSERT INTO {db}.x VALUES (7, 'seven'), (8, 'eight'), (9, 'nine')",
    )
    h.run()
    h.assert_equal("t")
    folder = server.datadir / db
    h.sql(f"FLUSH TABLES {db}.x FOR EXPORT")
    saved = {ext: (folder / f"x.{ext}").read_bytes() for ext in ("ibd", "cfg")}
    h.sql("UNLOCK TABLES", f"ALTER TABLE {db}.t DISCARD TABLESPACE")
    for ext, data in saved.items():
        (folder / f"t.{ext}").write_bytes(data)
    h.sql(f"ALTER TABLE {db}.t IMPORT TABLESPACE", f"UPDATE {db}.t SET v = 'neuf' WHERE id = 9")
    with pytest.raises(SourceOperationError) as stopped:
        h.run()
    message = str(stopped.value)
    assert "not understood" in message and stopped.value.table == f"{db}.t", message
    done = _resnapshot_as_named(h, message, server, zookeeper, zk_chroot, monkeypatch, capsys)
    assert done["rows"] == 3, done
    h.assert_equal("t")
    h.sql(f"DELETE FROM {db}.t WHERE id = 7", f"INSERT INTO {db}.t VALUES (10, 'ten')")
    h.run()
    h.assert_equal("t")


def test_a_start_position_inside_an_event_then_a_position_it_names(harness: Harness) -> None:  # noqa: F811
    """``start_from`` inside an event stops naming the two nearest event starts; the later one,
    given as written, loads the changes from there."""
    h, db = harness, harness.db
    h.sql(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    file, pos = h.start.split(":")
    h.start = f"{file}:{int(pos) + 7}"  # inside the CREATE's GTID event
    h.sql(f"INSERT INTO {db}.t VALUES (1, 10), (2, 20)")
    with pytest.raises(StartPositionError) as stopped:
        h.run()
    message = str(stopped.value)
    named = re.findall(r"nearest events start at (\S+) and (\S+)\.", message)
    assert named, message
    h.start = named[0][0]  # the event's own start: the CREATE and all after it
    h.sql(f"UPDATE {db}.t SET v = 11 WHERE id = 1")
    h.run()
    h.assert_equal("t")


def test_a_rename_onto_a_kept_lake_column_then_drop_the_one_it_names(harness: Harness) -> None:  # noqa: F811
    """A column dropped with ``drop_column="keep"`` stays in the lake; a later rename of another
    column onto its name stops ("the lake table has both"): the lake column it names dropped, the
    run renames and the lake equals the source."""
    h, db = harness, harness.db
    keep = {"drop_column": "keep"}
    h.sql(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT, b INT)", f"INSERT INTO {db}.t VALUES (1, 1, 100)")
    h.run(on_schema_change=keep)
    h.sql(
        f"ALTER TABLE {db}.t DROP COLUMN b",
        f"INSERT INTO {db}.t VALUES (2, 2)",
        f"ALTER TABLE {db}.t RENAME COLUMN a TO b",
        f"UPDATE {db}.t SET b = 3 WHERE id = 2",
    )
    with pytest.raises(LakeError) as stopped:
        h.run(on_schema_change=keep)
    message = str(stopped.value)
    drop = re.search(r"drop the lake column '(\w+)'", message)
    assert drop, message
    h.spark.sql(f"ALTER TABLE {quote_parts(('lake', db, 't'))} DROP COLUMN `{drop.group(1)}`")
    h.run(on_schema_change=keep)
    h.assert_equal("t")


def test_minimal_metadata_without_information_schema_then_grant_select(
    mariadb_minimal: MariaDbServer,
    spark: Any,
    spark_warehouse: str,
    conns: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MINIMAL metadata and a user that cannot read the table's ``information_schema`` rows: the
    column names are unknown and the run stops ("set binlog_row_metadata=FULL or give the user
    SELECT on the table"); SELECT granted, the next run loads the changes it stopped at."""
    server = mariadb_minimal
    user, password = f"r{uuid.uuid4().hex[:8]}", secrets.token_hex(8)
    server.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
    server.execute(f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'%'")
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_NOSELECT", mysql_uri(server, user, password))
    h = Harness(server, spark, spark_warehouse, "mysql_noselect")
    db = h.db
    try:
        h.sql(f"CREATE DATABASE `{db}`", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
        (file, pos, *_), *_ = server.execute("SHOW MASTER STATUS")
        h.start = f"{file}:{pos}"  # after the CREATE: the stream does not name the columns
        h.sql(f"INSERT INTO {db}.t VALUES (1, 'one'), (2, 'two')")
        with pytest.raises(SchemaMismatchError) as stopped:
            h.run()
        message = str(stopped.value)
        assert "give the user SELECT on the table" in message and f"{db}.t" in message, message
        server.execute(f"GRANT SELECT ON `{db}`.`t` TO '{user}'@'%'")
        h.sql(f"UPDATE {db}.t SET v = 'uno' WHERE id = 1")
        h.run()
        h.assert_equal("t")
    finally:
        h.close()
        server.execute(f"DROP USER '{user}'@'%'")


def test_a_cascading_child_then_each_remedy_it_names(
    harness: Harness,  # noqa: F811
    server: MariaDbServer,
    zookeeper: ZooKeeperServer,
    zk_chroot: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A routed child of ``ON DELETE CASCADE``: the server deletes its rows without logging them. The
    stop (``on_cascade="fail"``; the default warns with the same text) names two ways: re-snapshot the
    child now and then (the command, taken as written), or change the child rows before the
    parent's in the application (taken too): the lake equals the source after each."""
    h, db = harness, harness.db
    h.sql(
        f"CREATE TABLE {db}.p (id INT PRIMARY KEY)",
        f"CREATE TABLE {db}.c (id INT PRIMARY KEY, p INT, CONSTRAINT fk_c FOREIGN KEY (p) "
        f"REFERENCES {db}.p (id) ON DELETE CASCADE)",
        f"INSERT INTO {db}.p VALUES (1), (2), (3)",
        f"INSERT INTO {db}.c VALUES (10, 1), (11, 1), (20, 2), (30, 3)",
    )
    logger = logging.getLogger("tests.airflow.remedies")
    monkeypatch.setattr(BinlogToSparkOperator, "log", property(lambda self: logger))
    with pytest.raises(CascadeError, match="see the warnings above for the remedies"):
        h.run(on_cascade="fail")
    h.run()  # warns, with the remedies
    (message,) = [r.getMessage() for r in caplog.records if "Remedies: re-snapshot" in r.getMessage()][-1:]
    assert "change the child rows in the application before the parent's" in message, message
    h.sql(f"DELETE FROM {db}.p WHERE id = 1")  # 10 and 11 go without a row event
    h.run()
    _, lake = h.lake("c")
    assert 10 in lake, "the divergence the message warns of did not happen"
    done = _resnapshot_as_named(h, message, server, zookeeper, zk_chroot, monkeypatch, capsys)
    assert done["rows"] == 2, done
    h.assert_equal("c")
    h.sql("BEGIN", f"DELETE FROM {db}.c WHERE p = 2", f"DELETE FROM {db}.p WHERE id = 2", "COMMIT")
    h.run(on_cascade="ignore")
    h.assert_equal("c")
    h.assert_equal("p")


def _sharded_run(h: Harness, destination: str, source: str, **kwargs: Any) -> dict[str, Any]:
    """One run routing ``source`` (a table or a glob) of ``h.db`` into ``lake.<db>.orders``."""
    h.try_number += 1
    op = BinlogToSparkOperator(
        task_id="load", destination=destination, tables={f"{h.db}.{source}": f"lake.{h.db}.orders"},
        start_from=h.start, warehouse=h.warehouse, spark_master="local[2]", stop_spark=False,
        mysql_conn_id=h.mysql_conn_id, **kwargs,
    )  # fmt: skip
    result: dict[str, Any] = op.execute(make_context(try_number=h.try_number))
    return result


def test_shards_into_one_lake_table_then_each_remedy_named(harness: Harness) -> None:  # noqa: F811
    """Two source tables into one lake table: a shard column that is a source column stops ("choose
    another shard_column"), and so does a snapshot of both ("snapshot each shard under a destination
    of its own, or ... snapshot='never'"). Each taken: the lake holds both tables' rows, told apart
    by the shard column, value by value."""
    h, db = harness, harness.db
    for name in ("o_1", "o_2"):
        h.sql(f"CREATE TABLE {db}.{name} (id INT PRIMARY KEY, src VARCHAR(10), qty INT)")
    h.sql(
        f"INSERT INTO {db}.o_1 VALUES (1, 'a', 10), (2, 'a', 20)", f"INSERT INTO {db}.o_2 VALUES (1, 'b', 30)"
    )
    opts = {f"lake.{db}.orders": TargetOptions(shard_column="src", shard_value="{table}")}
    with pytest.raises(MissingKeyError, match="is a source column too: choose another shard_column"):
        _sharded_run(h, h.dest, "o_*", target_options=opts)
    shard = {f"lake.{db}.orders": TargetOptions(shard_column="_shard", shard_value="{table}")}
    _sharded_run(h, h.dest, "o_*", target_options=shard)

    def expected(prefix: str = "") -> dict[tuple[str, int], tuple[Any, ...]]:
        out = {}
        for name in ("o_1", "o_2"):
            for row in h.server.execute(f"SELECT id, src, qty FROM `{db}`.`{name}`"):
                out[(prefix + name, row[0])] = tuple(row)
        return out

    def lake() -> dict[tuple[str, int], tuple[Any, ...]]:
        table = quote_parts(("lake", db, "orders"))
        h.spark.catalog.refreshTable(table)
        rows = h.spark.sql(f"SELECT _shard, id, src, qty FROM {table}").collect()
        assert len({(r[0], r[1]) for r in rows}) == len(rows), rows
        return {(r[0], r[1]): tuple(r[1:]) for r in rows}

    assert lake() == expected()

    # a snapshot of both into one lake table (a new lake table, rows already there)
    h.spark.sql(f"DROP TABLE {quote_parts(('lake', db, 'orders'))}")
    h.start = ""
    h.sql(f"UPDATE {db}.o_2 SET qty = 31 WHERE id = 1", f"INSERT INTO {db}.o_1 VALUES (3, 'a', 40)")
    with pytest.raises(LakeError, match="snapshot each shard under a destination of its own"):
        _sharded_run(h, f"{h.dest}-s", "o_*", target_options=shard, snapshot="initial")
    # a destination per shard, each with its snapshot (its shard value names the destination, as
    # the check of writers into one lake table asks)
    own = {f"lake.{db}.orders": TargetOptions(shard_column="_shard", shard_value="{destination}")}
    for name in ("o_1", "o_2"):
        _sharded_run(h, f"{h.dest}-{name}", name, target_options=own, snapshot="initial")
    assert lake() == expected(f"{h.dest}-")
    h.sql(f"DELETE FROM {db}.o_1 WHERE id = 2", f"UPDATE {db}.o_2 SET qty = 32 WHERE id = 1")
    for name in ("o_1", "o_2"):
        _sharded_run(h, f"{h.dest}-{name}", name, target_options=own, snapshot="initial")
    assert lake() == expected(f"{h.dest}-")


def test_minimal_metadata_hash_keys_changed_then_full_and_a_new_destination(
    mariadb_minimal: MariaDbServer,
    spark: Any,
    spark_warehouse: str,
    conns: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MINIMAL metadata: a row image carries MariaDB's hidden hash column of a UNIQUE key on a
    TEXT column, and the table's hash keys changed since (the server now lists two): the columns
    cannot be matched, the stop says the binlog is not damaged and names FULL metadata and a new
    destination with snapshot='initial'. Taken as written, the lake equals the source."""
    server = mariadb_minimal
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_MINIMAL_R", mysql_uri(server))
    h = Harness(server, spark, spark_warehouse, "mysql_minimal_r")
    db = h.db
    try:
        h.sql(
            f"CREATE DATABASE `{db}`",
            f"CREATE TABLE {db}.u (id INT PRIMARY KEY, b TEXT, UNIQUE KEY ub (b))",
            f"INSERT INTO {db}.u VALUES (1, 'one'), (2, 'two')",
        )
        h.run()
        h.assert_equal("u")
        h.sql(
            f"INSERT INTO {db}.u VALUES (3, 'three')",
            f"ALTER TABLE {db}.u ADD COLUMN w TEXT, ADD UNIQUE KEY uw (w)",
            f"INSERT INTO {db}.u VALUES (4, 'four', 'w4')",
        )
        with pytest.raises(UnreadableBinlogError) as stopped:
            h.run()
        message = str(stopped.value)
        assert "The binlog is not damaged" in message and "Set binlog_row_metadata=FULL" in message, message
        assert "DB_ROW_HASH_n" in message and f"{db}.u" in message, message
        server.execute("SET GLOBAL binlog_row_metadata = FULL")
        handover = re.search(r"(ALTER TABLE <lake table> UNSET TBLPROPERTIES \('[^']+'\))", message)
        assert handover, message
        h.spark.sql(handover.group(1).replace("<lake table>", quote_parts(("lake", db, "u"))))
        h.dest, h.start = f"{h.dest}-full", ""
        h.sql(f"UPDATE {db}.u SET w = 'w1' WHERE id = 1")
        h.run(snapshot="initial")
        h.assert_equal("u")
        h.sql(f"DELETE FROM {db}.u WHERE id = 2", f"UPDATE {db}.u SET b = 'uno' WHERE id = 1")
        h.run(snapshot="initial")
        h.assert_equal("u")
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = MINIMAL")
        h.close()


def test_a_system_versioned_table_stops_then_exclude(harness: Harness) -> None:  # noqa: F811
    """A table made system-versioned in the stream stops the run (its row events would bring
    history rows the source's SELECT does not show); excluded as the message says, the run goes on
    and the other tables equal the source."""
    h, db = harness, harness.db
    h.sql(f"CREATE TABLE {db}.p (id INT PRIMARY KEY, v INT)", f"INSERT INTO {db}.p VALUES (1, 1)")
    h.run()
    h.sql(
        f"CREATE TABLE {db}.sv (id INT PRIMARY KEY, v INT) WITH SYSTEM VERSIONING",
        f"INSERT INTO {db}.sv VALUES (1, 1)",
        f"UPDATE {db}.sv SET v = 2 WHERE id = 1",
        f"UPDATE {db}.p SET v = 2 WHERE id = 1",
    )
    with pytest.raises(SourceOperationError) as stopped:
        h.run()
    message = str(stopped.value)
    assert "history row" in message and "exclude the table from the routes (exclude=)" in message, message
    h.exclude = [f"{db}.sv"]
    h.sql(f"INSERT INTO {db}.p VALUES (2, 20)")
    h.run()
    h.assert_equal("p")
    assert not h.spark.catalog.tableExists(quote_parts(("lake", db, "sv")))


def test_a_key_column_missing_from_a_row_image_then_key_columns_the_images_hold(
    harness: Harness,  # noqa: F811
) -> None:
    """``key_columns`` naming a column that ``binlog_row_image=MINIMAL`` leaves out of a delete's
    before image stops at the change ("set TargetOptions(key_columns=(...)) to columns its row images
    hold"); the primary key, which every image holds, taken instead: the lake equals the source."""
    h, db = harness, harness.db
    by_code = {f"lake.{db}.t": TargetOptions(key_columns=("code",))}
    h.sql(
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, code INT NOT NULL UNIQUE, v INT)",
        f"INSERT INTO {db}.t VALUES (1, 11, 1), (2, 12, 2)",
    )
    h.run(target_options=by_code)
    h.sql(
        f"UPDATE {db}.t SET v = 5 WHERE id = 1",
        "SET SESSION binlog_row_image = MINIMAL",  # a delete's before image: the primary key only
        f"DELETE FROM {db}.t WHERE id = 2",
        "SET SESSION binlog_row_image = FULL",
    )
    with pytest.raises(MissingKeyError) as stopped:
        h.run(target_options=by_code)
    message = str(stopped.value)
    assert "key column 'code' is missing from a row image" in message and "mysql-bin." in message, message
    h.run(target_options={f"lake.{db}.t": TargetOptions(key_columns=("id",))})
    h.assert_equal("t")


def test_verify_at_cursor_without_a_commit_mark_then_without_at_cursor(
    harness: Harness,  # noqa: F811
    server: MariaDbServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``binlog-cdc verify --at-cursor`` of a lake table no binlog-cdc run wrote (no commit mark)
    stops ("verify without --at-cursor, or name the --destination that loads it"); without
    ``--at-cursor``, as it says, the comparison runs and finds the tables equal."""
    from airflow_provider_binlog import cli

    h, db = harness, harness.db
    lake = quote_parts(("lake", db, "t"))
    h.sql(
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(5))",
        f"INSERT INTO {db}.t VALUES (1, 'a'), (2, NULL)",
    )
    h.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quote_parts(('lake', db))}")
    h.spark.sql(f"CREATE TABLE {lake} (id INT, v STRING) USING iceberg")
    h.spark.sql(f"INSERT INTO {lake} VALUES (1, 'a'), (2, NULL)")
    monkeypatch.setenv("VERIFY_PASSWORD", server.root_password)
    argv = [
        "verify", "--host", server.host, "--port", str(server.port), "--user", server.root_user,
        "--password-env", "VERIFY_PASSWORD", "--warehouse", h.warehouse, "--spark-master", "local[1]",
        "--tables", f"{db}.t=lake.{db}.t",
    ]  # fmt: skip
    capsys.readouterr()
    assert cli.main([*argv, "--at-cursor"]) == 1
    said = capsys.readouterr()
    assert (
        "has no binlog-cdc commit mark" in said.err + said.out
        and "verify without --at-cursor" in said.err + said.out
    )
    assert cli.main(argv) == 0, capsys.readouterr()
    assert f"{db}.t == lake.{db}.t" in capsys.readouterr().out
