"""The 11-column benchmark table the issues name, and its loader (shared by the benchmarks).

INT, BIGINT, VARCHAR, DECIMAL(12,4), DATETIME(6), JSON, TEXT, DOUBLE, TINYINT, INT, DATE.
"""

from __future__ import annotations

import json
import random
from typing import Any

DDL = """
CREATE TABLE bench.t (
  id INT PRIMARY KEY, big BIGINT, name VARCHAR(64), amount DECIMAL(12,4), ts DATETIME(6),
  doc JSON, note TEXT, score DOUBLE, flag TINYINT, qty INT, day DATE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""
_ROW = "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"


def create(cur: Any) -> None:
    """(Re)create ``bench.t`` (empty)."""
    cur.execute("CREATE DATABASE IF NOT EXISTS bench")
    cur.execute("DROP TABLE IF EXISTS bench.t")
    cur.execute(DDL)


def insert_rows(cur: Any, rows: int, batch: int, seed: int = 42) -> None:
    """Insert rows ``0 .. rows-1`` with every value varied, ``batch`` rows per statement."""
    rnd = random.Random(seed)
    for base in range(0, rows, batch):
        n = min(batch, rows - base)
        args: list[Any] = []
        for i in range(base, base + n):
            doc = {"id": i, "tags": ["a", "b", str(i % 97)], "price": rnd.random() * 100, "ok": i % 2 == 0}
            args += [
                i, rnd.getrandbits(62), f"name-{i}-{rnd.getrandbits(32):x}", f"{rnd.random() * 1e6:.4f}",
                f"2024-01-{1 + i % 28:02d} 12:{i % 60:02d}:{i % 60:02d}.{i % 1000000:06d}",
                json.dumps(doc), "note " * rnd.randint(20, 120), rnd.random(), i % 128, i, "2024-05-06",
            ]  # fmt: skip
        cur.execute("INSERT INTO bench.t VALUES " + ",".join([_ROW] * n), args)
