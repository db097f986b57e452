"""The event store: a bounded ring buffer between the parser thread and the consumer (canal's EventStore).

Three sequence cursors, ``put >= get >= ack``, count entries since the store was created::

    ack_seq            get_seq                 put_seq
       |  handed out,     |  buffered, not yet   |  free
       |  not yet acked   |  handed out          |
       v                  v                      v
    ---[==================[======================[---------

* :meth:`EventStore.put` appends entries; it **blocks** while the buffer holds ``max_entries``
  entries or ``max_bytes`` estimated bytes (an entry larger than ``max_bytes`` is admitted alone
  into an empty buffer, so nothing can wedge the store). :meth:`EventStore.bound` lowers both for
  a while (a consumer that needs less read-ahead now) and restores them.
* :meth:`EventStore.get_without_ack` hands out the next entries as a :class:`Batch` with an
  increasing id (an empty batch has the id ``None``). It waits up to ``timeout`` for
  ``batch_size`` entries, and returns early when the buffer is full or the producer has flushed.
* :meth:`EventStore.ack` releases the **oldest** outstanding batch only; naming any other batch
  raises :class:`~airflow_provider_binlog.canal.errors.BatchOrderError` naming both ids.
* :meth:`EventStore.rollback` forgets every outstanding batch and moves ``get`` back to ``ack``,
  so the same entries are handed out again (in new batches with new ids).

Ack points and transactions larger than the buffer
--------------------------------------------------
A batch's **ack point** is its last :class:`TransactionEnd` or :class:`DdlEntry` (the last entry
of its statement, for a DDL about several tables) that is ``durable`` (not behind an unresolved
XA PREPARE, see :mod:`.convert`); only an ack
point may become the durable cursor, so a cursor never points into a transaction. A batch that
lies wholly inside a transaction has no ack point.

The design choice: acking a batch **releases its memory** in the store whether or not it has an
ack point; the durable cursor (:attr:`EventStore.durable_seq` / :attr:`Batch.ack_point`) moves
only when the acked batch has an ack point. Acking a batch without an ack point therefore means
"I have staged these entries myself; you may drop them" and never moves the cursor. That is how a
transaction larger than the buffer drains with bounded memory: the consumer takes a batch, stages
it (e.g. to a file), acks it, and the parser refills the space; the cursor moves at the XID.

The price: once part of an open transaction has been released, the store can no longer
re-deliver that transaction from memory. :meth:`EventStore.rollback` tells the caller so by
returning ``False``; the caller (the instance) must then :meth:`EventStore.reset` the store and
re-read the binlog from the durable cursor, which starts again at the transaction's first event.
A crash behaves the same way: the restart resumes from the durable cursor. Consumers must thus
treat everything after the durable cursor as provisional, which they must anyway.

Releasing handed-out batches before the ack
-------------------------------------------
A consumer that has copied a batch's entries elsewhere (staged them to a file) but cannot ack yet
(its commit is still running) may :meth:`EventStore.release` it: the store drops its entries and
their bytes, so the producer can refill that space while the commit runs, but the batch stays
outstanding and its ack still moves the cursor. Batches are released oldest first. As with a
partial transaction, a released batch cannot be handed out again: :meth:`EventStore.rollback`
then returns ``False`` and the caller re-reads from the durable cursor. The cursors become
``put >= get >= release >= ack``, and capacity counts from ``release``.

Sizes are estimated cheaply (:func:`estimate_size`: fixed overhead plus the lengths of str/bytes
values), not measured; the estimate is what ``max_bytes`` bounds.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, Entry, RowChange, TransactionEnd
from airflow_provider_binlog.canal.errors import BatchOrderError, StoreClosedError
from airflow_provider_binlog.errors import ConfigurationError

_ROW_OVERHEAD = 240
_IMAGE_OVERHEAD = 64
_VALUE_OVERHEAD = 56


def row_size(values: int, images: int, data_bytes: int) -> int:
    """The estimate of :func:`estimate_size` for a row change from counts known per rows event:
    ``values`` column values over its ``images`` (1 or 2), ``data_bytes`` its share of the event's
    row data (which stands in for the lengths of its str/bytes values)."""
    return _ROW_OVERHEAD + images * _IMAGE_OVERHEAD + values * _VALUE_OVERHEAD + data_bytes


def estimate_size(entry: Entry) -> int:
    """A cheap estimate of an entry's memory footprint in bytes (no deep traversal).

    :param entry: the entry.
    """
    if type(entry) is RowChange:
        n = _ROW_OVERHEAD
        for image in (entry.before, entry.after):
            if image:
                n += _IMAGE_OVERHEAD + _VALUE_OVERHEAD * len(image)
                for v in image.values():
                    if type(v) is str or type(v) is bytes:
                        n += len(v)
        return n
    if type(entry) is DdlEntry:
        return _ROW_OVERHEAD + len(entry.sql)
    return _ROW_OVERHEAD


class StoreResetError(StoreClosedError):
    """The store was reset while a producer waited to put; the producer must restart from the cursor."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Entries handed out together.

    :param id: increasing batch id, ``None`` for an empty batch.
    :param entries: the entries in commit order.
    :param start_seq: store sequence of the first entry.
    :param end_seq: store sequence just past the last entry.
    :param ack_point: the last transaction end or DDL in the batch; ``None`` when the batch lies
        wholly inside a transaction (acking it then releases memory but does not move the cursor).
    :param size: the estimated bytes of its entries (what the store counted for them).
    """

    id: int | None
    entries: tuple[Entry, ...]
    start_seq: int
    end_seq: int
    ack_point: TransactionEnd | DdlEntry | None
    size: int = 0

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    @property
    def start_position(self) -> BinlogPosition | None:
        return self.entries[0].position if self.entries else None

    @property
    def end_position(self) -> BinlogPosition | None:
        return self.entries[-1].position if self.entries else None

    @property
    def row_changes(self) -> list[RowChange]:
        return [e for e in self.entries if type(e) is RowChange]


class EventStore:
    """A bounded ring buffer with put/get/ack cursors (see the module docstring).

    :param max_entries: capacity in entries.
    :param max_bytes: capacity in estimated bytes.
    :param size_of: the size estimator (default :func:`estimate_size`).
    :param first_batch_id: the id of the first batch (to continue after ids an earlier attempt used).
    """

    def __init__(
        self,
        max_entries: int = 16_384,
        max_bytes: int = 64 * 1024 * 1024,
        size_of: Callable[[Entry], int] = estimate_size,
        first_batch_id: int = 1,
    ) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ConfigurationError("store capacity must be at least 1 entry and 1 byte")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._bound_entries = max_entries  # what puts may fill now (see bound())
        self._bound_bytes = max_bytes
        self._size_of = size_of
        self._ring: list[Entry | None] = [None] * max_entries
        self._sizes: list[int] = [0] * max_entries
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._not_empty = threading.Condition(self._lock)
        self._put_seq = 0
        self._get_seq = 0
        self._ack_seq = 0
        self._release_seq = 0
        self._durable_seq = 0
        self._used_bytes = 0
        self._next_batch_id = max(1, first_batch_id)
        self._outstanding: OrderedDict[int, Batch] = OrderedDict()
        self._released: dict[int, int | None] = {}  # released batch id -> its durable sequence
        self._producer_waiting = False
        self._consumers_waiting = 0
        self._wake_at = 0  # put sequence a waiting consumer's batch is complete at (see _wake)
        self._flushed = False
        self._closed = False
        self._generation = 0
        self.peak_bytes = 0
        self.peak_entries = 0

    # -- producer ---------------------------------------------------------------------------

    def put(
        self,
        entries: Entry | Iterable[Entry],
        timeout: float | None = None,
        generation: int | None = None,
        size_each: int | None = None,
        sizes: list[int] | None = None,
    ) -> int:
        """Append entries in order, blocking while the buffer is full.

        :param entries: one entry or an iterable of entries.
        :param timeout: seconds to wait for space per entry; ``None`` waits indefinitely.
        :param generation: the :attr:`generation` the producer started in; a put after a
            :meth:`reset` then raises :class:`StoreResetError` instead of mixing old entries in.
        :param size_each: the estimated size of every entry (the rows of one event, see
            :func:`row_size`), instead of asking the store's estimator per entry.
        :param sizes: the estimated size of each entry, in order (a list as long as ``entries``, a
            list too: the rows of several events put together); instead of ``size_each``.
        :return: the number of entries put (fewer than given only on timeout).
        :raises StoreClosedError: the store was closed; :class:`StoreResetError` when reset.
        """
        items: Iterable[Entry] = (
            entries
            if type(entries) is list
            else (entries,)
            if isinstance(entries, RowChange | DdlEntry | TransactionEnd)
            else entries
        )
        count = 0
        with self._lock:
            if generation is not None and generation != self._generation:
                raise StoreResetError("the event store was reset")
            generation = self._generation
            if type(items) is list:
                if size_each is not None and self._fits(len(items), len(items) * size_each):
                    return self._append_all(items, [size_each] * len(items))
                if sizes is not None and self._fits(len(items), sum(sizes)):
                    return self._append_all(items, sizes)
            size_of = self._size_of
            for i, entry in enumerate(items):
                size = sizes[i] if sizes is not None else size_of(entry) if size_each is None else size_each
                deadline = None if timeout is None else time.monotonic() + timeout
                while True:
                    if self._closed:
                        raise StoreClosedError("the event store is closed")
                    if self._generation != generation:
                        raise StoreResetError("the event store was reset")
                    held = self._put_seq - self._release_seq
                    if held < self._bound_entries and (
                        held == 0 or self._used_bytes + size <= self._bound_bytes
                    ):
                        break
                    self._producer_waiting = True
                    self._not_empty.notify_all()
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        self._producer_waiting = False
                        return count
                    self._not_full.wait(remaining)
                self._producer_waiting = False
                slot = self._put_seq % self.max_entries
                self._ring[slot] = entry
                self._sizes[slot] = size
                self._put_seq += 1
                self._used_bytes += size
                self._flushed = False
                count += 1
                if self._used_bytes > self.peak_bytes:
                    self.peak_bytes = self._used_bytes
                held += 1
                if held > self.peak_entries:
                    self.peak_entries = held
            self._wake()
        return count

    def _fits(self, n: int, size: int) -> bool:
        """Whether ``n`` entries of ``size`` bytes together fit now, as ``n`` single puts would find
        (lock held)."""
        if self._closed:
            return False
        held = self._put_seq - self._release_seq
        if held + n > self._bound_entries:
            return False
        return self._used_bytes + size <= self._bound_bytes or (held == 0 and n == 1)

    def _append_all(self, entries: list[Entry], each: list[int]) -> int:
        """Append entries known to fit (:meth:`_fits`) in one go, ``each`` their sizes (lock held)."""
        cap, ring, sizes = self.max_entries, self._ring, self._sizes
        n = len(entries)
        first = self._put_seq % cap
        head = min(n, cap - first)  # the slots up to the ring's end, then the rest from its start
        if head < n:
            ring[first : first + head] = entries[:head]
            sizes[first : first + head] = each[:head]
            ring[: n - head] = entries[head:]
            sizes[: n - head] = each[head:]
        else:
            ring[first : first + n] = entries
            sizes[first : first + n] = each
        seq = self._put_seq + n
        self._put_seq = seq
        self._used_bytes += sum(each)
        self._flushed = False
        self.peak_bytes = max(self.peak_bytes, self._used_bytes)
        self.peak_entries = max(self.peak_entries, seq - self._release_seq)
        self._wake()
        return n

    def _wake(self) -> None:
        """After a put: wake waiting consumers once one of them can return (its batch is complete
        or the buffer is full), not at every put (lock held). A consumer woken per rows event
        would take the GIL and the lock back thousands of times per batch only to wait again."""
        if self._consumers_waiting and (self._put_seq >= self._wake_at or self._full()):
            self._not_empty.notify_all()

    def flush(self) -> None:
        """Tell waiting consumers that no more entries come for now (e.g. the stop position was
        reached), so a pending get returns what is buffered without waiting for its timeout."""
        with self._lock:
            self._flushed = True
            self._not_empty.notify_all()

    # -- consumer ---------------------------------------------------------------------------

    def get_without_ack(self, batch_size: int, timeout: float | None = 0.0) -> Batch:
        """Hand out up to ``batch_size`` entries after ``get`` as a new batch.

        Waits until ``batch_size`` entries are buffered, the buffer is full (the producer is
        blocked), the producer flushed, or ``timeout`` passed; then returns what is there.

        :param batch_size: the maximum number of entries.
        :param timeout: seconds to wait; ``0`` returns at once; ``None`` waits without limit.
        :return: the batch; its id is ``None`` when it is empty.
        """
        if batch_size < 1:
            raise ConfigurationError("batch_size must be at least 1")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                if self._closed:
                    raise StoreClosedError("the event store is closed")
                available = self._put_seq - self._get_seq
                if available >= batch_size or (
                    available and (self._producer_waiting or self._flushed or self._full())
                ):
                    break
                if self._flushed and not available:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                want = self._get_seq + batch_size
                self._wake_at = want if not self._consumers_waiting else min(self._wake_at, want)
                self._consumers_waiting += 1
                try:
                    self._not_empty.wait(remaining)
                finally:
                    self._consumers_waiting -= 1
                    if not self._consumers_waiting:
                        self._wake_at = 0
            n = min(batch_size, self._put_seq - self._get_seq)
            start = self._get_seq
            if n == 0:
                return Batch(None, (), start, start, None)
            cap = self.max_entries
            ring = self._ring
            first = start % cap
            sizes = self._sizes
            if first + n <= cap:
                entries = tuple(ring[first : first + n])
                size = sum(sizes[first : first + n])
            else:
                entries = tuple(ring[first:]) + tuple(ring[: n - (cap - first)])
                size = sum(sizes[first:]) + sum(sizes[: n - (cap - first)])
            ack_point: TransactionEnd | DdlEntry | None = None
            for entry in reversed(entries):
                if type(entry) is TransactionEnd:
                    if entry.durable:
                        ack_point = entry
                        break
                elif type(entry) is DdlEntry and entry.ends_statement and entry.durable:
                    ack_point = entry
                    break
            batch = Batch(self._next_batch_id, entries, start, start + n, ack_point, size)  # type: ignore[arg-type]
            self._next_batch_id += 1
            self._get_seq += n
            self._outstanding[batch.id] = batch  # type: ignore[index]
            return batch

    def _full(self) -> bool:
        return (
            self._put_seq - self._release_seq >= self._bound_entries or self._used_bytes >= self._bound_bytes
        )

    def bound(self, max_entries: int | None = None, max_bytes: int | None = None) -> None:
        """From now on buffer at most ``max_entries`` entries and ``max_bytes`` estimated bytes
        (each at most the capacity the store was made with; ``None``: that capacity). What is
        buffered stays; the producer waits until the buffer is below the new bound.

        For a consumer whose need for read-ahead changes: a drain reads far ahead while Spark
        starts (its batches wait in the store until Spark is up) and needs a few batches once it
        folds as it reads (:func:`~airflow_provider_binlog.drain.loop.read_ahead`).
        """
        if (max_entries is not None and max_entries < 1) or (max_bytes is not None and max_bytes < 1):
            raise ConfigurationError("store capacity must be at least 1 entry and 1 byte")
        with self._lock:
            self._bound_entries = min(max_entries or self.max_entries, self.max_entries)
            self._bound_bytes = min(max_bytes or self.max_bytes, self.max_bytes)
            self._not_full.notify_all()  # a raised bound lets a waiting producer on

    def ack(self, batch_id: int) -> Batch:
        """Release the oldest outstanding batch.

        :param batch_id: the id of the oldest outstanding batch.
        :return: the released batch (its :attr:`Batch.ack_point`, if any, is the new cursor).
        :raises BatchOrderError: ``batch_id`` is not the oldest outstanding batch.
        """
        with self._lock:
            oldest = next(iter(self._outstanding), None)
            if oldest is None or batch_id != oldest:
                raise BatchOrderError(batch_id, oldest)
            batch = self._outstanding.pop(oldest)
            if oldest in self._released:
                durable = self._released.pop(oldest)
            else:
                self._drop(batch)
                self._release_seq = batch.end_seq
                durable = self._ack_end(batch)
            self._ack_seq = batch.end_seq
            if durable is not None:
                self._durable_seq = durable
            self._not_full.notify_all()
            return batch

    def release(self, batch_id: int) -> None:
        """Drop the entries of an outstanding batch from memory, keeping it outstanding.

        For a consumer that has copied the entries and waits for its commit before acking (see the
        module docstring); afterwards :meth:`rollback` returns ``False``.

        :param batch_id: the oldest outstanding batch not released yet.
        :raises BatchOrderError: ``batch_id`` is not that batch.
        """
        with self._lock:
            oldest = next((b for b in self._outstanding.values() if b.end_seq > self._release_seq), None)
            if oldest is None or oldest.id != batch_id:
                raise BatchOrderError(batch_id, oldest.id if oldest is not None else None)
            self._drop(oldest)
            self._release_seq = oldest.end_seq
            # keep what ack needs (range, ack point, durable sequence), not the entries
            self._released[batch_id] = self._ack_end(oldest)
            self._outstanding[batch_id] = Batch(
                batch_id, (), oldest.start_seq, oldest.end_seq, oldest.ack_point, oldest.size
            )
            self._not_full.notify_all()

    def _drop(self, batch: Batch) -> None:
        """Clear the batch's slots (one or two slices of the ring: it may wrap around)."""
        cap, ring, sizes = self.max_entries, self._ring, self._sizes
        n = batch.end_seq - batch.start_seq
        first = batch.start_seq % cap
        for lo, hi in ((first, min(first + n, cap)), (0, max(0, first + n - cap))):
            if hi > lo:
                self._used_bytes -= sum(sizes[lo:hi])
                ring[lo:hi] = [None] * (hi - lo)
                sizes[lo:hi] = [0] * (hi - lo)

    @staticmethod
    def _ack_end(batch: Batch) -> int | None:
        """The sequence just past the batch's ack point (the durable point once it is acked)."""
        if batch.ack_point is None:
            return None
        idx = len(batch.entries) - 1
        while batch.entries[idx] is not batch.ack_point:
            idx -= 1
        return batch.start_seq + idx + 1

    def oldest_outstanding_batches(self, count: int) -> list[Batch]:
        """The ``count`` batches :meth:`ack` accepts next, in order (fewer when fewer are outstanding)."""
        with self._lock:
            return list(itertools.islice(self._outstanding.values(), count))

    def rollback(self) -> bool:
        """Forget every outstanding batch and move ``get`` back to ``ack``.

        :return: ``True`` when every entry after the durable cursor will be handed out again;
            ``False`` when part of an open transaction was already released by an ack without an
            ack point, or a batch by :meth:`release`, in which case the caller must :meth:`reset`
            and re-read from the cursor.
        """
        with self._lock:
            released = bool(self._released)
            self._outstanding.clear()
            self._released.clear()
            self._get_seq = self._ack_seq
            return self._ack_seq == self._durable_seq and not released

    def reset(self) -> None:
        """Drop everything buffered and outstanding (before re-reading from the durable cursor).

        Producers blocked in :meth:`put` get :class:`StoreResetError`. Batch ids keep increasing.
        """
        with self._lock:
            self._generation += 1
            self._outstanding.clear()
            self._released.clear()
            self._ring = [None] * self.max_entries
            self._sizes = [0] * self.max_entries
            self._ack_seq = self._get_seq = self._release_seq = self._durable_seq = self._put_seq
            self._used_bytes = 0
            self._flushed = False
            self._not_full.notify_all()
            self._not_empty.notify_all()

    def close(self) -> None:
        """Close the store; blocked producers and consumers get :class:`StoreClosedError`."""
        with self._lock:
            self._closed = True
            self._not_full.notify_all()
            self._not_empty.notify_all()

    # -- state ------------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Increases with every :meth:`reset`."""
        return self._generation

    @property
    def next_batch_id(self) -> int:
        return self._next_batch_id

    @property
    def put_seq(self) -> int:
        return self._put_seq

    @property
    def get_seq(self) -> int:
        return self._get_seq

    @property
    def ack_seq(self) -> int:
        return self._ack_seq

    @property
    def durable_seq(self) -> int:
        """Sequence just past the last acked ack point (where a re-read would resume)."""
        return self._durable_seq

    @property
    def used_bytes(self) -> int:
        return self._used_bytes

    @property
    def outstanding(self) -> tuple[int, ...]:
        """Ids of the batches handed out and not yet acked, oldest first."""
        with self._lock:
            return tuple(self._outstanding)

    @property
    def buffered(self) -> int:
        """Entries buffered and not yet handed out."""
        return self._put_seq - self._get_seq

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (
            f"EventStore(put={self._put_seq}, get={self._get_seq}, ack={self._ack_seq}, "
            f"bytes={self._used_bytes}/{self.max_bytes}, entries<={self.max_entries})"
        )
