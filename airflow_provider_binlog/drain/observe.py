"""What a run measures, told to an observer as it happens (no Airflow here: the operator's observer,
:class:`~airflow_provider_binlog.operators.metrics.RunMetrics`, sends them through Airflow's metrics).

==========================  ========================================================================
``lag(when, seconds)``      ``start``: once subscribed, the age of the oldest transaction after the
                            run's start (0: nothing to read); ``end``: after the last ack, the age of
                            the oldest transaction still unread (what came after the stop point). As
                            ``binlog-cdc status`` measures it (:func:`.status.first_unread`: one short
                            side dump each); not told when unknown (a GTID-only start, a dump failed)
``commit(table, seconds)``  each Iceberg commit of the drain to a lake table (dotted name; a
                            re-snapshot's too, not those of an initial snapshot before the drain),
                            from its first attempt to its end, conflict retries included, on the
                            committing thread (:func:`..lake.commits.observe_commits`)
``tables(read, merged)``    at the end of the run, also of a failed one: per lake table the changes
                            (row changes and statements) read for it
                            (:attr:`~..lake.write.merge.ChangeMerger.read`) and the counts of the commits
                            that returned (the summary's ``tables``)
==========================  ========================================================================

Every call is guarded: an observer that raises is reported (a warning) and never fails the run.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from airflow_provider_binlog.drain.loop import Report


class RunObserver(Protocol):
    """Told what a run measured (see the module docstring)."""

    def lag(self, when: str, seconds: float) -> None: ...

    def commit(self, table: str, seconds: float) -> None: ...

    def tables(self, read: Mapping[str, int], merged: Mapping[str, Mapping[str, int]]) -> None: ...


def dotted(quoted: str) -> str:
    """The dotted name of a quoted lake table name (as the summary names it)."""
    from airflow_provider_binlog.canal.names import name_text, parse_name

    return name_text(parse_name(quoted))


class Observing:
    """A run's side of its observer: the measurements and the guarded calls.

    :param observer: told what the run measured (``None``: nothing is measured for it).
    :param destination: the run's destination (its commits are the ones observed).
    :param report: where a failing observer is reported.
    """

    def __init__(self, observer: RunObserver | None, destination: str, report: Report) -> None:
        self.observer = observer
        self.destination = destination
        self.report = report

    def _call(self, what: str, *args: Any) -> None:
        if self.observer is None:
            return
        try:
            getattr(self.observer, what)(*args)
        except Exception as exc:
            self.report(
                logging.WARNING,
                f"destination {self.destination}: the run's observer failed ({what}): "
                f"{type(exc).__name__}: {exc}",
            )

    def lag(self, when: str, client: Any, position: Any, included: bool, matches: Any = None) -> float | None:
        """Measure the lag at ``position`` (``included``: its event is still to be read) and tell it;
        ``matches``: the destination's filter (only its tables' transactions are its lag)."""
        if self.observer is None or position is None:
            return None
        from airflow_provider_binlog.drain.status import first_unread

        unread, since = first_unread(client, position, included=included, matches=matches)
        if unread and since is None:
            return None  # not found within the dump's bound, or the dump failed
        seconds = max(time.time() - since, 0.0) if since is not None else 0.0
        self._call("lag", when, seconds)
        return seconds

    @contextlib.contextmanager
    def commits(self) -> Iterator[None]:
        """Inside the block, each commit of the destination is told with its seconds."""
        if self.observer is None:
            yield
            return
        from airflow_provider_binlog.lake.commits import observe_commits

        with observe_commits(self.destination, lambda t, s: self._call("commit", dotted(t), s)):
            yield

    def tables(self, merger: Any, totals: Mapping[str, Mapping[str, int]]) -> None:
        """Tell the changes read per table (``merger``: the run's merger, ``None`` if never made)
        and the counts of the commits that returned."""
        if self.observer is None:
            return
        read = {dotted(t): n for t, n in getattr(merger, "read", {}).items()} if merger is not None else {}
        self._call("tables", read, totals)
