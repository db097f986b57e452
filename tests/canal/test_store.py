"""The event store: cursors, in-order ack, rollback, bounded memory, concurrency."""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from airflow_provider_binlog.canal.change import TransactionEnd
from airflow_provider_binlog.canal.errors import BatchOrderError, StoreClosedError
from airflow_provider_binlog.canal.store import EventStore, StoreResetError, estimate_size, row_size
from airflow_provider_binlog.errors import ConfigurationError

from .helpers import ddl, end, row, transactions


def test_cursors_and_in_order_ack() -> None:
    store = EventStore(max_entries=100)
    entries = transactions(3, 2)  # r r e r r e r r e
    assert store.put(entries) == 9
    assert (store.put_seq, store.get_seq, store.ack_seq) == (9, 0, 0)
    b1 = store.get_without_ack(4)
    b2 = store.get_without_ack(4)
    assert (b1.id, b2.id) == (1, 2)
    assert list(b1) == entries[:4] and list(b2) == entries[4:8]
    assert b1.ack_point is entries[2]
    assert b2.ack_point is entries[5]
    assert (store.put_seq, store.get_seq, store.ack_seq) == (9, 8, 0)
    assert store.outstanding == (1, 2)
    assert store.ack(1) is b1
    assert store.durable_seq == 3
    assert store.ack(2) is b2
    assert store.durable_seq == 6
    assert (store.put_seq, store.get_seq, store.ack_seq) == (9, 8, 8)


def test_empty_batch_has_no_id_and_ids_increase() -> None:
    store = EventStore()
    empty = store.get_without_ack(10, timeout=0.05)
    assert empty.id is None and len(empty) == 0 and empty.ack_point is None
    store.put(row(1))
    assert store.get_without_ack(10).id == 1
    store.rollback()
    assert store.get_without_ack(10).id == 2  # ids keep increasing across rollbacks


def test_out_of_order_ack_names_both_ids() -> None:
    store = EventStore()
    store.put(transactions(4, 1))
    b1, b2 = store.get_without_ack(2), store.get_without_ack(2)
    with pytest.raises(
        BatchOrderError, match=f"batch {b2.id} is not the oldest outstanding batch, {b1.id} is"
    ):
        store.ack(b2.id)  # type: ignore[arg-type]
    with pytest.raises(BatchOrderError, match="batch 99 is not the oldest"):
        store.ack(99)
    store.ack(b1.id)  # type: ignore[arg-type]
    store.ack(b2.id)  # type: ignore[arg-type]
    with pytest.raises(BatchOrderError, match="no batch is outstanding"):
        store.ack(b2.id)  # type: ignore[arg-type]


def test_rollback_redelivers_the_same_changes() -> None:
    store = EventStore()
    entries = transactions(5, 3)
    store.put(entries)
    first = store.get_without_ack(4)
    store.ack(first.id)  # type: ignore[arg-type]
    seen = [store.get_without_ack(5), store.get_without_ack(5)]
    assert store.rollback() is True
    assert store.outstanding == ()
    again = store.get_without_ack(10)
    assert list(again) == [e for b in seen for e in b]
    assert again.id not in {b.id for b in seen}
    with pytest.raises(BatchOrderError):
        store.ack(seen[0].id)  # type: ignore[arg-type]  # rolled-back ids are gone


def test_ddl_is_an_ack_point() -> None:
    store = EventStore()
    store.put([row(1), end(2), ddl(3), row(4)])
    batch = store.get_without_ack(10)
    assert batch.ack_point is not None and batch.ack_point.position.pos == 1030


def test_put_blocks_when_full_by_entries_and_by_bytes() -> None:
    store = EventStore(max_entries=3)
    assert store.put([row(i) for i in range(5)], timeout=0.05) == 3
    store.ack(store.get_without_ack(2).id)  # type: ignore[arg-type]
    assert store.put([row(i) for i in range(3, 5)], timeout=0.05) == 2

    size = estimate_size(row(0, "y" * 1000))
    by_bytes = EventStore(max_entries=1000, max_bytes=size * 2)
    assert by_bytes.put([row(i, "y" * 1000) for i in range(5)], timeout=0.05) == 2
    assert by_bytes.used_bytes == size * 2
    # an entry bigger than the whole budget still goes into an empty buffer
    huge = EventStore(max_entries=10, max_bytes=10)
    assert huge.put([row(1, "z" * 10_000), row(2)], timeout=0.05) == 1


