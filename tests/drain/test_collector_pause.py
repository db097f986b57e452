"""The drain's pause of Python's cyclic garbage collector during a drain (pure, no services)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from airflow_provider_binlog.drain.collector import CollectorPause


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_while_any_drain_runs_then_restored() -> None:
    outer, inner = CollectorPause(), CollectorPause()
    with outer:
        assert not gc.isenabled()
        with inner:
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer drain still runs
        assert gc.get_freeze_count() > 0  # what lived before the pause is left out of collections
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with CollectorPause():
        pass
    assert not gc.isenabled()


def test_tick_collects_cycles_at_most_every_interval() -> None:
    with CollectorPause(interval=3600.0) as pause:
        ref = _cycle()
        pause.tick()  # too early: the cycle stays
        assert ref() is not None
        pause.interval = 0.0
        pause.tick()
        assert ref() is None


def test_exit_twice_and_exit_after_a_failed_start_change_nothing() -> None:
    pause = CollectorPause()
    pause.__exit__()  # never entered (the run failed before the drain)
    assert gc.isenabled()
    with pause:
        pass
    pause.__exit__()
    assert gc.isenabled()
