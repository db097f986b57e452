"""The drain loop's exactly-once protocol with a fake instance and a fake merger (pure, no services).

A crash (an exception) at every step -- after a batch was taken, in the commit, between the commit
and the acks, between two acks, around the hand-over -- and what was acked then: only batches whose
commit had returned, in batch order, a prefix of what was taken; a failed commit acks nothing. A
rerun from the cursor then commits and acks the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_provider_binlog.drain import loop as loop_module
from airflow_provider_binlog.drain.loop import ChunkLoop, Limits
from airflow_provider_binlog.drain.reconcile import reconcile

# ------------------------------------------------------------------------------------------ fakes


@dataclass(frozen=True)
class Entry:
    batch: int
    index: int

    @property
    def end_position(self) -> tuple[int, int]:
        return (self.batch, self.index)


@dataclass(frozen=True)
class Batch:
    id: int | None
    entries: tuple[Entry, ...] = ()
    size: int = 0


class Log:
    """What happened, in order, across both threads."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.lock = threading.Lock()

    def add(self, *event: Any) -> None:
        with self.lock:
            self.events.append(event)

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] == kind]


class FakeStore:
    def __init__(self, log: Log) -> None:
        self.log = log
        self.released: list[int] = []

    def release(self, batch_id: int) -> None:
        self.released.append(batch_id)
        self.log.add("release", batch_id)

    def bound(self, max_entries: int, max_bytes: int) -> None:
        self.log.add("bound", max_entries, max_bytes)


class FakeInstance:
    """Hands out ``batches`` batches of ``per_batch`` entries after the cursor, then empty batches;
    acks must come for the oldest outstanding batch (canal's rule)."""

    def __init__(self, log: Log, first: int, last: int, per_batch: int = 3) -> None:
        self.log = log
        self.store = FakeStore(log)
        self.queue = [
            Batch(i, tuple(Entry(i, k) for k in range(per_batch)), 100 * per_batch)
            for i in range(first, last + 1)
        ]
        self.outstanding: list[int] = []
        self.acked: list[int] = []

    def get_without_ack(self, batch_size: int = 1000, timeout: float | None = 1.0) -> Batch:
        if not self.queue:
            return Batch(None)
        batch = self.queue.pop(0)
        self.outstanding.append(batch.id)  # type: ignore[arg-type]
        self.log.add("take", batch.id)
        return batch

    def ack(self, batch_id: int) -> None:
        if not self.outstanding or self.outstanding[0] != batch_id:
            raise AssertionError(
                f"batch {batch_id} is not the oldest outstanding batch {self.outstanding[:1]}"
            )
        self.outstanding.pop(0)
        self.acked.append(batch_id)
        self.log.add("ack", batch_id)

    def ack_many(self, batch_ids: Sequence[int]) -> None:
        for batch_id in batch_ids:
            self.ack(batch_id)

    @property
    def done(self) -> bool:
        return not self.queue and not self.outstanding

    @property
    def cursor(self) -> Any:
        return None

    @property
    def lag_seconds(self) -> float | None:
        return None


@dataclass
class Counts:
    changes: int

    def as_dict(self) -> dict[str, int]:
        return {"changes": self.changes, "commits": 1}


@dataclass
class FakeMerger:
    """Folds entries (one image per entry), takes chunks, commits them in the committer thread."""

    log: Log
    fail_commit: int | None = None  # the n-th commit raises
    held_entries: list[Entry] = field(default_factory=list)
    commits: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def held(self) -> int:
        return len(self.held_entries)

    def add_many(self, entries: Sequence[Entry], target_for: Any) -> int:
        self.held_entries.extend(entries)
        self.log.add("fold", entries[0].batch)
        return len(entries)

    def take(self) -> list[Entry]:
        chunk, self.held_entries = self.held_entries, []
        self.log.add("take_chunk", sorted({e.batch for e in chunk}))
        return chunk

    def commit(self, chunk: list[Entry], end: Any) -> dict[str, Counts]:
        self.commits += 1
        batches = sorted({e.batch for e in chunk})
        self.log.add("commit_start", batches)
        if self.commits == self.fail_commit:
            self.log.add("commit_failed", batches)
            raise RuntimeError("MERGE failed")
        self.log.add("commit_done", batches)
        return {"lake.t": Counts(len(chunk))}

    def committed(self) -> dict[str, Any]:
        return {}


class Crash(Exception):
    """The injected failure."""


def failpoints(monkeypatch: pytest.MonkeyPatch, log: Log, crash_at: tuple[str, int] | None) -> None:
    """Replace the loop's failpoints: record each hit, raise :class:`Crash` at the n-th hit of one."""
    hits: dict[str, int] = {}

    def failpoint(name: str) -> None:
        hits[name] = hits.get(name, 0) + 1
        log.add("failpoint", name)
        if crash_at is not None and crash_at == (name, hits[name]):
            raise Crash(f"{name}#{hits[name]}")

    monkeypatch.setattr(loop_module, "failpoint", failpoint)