def test_a_bound_below_the_capacity_holds_the_producer_until_raised() -> None:
    """bound() lowers what puts may fill (entries and bytes) without losing what is buffered; a
    get returns early at the bound as at a full store; bound() without arguments restores the
    capacity and wakes a waiting producer."""
    store = EventStore(max_entries=10)
    assert store.put([row(i) for i in range(6)], timeout=0.05) == 6
    store.bound(max_entries=4)
    assert store.put(row(6), timeout=0.05) == 0  # 6 buffered: over the bound of 4
    t0 = time.monotonic()
    assert len(store.get_without_ack(100, timeout=10)) == 6
    assert time.monotonic() - t0 < 5  # full at the bound: no wait for the 100 entries asked
    assert store.put([row(i) for i in range(6, 12)], timeout=0.05) == 0  # 6 taken, not released
    store.ack(1)
    assert store.put([row(i) for i in range(6, 12)], timeout=0.05) == 4

    waiting = threading.Thread(target=lambda: store.put([row(10), row(11)]), daemon=True)
    waiting.start()
    deadline = time.monotonic() + 10
    while not store._producer_waiting and time.monotonic() < deadline:  # blocked in put
        time.sleep(0.01)
    assert store._producer_waiting and store.buffered == 4 and waiting.is_alive()
    store.bound()  # back to 10 entries
    waiting.join(5)
    assert not waiting.is_alive() and store.buffered == 6

    size = estimate_size(row(0, "y" * 1000))
    by_bytes = EventStore(max_entries=1000, max_bytes=size * 10)
    by_bytes.bound(max_bytes=size * 2)
    assert by_bytes.put([row(i, "y" * 1000) for i in range(5)], timeout=0.05) == 2
    by_bytes.bound(max_entries=5000, max_bytes=size * 50)  # never above the capacity: the ring's size
    assert by_bytes.put([row(i, "y" * 1000) for i in range(2, 20)], timeout=0.05) == 8
    with pytest.raises(ConfigurationError):
        by_bytes.bound(max_entries=0)


def test_get_returns_early_when_the_producer_is_blocked() -> None:
    store = EventStore(max_entries=4)

    def produce() -> None:
        with contextlib.suppress(StoreClosedError):
            store.put(transactions(3, 3))

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    t0 = time.monotonic()
    batch = store.get_without_ack(100, timeout=10)  # would wait 10 s if full were not detected
    assert len(batch) == 4 and time.monotonic() - t0 < 5
    store.close()
    producer.join(5)


def test_get_waits_for_batch_size_or_timeout_or_flush() -> None:
    store = EventStore()
    store.put(row(1))
    t0 = time.monotonic()
    assert len(store.get_without_ack(10, timeout=0.2)) == 1
    assert time.monotonic() - t0 >= 0.15
    store.put(row(2))
    threading.Timer(0.1, store.flush).start()
    t0 = time.monotonic()
    assert len(store.get_without_ack(10, timeout=10)) == 1
    assert time.monotonic() - t0 < 5


def test_transaction_larger_than_the_buffer_flows_through() -> None:
    """A 1000-row transaction through a 50-entry buffer: batches without an ack point are acked to
    release memory, the durable cursor moves only at the transaction end."""
    store = EventStore(max_entries=50)
    big = transactions(1, 1000) + transactions(1, 2)  # txn of 1000 rows, then a small one
    producer = threading.Thread(target=store.put, args=(big,), daemon=True)
    producer.start()
    got = []
    durable_moves = []
    while len(got) < len(big):
        batch = store.get_without_ack(32, timeout=5)
        assert batch.id is not None
        got.extend(batch)
        store.ack(batch.id)
        assert store.peak_entries <= 50
        if batch.ack_point is not None:
            durable_moves.append(store.durable_seq)
    producer.join(5)
    assert got == big
    assert min(durable_moves) >= 1001  # never inside the big transaction
    assert all(isinstance(big[s - 1], TransactionEnd) for s in durable_moves)


def test_rollback_after_a_partial_transaction_ack_requires_a_reread() -> None:
    store = EventStore(max_entries=10)
    entries = transactions(1, 3) + transactions(1, 20)

    def produce() -> None:
        with contextlib.suppress(StoreResetError):
            store.put(entries)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    store.ack(store.get_without_ack(4, timeout=5).id)  # type: ignore[arg-type]  # first txn, durable
    assert store.rollback() is True
    partial = store.get_without_ack(5, timeout=5)
    assert partial.ack_point is None
    store.ack(partial.id)  # type: ignore[arg-type]  # releases memory inside the open transaction
    assert store.durable_seq == 4
    assert store.rollback() is False  # the caller must re-read from the durable cursor
    store.reset()
    producer.join(5)
    assert not producer.is_alive()  # the blocked producer was woken by the reset
    assert store.buffered == 0 and store.outstanding == ()


