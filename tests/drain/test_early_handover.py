"""The early hand-over of a chunk (Spark idle) weighs the per-target cost of a MERGE (pure, fakes).

A chunk spread over many targets is not handed over early: each target it holds would be merged
again in the next chunk. Acks stay a prefix of the taken batches, in order, after their commit.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from airflow_provider_binlog.drain.loop import ChunkLoop, Limits, early_rows, targets_held

from .test_loop import Batch, FakeInstance, FakeMerger, Log, check_acks, drain, failpoints


@dataclass
class WideMerger(FakeMerger):
    """Says that every image it holds is of another target (a wide destination)."""

    spread: bool = True

    @property
    def targets(self) -> int:
        return self.held if self.spread else min(self.held, 1)


@pytest.fixture
def committer() -> Iterator[ThreadPoolExecutor]:
    pool = ThreadPoolExecutor(1, thread_name_prefix="test-commit")
    yield pool
    pool.shutdown(wait=True)


def test_early_rows_grow_with_the_targets_held() -> None:
    limits = Limits(max_rows_per_commit=1_000_000)
    assert early_rows(limits, 1) == early_rows(limits, 10) == 100_000
    assert early_rows(limits, 3) == 100_000  # the few big tables of the 1M benchmark: as before
    assert early_rows(limits, 200) == 2_000_000  # past max_rows: only a full chunk or the end
    assert targets_held(None) == 0 and targets_held(object()) == 1


@pytest.mark.parametrize("spread", [True, False])
def test_a_chunk_over_many_targets_is_not_handed_over_early(
    monkeypatch: pytest.MonkeyPatch, committer: ThreadPoolExecutor, spread: bool
) -> None:
    """max_rows 300: early at 30 images (10 batches of 3), and 3 images per target held. Spread
    over one target per image, the chunk is never thick enough: one chunk, handed over at the end."""
    log = Log()
    failpoints(monkeypatch, log, None)
    instance, merger = FakeInstance(log, 1, 20), WideMerger(log, spread=spread)
    drain(instance, merger, committer, max_rows=300)
    chunks = [c[1] for c in log.of("take_chunk")]
    if spread:
        assert chunks == [list(range(1, 21))]
    else:
        assert len(chunks) >= 2 and len(chunks[0]) <= 11, chunks
    assert instance.acked == list(range(1, 21))
    check_acks(log, instance)


class FullStoreInstance(FakeInstance):
    """A store of ``cap`` batches: while that many are taken and not released, nothing comes."""

    def __init__(self, log: Log, first: int, last: int, cap: int) -> None:
        super().__init__(log, first, last)
        self.cap = cap

    def get_without_ack(self, batch_size: int = 1000, timeout: float | None = 1.0) -> Batch:
        unreleased = [b for b in self.outstanding if b not in self.store.released]
        if len(unreleased) >= self.cap:
            return Batch(None)
        return super().get_without_ack(batch_size, timeout)


def test_a_store_full_of_batches_waiting_for_spark_is_not_the_end_of_the_chunk(
    monkeypatch: pytest.MonkeyPatch, committer: ThreadPoolExecutor
) -> None:
    """Spark starts while 4 batches fill the store: the empty read folds them (releasing the
    store) and the loop reads on, instead of handing the 4 over as if nothing more were buffered."""
    log = Log()
    failpoints(monkeypatch, log, None)
    instance, merger = FullStoreInstance(log, 1, 20, cap=4), WideMerger(log)
    started = threading.Event()
    ready: Future[Any] = committer.submit(lambda: (started.wait(5.0), merger)[1])
    loop = ChunkLoop(
        "test", instance, ready, committer, lambda s, t: "lake.t",
        Limits(batch_size=3, max_rows_per_commit=300, progress_interval=3600.0),
        lambda level, line: None,
    )  # fmt: skip
    threading.Timer(0.3, started.set).start()
    loop.run()
    assert [c[1] for c in log.of("take_chunk")] == [list(range(1, 21))]
    assert instance.acked == list(range(1, 21))
    check_acks(log, instance)