@pytest.fixture
def committer() -> Iterator[ThreadPoolExecutor]:
    pool = ThreadPoolExecutor(1, thread_name_prefix="test-commit")
    yield pool
    pool.shutdown(wait=True)


def drain(
    instance: FakeInstance, merger: FakeMerger, committer: ThreadPoolExecutor, max_rows: int = 6
) -> ChunkLoop:
    ready: Future[Any] = committer.submit(lambda: merger)
    loop = ChunkLoop(
        "test", instance, ready, committer, lambda s, t: "lake.t",
        Limits(batch_size=3, max_rows_per_commit=max_rows, progress_interval=3600.0),
        lambda level, line: None,
    )  # fmt: skip
    loop.run()
    return loop


# ------------------------------------------------------------------------------------ invariants


def check_acks(log: Log, instance: FakeInstance) -> None:
    """Acks are a prefix of the taken batches, in order, each after the commit holding it returned
    (and no batch of a failed commit is acked)."""
    taken = [e[1] for e in log.of("take")]
    assert instance.acked == taken[: len(instance.acked)], (instance.acked, taken)
    for i, event in enumerate(log.events):
        if event[0] != "ack":
            continue
        batch = event[1]
        done_before = [e for e in log.events[:i] if e[0] == "commit_done" and batch in e[1]]
        assert done_before, f"batch {batch} was acked before a commit holding it returned"
    failed = {b for e in log.of("commit_failed") for b in e[1]}
    assert not failed & set(instance.acked), (failed, instance.acked)


def test_a_run_without_crash_commits_and_acks_every_batch_in_order(
    monkeypatch: pytest.MonkeyPatch, committer: ThreadPoolExecutor
) -> None:
    log = Log()
    failpoints(monkeypatch, log, None)
    instance, merger = FakeInstance(log, 1, 10), FakeMerger(log)
    loop = drain(instance, merger, committer)
    assert instance.acked == list(range(1, 11))
    assert instance.store.released == list(range(1, 11))  # folded, then released, each once
    check_acks(log, instance)
    assert loop.changes == 30 and loop.batches == 10 and loop.commits == merger.commits >= 2
    assert loop.totals == {"lake.t": {"changes": 30, "commits": loop.commits}}
    # the failpoints in their places: a chunk is committed, then its batches acked one by one
    names = [e[1] for e in log.of("failpoint")]
    assert names.count("drain") == 10 and names.count("ack") == 10
    assert (
        names.count("before_commit")
        == names.count("after_commit")
        == names.count("after_ack")
        == loop.commits
    )


CRASHES = [
    ("drain", 1),  # the first batch taken, nothing committed
    ("drain", 5),  # a batch taken while an earlier chunk is committed or acked
    ("before_commit", 1),
    ("before_commit", 2),
    ("after_commit", 1),  # the lake holds the chunk, nothing of it acked
    ("after_commit", 2),
    ("ack", 1),  # before the first ack
    ("ack", 2),  # between two acks of one chunk
    ("ack", 4),
    ("after_ack", 1),
]


@pytest.mark.parametrize(("name", "nth"), CRASHES, ids=[f"{n}#{k}" for n, k in CRASHES])
def test_a_crash_at_every_step_acks_only_committed_batches_in_order_and_a_rerun_finishes(
    monkeypatch: pytest.MonkeyPatch, committer: ThreadPoolExecutor, name: str, nth: int
) -> None:
    log = Log()
    failpoints(monkeypatch, log, (name, nth))
    instance, merger = FakeInstance(log, 1, 10), FakeMerger(log)
    with pytest.raises(Crash):
        drain(instance, merger, committer)
    committer.shutdown(wait=True)  # as the drain does: no commit left running
    check_acks(log, instance)
    hits = [e[1] for e in log.of("failpoint")]
    if name == "ack":
        assert len(instance.acked) == nth - 1  # the acks before the crash, none after
    if name in ("drain", "before_commit", "after_commit"):
        # nothing is acked after the crash point: every ack came before the failing hit
        crash_index = [i for i, e in enumerate(log.events) if e == ("failpoint", name)][nth - 1]
        assert all(i < crash_index for i, e in enumerate(log.events) if e[0] == "ack")
    if name == "after_commit":
        committed = {b for e in log.of("commit_done") for b in e[1]}
        assert committed - set(instance.acked), "the chunk committed before the crash was acked"
    assert hits.count(name) == nth

    # the rerun starts at the cursor: every batch not acked is read again and acked
    cursor = instance.acked[-1] if instance.acked else 0
    rerun_log = Log()
    failpoints(monkeypatch, rerun_log, None)
    again = FakeInstance(rerun_log, cursor + 1, 10)
    with ThreadPoolExecutor(1) as pool:
        drain(again, FakeMerger(rerun_log), pool)
    check_acks(rerun_log, again)
    assert instance.acked + again.acked == list(range(1, 11))