def test_release_frees_space_but_keeps_the_batch_outstanding() -> None:
    """A released batch (staged by the consumer, its commit still running) gives its space to the
    producer; its ack still moves the durable cursor; a rollback then needs a re-read."""
    store = EventStore(max_entries=6)
    entries = transactions(2, 2) + transactions(1, 2)  # r r e r r e | r r e
    assert store.put(entries, timeout=0.05) == 6  # full
    b1, b2 = store.get_without_ack(4), store.get_without_ack(2)  # ack points at seq 3 and 6
    assert b1.size == sum(map(estimate_size, entries[:4])) and store.used_bytes == b1.size + b2.size
    with pytest.raises(
        BatchOrderError, match=f"batch {b2.id} is not the oldest outstanding batch, {b1.id} is"
    ):
        store.release(b2.id)  # type: ignore[arg-type]
    store.release(b1.id)  # type: ignore[arg-type]
    assert store.put(entries[6:], timeout=0.05) == 3  # the 4 released slots took the next transaction
    assert store.outstanding == (b1.id, b2.id) and store.durable_seq == 0
    released = store.ack(b1.id)  # type: ignore[arg-type]
    assert released.entries == () and released.ack_point is entries[2] and store.durable_seq == 3
    store.release(b2.id)  # type: ignore[arg-type]
    assert list(store.get_without_ack(10)) == entries[6:]
    assert store.rollback() is False  # b2's entries are gone from memory: re-read from the cursor
    store.reset()
    assert store.buffered == 0 and store.used_bytes == 0


def test_reset_wakes_a_blocked_producer_with_reset_error() -> None:
    store = EventStore(max_entries=1)
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            store.put([row(1), row(2)])
        except StoreClosedError as exc:
            errors.append(exc)

    t = threading.Thread(target=produce)
    t.start()
    time.sleep(0.1)
    store.reset()
    t.join(5)
    assert len(errors) == 1 and isinstance(errors[0], StoreResetError)


def test_close_wakes_consumers() -> None:
    store = EventStore()
    threading.Timer(0.1, store.close).start()
    with pytest.raises(StoreClosedError):
        store.get_without_ack(10, timeout=10)


def test_concurrent_producer_and_consumer_with_rollbacks() -> None:
    """Random batch sizes, random rollbacks: acked entries are exactly the input, in order."""
    rng = random.Random(7)
    entries = transactions(400, 5)
    store = EventStore(max_entries=64)
    producer = threading.Thread(target=store.put, args=(entries,), daemon=True)
    producer.start()
    acked = []
    while len(acked) < len(entries):
        batch = store.get_without_ack(rng.randint(1, 40), timeout=5)
        if batch.id is None:
            continue
        # roll back only where it can be served from memory
        if batch.ack_point is not None and rng.random() < 0.2 and store.ack_seq == store.durable_seq:
            assert store.rollback() is True
            continue
        acked.extend(batch)
        store.ack(batch.id)
    producer.join(5)
    assert acked == entries
    assert store.peak_entries <= 64


_RSS_SCRIPT = textwrap.dedent(
    """
    import sys, threading
    sys.path.insert(0, {root!r})

    def peak_kb():
        # VmHWM: this process's own peak RSS. ru_maxrss would not do: Linux carries the parent's
        # high-water mark across fork+exec, so under a big pytest process it hides what we measure.
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))

    from tests.canal.helpers import row, end
    from airflow_provider_binlog.canal.store import EventStore

    N = 1_000_000
    control = sys.argv[1] == "control"
    store = EventStore(max_entries=8192, max_bytes=8 * 1024 * 1024)
    base = peak_kb()
    def produce():
        store.put(row(i, "v" * 40) for i in range(N))
        store.put(end(N))
    if control:  # the same rows held at once, to show the measurement sees them
        held = [row(i, "v" * 40) for i in range(N // 5)]
        print(len(held), 0, base, peak_kb(), 0, 0)
        sys.exit(0)
    t = threading.Thread(target=produce, daemon=True)
    t.start()
    rows = commits = 0
    while True:
        b = store.get_without_ack(4096, timeout=10)
        assert b.id is not None
        rows += len(b) - (b.ack_point is not None)
        store.ack(b.id)
        if b.ack_point is not None:
            commits += 1
            break
    t.join()
    peak = peak_kb()
    print(rows, commits, base, peak, store.peak_entries, store.peak_bytes)
    """
)


