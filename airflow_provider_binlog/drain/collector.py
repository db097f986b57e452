"""Python's cyclic garbage collector paused while a drain runs (see :class:`CollectorPause`)."""

from __future__ import annotations

import gc
import threading
import time


class CollectorPause:
    """Python's cyclic garbage collector paused while changes are drained.

    A drain allocates millions of small container objects (row changes, positions, keys) that die
    by reference counting; the collector would scan each of them at least once, which cost the
    operator process 40% of its CPU (``bench/end_to_end.py``, 1M changes: 29.5 against 17.8
    CPU-seconds). Cycles are rare on this path, so automatic collection is off while any drain
    runs in the process, and :meth:`tick` (after each commit) runs a full collection at most every
    ``interval`` seconds, which bounds what a cycle can hold on to. The objects alive when the first
    pause began are frozen out of those collections (``gc.freeze``) and thawed when the last ends.
    """

    _lock = threading.Lock()
    _active = 0
    _was_enabled = False

    def __init__(self, interval: float = 30.0) -> None:
        self.interval = interval
        self._last = 0.0
        self._on = False

    def __enter__(self) -> CollectorPause:
        cls = type(self)
        with cls._lock:
            if cls._active == 0:
                cls._was_enabled = gc.isenabled()
                gc.disable()
                gc.freeze()
            cls._active += 1
        self._on = True
        self._last = time.monotonic()
        return self

    def tick(self) -> None:
        """Collect now if ``interval`` seconds passed since the pause began or the last collection."""
        now = time.monotonic()
        if self._on and now - self._last >= self.interval:
            gc.collect()
            self._last = now

    def __exit__(self, *exc: object) -> None:
        if not self._on:
            return
        self._on = False
        cls = type(self)
        with cls._lock:
            cls._active -= 1
            if cls._active == 0:
                gc.unfreeze()
                if cls._was_enabled:
                    gc.enable()
