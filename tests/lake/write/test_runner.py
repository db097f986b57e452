"""Unit tests of :class:`airflow_provider_binlog.lake.write.runner.TargetRunner`'s pool for per-table reads
(pure orchestration: the work is Python callables and the session a stand-in; the real reads run in
the lake and drain suites, e.g. test_shards for the writers check)."""

from __future__ import annotations

import threading
from typing import Any
from unittest import mock

import pytest

from airflow_provider_binlog.lake.write.runner import TargetRunner

WAIT = 30.0  # seconds; only reached when the behaviour under test is missing


@pytest.fixture(autouse=True)
def activated(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The sessions made active on the pool's threads (no JVM here)."""
    calls: list[Any] = []
    monkeypatch.setattr("airflow_provider_binlog.lake.write.runner.activate", calls.append)
    return calls


def runner(parallel: int, spark: Any = None) -> TargetRunner:
    spark = spark if spark is not None else mock.MagicMock(name="spark")
    return TargetRunner(spark, parallel, committed=lambda target, mark: None)


def test_map_runs_items_side_by_side_and_keeps_their_order() -> None:
    """Every call waits at a barrier of ``parallel`` parties: one at a time, it would break."""
    barrier = threading.Barrier(3, timeout=WAIT)
    threads: set[int] = set()

    def read(n: int) -> int:
        threads.add(threading.get_ident())
        barrier.wait()
        return n * n

    r = runner(3)
    try:
        assert r.map(read, range(6)) == [0, 1, 4, 9, 16, 25]
    finally:
        r.close()
    assert threading.get_ident() not in threads and len(threads) == 3


def test_map_makes_the_session_active_on_its_threads(activated: list[Any]) -> None:
    spark = mock.MagicMock(name="spark")
    r = runner(2, spark)
    try:
        r.map(lambda n: n, range(4))
    finally:
        r.close()
    assert activated == [spark] * 4


def test_map_waits_for_every_item_then_raises_the_first_failure_in_order() -> None:
    done: list[int] = []
    late = threading.Event()

    def read(n: int) -> int:
        if n == 1:
            assert late.wait(WAIT)  # fails after item 2 did
            raise ValueError("table 1 refused")
        if n == 2:
            late.set()
            raise ValueError("table 2 refused")
        done.append(n)
        return n

    r = runner(4)
    try:
        with pytest.raises(ValueError, match="table 1 refused"):
            r.map(read, range(5))
    finally:
        r.close()
    assert sorted(done) == [0, 3, 4], "the items after a failure were still read"


@pytest.mark.parametrize(("parallel", "items"), [(1, 3), (4, 1), (4, 0)])
def test_map_one_at_a_time_runs_on_the_calling_thread(parallel: int, items: int) -> None:
    threads: set[int] = set()

    def read(n: int) -> int:
        threads.add(threading.get_ident())
        return -n

    r = runner(parallel)
    assert r.map(read, range(items)) == [-n for n in range(items)]
    assert threads <= {threading.get_ident()}
    assert r._pool is None, "no pool was started"


def test_run_as_prepared_starts_a_target_before_the_next_is_prepared() -> None:
    """The second target is prepared only once the first one's statement runs on the pool."""
    first_runs = threading.Event()
    ran: list[str] = []

    def prepared() -> Any:
        yield "a", [(lambda: (ran.append("a"), first_runs.set()), None)]
        assert first_runs.wait(WAIT), "the first target did not start while the next was prepared"
        yield "b", [(lambda: ran.append("b"), None)]
        yield "c", []  # nothing to run

    r = runner(2)
    try:
        r.run_as_prepared(prepared())
    finally:
        r.close()
    assert sorted(ran) == ["a", "b"]


def test_run_as_prepared_lets_started_targets_end_then_raises_the_preparing_failure() -> None:
    release = threading.Event()
    ended: list[str] = []

    def slow() -> None:
        assert release.wait(WAIT)
        ended.append("a")

    def refused() -> None:
        raise ValueError("table b refused")

    def prepared() -> Any:
        yield "a", [(slow, None)]
        yield "b", [(refused, None)]
        release.set()
        raise RuntimeError("table c: a type mapping error")

    r = runner(2)
    try:
        with pytest.raises(RuntimeError, match="type mapping") as caught:
            r.run_as_prepared(prepared())
    finally:
        r.close()
    assert ended == ["a"], "a target started before the failure did not run to its end"
    assert any("table b refused" in note for note in caught.value.__notes__)


def test_run_as_prepared_with_one_thread_prepares_everything_first() -> None:
    events: list[str] = []

    def prepared() -> Any:
        for name in ("a", "b"):
            events.append(f"prepare {name}")
            yield name, [(lambda name=name: events.append(f"run {name}"), None)]

    r = runner(1)
    r.run_as_prepared(prepared())
    assert events == ["prepare a", "prepare b", "run a", "run b"]
    assert r._pool is None
