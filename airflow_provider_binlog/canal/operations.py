"""Source operations and the lake: what a DDL statement on a routed table does to its lake table.

Every source operation either reaches the lake exactly, at its place in the binlog order, or stops
the run before any cursor moves past it with a :class:`SourceOperationError` that names the table,
the statement, the binlog ``file:pos`` and the way forward. Never a successful run with wrong data.
"""

from __future__ import annotations

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.errors import CanalError

#: How long a statement may be in an error message before it is cut.
STATEMENT_SHOWN = 200


def shown_statement(sql: str, limit: int = STATEMENT_SHOWN) -> str:
    """The statement on one line, cut to ``limit`` characters (``...`` marks a cut)."""
    text = " ".join(sql.split())
    return text if len(text) <= limit else text[:limit] + "..."


class SourceOperationError(CanalError):
    """A source operation (a DDL statement on a routed table) cannot reach the lake exactly: the run
    stops before it, so no cursor moves past it.

    :param table: the source table, ``schema.table``.
    :param statement: the statement text as logged (kept whole; the message shows its start).
    :param position: where the statement is in the binlog.
    :param remedy: the way forward (the option value that changes it, or the re-snapshot command).
    :param reason: why the lake cannot follow it.
    :param target: the lake table the table is routed to, when known.
    """

    def __init__(
        self,
        table: str,
        statement: str,
        position: BinlogPosition,
        remedy: str,
        reason: str = "the lake cannot apply it exactly",
        target: str | None = None,
    ) -> None:
        self.table = table
        self.statement = statement
        self.position = position
        self.remedy = remedy
        self.reason = reason
        self.target = target
        into = f" (lake table {target})" if target else ""
        super().__init__(
            f"{table}{into}: {reason}: {shown_statement(statement)!r} at {position}. Nothing at or after "
            f"{position} was applied for it and the cursor stays before it. Remedy: {remedy}"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (
            type(self),
            (self.table, self.statement, self.position, self.remedy, self.reason, self.target),
        )


class ResnapshotNeeded(SourceOperationError):
    """The policy for this operation is ``"resnapshot"``: the lake table must be loaded again from
    the source at a consistent position after the statement (``binlog-cdc resnapshot``).

    ``target`` names the lake table to replace.
    """
