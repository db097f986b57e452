"""The lake copy of an online schema-change tool's shadow table, swapped in at its cut-over.

gh-ost and pt-online-schema-change alter a big table ``t`` without locking it::

    gh-ost:  CREATE TABLE _t_gho LIKE t; ALTER TABLE _t_gho ...;
             INSERT IGNORE INTO _t_gho (..) SELECT .. FROM t  (chunks; t's DML applied to _t_gho)
             RENAME TABLE t TO _t_del, _t_gho TO t
    pt-osc:  CREATE TABLE _t_new (t's definition) or LIKE t; ALTER TABLE _t_new ...;
             triggers on t write REPLACE/DELETE into _t_new; INSERT LOW_PRIORITY IGNORE INTO _t_new SELECT ..
             RENAME TABLE t TO _t_old, _t_new TO t; DROP TRIGGER ..; DROP TABLE _t_old

The shadow table (``_t_gho``, ``_t_new``: :func:`copy_base`) starts empty, and in ROW format every row
it gets is a row event. So when a destination read its CREATE, the lake can follow it into a staging
table beside ``t``'s lake table (``{table}__resnapshot_{attempt}``, the re-snapshot's naming,
:func:`~.resnapshot.staging_parts`), merged like any target (the same exactly-once marks), and at the
cut-over swap it in as a finished re-snapshot does (one Iceberg commit, :mod:`.resnapshot`) instead of
reading the whole source table again.

:class:`OnlineCopies` screens every batch before the merger folds it (the drain's loop):

* a shadow table's CREATE starts a copy (a record, below); the attempt id is derived from the
  destination, the shadow's name and the CREATE's ``file:pos``, so a re-read gives the same one;
* its row changes are handed on under a source name of their own, ``{shadow}\\0{attempt}`` (no
  MySQL name holds a NUL), which :meth:`OnlineCopies.target_for` routes to the staging table, so one
  migration's rows never reach another's staging table;
* its DDL entries never reach the merger. An ALTER before the first row is fine (the staging table is
  made at the first row with the columns then); anything the copy cannot follow exactly breaks it: an
  ALTER after rows were copied, an ALTER not understood or renaming it, statement-format DML on it, a
  TRUNCATE, ``CREATE .. SELECT`` or ``IF NOT EXISTS``, a RENAME to another name, a row without a key,
  column rules (``columns=``) on ``t``; a DROP ends it;
* at a RENAME that gives ``t`` the rows of its tracked shadow table it records a
  :class:`SwapDecision` (the copy, or why not); the merger's fold raises
  :class:`~.operations.ResnapshotNeeded` for ``t`` there as before, and the loop asks
  :meth:`OnlineCopies.decision` (:mod:`...drain.online_copy`): the copy is swapped in, or ``t`` is
  re-snapshotted as before. Either way a line names the table, the ``file:pos`` and why.

The copy rows are moved to the front of the screened batch, so the merger folds the staging target
before ``t``: when ``t``'s fold raises at the RENAME, every copy row before it is held, and the loop
commits them before the swap.

Records, in the meta store under the destination (written when the screen meets the statement, which
may be before the cursor passes it: a crash re-reads from the cursor, and every state below either
is derived again or is on the safe side)::

    copy/{schema.shadow}  {"source": "shop._t_gho", "base": "shop.t", "attempt": "3f9c..",
                           "created": "file:pos", "rows": bool, "status": "copying"|"swapping"|
                           "swapped"|"broken"|"dropped"|"superseded", "why": "..", "at": "file:pos",
                           "cut_over": "file:pos", "cleaned": bool}

A re-read CREATE of a copy already ``swapped``, ``broken`` or ``dropped`` (same attempt) leaves the
record as it is; a record that says ``rows`` or ``broken`` ahead of the cursor only makes the swap
re-snapshot. Without a record (the destination started after the CREATE) the shadow's rows are not
kept and the cut-over re-snapshots ``t``. A cut-over the lake table's mark already covers (a
re-snapshot of ``t`` taken after it) needs no swap: the copy is ``superseded``. Staging tables of
copies that ended are dropped at the end of the run (:meth:`OnlineCopies.ended`) or, after a failed
run, at the next one's start (:func:`settle_copies`, which also settles the records of swaps made).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_binlog.binlog.columns import TableSchema
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import DdlEntry, DdlKind, Entry, RowChange
from airflow_provider_binlog.canal.filter import TableFilter
from airflow_provider_binlog.canal.meta.base import MetaManager
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.names import name_text, parse_name
from airflow_provider_binlog.canal.snapshot.resnapshot import resnapshot_key, staging_parts
from airflow_provider_binlog.canal.snapshot.values import table_key
from airflow_provider_binlog.canal.sql.operations import rename_origins

log = logging.getLogger(__name__)

PREFIX = "copy"
COPY_SUFFIXES = ("gho", "new")
"""Suffixes of the shadow tables that receive the copy (``_t_gho``: gh-ost, ``_t_new``: pt-osc); the
changelog (``_ghc``) and parked (``_del``, ``_old``) tables are never read."""
_COPY = re.compile(r"_(.+)_(?:" + "|".join(COPY_SUFFIXES) + ")", re.IGNORECASE | re.DOTALL)
SEPARATOR = "\x00"
"""Between the shadow's name and the attempt in the source name its copy rows carry."""
LIVE = ("copying", "swapping")
"""Statuses of a copy whose rows are kept (its staging table is in use)."""
_SELECT = re.compile(r"\bSELECT\b", re.IGNORECASE)

