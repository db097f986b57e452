"""The cut-over of an online schema-change tool in a run: swap the shadow table's lake copy in, or
re-snapshot (:mod:`..canal.online_copy` tracks the copy; this is the loop's side, with Spark).

When the merger's fold raises :class:`~..canal.sql.operations.ResnapshotNeeded` for ``t`` at a RENAME that
gives it a shadow table's rows, :class:`~.loop.ChunkLoop` has settled the running commit and committed
what the other targets hold (every copy row before the RENAME: the screen folds them first), then
calls :func:`prepare_swap`. When the copy can be swapped in, it writes the re-snapshot progress record
of ``t`` in status ``swapping`` with the copy's attempt and ``S`` just past the RENAME
(:func:`~..canal.online_copy.resnapshot_record`); the table re-snapshot the loop then runs takes it up
as an attempt whose chunks are all loaded: the swap (one commit marked at ``S``), the staging table
dropped, ``done``, with every crash guarantee of :mod:`..canal.snapshot.resnapshot`. Otherwise the re-snapshot
reads ``t`` from the source as before. Either way one line says which path and why, naming the table
and the RENAME's ``file:pos``.

The copy is swapped in only when it provably equals the source table at ``S``: the decision says so
(creation read, nothing it cannot follow), the staging table exists when the copy had rows (else an
empty one is made with the shadow's columns), its mark lies before the RENAME, and it was merged with
the same options as ``t``'s lake table and not as an append-only log.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_provider_binlog.canal.online_copy import OnlineCopies, SwapDecision, resnapshot_record

log = logging.getLogger(__name__)


def prepare_swap(
    copies: OnlineCopies, exc: Any, merger: Any, target: str, report: Any
) -> SwapDecision | None:
    """Make the re-snapshot ``exc`` asks for swap the shadow copy in when it can (see the module
    docstring); return the decision taken (``None``: the statement is no cut-over).

    :param exc: the :class:`~..canal.sql.operations.ResnapshotNeeded` of the cut-over.
    :param merger: the run's :class:`~..lake.write.merge.ChangeMerger` (its session and options).
    :param target: ``t``'s lake table, as the re-snapshot's record names it.
    :param report: ``report(level, line)``.
    """
    decision = copies.decision(exc.table, exc.position)
    if decision is None:
        return None
    reason = decision.reason
    rows = 0
    if reason is None:
        try:
            reason, rows = _check(copies, decision, merger, target)
        except Exception as exc_:  # a check that cannot be made: on the safe side
            reason = f"the lake copy could not be checked ({type(exc_).__name__}: {exc_})"
    where = f"destination {copies.destination}: {decision.table} at {decision.position}"
    if reason is not None:
        if decision.attempt is not None:  # a copy was kept and is not usable: it ends here
            copies.set_status(decision.shadow, "broken", reason)
        report(logging.INFO, f"{where}: cut-over from {decision.shadow}: re-snapshot, {reason}")
        return decision
    assert decision.attempt is not None
    copies.set_status(decision.shadow, "swapping")
    key, value = resnapshot_record(decision, target, rows)
    guard = copies.guard
    if guard is not None:
        guard()
    copies.meta.update_json(copies.identity, key, lambda _old: value)
    report(
        logging.INFO,
        f"{where}: cut-over from {decision.shadow}: its lake copy (read since its creation at "
        f"{decision.created}, {rows} rows) is swapped into {target}, no re-snapshot",
    )
    return decision


def _check(copies: OnlineCopies, decision: SwapDecision, merger: Any, target: str) -> tuple[str | None, int]:
    """Why the copy cannot be swapped in (``None``: it can) and its row count."""
    from airflow_provider_binlog.canal.online_copy import staging_target
    from airflow_provider_binlog.canal.snapshot.resnapshot import mark_key
    from airflow_provider_binlog.lake import commits
    from airflow_provider_binlog.lake.resnapshot import LakeResnapshot
    from airflow_provider_binlog.lake.sql import parse_name, quote_parts

    assert decision.attempt is not None
    staging = staging_target(target, decision.attempt)
    opts = merger.options_for(quote_parts(parse_name(target)))
    if opts.append_only:
        return f"{target} is append-only (its lake copy is a log of changes, not the table)", 0
    if merger.options_for(quote_parts(parse_name(staging))) != opts:
        return f"{target} has options of its own (target_options) that its lake copy was not merged with", 0
    spark = merger.spark
    swapper = LakeResnapshot(
        spark, copies.destination, decision.table, target, opts, keep=copies.live_attempts()
    )
    try:
        quoted = swapper.staging(decision.attempt)
        if decision.attempt not in swapper.leftovers():
            if decision.rows:
                return f"its lake copy {staging} is missing", 0
            if decision.table_schema is None:
                return "the columns of the copy are unknown", 0
            swapper.prepare(decision.attempt, decision.table_schema)  # an empty copy: an empty table
            return None, 0
        mark = commits.read_mark(spark, quoted, copies.destination)
        if mark is not None and not tuple(mark.order_key) < tuple(mark_key(decision.end_position)):
            return f"its lake copy {staging} holds changes past the cut-over ({mark.position})", 0
        rows = int(spark.table(quoted).count())
        return None, rows
    finally:
        swapper.close()


def swapped(copies: OnlineCopies, decision: SwapDecision | None, result: Any) -> None:
    """After the re-snapshot: record the copy ``swapped`` and say so in the result (``copied``)."""
    if decision is None or decision.reason is not None or result is None:
        return
    if getattr(result, "attempt", None) == decision.attempt and not getattr(result, "gone", False):
        result.copied = decision.shadow
        copies.set_status(decision.shadow, "swapped", cleaned=True)  # the re-snapshot dropped the staging


def finish(copies: OnlineCopies, merger: Any, report: Any) -> None:
    """At the end of a run: drop the staging tables of the copies that ended in it
    (:meth:`~..canal.online_copy.OnlineCopies.ended`)."""
    from airflow_provider_binlog.lake.resnapshot import LakeResnapshot

    for rec in copies.ended():
        base = str(rec["base"])
        target = copies.target_for(*base.split(".", 1))
        if target is not None:
            swapper = LakeResnapshot(merger.spark, copies.destination, base, target)
            try:
                swapper.drop_staging(str(rec["attempt"]))
            finally:
                swapper.close()
        copies.cleaned(rec)
        report(
            logging.INFO,
            f"destination {copies.destination}: the lake copy of {base} in {rec['source']} ended "
            f"({rec.get('status')}: {rec.get('why') or '-'}); its staging table is dropped",
        )


__all__ = ["finish", "prepare_swap", "swapped"]
