"""``binlog-cdc verify``: lake tables loaded by the operator, differences put there on purpose; the key
choice; ``--at-cursor`` while a writer keeps writing the source."""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import Shop, make_context

from airflow_provider_binlog import cli
from airflow_provider_binlog.cli.common import parse_conf
from airflow_provider_binlog.cli.verify import parse_keys, parse_tables
from airflow_provider_binlog.dev.services import MariaDbServer
from airflow_provider_binlog.errors import ConfigurationError
from airflow_provider_binlog.lake.errors import MissingKeyError
from airflow_provider_binlog.lake.verify.verify import verify_table
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_parse_arguments() -> None:
    assert parse_tables(" shop.a=lake.s.a , shop.b=cat.x.b ") == {"shop.a": "lake.s.a", "shop.b": "cat.x.b"}
    for bad in ("", "shop.a", "shopa=lake.s.a", "shop.a=", "shop.a=x,shop.a=y"):
        with pytest.raises(ConfigurationError, match="--tables"):
            parse_tables(bad)
    assert parse_conf(["spark.a=1", "spark.b=x=y"]) == {"spark.a": "1", "spark.b": "x=y"}
    with pytest.raises(ConfigurationError, match="--conf"):
        parse_conf(["novalue"])
    tables = {"shop.a": "lake.s.a", "shop.b": "lake.s.b"}
    assert parse_keys(["id", "shop.b=x, y"], tables) == {"shop.a": ["id"], "shop.b": ["x", "y"]}
    assert parse_keys([], tables) == {}
    for bad in (["shop.c=id"], ["a,,b"], ["shop.a="]):
        with pytest.raises(ConfigurationError, match="--key"):
            parse_keys(bad, tables)
    assert "verify" in cli.build_parser().format_help()


def _argv(mariadb: MariaDbServer, warehouse: str, tables: str, *more: str) -> list[str]:
    return [
        "verify", "--host", mariadb.host, "--port", str(mariadb.port), "--user", mariadb.root_user,
        "--password-env", "VERIFY_PASSWORD", "--warehouse", warehouse, "--spark-master", "local[2]",
        "--conf", "spark.sql.shuffle.partitions=4", "--tables", tables, *more,
    ]  # fmt: skip


def _load(shop: Shop, spark_warehouse: str, ns: str) -> None:
    BinlogToSparkOperator(
        task_id="load", destination=f"verify-{ns}", tables={"shop.*": f"lake.{ns}.{{table}}"},
        start_from=shop.start_from, warehouse=spark_warehouse, spark_master="local[2]", stop_spark=False,
    ).execute(make_context())  # fmt: skip