Report = Callable[[int, str], None]
TargetFor = Callable[[str, str], "str | None"]


def copy_base(table: str) -> str | None:
    """The table a shadow copy table is named after (``_t_gho``, ``_t_new`` -> ``t``), else ``None``."""
    m = _COPY.fullmatch(table)
    return m.group(1) if m else None


def copy_attempt(destination: str, source: str, created: BinlogPosition | str) -> str:
    """The attempt id of the copy of ``source`` (``schema.shadow``) created at ``created``."""
    text = f"{destination}\0{source}\0{created}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def copy_key(source: str) -> str:
    """The record key of the copy into shadow table ``source`` (``schema.shadow``)."""
    return PREFIX + table_key(source)[len("snapshot") :]


def staging_target(target: str, attempt: str) -> str:
    """The staging table (name as text) of ``attempt`` beside the lake table ``target``."""
    return name_text(staging_parts(parse_name(target), attempt))


@dataclass(frozen=True)
class SwapDecision:
    """What a RENAME giving ``table`` its shadow copy's rows does (see the module docstring).

    :param table: ``schema.table`` (the cut-over's new name).
    :param shadow: ``schema.shadow`` whose rows it takes.
    :param position: the RENAME's ``file:pos``; ``end_position``: just past it (the swap's mark).
    :param attempt: the copy's attempt (its staging table), ``None`` when ``reason`` says why not.
    :param reason: why the copy cannot be swapped in (``t`` is re-snapshotted), ``None``: it can.
    :param table_schema: ``table``'s columns after the RENAME (the shadow's).
    :param rows: the copy received rows (else the staging table may not exist yet).
    :param created: where the copy started.
    """

    table: str
    shadow: str
    position: BinlogPosition
    end_position: BinlogPosition
    attempt: str | None
    reason: str | None
    table_schema: TableSchema | None = None
    rows: bool = False
    created: str = ""


