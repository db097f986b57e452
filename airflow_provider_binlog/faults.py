"""Failpoints: named places where a test can make the process die or fail on purpose.

Off unless ``BINLOG_CDC_FAILPOINTS`` is set to rules, comma-separated, each ``name=action@when``:

* ``after_commit=kill`` (``@1``: the first hit), ``before_commit=raise@2`` (the second hit);
* ``drain=kill@3+1.5``: the third hit starts a timer that SIGKILLs the process 1.5 s later,
  wherever it is then (reading, starting Spark, inside a MERGE, writing an ack); with
  ``after_ack=kill@2`` beside it, whichever comes first kills, so a run that reaches its second
  ``after_ack`` is certain to be killed while it works.

Actions: ``kill`` (SIGKILL this process: a crash with no cleanup), ``raise`` (raise
:class:`InjectedFault`) and ``pause`` (the hitting thread writes a line starting with
:data:`PAUSE_MARK` to stderr and waits until the file :func:`continue_file` of this process exists,
at most the rule's delay or 600 s: a harness does something meanwhile, then creates the file; the
process's other threads, e.g. its ZooKeeper session, go on). A kill first
writes one line starting with :data:`KILL_MARK` to stderr,
naming where it landed, so a harness can tell a planned kill from any other death. Hits are
counted per name (for names that have a rule) across every thread of the process.

Failpoints in the code: ``drain`` (after a batch was taken from the store), ``before_commit``,
``merge_table`` (before each target's MERGE of a commit: later hits leave some targets committed),
``after_commit`` (the lake holds the chunk, nothing acked yet), ``ack`` (once per batch of a
chunk, before its batches are acked together: later hits leave earlier chunks acked),
``after_ack``; ``snapshot_before_load`` and ``snapshot_after_load`` around each snapshot chunk;
``lake_commit`` before each attempt of an Iceberg commit (:func:`..lake.commits.commit`) and
``mark_tag`` after it landed, before the destination's mark tag moves (a commit Spark made has
not moved it);
``file_written`` when the driver has written a data file (and for its own MERGE a deletion
vector file) and not committed it yet (:func:`..lake.native.file_append.write_committed`,
:func:`..lake.native.position_delta.merge_file`);
``watch_announce`` when an asset watcher's range is pending in the meta store and its trigger event
not yet handed to the triggerer, ``watch_confirm`` when Airflow stored that event and the watermark
has not moved yet (:mod:`..triggers.watch`).
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_binlog import settings
from airflow_provider_binlog.errors import BinlogCdcError

ENV = settings.env_name("failpoints")
KILL_MARK = "failpoint kill: "
PAUSE_MARK = "failpoint pause: "

_lock = threading.Lock()
_hits: dict[str, int] = {}


class InjectedFault(BinlogCdcError):
    """Raised by a ``raise`` failpoint."""


@dataclass(frozen=True)
class Rule:
    """What one failpoint does: ``action`` at hit ``nth``, ``delay`` seconds later (from a timer
    thread) when set."""

    action: str
    nth: int = 1
    delay: float | None = None

    def __str__(self) -> str:
        return f"{self.action}@{self.nth}" + ("" if self.delay is None else f"+{self.delay:g}")


def parse(spec: str) -> dict[str, Rule]:
    """The rules of a ``BINLOG_CDC_FAILPOINTS`` value, by failpoint name.

    :raises ValueError: a hit number or delay that does not parse or is out of range, or a delay
        with an action other than ``kill``.
    """
    out = {}
    for item in filter(None, (x.strip() for x in spec.split(","))):
        name, _, action = item.partition("=")
        action, _, when = (action or "kill").partition("@")
        nth_text, plus, delay_text = (when or "1").partition("+")
        nth = int(nth_text)
        delay = float(delay_text) if plus else None
        if nth < 1 or (delay is not None and not delay >= 0):
            raise ValueError(f"failpoint rule {item!r}: the hit counts from 1, a delay is >= 0")
        if delay is not None and action not in ("kill", "pause"):
            raise ValueError(f"failpoint rule {item!r}: a delay needs the kill action (or pause: its bound)")
        out[name.strip()] = Rule(action, nth, delay)
    return out


def _kill(where: str) -> None:
    os.write(2, f"\n{KILL_MARK}{where}\n".encode())  # unbuffered: SIGKILL leaves no flush
    os.kill(os.getpid(), signal.SIGKILL)


def continue_file(pid: int) -> Path:
    """The file whose creation ends a ``pause`` of process ``pid``."""
    return Path(tempfile.gettempdir()) / f"binlog-cdc-failpoint-continue-{pid}"


def _pause(where: str, bound: float | None) -> None:
    release = continue_file(os.getpid())
    os.write(2, f"\n{PAUSE_MARK}{where} pid={os.getpid()} until {release} exists\n".encode())
    deadline = time.monotonic() + (600.0 if bound is None else bound)
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    release.unlink(missing_ok=True)


def failpoint(name: str) -> None:
    """Do what ``BINLOG_CDC_FAILPOINTS`` says for ``name`` (nothing when unset)."""
    spec = settings.current().failpoints
    if not spec:
        return
    rule = parse(spec).get(name)
    if rule is None:
        return
    with _lock:  # merge_table is hit from several threads at once
        hit = _hits[name] = _hits.get(name, 0) + 1
    if hit != rule.nth:
        return
    if rule.delay is not None:
        timer = threading.Timer(rule.delay, _kill, (f"a timer {rule.delay:g} s after {name}@{hit} ({rule})",))
        timer.daemon = True
        timer.start()
        return
    if rule.action == "kill":
        _kill(f"{name}@{hit} ({rule})")
    if rule.action == "pause":
        _pause(f"{name}@{hit} ({rule})", rule.delay)
        return
    raise InjectedFault(f"failpoint {name} ({rule})")


def reset() -> None:
    """Forget the hits counted so far (for tests in one process)."""
    with _lock:
        _hits.clear()
