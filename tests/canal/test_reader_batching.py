"""The reader puts the row changes of consecutive rows events together (one store put per
statement, or per ``max_entries // 16`` rows, not one per rows event): what the consumer gets is the
same, entry for entry, as with a put per event (a store of 16 entries flushes after every event),
through dumps killed mid-statement too."""

from __future__ import annotations

import time
from typing import Any

import pytest

from airflow_provider_binlog.canal.change import Entry, RowChange, TransactionEnd
from airflow_provider_binlog.canal.meta import MemoryMetaManager
from airflow_provider_binlog.canal.positions.start import StartSpec

from .test_instance import drain, head, make
from .test_reader_bounds import _kill_dumps

pytestmark = pytest.mark.integration


def _load(mariadb: Any, database: str, pad: int = 3000) -> tuple[Any, Any]:
    """20 transactions of 2 multi-row statements (100 rows of ``pad`` bytes: many rows events
    each), a single-row update and a delete; returns the binlog range."""
    mariadb.execute(f"CREATE TABLE `{database}`.b (id INT PRIMARY KEY, t INT, pad TEXT)")
    start = head(mariadb)
    conn = mariadb.connect(database)
    text = "p" * pad
    try:
        with conn.cursor() as cur:
            for t in range(20):
                conn.begin()
                rows = [(t * 100 + i, t, text) for i in range(100)]
                cur.executemany("INSERT INTO b VALUES (%s, %s, %s)", rows)
                cur.execute("UPDATE b SET pad = 'u' WHERE t = %s", (t,))
                cur.execute("UPDATE b SET t = -1 WHERE id = %s", (t * 100,))
                cur.execute("DELETE FROM b WHERE id = %s", (t * 100 + 1,))
                conn.commit()
    finally:
        conn.close()
    return start, head(mariadb)


def test_batched_puts_deliver_what_puts_per_event_deliver(mariadb: Any, database: str) -> None:
    start, stop = _load(mariadb, database)
    runs: dict[int, list[Entry]] = {}
    for max_entries in (16, 4096):  # flush every rows event / every 256 rows or statement end
        inst = make(
            mariadb, database, MemoryMetaManager(), start=StartSpec(position=str(start)),
            max_entries=max_entries,
        )  # fmt: skip
        assert inst.store.max_entries == max_entries
        inst.subscribe(stop_at=stop)
        try:
            runs[max_entries] = drain(inst, batch_size=700)
        finally:
            inst.close()
    per_event, batched = runs[16], runs[4096]
    rows = [e for e in batched if type(e) is RowChange]
    assert len(rows) == 20 * (100 + 100 + 1 + 1)
    assert sum(type(e) is TransactionEnd for e in batched) == 20
    assert len({e.position for e in rows}) > 20 * 4 * 4  # many rows events per statement
    assert batched == per_event  # every entry: values, positions, order keys, transaction ends
    keys = [e.order_key for e in batched]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_batched_puts_through_killed_dumps(mariadb: Any, database: str) -> None:
    """Dumps killed while a statement's rows are converted and not put yet: the reconnect resumes
    after the last complete transaction, and every change arrives once, in order (a store of 512
    entries: puts of up to 32 rows, and a reader held back while the consumer reads)."""
    start, stop = _load(mariadb, database, pad=20000)  # 40 MB: more than the socket buffers hold
    inst = make(mariadb, database, MemoryMetaManager(), start=StartSpec(position=str(start)),
                max_entries=512, reconnect_initial=0.05, reconnect_timeout=60)  # fmt: skip
    reference = make(mariadb, database, MemoryMetaManager(),
                     start=StartSpec(position=str(start)), max_entries=16)  # fmt: skip
    reference.subscribe(stop_at=stop)
    try:
        expected = drain(reference)
    finally:
        reference.close()
    inst.subscribe(stop_at=stop)
    got: list[Entry] = []
    kills = 0
    deadline = time.monotonic() + 120
    try:
        while not inst.done:
            assert time.monotonic() < deadline
            batch = inst.get_without_ack(150, timeout=0.5)
            if batch.id is None:
                continue
            got.extend(batch.entries)
            inst.ack(batch.id)
            if kills < 3 and len(got) > 700 * (kills + 1) and inst.reconnects >= kills:
                kills += _kill_dumps(mariadb) > 0
    finally:
        inst.close()
    assert kills >= 1 and inst.reconnects >= 1, (kills, inst.reconnects, len(got))
    assert got == expected