class OnlineCopies:
    """Follows the shadow tables of online schema-change tools into staging tables (see the module
    docstring).

    :param destination: the destination (in attempt ids and log lines).
    :param meta: the destination's meta store (the records); ``identity`` its client identity.
    :param target_for: ``(schema, table) -> lake table or None``: the destination's routes.
    :param table_filter: the destination's filter (its column rules).
    :param guard: called before every record write (the running node's check).
    :param report: ``report(level, line)`` for the task log.
    """

    def __init__(
        self,
        destination: str,
        meta: MetaManager,
        identity: ClientIdentity,
        target_for: TargetFor,
        table_filter: TableFilter | None = None,
        guard: Callable[[], None] | None = None,
        report: Report | None = None,
    ) -> None:
        self.destination = destination
        self.meta = meta
        self.identity = identity
        self.target_for = target_for
        self.table_filter = table_filter
        self.guard = guard
        self.report = report or (lambda level, line: log.log(level, line))
        self._records: dict[str, dict[str, Any]] | None = None
        self.decisions: dict[tuple[str, str], SwapDecision] = {}
        self._bases: dict[tuple[str, str], str | None] = {}

    @property
    def records(self) -> dict[str, dict[str, Any]]:
        """Shadow ``schema.table`` -> its copy record (read from the meta store at first use: after the
        run's start settled them, :func:`settle_copies`)."""
        if self._records is None:
            self._records = {}
            for name in self.meta.list_keys(self.identity, PREFIX):
                value = self.meta.get_json(self.identity, f"{PREFIX}/{name}").value
                if isinstance(value, dict) and value.get("source"):
                    self._records[str(value["source"])] = value
        return self._records

    # ---- names -----------------------------------------------------------------------------------

    def base_of(self, schema: str, table: str) -> str | None:
        """The routed table whose copy ``schema.table`` is, or ``None`` (no shadow name, the base is
        not routed, or the shadow has a route of its own)."""
        key = (schema, table)
        if key not in self._bases:
            base = copy_base(table)
            if base is not None and (
                self.target_for(schema, table) is not None or self.target_for(schema, base) is None
            ):
                base = None
            self._bases[key] = base
        return self._bases[key]

    def resolve(self, schema: str, table: str) -> str | None:
        """The staging table of a copy row's source name (``{shadow}\\0{attempt}``), else ``None``."""
        shadow, sep, attempt = table.partition(SEPARATOR)
        if not sep:
            return None
        base = copy_base(shadow)
        target = self.target_for(schema, base) if base is not None else None
        return None if target is None else staging_target(target, attempt)

    def resolver(self, target_for: TargetFor) -> TargetFor:
        """``target_for`` that also routes copy rows to their staging tables."""

        def resolve(schema: str, table: str) -> str | None:
            if SEPARATOR in table:
                return self.resolve(schema, table)
            return target_for(schema, table)

        return resolve

    def live_attempts(self) -> set[str]:
        """Attempts whose staging tables are in use."""
        return {str(r["attempt"]) for r in self.records.values() if r.get("status") in LIVE}

    # ---- the screen ------------------------------------------------------------------------------

    def screen(self, entries: Sequence[Entry]) -> Sequence[Entry]:
        """The batch as the merger is to fold it: copy rows renamed and first, the shadow tables' other
        entries taken out (see the module docstring)."""
        for e in entries:  # the common batch: no DDL, no table named like a shadow (they start with _)
            kind = type(e)
            if (kind is RowChange and e.table[:1] == "_") or kind is DdlEntry:  # type: ignore[union-attr,index]
                break
        else:  # as it is (a copy cost a pass over cold entries)
            return entries
        copies: list[Entry] = []
        out: list[Entry] = []
        base_of = self.base_of
        for e in entries:
            kind = type(e)
            if kind is RowChange:
                assert isinstance(e, RowChange)
                if base_of(e.schema, e.table) is None:
                    out.append(e)
                    continue
                row = self._row(e)
                if row is not None:
                    copies.append(row)
            elif kind is DdlEntry:
                assert isinstance(e, DdlEntry)
                if e.table is not None and base_of(e.schema, e.table) is not None:
                    self._shadow_statement(e)
                    continue
                if e.kind is DdlKind.DDL and e.table is not None:
                    self._cut_over(e)
                out.append(e)
            else:
                out.append(e)
        return copies + out if copies else out

    def decision(self, table: str, position: BinlogPosition) -> SwapDecision | None:
        """What the RENAME at ``position`` giving ``table`` a shadow's rows does (``None``: it does not)."""
        return self.decisions.get((table, str(position)))

    def _row(self, e: RowChange) -> RowChange | None:
        source = f"{e.schema}.{e.table}"
        rec = self.records.get(source)
        if rec is None or rec.get("status") not in LIVE:
            return None  # not followed: its creation was not read, or the copy ended
        if not e.primary_key:
            self._end(rec, "broken", f"a row without a primary key at {e.position}", e.position)
            return None
        if not rec.get("rows"):
            self._put({**rec, "rows": True})
        return dataclasses.replace(e, table=f"{e.table}{SEPARATOR}{rec['attempt']}")

    def _shadow_statement(self, e: DdlEntry) -> None:
        assert e.table is not None
        source = f"{e.schema}.{e.table}"
        rec = self.records.get(source)
        live = rec is not None and rec.get("status") in LIVE
        if e.kind is DdlKind.STATEMENT_DML:
            if live:
                assert rec is not None
                self._end(rec, "broken", f"statement-format DML on it at {e.position}", e.position)
            return
        if e.kind is DdlKind.TRUNCATE:
            if live:
                assert rec is not None
                self._end(rec, "broken", f"a TRUNCATE of it at {e.position}", e.position)
            return
        stmt = e.statement
        if stmt is not None and stmt.kind == "create":
            self._created(e, stmt.if_not_exists or _SELECT.search(e.sql) is not None)
            return
        if not live:
            return
        assert rec is not None
        if stmt is None or stmt.kind not in ("alter", "drop", "rename"):
            self._end(rec, "broken", f"a statement not understood on it at {e.position}", e.position)
        elif stmt.kind == "drop":
            self._end(rec, "dropped", f"dropped at {e.position}", e.position)
        elif stmt.kind == "rename":
            origins = rename_origins(stmt.renames)
            base = (e.schema, self.base_of(e.schema, e.table) or "")
            if origins.get(base) != (e.schema, e.table):  # not the cut-over into its own table
                self._end(rec, "broken", f"renamed other than into {base[1]} at {e.position}", e.position)
        elif stmt.renames or not stmt.complete:
            self._end(rec, "broken", f"an ALTER not followed here at {e.position}", e.position)
        elif rec.get("rows"):
            self._end(rec, "broken", f"an ALTER after rows were copied, at {e.position}", e.position)

    def _created(self, e: DdlEntry, inexact: bool) -> None:
        assert e.table is not None
        source = f"{e.schema}.{e.table}"
        base = self.base_of(e.schema, e.table)
        attempt = copy_attempt(self.destination, source, e.position)
        rec = self.records.get(source)
        if rec is not None and rec.get("attempt") == attempt and rec.get("status") not in LIVE:
            return  # read again after the copy ended: it stays ended
        status, why = "copying", ""
        if inexact:
            status, why = "broken", "created by CREATE .. SELECT or IF NOT EXISTS (may not start empty)"
        elif (
            self.table_filter is not None
            and base is not None
            and self.table_filter.has_column_rules(e.schema, base)
        ):
            status, why = "broken", f"column rules (columns=) on {e.schema}.{base}"
        record = {
            "source": source, "base": f"{e.schema}.{base}", "attempt": attempt, "created": str(e.position),
            "rows": False, "status": status, "why": why, "at": str(e.position), "cleaned": False,
        }  # fmt: skip
        self._put(record)
        self.report(
            logging.INFO,
            f"destination {self.destination}: {source} created at {e.position} as a copy of "
            f"{e.schema}.{base}: "
            + (f"not followed ({why})" if why else f"its rows are kept (attempt {attempt})"),
        )

    def _cut_over(self, e: DdlEntry) -> None:
        """Record what a RENAME giving ``e.table`` a shadow copy's rows does."""
        stmt = e.statement
        if stmt is None or not stmt.renames:
            return
        assert e.table is not None
        came_from = rename_origins(stmt.renames).get((e.schema, e.table))
        if came_from is None or came_from[0] != e.schema or copy_base(came_from[1]) != e.table:
            return  # not a shadow table's cut-over
        shadow = f"{came_from[0]}.{came_from[1]}"
        table = f"{e.schema}.{e.table}"
        rec = self.records.get(shadow)
        attempt, reason = None, None
        if self.base_of(*came_from) is None:
            reason = f"{shadow} is not followed as a copy (it has a route of its own)"
        elif rec is None:
            reason = (
                f"the creation of {shadow} was not read by this destination (before its cursor), so its "
                "copy is not all in the lake"
            )
        elif rec.get("status") not in LIVE:
            reason = f"the copy in {shadow} is not usable: {rec.get('why') or rec.get('status')}"
        else:
            attempt = str(rec["attempt"])
            if rec.get("cut_over") != str(e.position):
                self._put({**rec, "cut_over": str(e.position)})
        self.decisions[(table, str(e.position))] = SwapDecision(
            table, shadow, e.position, e.end_position, attempt, reason, e.table_schema,
            bool(rec and rec.get("rows")), str(rec.get("created", "")) if rec else "",
        )  # fmt: skip

    # ---- records ---------------------------------------------------------------------------------

    def _end(self, rec: dict[str, Any], status: str, why: str, at: BinlogPosition) -> None:
        self._put({**rec, "status": status, "why": why, "at": str(at)})
        self.report(
            logging.INFO,
            f"destination {self.destination}: the lake copy of {rec['base']} in {rec['source']} is "
            f"{status}: {why}" + ("; its cut-over re-snapshots the table" if status == "broken" else ""),
        )

    def _put(self, record: dict[str, Any]) -> None:
        self.records[str(record["source"])] = record
        if self.guard is not None:
            self.guard()
        self.meta.update_json(self.identity, copy_key(str(record["source"])), lambda _old: record)

    def set_status(self, shadow: str, status: str, why: str = "", cleaned: bool = False) -> None:
        """Record the copy into ``shadow`` as ``swapping`` or ``swapped`` (the loop, at the swap), or
        ``broken`` (its lake copy cannot be swapped in); ``cleaned``: its staging table is gone."""
        rec = self.records.get(shadow)
        if rec is not None:
            self._put({**rec, "status": status, "cleaned": cleaned, **({"why": why} if why else {})})

    def ended(self) -> list[dict[str, Any]]:
        """At the end of a run that read everything it took: the copies whose staging tables are no
        longer needed and not dropped yet. A copy whose cut-over this run read and did not swap in is
        recorded ``superseded`` here (the lake table's mark covered the RENAME: a re-snapshot after it
        holds its effect); the caller drops their staging tables, then :meth:`cleaned` each."""
        cut = {d.shadow for d in self.decisions.values() if d.attempt is not None}
        out = []
        for source, rec in list(self.records.items()):
            if rec.get("cleaned"):
                continue
            if rec.get("status") in LIVE and source in cut:
                rec = {**rec, "status": "superseded", "why": f"its cut-over at {rec.get('cut_over')} was "
                       "covered by the lake table's mark (a re-snapshot after it)"}  # fmt: skip
                self._put(rec)
            if rec.get("status") not in LIVE:
                out.append(rec)
        return out

    def cleaned(self, rec: dict[str, Any]) -> None:
        """Record that ``rec``'s staging table was dropped."""
        self._put({**self.records.get(str(rec["source"]), rec), "cleaned": True})


