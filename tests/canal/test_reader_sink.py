"""The reader's sink (unit, no server): row changes wait for the end of their statement, or until a
sixteenth of the store's capacity (entries or estimated bytes) is pending; anything else puts them
first; order, sizes and the re-read filter are those of puts per event."""

from __future__ import annotations

from airflow_provider_binlog.binlog.client import ReplicationClient, ReplicationConfig
from airflow_provider_binlog.canal.convert import EntryConverter
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.reader import BinlogReader
from airflow_provider_binlog.canal.store import EventStore

from .helpers import end, row


def reader(store: EventStore) -> BinlogReader:
    flt = TableFilter(include="s\\.t")
    conv = EntryConverter("d", flt, lambda entries, size: None)
    client = ReplicationClient(ReplicationConfig("127.0.0.1", 1))  # never connected here
    return BinlogReader("d", client, store, flt, None, conv)


def test_rows_wait_for_anything_else_and_keep_their_sizes() -> None:
    store = EventStore(max_entries=1024, max_bytes=1 << 30)
    r = reader(store)
    rows = [row(i) for i in range(5)]
    r._sink(rows[:2], 100)  # one rows event
    r._sink(rows[2:4], 300)  # the next of the same statement
    assert store.put_seq == 0
    r._sink([end(4)])  # the transaction's end puts them first
    r._sink([row(5)], 50)
    r._flush()  # what the loop does after a non-rows event, and at the stream's end
    batch = store.get_without_ack(10)
    assert list(batch) == [*rows[:4], end(4), row(5)]
    assert batch.size == 2 * 100 + 2 * 300 + store._size_of(end(4)) + 50
    assert r._last_put == row(5).order_key


def test_pending_rows_are_bounded_by_entries_and_bytes() -> None:
    store = EventStore(max_entries=64, max_bytes=1 << 30)  # 4 entries pending at most
    r = reader(store)
    r._sink([row(0), row(1), row(2)], 10)
    assert store.put_seq == 0
    r._sink([row(3)], 10)
    assert store.put_seq == 4 and not r._rows
    store = EventStore(max_entries=1024, max_bytes=1600)  # 100 estimated bytes pending at most
    r = reader(store)
    r._sink([row(0)], 60)
    assert store.put_seq == 0
    r._sink([row(1)], 60)
    assert store.put_seq == 2 and store.used_bytes == 120 and r._row_bytes == 0


def test_a_re_read_skips_what_was_put_with_its_sizes() -> None:
    """After a reconnect the converter hands over rows already put again: only the later ones go
    in, each with its own size."""
    store = EventStore(max_entries=1024, max_bytes=1 << 30)
    r = reader(store)
    rows = [row(i) for i in range(6)]
    r._sink(rows[:3], 10)
    r._flush()
    r._sink(rows[1:3], 10)
    r._sink(rows[3:], 20)
    r._flush()
    batch = store.get_without_ack(10)
    assert list(batch) == rows and batch.size == 3 * 10 + 3 * 20
