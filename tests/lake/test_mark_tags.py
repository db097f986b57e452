"""A destination's mark kept by an Iceberg tag (``lake/commits.py``'s module docstring, ``MarkReader``)
against real local Spark + Iceberg: every marked commit moves the tag (in the same transaction when
the driver commits); the mark survives full expiry behind other writers' commits; a table with an
ancestry mark and no tag gets the tag at its next read; a table rolled back to before its tag stops,
as does an append-only table with rows and no mark, or whose insert Spark committed may have expired
with the snapshots around it."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import OrderKey
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.spark import jvm_helpers

pytestmark = pytest.mark.spark

DEST = "tags é"


def _table(spark: Any) -> str:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.tags")
    name = f"lake.tags.t_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE TABLE {name} (id bigint) USING iceberg TBLPROPERTIES ('format-version' = '2')")
    return name


def _props(n: int) -> dict[str, str]:
    return commits.mark_properties(DEST, OrderKey(3, n, -1, 0), BinlogPosition("b.000003", n), None, None)


def _commit(spark: Any, name: str, n: int) -> None:
    """A marked commit as the merge makes one through Spark (the tag moved after it)."""
    commits.commit(spark, name, _props(n), lambda: spark.sql(f"INSERT INTO {name} VALUES ({n})"))


def _foreign(spark: Any, name: str, value: int) -> None:
    spark.sql(f"INSERT INTO {name} VALUES ({value})")  # another writer: no mark


def _expire_all(spark: Any, name: str) -> None:
    table = name.split(".", 1)[1]
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() + 1))
    spark.sql("SET spark.sql.session.timeZone = UTC")
    spark.sql(
        f"CALL lake.system.expire_snapshots(table => '{table}', older_than => TIMESTAMP '{now}', "
        "retain_last => 1)"
    )


def remove_orphans(spark: Any, name: str) -> None:
    """``remove_orphan_files`` of every file no snapshot holds, however new (the procedure refuses
    less than 24 hours; its Action API does not)."""
    actions = spark._jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    table = commits.load_iceberg_table(spark, name)
    actions.deleteOrphanFiles(table).olderThan(int(time.time() * 1000) + 1000).execute()


def _tagged(spark: Any, name: str) -> int | None:
    table = commits.load_iceberg_table(spark, name)
    table.refresh()
    ref = table.refs().get(commits.mark_tag(DEST))
    return None if ref is None else int(ref.snapshotId())


def _marks(spark: Any, append_only: bool = False) -> commits.Marks:
    return commits.Marks(spark, DEST, found=lambda _t: None, append_only=lambda _t: append_only)


def test_the_tag_follows_each_commit_and_keeps_the_mark_through_full_expiry(spark: Any) -> None:
    assert commits.mark_tag("shop") == "binlog-cdc-mark-shop" == commits.MARK_TAG_PREFIX + "shop"
    name = _table(spark)
    _commit(spark, name, 100)
    first = commits.load_iceberg_table(spark, name).currentSnapshot().snapshotId()
    assert _tagged(spark, name) == first
    _commit(spark, name, 200)
    ours = int(commits.load_iceberg_table(spark, name).currentSnapshot().snapshotId())
    assert _tagged(spark, name) == ours
    for v in (1, 2, 3):  # three commits of other writers, then every snapshot but the newest expired
        _foreign(spark, name, v)
    _expire_all(spark, name)
    table = commits.load_iceberg_table(spark, name)
    walk = jvm_helpers.mark_reader(spark, table).mark  # the ancestry alone: expired with the snapshots
    assert walk(table, DEST, commits.DESTINATION, commits.ORDER_KEY, 10_000) is None
    assert commits.mark_of(spark, table, DEST, max_depth=10_000) is not None
    state = commits.MarkState.read(spark, table, DEST)
    assert state.state == "gap" and state.mark is not None and not state.intact
    assert state.mark.order_key == OrderKey(3, 200, -1, 0) and state.mark.snapshot_id == ours
    assert _marks(spark, append_only=True).get(name) == state.mark  # no stop: the tag holds it
    # compaction and manifest rewrites and orphan removal keep it too
    short = name.split(".", 1)[1]
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{short}', options => map('min-input-files', '1'))"
    )
    spark.sql(f"CALL lake.system.rewrite_manifests(table => '{short}')")
    _expire_all(spark, name)
    remove_orphans(spark, name)
    mark = commits.read_mark(spark, name, DEST)
    assert mark is not None and mark.order_key == OrderKey(3, 200, -1, 0)
    assert sorted(r[0] for r in spark.sql(f"SELECT id FROM {name}").collect()) == [1, 2, 3, 100, 200]


def test_a_table_with_an_ancestry_mark_and_no_tag_gets_the_tag_once(spark: Any, caplog: Any) -> None:
    name = _table(spark)
    with commits.commit_properties(spark, _props(100)):  # as earlier versions committed: no tag
        spark.sql(f"INSERT INTO {name} VALUES (100)")
    ours = int(commits.load_iceberg_table(spark, name).currentSnapshot().snapshotId())
    _foreign(spark, name, 1)
    assert _tagged(spark, name) is None
    assert (
        commits.read_mark(spark, name, DEST) is not None and _tagged(spark, name) is None
    )  # a read writes nothing
    with caplog.at_level("INFO", logger=commits.__name__):
        mark = _marks(spark).get(name)
        assert mark is not None and mark.snapshot_id == ours and _tagged(spark, name) == ours
        _marks(spark).get(name)  # the next run: tagged already
    said = [r.getMessage() for r in caplog.records if "now kept by tag" in r.getMessage()]
    assert len(said) == 1 and commits.mark_tag(DEST) in said[0]


def test_a_mark_newer_than_the_tag_moves_the_tag(spark: Any) -> None:
    """A run killed after Spark committed and before the tag moved: the next read moves it."""
    name = _table(spark)
    _commit(spark, name, 100)
    with commits.commit_properties(spark, _props(200)):
        spark.sql(f"INSERT INTO {name} VALUES (200)")
    ours = int(commits.load_iceberg_table(spark, name).currentSnapshot().snapshotId())
    assert _tagged(spark, name) != ours
    mark = _marks(spark).get(name)
    assert mark is not None and mark.order_key == OrderKey(3, 200, -1, 0) and _tagged(spark, name) == ours


def test_a_table_rolled_back_to_before_its_tag_stops(spark: Any) -> None:
    name = _table(spark)
    _commit(spark, name, 100)
    before = int(commits.load_iceberg_table(spark, name).currentSnapshot().snapshotId())
    _commit(spark, name, 200)
    short = name.split(".", 1)[1]
    spark.sql(f"CALL lake.system.rollback_to_snapshot('{short}', {before})")
    with pytest.raises(commits.MarkDivergedError) as raised:
        _marks(spark).get(name)
    text = str(raised.value)
    assert (
        name.split(".", 1)[1] in text and commits.mark_tag(DEST) in text and "binlog-cdc resnapshot" in text
    )
    # another writer's commits since the rollback: still a stop
    _foreign(spark, name, 1)
    with pytest.raises(commits.MarkDivergedError):
        _marks(spark).get(name)
    # ... and full expiry (the snapshot rolled back to, the tagged one's parent, expires): still a stop
    _expire_all(spark, name)
    with pytest.raises(commits.MarkDivergedError):
        _marks(spark).get(name)
    # a read that writes nothing answers the ancestry's mark (a re-snapshot reads it)
    mark = commits.read_mark(spark, name, DEST)
    assert mark is None or mark.order_key == OrderKey(3, 100, -1, 0)


def test_an_append_only_table_with_rows_and_no_mark_stops_a_keyed_one_goes_on(spark: Any) -> None:
    name = _table(spark)
    _foreign(spark, name, 1)
    with pytest.raises(commits.MarkMissingError) as raised:
        _marks(spark, append_only=True).get(name)
    assert "append-only" in str(raised.value) and "binlog-cdc resnapshot" in str(raised.value)
    assert _marks(spark, append_only=False).get(name) is None
    empty = _table(spark)
    assert _marks(spark, append_only=True).get(empty) is None  # nothing in it: nothing to double


def test_an_append_only_insert_spark_committed_then_expired_unseen_stops(spark: Any) -> None:
    """The window of an insert Spark commits: its intent is recorded first; when expiry hides
    whether it landed, an append-only table stops instead of applying it again."""
    name = _table(spark)
    _commit(spark, name, 100)
    props = _props(200)
    commits.record_intent(spark, name, props)
    with commits.commit_properties(spark, props):  # landed; killed before the tag moved
        spark.sql(f"INSERT INTO {name} VALUES (200)")
    table = commits.load_iceberg_table(spark, name)
    table.refresh()
    assert table.properties().get(commits.INTENT_PREFIX + DEST) == "3:200:-1:0"
    # seen: the ancestry holds it, the tag moves there
    state = commits.MarkState.read(spark, table, DEST)
    assert state.intact and state.mark is not None and state.mark.order_key == OrderKey(3, 200, -1, 0)
    # not landed (intent recorded, no commit), ancestry intact: applied again safely
    other = _table(spark)
    _commit(spark, other, 100)
    commits.record_intent(spark, other, props)
    mark = _marks(spark, append_only=True).get(other)
    assert mark is not None and mark.order_key == OrderKey(3, 100, -1, 0)
    # landed, then two other commits and full expiry: it cannot be seen any more -> a stop
    _foreign(spark, name, 1)
    _foreign(spark, name, 2)
    _expire_all(spark, name)
    with pytest.raises(commits.MarkMissingError) as raised:
        _marks(spark, append_only=True).get(name)
    assert "3:200:-1:0" in str(raised.value) and name.split(".", 1)[1] in str(raised.value)


def test_cost_of_the_tag_move(spark: Any) -> None:
    """Per commit: the tag's move after a Spark commit (one metadata commit), and its check when the
    tag is there already (after a transaction that moved it); printed for the report."""
    name = _table(spark)
    _commit(spark, name, 1)
    n = 20
    moved = checked = 0.0
    for i in range(2, 2 + n):
        with commits.commit_properties(spark, _props(i)):
            spark.sql(f"INSERT INTO {name} VALUES ({i})")
        t0 = time.perf_counter()
        commits.move_tag(spark, name, _props(i))
        t1 = time.perf_counter()
        commits.move_tag(spark, name, _props(i))  # there already: nothing written
        t2 = time.perf_counter()
        moved += t1 - t0
        checked += t2 - t1
        assert _tagged(spark, name) == int(
            commits.load_iceberg_table(spark, name).currentSnapshot().snapshotId()
        )
    print(
        f"tag move after a Spark commit: {moved / n * 1000:.1f} ms; check only: {checked / n * 1000:.1f} ms"
    )
    # the driver's commit: an empty marked append alone, and in a transaction with the tag's move
    table = commits.load_iceberg_table(spark, name)
    plain = tagged = 0.0
    for i in range(100, 100 + n):
        props = _props(i)
        t0 = time.perf_counter()
        append = table.newAppend()
        for key, value in props.items():
            append.set(key, value)
        append.commit()
        t1 = time.perf_counter()

        def build(transaction: Any, props: dict[str, str] = props) -> None:
            op = transaction.newAppend()
            for key, value in props.items():
                op.set(key, value)
            op.commit()

        commits.commit_tagged(spark, table, build, props)
        t2 = time.perf_counter()
        plain += t1 - t0
        tagged += t2 - t1
    assert _tagged(spark, name) == int(table.currentSnapshot().snapshotId())
    print(f"driver's append: {plain / n * 1000:.1f} ms alone, {tagged / n * 1000:.1f} ms with the tag in it")


def test_a_tagged_commit_that_lost_the_race_is_made_again(spark: Any) -> None:
    """Another writer commits between a driver's transaction's start and its commit: Iceberg's own
    retry cannot carry the tag move, so the commit fails having changed nothing and is built again."""
    name = _table(spark)
    _commit(spark, name, 1)
    table = commits.load_iceberg_table(spark, name)
    built: list[int] = []
    props = _props(2)

    def build(transaction: Any) -> None:
        built.append(1)
        append = transaction.newAppend()
        for key, value in props.items():
            append.set(key, value)
        append.commit()
        if len(built) == 1:
            _foreign(spark, name, 7)  # another writer, now

    commits.commit_tagged(spark, table, build, props)
    assert len(built) == 2
    table.refresh()
    current = table.currentSnapshot()
    assert (
        current.summary().get(commits.ORDER_KEY) == "3:2:-1:0"
        and _tagged(spark, name) == current.snapshotId()
    )
    assert sorted(r[0] for r in spark.sql(f"SELECT id FROM {name}").collect()) == [1, 7]