def resnapshot_record(decision: SwapDecision, target: str, rows: int) -> tuple[str, dict[str, Any]]:
    """The re-snapshot progress record (key, value) that makes a table re-snapshot swap the copy in:
    attempt = the copy's, ``start`` just past the RENAME, status ``swapping`` (see :mod:`.resnapshot`)."""
    assert decision.attempt is not None
    value = {
        "attempt": decision.attempt, "source": decision.table, "target": target,
        "start": str(decision.end_position), "status": "swapping", "chunk": 0, "last_key": None,
        "rows": rows, "pending": None, "copy": decision.shadow,
    }  # fmt: skip
    return resnapshot_key(decision.table), value


def settle_copies(
    meta: MetaManager,
    identity: ClientIdentity,
    target_for: TargetFor,
    drop_staging: Callable[[str, str, str], None],
    guard: Callable[[], None] | None = None,
    cursor: BinlogPosition | None = None,
) -> set[str]:
    """At a run's start: settle the copy records and drop the staging tables of copies that ended.

    A ``copying``/``swapping`` copy whose table's re-snapshot record shows its swap ``done`` is
    ``swapped``; one whose table is no longer routed is ``dropped``; one whose cut-over the cursor
    passed without a swap is ``superseded`` (the lake table's mark covered it). Ended copies get their
    staging table dropped once (``cleaned``).

    :param drop_staging: ``(source table, its target, attempt)`` drops that staging table if there.
    :param cursor: the destination's cursor (``None``: none yet).
    :return: the attempts still in use (their staging tables are kept).
    """
    live: set[str] = set()
    for name in meta.list_keys(identity, PREFIX):
        key = f"{PREFIX}/{name}"
        rec: dict[str, Any] | None = meta.get_json(identity, key).value
        if not isinstance(rec, dict) or not rec.get("base") or rec.get("cleaned"):
            continue
        base = str(rec["base"])
        target = target_for(*base.split(".", 1))
        status = rec.get("status")
        if status in LIVE:
            done = meta.get_json(identity, resnapshot_key(base)).value or {}
            if done.get("attempt") == rec.get("attempt") and done.get("status") in ("done", "swapping"):
                if done.get("status") == "swapping":
                    live.add(str(rec["attempt"]))  # the swap is under way (settled with its record)
                    continue
                status = "swapped"
            elif target is None:
                status = "dropped"
            elif (
                rec.get("cut_over") and cursor is not None and cursor >= BinlogPosition.parse(rec["cut_over"])
            ):
                status = "superseded"
            else:
                live.add(str(rec["attempt"]))
                continue
        if target is not None:
            drop_staging(base, target, str(rec["attempt"]))
        settled = {**rec, "status": status, "cleaned": True}
        if guard is not None:
            guard()
        meta.update_json(identity, key, lambda _old, value=settled: value)
    return live


def live_copy_attempts(meta: MetaManager, identity: ClientIdentity) -> set[str]:
    """Attempts of copies in progress (their staging tables are not another attempt's leftovers)."""
    out = set()
    for name in meta.list_keys(identity, PREFIX):
        rec = meta.get_json(identity, f"{PREFIX}/{name}").value
        if isinstance(rec, dict) and rec.get("status") in LIVE and rec.get("attempt"):
            out.add(str(rec["attempt"]))
    return out


__all__ = [
    "COPY_SUFFIXES",
    "LIVE",
    "OnlineCopies",
    "SwapDecision",
    "copy_attempt",
    "copy_base",
    "copy_key",
    "live_copy_attempts",
    "resnapshot_record",
    "settle_copies",
    "staging_target",
]
