"""The C fast path of the fold and of staging a folded piece (``_fold``, optional).

``_fold.fold_run`` is the twin of :func:`.collapse.fold`'s loop for the common case (a piece
without metadata or shard column whose images are held as bare tuples); ``_fold.columns`` is the
twin of :func:`.collapse.staged_rows` and :func:`.collapse.staged_actions` for a chunk of such a
piece. Each stops or returns ``None`` where the Python loop must take over, so the results are the
same with or without it (``BINLOG_CDC_PURE_PYTHON=1`` turns it off, as it does the C row decoder).
``_fold.sources`` is the twin of :func:`.routes._sources` (a batch's entries grouped by source
table), and ``_fold.in_order`` tells :meth:`.pending.Pending.add` that a target's entries need no
sort.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_binlog.binlog.values_native import c_extension
from airflow_provider_binlog.canal.change import Op, RowChange

OPS = (Op.INSERT, Op.UPDATE, Op.DELETE)
"""The ops as ``fold_run`` takes them (it compares by identity)."""
UPSERT, DELETE = "U", "D"
"""The staged actions (see :func:`.collapse.staged_actions`)."""


def load() -> tuple[Any, Any] | None:
    """``(module, plan of RowChange)``, or ``None`` when it is not built or ``BINLOG_CDC_PURE_PYTHON``
    is set."""
    mod = c_extension("airflow_provider_binlog.lake._fold")
    if mod is None:
        return None
    slots = ("op", "before", "after", "table_schema", "schema", "table", "order_key")
    return mod, mod.change_plan(RowChange, slots)


NATIVE = load()
"""What :func:`load` returned at import."""