@pytest.mark.parametrize("failing", [1, 2])
def test_a_failed_commit_acks_nothing_of_its_chunk(
    monkeypatch: pytest.MonkeyPatch, committer: ThreadPoolExecutor, failing: int
) -> None:
    log = Log()
    failpoints(monkeypatch, log, None)
    instance, merger = FakeInstance(log, 1, 10), FakeMerger(log, fail_commit=failing)
    with pytest.raises(RuntimeError, match="MERGE failed"):
        drain(instance, merger, committer)
    check_acks(log, instance)
    (failed,) = log.of("commit_failed")
    assert not set(failed[1]) & set(instance.acked)
    done = {b for e in log.of("commit_done") for b in e[1]}
    assert set(instance.acked) == done  # the earlier commits' batches, all acked


def test_batches_taken_while_spark_starts_wait_aside_then_fold_in_order(
    monkeypatch: pytest.MonkeyPatch, committer: ThreadPoolExecutor
) -> None:
    log = Log()
    failpoints(monkeypatch, log, None)
    gate = threading.Event()
    instance, merger = FakeInstance(log, 1, 4), FakeMerger(log)

    def start() -> FakeMerger:  # Spark's start
        assert gate.wait(10)
        return merger

    starting = committer.submit(start)
    loop = ChunkLoop(
        "test", instance, starting, committer, lambda s, t: "lake.t",
        Limits(batch_size=3, max_rows_per_commit=1000, progress_interval=3600.0), lambda level, line: None,
    )  # fmt: skip
    for _ in range(3):  # three batches taken before Spark is up: kept aside, not folded or released
        batch = instance.get_without_ack()
        loop.pending.append(batch.id)
        loop._feed(batch.id, batch.entries)
    assert loop.merger is None and not log.of("fold") and not instance.store.released
    assert not log.of("bound")  # the store's whole capacity reads ahead while Spark starts
    gate.set()
    loop._feed(wait_for_spark=True)
    assert [e[1] for e in log.of("fold")] == [1, 2, 3] and instance.store.released == [1, 2, 3]
    # then, once, a few batches' read-ahead: after what waited for Spark was folded and released
    assert log.of("bound") == [("bound", 24, 1024 * 1024 * 1024 // 16 + 16 * 1024 * 1024)]
    kinds = [e[0] for e in log.events if e[0] in ("bound", "release")]
    assert kinds == ["release", "release", "release", "bound"]
    assert loop.rows == 9 and loop.pending == [1, 2, 3]
    loop.run()  # the loop goes on from there
    assert instance.acked == [1, 2, 3, 4]
    check_acks(log, instance)
    assert len(log.of("bound")) == 1


def test_an_idle_committer_takes_a_tenth_of_max_rows(
    monkeypatch: pytest.MonkeyPatch, committer: ThreadPoolExecutor
) -> None:
    """With Spark idle, a chunk is handed over once it holds a tenth of max_rows_per_commit."""
    log = Log()
    failpoints(monkeypatch, log, None)
    instance, merger = FakeInstance(log, 1, 20), FakeMerger(log)
    drain(instance, merger, committer, max_rows=30)  # a tenth: 3 images = one batch
    first = log.of("take_chunk")[0][1]
    assert len(first) <= 2, first  # not grown to max_rows (10 batches)
    assert instance.acked == list(range(1, 21))


# ------------------------------------------------------------------------------------ reconcile


@dataclass(frozen=True)
class Pos:
    binlog_position: Any


@dataclass(frozen=True)
class Range:
    start: Pos | None
    end: Pos | None


@dataclass(frozen=True)
class Mark:
    position: Any = None
    end_position: Any = None


def test_reconcile_names_the_targets_that_hold_each_stale_batch() -> None:
    stale = {7: Range(Pos(10), Pos(20)), 5: Range(Pos(1), Pos(9)), 8: Range(None, None)}
    marks = {
        "lake.a": Mark(position=20),  # applied the batch's last row event
        "lake.b": Mark(end_position=21),  # completed a chunk ending just past it
        "lake.c": Mark(end_position=20, position=19),  # stopped before its end
        "lake.d": None,  # never committed
    }
    out = reconcile(stale, marks)
    assert [s.batch_id for s in out] == [5, 7, 8]
    assert out[0].holders == ("lake.a", "lake.b", "lake.c")
    assert out[1].holders == ("lake.a", "lake.b")
    assert out[2].holders == ()
    assert "already committed to lake.a, lake.b" in out[1].describe()
    assert out[1].describe().startswith("batch 7 (10..20) of an earlier attempt")
    assert "was not committed" in out[2].describe()
