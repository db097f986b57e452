"""What grows in a long drain: a memory probe for ``bench/end_to_end.py`` (issue #20).

Set ``BENCH_MEMPROBE=1`` in a run's environment (``--variant-env BENCH_MEMPROBE=1``, or exported:
the run processes inherit it) and each progress line of the drain is followed by one ``mem:`` line:
the process RSS, glibc's heap (``mallinfo2``: bytes in use and bytes free but kept), pyarrow's
allocated bytes, the Spark driver JVM's direct buffers, the objects the cyclic collector tracks, and
the object types whose count grew most since the first progress line. ``BENCH_MEMPROBE=trace`` also
starts :mod:`tracemalloc` (slow: about 2x) and prints the source lines whose live allocations grew
most since the first progress line.
"""

from __future__ import annotations

import collections
import ctypes
import gc
import logging
import os
import tracemalloc
import weakref
from typing import Any

_log = logging.getLogger("bench.memprobe")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _mallinfo() -> tuple[int, int, int] | None:
    """(non-mmapped heap bytes, of it in use, mmapped bytes) of glibc's malloc, main arena only."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        f = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    f.restype = _Mallinfo2
    m = f()
    return m.arena, m.uordblks, m.hblkhd


def _pymalloc() -> tuple[int, int, int] | None:
    """(arena bytes, bytes in allocated blocks, arenas highwater) of Python's small-object allocator
    (``sys._debugmallocstats``, which writes to the C stderr: read back through a temporary file)."""
    import sys
    import tempfile

    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(tmp.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode(errors="replace")
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        digits = value.strip().replace(",", "")
        if digits.isdigit():
            found.setdefault(key.strip(), int(digits))  # the first "Total" is the arenas'
    try:
        return (found["Total"], found["# bytes in allocated blocks"], found["# arenas highwater mark"])
    except KeyError:
        return None


def _jvm_direct() -> int | None:
    """Bytes of the Spark driver JVM's direct buffers (``BufferPoolMXBean`` "direct": NIO's and
    netty's, so Arrow's through Iceberg's vectorized reads), or ``None`` without a running Spark."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None or sc._jvm is None:
        return None
    jvm = sc._jvm
    kind = jvm.java.lang.Class.forName("java.lang.management.BufferPoolMXBean")
    for pool in jvm.java.lang.management.ManagementFactory.getPlatformMXBeans(kind):
        if pool.getName() == "direct":
            return int(pool.getMemoryUsed())
    return None


class MemProbe:
    def __init__(self, mode: str) -> None:
        self.trace = mode == "trace"
        self.first_types: collections.Counter[str] | None = None
        self.first_snap: Any = None
        if self.trace:
            tracemalloc.start(1)
        # the instances' stores, to print how full they are (made before gc.freeze(), so not found
        # by gc.get_objects())
        from airflow_provider_binlog.canal import store

        self.stores: weakref.WeakSet[Any] = weakref.WeakSet()
        made = store.EventStore.__init__

        def init(me: Any, *args: Any, **kwargs: Any) -> None:
            made(me, *args, **kwargs)
            self.stores.add(me)

        store.EventStore.__init__ = init  # type: ignore[method-assign]

    def at_progress(self, rss: int) -> None:
        import pyarrow as pa

        mb = 1 << 20
        objs = gc.get_objects()
        types = collections.Counter(type(o).__name__ for o in objs)
        heap = _mallinfo()
        parts = [f"rss {rss // mb} MB"]
        if heap is not None:
            parts.append(f"malloc heap {heap[0] // mb} MB (in use {heap[1] // mb}, mmapped {heap[2] // mb})")
        py = _pymalloc()
        if py is not None:
            parts.append(f"pymalloc {py[0] // mb} MB (in use {py[1] // mb}, highwater {py[2]} arenas)")
        parts.append(f"arrow {pa.total_allocated_bytes() // mb} MB ({pa.default_memory_pool().backend_name})")
        direct = _jvm_direct()
        if direct is not None:
            parts.append(f"JVM direct buffers {direct // mb} MB")
        parts.append(f"gc-tracked {sum(types.values()):,}")
        for store in list(self.stores):
            held = store.put_seq - store._release_seq
            estimated, peak = store.used_bytes // mb, store.peak_bytes // mb
            parts.append(
                f"store {held:,} entries ({estimated} MB estimated; peak {store.peak_entries:,}, {peak} MB)"
            )
        if self.first_types is None:
            self.first_types = types
        else:
            grown = (types - self.first_types).most_common(6)
            parts.append("grown: " + ", ".join(f"{k} +{v:,}" for k, v in grown))
        del objs
        if self.trace:
            traced, _peak = tracemalloc.get_traced_memory()
            parts.append(f"traced {traced // mb} MB")
            mine = tracemalloc.Filter(False, tracemalloc.__file__)
            snap = tracemalloc.take_snapshot().filter_traces([mine])
            if self.first_snap is None:
                self.first_snap = snap
            else:
                for stat in snap.compare_to(self.first_snap, "lineno")[:8]:
                    diff = f"{stat.size_diff / mb:+.1f} MB {stat.count_diff:+,}"
                    parts.append(f"\n        {diff} {stat.traceback}")
        _log.info("mem: " + "; ".join(parts))


def from_env() -> MemProbe | None:
    mode = os.environ.get("BENCH_MEMPROBE", "")
    return MemProbe(mode) if mode else None