@pytest.mark.timeout(300)
def test_one_million_row_transaction_bounded_memory() -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def run(mode: str) -> list[int]:
        script = _RSS_SCRIPT.format(root=root)
        cmd = [sys.executable, "-c", script, mode]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=280, check=True)
        return list(map(int, done.stdout.split()))

    _, _, control_base, control_peak, _, _ = run("control")
    control_mb = (control_peak - control_base) / 1024
    assert control_mb > 60, f"200k rows held at once only grew RSS by {control_mb:.0f} MB"
    rows, commits, base_kb, peak_kb, peak_entries, peak_bytes = run("store")
    assert rows == 1_000_000 and commits == 1
    assert peak_entries <= 8192 and peak_bytes <= 8 * 1024 * 1024
    growth_mb = (peak_kb - base_kb) / 1024
    # a million RowChange objects held at once would take well over 500 MB
    assert growth_mb < 80, f"peak RSS grew by {growth_mb:.0f} MB"
    print(
        f"1M-row transaction: peak RSS {peak_kb / 1024:.0f} MB (+{growth_mb:.0f} MB);"
        f" 200k rows held: +{control_mb:.0f} MB"
    )


def test_only_the_last_entry_of_a_multi_table_ddl_is_an_ack_point() -> None:
    import dataclasses

    store = EventStore()
    first = dataclasses.replace(ddl(5), table="a", ends_statement=False)
    second = dataclasses.replace(ddl(5), table="b")
    store.put([row(1), end(2), first, second])
    split = store.get_without_ack(3)
    assert split.ack_point is not None and split.ack_point.position.pos == 1020  # not the DROP of "a"
    assert store.get_without_ack(1).ack_point is second


def test_rows_of_one_event_put_with_one_size_behave_like_single_puts() -> None:
    """``put(rows, size_each=s)`` (the instance's path: one estimate per rows event) appends at
    once when everything fits, and otherwise waits entry by entry exactly as single puts do."""
    rows = [row(i) for i in range(10)]
    assert row_size(2, 1, len("x")) == estimate_size(row(0))  # the same estimate, from counts
    each = row_size(2, 1, 30)
    store = EventStore(max_entries=100, max_bytes=10 * each)
    assert store.put(rows, size_each=each) == 10
    assert store.used_bytes == 10 * each and store.peak_entries == 10
    batch = store.get_without_ack(4)
    assert list(batch) == rows[:4] and batch.size == 4 * each

    store = EventStore(max_entries=100, max_bytes=3 * each)  # room for 3 of 10
    assert store.put(rows, timeout=0.05, size_each=each) == 3
    assert store.put(rows[3:], timeout=0.05, size_each=each) == 0
    assert list(store.get_without_ack(10)) == rows[:3]

    store = EventStore(max_entries=5, max_bytes=1 << 30)  # room for 5 entries
    assert store.put(rows, timeout=0.05, size_each=each) == 5
    store = EventStore(max_entries=100, max_bytes=each // 2)  # an empty store takes one oversized entry
    assert store.put(rows, timeout=0.05, size_each=each) == 1


def test_rows_of_several_events_put_with_their_sizes_behave_like_single_puts() -> None:
    """``put(rows, sizes=[...])`` (the reader's path: the rows of consecutive rows events, each
    with its event's estimate) appends at once when everything fits, across the ring's end too,
    and otherwise waits entry by entry exactly as single puts of those sizes do."""
    rows = [row(i) for i in range(10)]
    sizes = [100] * 4 + [300] * 6
    store = EventStore(max_entries=16, max_bytes=1 << 30)
    assert store.put(rows[:9], size_each=1) == 9
    store.ack(store.get_without_ack(9).id)  # the next put wraps around the ring's end
    assert store.put(rows, sizes=sizes) == 10
    assert store.used_bytes == sum(sizes) and store.peak_entries == 10
    first = store.get_without_ack(5)
    assert list(first) == rows[:5] and first.size == 4 * 100 + 300
    rest = store.get_without_ack(10)
    assert list(rest) == rows[5:] and rest.size == 5 * 300
    store.ack(first.id)
    assert store.used_bytes == 5 * 300

    store = EventStore(max_entries=100, max_bytes=4 * 100 + 2 * 300)  # room for the first 6 of 10
    assert store.put(rows, timeout=0.05, sizes=sizes) == 6
    assert store.used_bytes == 4 * 100 + 2 * 300
    assert list(store.get_without_ack(10)) == rows[:6]

    store = EventStore(max_entries=100, max_bytes=50)  # an empty store takes one oversized entry
    assert store.put(rows, timeout=0.05, sizes=sizes) == 1 and store.used_bytes == 100
