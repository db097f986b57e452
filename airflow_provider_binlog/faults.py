"""Failpoints: named places where a test can make the process die or fail on purpose.

Off unless ``BINLOG_CDC_FAILPOINTS`` is set, e.g. ``after_commit=kill`` or
``before_commit=raise@2`` (on the second hit) or several, comma-separated. Actions: ``kill``
(SIGKILL this process: a crash with no cleanup) and ``raise`` (raise :class:`InjectedFault`).
The crash tests use them to stop the task exactly between the Iceberg commit and the ack.

Failpoints in the code: ``drain`` (after a batch was taken from the store), ``before_commit``,
``merge_table`` (before each target's MERGE of a commit: later hits leave some targets committed),
``after_commit`` (the lake holds the chunk, nothing acked yet), ``ack`` (before each batch's ack:
later hits leave some batches acked), ``after_ack``; ``snapshot_before_load`` and
``snapshot_after_load`` around each snapshot chunk.
"""

from __future__ import annotations

import os
import signal

from airflow_provider_binlog.errors import BinlogCdcError

ENV = "BINLOG_CDC_FAILPOINTS"
_hits: dict[str, int] = {}


class InjectedFault(BinlogCdcError):
    """Raised by a ``raise`` failpoint."""


def _parse(spec: str) -> dict[str, tuple[str, int]]:
    out = {}
    for item in filter(None, (x.strip() for x in spec.split(","))):
        name, _, action = item.partition("=")
        action, _, nth = (action or "kill").partition("@")
        out[name] = (action, int(nth or 1))
    return out


def failpoint(name: str) -> None:
    """Do what ``BINLOG_CDC_FAILPOINTS`` says for ``name`` (nothing when unset)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    rule = _parse(spec).get(name)
    if rule is None:
        return
    _hits[name] = _hits.get(name, 0) + 1
    action, nth = rule
    if _hits[name] != nth:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise InjectedFault(f"failpoint {name} ({action}@{nth})")
