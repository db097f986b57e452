"""``lake/spark/java_classes`` and ``lake/spark/table_schema`` against the real JVM: a class or static member
is resolved once per JVM and then costs one py4j call per use; an Iceberg schema read as one JSON
string says what walking it field by field says."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.spark import java_classes
from airflow_provider_binlog.lake.spark.table_schema import Field, columns_of, parse


@pytest.fixture
def sent(spark: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The commands py4j sends from now on, but its deletes of JVM objects Python dropped (``m``
    commands: garbage collection sends them whenever it runs)."""
    client = spark._jvm._gateway_client
    commands: list[str] = []
    original = client.send_command

    def record(command: str, *args: Any, **kwargs: Any) -> Any:
        if not command.startswith("m\n"):
            commands.append(command)
        return original(command, *args, **kwargs)

    monkeypatch.setattr(client, "send_command", record)
    yield commands


def test_a_static_member_is_resolved_once(spark: Any, sent: list[str]) -> None:
    name, member = "java.lang.Integer", "toHexString"
    java_classes._CACHE.pop((id(spark._jvm._gateway_client), name, member), None)
    first = java_classes.java_static(spark, name, member)
    resolved = len(sent)
    assert resolved == 1  # the member's lookup; the class itself costs none
    assert java_classes.java_static(spark, name, member) is first
    assert len(sent) == resolved
    assert first(255) == "ff"
    assert len(sent) == resolved + 1
    # constants and constructors the same way
    assert java_classes.java_static(spark, "java.lang.Integer", "MAX_VALUE") == 2**31 - 1
    made = java_classes.java_class(spark, "java.util.ArrayList")()
    made.add("x")
    assert int(made.size()) == 1


def test_the_path_spelled_out_costs_a_call_per_name(spark: Any, sent: list[str]) -> None:
    """Why the module exists: the same member reached through the JVM view's packages."""
    spark._jvm.java.lang.Integer.toHexString(255)
    assert len(sent) >= 4  # java, java.lang, java.lang.Integer, the member, the call


def test_a_cache_entry_of_another_client_is_not_used() -> None:
    class Client:
        pass

    old, new = Client(), Client()
    made: list[str] = []
    assert java_classes._cached(old, "a.B", "m", lambda: made.append("old") or "from old") == "from old"
    assert java_classes._cached(old, "a.B", "m", lambda: made.append("again") or "again") == "from old"
    # a new client that reuses the old one's id (the old one gone) does not get the old member
    java_classes._CACHE[(id(new), "a.B", "m")] = java_classes._CACHE.pop((id(old), "a.B", "m"))
    assert java_classes._cached(new, "a.B", "m", lambda: made.append("new") or "from new") == "from new"
    assert made == ["old", "new"]
    java_classes._CACHE.pop((id(new), "a.B", "m"))


def test_commit_properties_find_icebergs_thread_local_once_and_each_thread_commits_its_own(
    spark: Any, sent: list[str]
) -> None:
    name = f"lake.jc.t_{uuid.uuid4().hex[:8]}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.jc")
    spark.sql(f"CREATE TABLE {name} (id bigint) USING iceberg")
    holder = "org.apache.iceberg.spark.CommitMetadata"
    local = java_classes.java_private_static(spark, holder, "COMMIT_PROPERTIES")
    before = len(sent)
    assert java_classes.java_private_static(spark, holder, "COMMIT_PROPERTIES") is local
    assert len(sent) == before  # read once per JVM
    assert "ThreadLocal" in str(local.getClass().getName())

    def insert(value: int) -> None:
        with commits.commit_properties(spark, {"binlog-cdc.test": f"thread {value}"}):
            spark.sql(f"INSERT INTO {name} VALUES ({value})")

    for value in (1, 2):  # each from its own thread: py4j gives each its own JVM thread
        thread = threading.Thread(target=insert, args=(value,))
        thread.start()
        thread.join()
    insert(3)
    spark.sql(f"INSERT INTO {name} VALUES (4)")  # outside the block: no property
    summaries = spark.sql(f"SELECT summary FROM {name}.snapshots ORDER BY committed_at").collect()
    assert [r[0].get("binlog-cdc.test") for r in summaries] == ["thread 1", "thread 2", "thread 3", None]


def _walked(schema: Any) -> list[Field]:
    columns = schema.columns()
    out = []
    for i in range(int(columns.size())):
        f = columns.get(i)
        kind = f.type()
        out.append(
            Field(
                int(f.fieldId()),
                str(f.name()),
                str(kind) if kind.isPrimitiveType() else str(kind.typeId()).lower(),
                bool(f.isOptional()),
            )
        )
    return out


def test_an_iceberg_schema_read_as_json_equals_the_walk(spark: Any) -> None:
    name = f"lake.schemas.t_{uuid.uuid4().hex[:8]}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.schemas")
    spark.sql(
        f"CREATE TABLE {name} (id bigint NOT NULL, `Mixed Case` string, `a.b` int, d decimal(10, 2), "
        "ts timestamp, tn timestamp_ntz, dt date, b binary, f float, g double, ok boolean, "
        "s struct<x: int, y: string>, l array<bigint>, m map<string, int>) USING iceberg "
        "TBLPROPERTIES ('format-version'='3')"
    )
    table = commits.load_iceberg_table(spark, name)
    assert table is not None
    read = columns_of(spark, table.schema())
    assert list(read.fields) == _walked(table.schema())
    assert [f.type for f in read.fields] == [
        "long", "string", "int", "decimal(10, 2)", "timestamptz", "timestamp", "date", "binary",
        "float", "double", "boolean", "struct", "list", "map",
    ]  # fmt: skip
    assert not read.fields[0].optional and read.fields[1].optional
    # found as Spark resolves a column: case-insensitively, a dotted name as one top-level column
    for wanted in ("mixed case", "MIXED CASE", "a.b", "ID"):
        found = read.find(wanted)
        jvm_found = table.schema().caseInsensitiveFindField(wanted)
        assert found is not None and found.id == int(jvm_found.fieldId())
    assert read.find("x") is None and read.find("s.x") is None  # nested fields are not columns here
    assert read.find("nope") is None


def test_a_schema_parsed_from_its_json() -> None:
    text = (
        '{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"k","required":true,"type":"long"},'
        '{"id":2,"name":"v","required":false,"type":{"type":"list","element-id":3,'
        '"element":"int","element-required":false}}]}'
    )
    assert parse(text).fields == (Field(1, "k", "long", False), Field(2, "v", "list", True))