def test_verify_names_the_differing_columns(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    shop.changes(120)
    ns = f"verify_{uuid.uuid4().hex[:8]}"
    _load(shop, spark_warehouse, ns)
    monkeypatch.setenv("VERIFY_PASSWORD", mariadb.root_password)
    argv = _argv(mariadb, spark_warehouse, f"shop.orders=lake.{ns}.orders,shop.customers=lake.{ns}.customers")
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert f"shop.orders == lake.{ns}.orders: " in out and f"shop.customers == lake.{ns}.customers: " in out
    assert "compared on" not in out  # the primary key: not worth a line

    keys = [r[0] for r in mariadb.execute("SELECT id FROM shop.orders ORDER BY id LIMIT 3")]
    key = keys[0]
    (quantity, note) = mariadb.execute("SELECT quantity, note FROM shop.orders WHERE id = %s", (key,))[0]
    spark.sql(f"UPDATE lake.{ns}.orders SET quantity = quantity + 1, note = 'changed' WHERE id = {key}")
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert f"shop.customers == lake.{ns}.customers: " in out, out
    assert f"shop.orders != lake.{ns}.orders: " in out, out
    assert f"different values: 1 key(s): ({key},)" in out, out
    assert "differing columns: " in out and "quantity (1 row)" in out and "note (1 row)" in out, out
    # side by side: the source's value, then the lake's
    assert re.search(rf"^\s+quantity\s+source {quantity}\s+lake {quantity + 1}$", out, re.M), out
    src_note = "NULL" if note is None else repr(note)[:39]
    assert re.search(rf"^\s+note\s+source {re.escape(src_note)}.*\s+lake 'changed'$", out, re.M), out
    assert not re.search(r"^\s+amount\s+source", out, re.M), out  # equal columns are not shown
    assert mariadb.root_password not in out

    # three differing keys, two shown column by column
    others = ", ".join(map(str, keys[1:]))
    spark.sql(f"UPDATE lake.{ns}.orders SET amount = amount + 1 WHERE id IN ({others})")
    assert cli.main([*argv, "--show", "2"]) == 1
    out = capsys.readouterr().out
    assert "different values: 3 key(s): " in out and "(+1 more)" in out, out
    assert "amount (2 rows)" in out and "quantity (1 row)" in out, out
    assert len(re.findall(r"^\s+amount\s+source ", out, re.M)) == 1, out  # keys[1] shown, keys[2] not
    assert len(re.findall(r"^    \(\d+,\):$", out, re.M)) == 2, out
    assert mariadb.root_password not in out

    monkeypatch.delenv("VERIFY_PASSWORD")
    assert cli.main(argv) == 1
    assert "VERIFY_PASSWORD (--password-env) is not set" in capsys.readouterr().err


def test_verify_chooses_a_unique_not_null_key(
    database: str, spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    ns = f"verify_{uuid.uuid4().hex[:8]}"
    for sql in (
        f"CREATE TABLE `{database}`.uk (code VARCHAR(10) NOT NULL, v INT, nick VARCHAR(10), "
        "UNIQUE KEY by_nick (nick), UNIQUE KEY by_code (code))",
        f"CREATE TABLE `{database}`.nullable (code VARCHAR(10), v INT, UNIQUE KEY by_code (code))",
        f"INSERT INTO `{database}`.uk VALUES ('a', 1, NULL), ('b', 2, 'bee'), ('c', 3, NULL)",
        f"INSERT INTO `{database}`.nullable VALUES ('a', 1), ('b', 2)",
    ):
        mariadb.execute(sql)
    for table in ("uk", "nullable"):
        cols = "code STRING, v INT" + (", nick STRING" if table == "uk" else "")
        spark.sql(f"CREATE TABLE lake.{ns}.{table} ({cols}) USING iceberg")
    spark.sql(f"INSERT INTO lake.{ns}.uk VALUES ('a', 1, NULL), ('b', 2, 'bee'), ('c', 30, NULL)")
    spark.sql(f"INSERT INTO lake.{ns}.nullable VALUES ('a', 1), ('b', 2)")

    conn = mariadb.connect()
    try:
        diff = verify_table(conn, spark, f"{database}.uk", f"lake.{ns}.uk")
        assert diff.key is not None and diff.key.columns == ("code",), diff.key  # by_nick allows NULL
        assert diff.different == [("c",)] and diff.column_counts == {"v": 1}, diff.describe()
        assert "compared on unique key `by_code` (code)" in diff.describe()
        with pytest.raises(MissingKeyError) as err:
            verify_table(conn, spark, f"{database}.nullable", f"lake.{ns}.nullable")
        message = str(err.value)
        assert (
            f"{database}.nullable has no primary key and no unique key whose columns are all NOT NULL"
            in message
        )
        assert "`by_code` (code) allows NULL in code" in message and "--key" in message
        assert verify_table(conn, spark, f"{database}.nullable", f"lake.{ns}.nullable", ["code"]).equal
    finally:
        conn.close()

    monkeypatch.setenv("VERIFY_PASSWORD", mariadb.root_password)
    tables = f"{database}.uk=lake.{ns}.uk,{database}.nullable=lake.{ns}.nullable"
    assert cli.main(_argv(mariadb, spark_warehouse, tables)) == 1
    err_text = capsys.readouterr().err
    assert f"{database}.nullable has no primary key" in err_text and "--key col[,col]" in err_text, err_text
    assert cli.main(_argv(mariadb, spark_warehouse, tables, "--key", f"{database}.nullable=code")) == 1
    out = capsys.readouterr().out
    assert f"{database}.nullable == lake.{ns}.nullable: 2 rows, all equal" in out, out
    assert "  compared on --key (code)" in out, out
    assert f"{database}.uk != lake.{ns}.uk" in out and "compared on unique key `by_code` (code)" in out, out
    assert re.search(r"^\s+v\s+source 3\s+lake 30$", out, re.M), out
    # one --key for every table: v is unique in both
    assert cli.main(_argv(mariadb, spark_warehouse, tables, "--key", "v")) == 1
    out = capsys.readouterr().out
    assert "missing in lake: 1 key(s): (3,)" in out and "only in lake: 1 key(s): (30,)" in out, out


class Writer(threading.Thread):
    """Keeps writing ``shop.orders`` (updates, inserts, deletes; never the protected key) until told
    to stop, at most ``bound`` seconds."""

    def __init__(self, mariadb: MariaDbServer, protected: int, bound: float = 240.0) -> None:
        super().__init__(daemon=True, name="verify-writer")
        self.mariadb = mariadb
        self.protected = protected
        self.bound = bound
        self.stop = threading.Event()
        self.writes = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(7)
        conn = self.mariadb.connect()
        deadline = time.monotonic() + self.bound
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT MAX(id) FROM shop.orders")
                next_id = int(cur.fetchone()[0]) + 1000
                while not self.stop.is_set() and time.monotonic() < deadline:
                    cur.execute(
                        "SELECT id FROM shop.orders WHERE id <> %s ORDER BY RAND() LIMIT 1", (self.protected,)
                    )
                    (victim,) = cur.fetchone()
                    kind = rng.random()
                    if kind < 0.6:
                        cur.execute("UPDATE shop.orders SET quantity = quantity + 1, note = %s WHERE id = %s",
                                    (f"w{self.writes}", victim))  # fmt: skip
                    elif kind < 0.85:
                        cur.execute(
                            "INSERT INTO shop.orders (id, customer_id, sku, quantity, amount, status, note, "
                            "created, ship_window) SELECT %s, customer_id, sku, quantity, amount, status, "
                            "'new', created, ship_window FROM shop.orders WHERE id = %s",
                            (next_id, victim),
                        )
                        next_id += 1
                    else:
                        cur.execute("DELETE FROM shop.orders WHERE id = %s", (victim,))
                    self.writes += 1
                    time.sleep(0.005)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            conn.close()


def test_verify_at_cursor_while_the_source_is_written(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    shop.changes(150)
    ns = f"verify_{uuid.uuid4().hex[:8]}"
    _load(shop, spark_warehouse, ns)
    (protected,) = mariadb.execute("SELECT MIN(id) FROM shop.orders")[0]
    monkeypatch.setenv("VERIFY_PASSWORD", mariadb.root_password)
    argv = _argv(mariadb, spark_warehouse, f"shop.orders=lake.{ns}.orders,shop.customers=lake.{ns}.customers")
    at = [*argv, "--at-cursor"]

    writer = Writer(mariadb, protected)
    writer.start()
    try:
        deadline = time.monotonic() + 60
        while writer.writes < 30 and time.monotonic() < deadline and writer.error is None:
            time.sleep(0.1)
        assert writer.writes >= 30, writer.error

        assert cli.main(argv) == 1  # the live source against the lake of the last run
        out = capsys.readouterr().out
        assert f"shop.orders != lake.{ns}.orders" in out, out

        assert cli.main(at) == 0, capsys.readouterr()
        out = capsys.readouterr().out
        assert f"shop.orders == lake.{ns}.orders: " in out, out
        assert f"shop.customers == lake.{ns}.customers: " in out, out
        found = re.search(
            r"shop\.orders == .*\n  at binlog position (\S+:\d+) \(source, consistent snapshot\); lake up to "
            rf"(\S+:\d+) \(destination verify-{ns}\) \(Iceberg snapshot \d+\); changed after the lake's "
            r"position: (\d+) key\(s\), not compared",
            out,
        )
        assert found, out
        assert int(found.group(3)) > 0 and found.group(1) != found.group(2), out

        # a lake row that is really wrong is found while the writer runs
        spark.sql(f"UPDATE lake.{ns}.orders SET amount = amount + 7 WHERE id = {protected}")
        assert cli.main(at) == 1
        out = capsys.readouterr().out
        assert f"shop.orders != lake.{ns}.orders" in out, out
        assert f"different values: 1 key(s): ({protected},)" in out, out
        assert "missing in lake" not in out and "only in lake" not in out, out
        assert re.search(r"^\s+amount\s+source \S+\s+lake \S+$", out, re.M), out
        assert f"shop.customers == lake.{ns}.customers: " in out, out
        assert writer.error is None and writer.is_alive()
    finally:
        writer.stop.set()
        writer.join(timeout=30)
    assert writer.error is None, writer.error


def test_verify_refuses_a_lake_nobody_named_and_says_where_a_table_is_missing(
    shop: Shop, conns: dict[str, str], spark: Any, spark_warehouse: str, mariadb: MariaDbServer,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:  # fmt: skip
    """Without --warehouse (nor a catalog in --conf, nor $BINLOG_CDC_WAREHOUSE) verify refuses,
    naming the option and the operator's default, and creates nothing (it made a default warehouse
    and reported every key "missing in lake"); a warehouse directory that does not exist is refused
    the same way; a lake table that does not exist is reported as such, with where it looked."""
    monkeypatch.setenv("VERIFY_PASSWORD", mariadb.root_password)
    monkeypatch.delenv("BINLOG_CDC_WAREHOUSE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    default = tmp_path / "data" / "airflow-provider-binlog" / "warehouse"
    argv = _argv(mariadb, "unused", "shop.orders=lake.shop.orders")
    at = argv.index("--warehouse")
    del argv[at : at + 2]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert (
        "binlog-cdc verify: error: binlog-cdc verify needs to know where the lake is: give --warehouse DIR"
        in err
    )
    assert f"else {default}, where it does not exist" in err and "nothing was read or created" in err, err
    assert not (tmp_path / "data").exists()

    missing = tmp_path / "no-such-warehouse"
    assert cli.main(_argv(mariadb, str(missing), "shop.orders=lake.shop.orders")) == 1
    err = capsys.readouterr().err
    assert f"--warehouse {missing}: no such directory" in err and "nothing was created" in err, err
    monkeypatch.setenv("BINLOG_CDC_WAREHOUSE", str(missing))
    assert cli.main(argv) == 1
    assert f"$BINLOG_CDC_WAREHOUSE {missing}: no such directory" in capsys.readouterr().err
    assert not missing.exists()
    monkeypatch.delenv("BINLOG_CDC_WAREHOUSE")

    shop.changes(5)
    ns = f"nowhere_{uuid.uuid4().hex[:8]}"
    assert cli.main(_argv(mariadb, spark_warehouse, f"shop.orders=lake.{ns}.orders")) == 1
    out = capsys.readouterr().out
    (count,), *_ = mariadb.execute("SELECT count(*) FROM shop.orders")
    assert (
        f"shop.orders != lake.{ns}.orders: the lake table lake.{ns}.orders does not exist (looked in "
        f"catalog lake, type hadoop, warehouse {spark_warehouse}); {count} source rows"
    ) in out, out
    assert "missing in lake" not in out
