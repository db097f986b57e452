"""Lake tables as Airflow assets: their names, the outlets a load declares, and a run's events.

**Names.** A lake table ``catalog.namespace.table`` is the asset ``iceberg://catalog/namespace/table``
(``lake.shop.orders`` -> ``iceberg://lake/shop/orders``; a nested namespace adds path segments,
each part percent-encoded); the asset's name is its URI.

**Outlets.** :func:`lake_outlets`: one :class:`~airflow.sdk.Asset` per route whose target is a
table name (known when the DAG is parsed), and one :class:`~airflow.sdk.AssetAlias`,
``binlog-cdc:<dag_id>.<task_id>``, for the tables only a run knows (``{schema}``/``{table}``
targets of globs, ``tables`` given by a template). The asset graph shows the declared tables at
once and the alias's tables after their first event; a downstream DAG may be scheduled on a table's
asset (``schedule=[Asset("iceberg://lake/shop/orders")]``, whichever way its event came) or on the
alias (any table of the load).

**Events.** :func:`emit_events`, after the drain: one event per lake table the run committed to
(changes merged, a TRUNCATE or DDL applied, or a re-snapshot), none for the others: a run that
merged nothing emits nothing. A table whose changes an earlier, failed attempt of the task committed
and never acked (a crash between commit and ack: this attempt finds them in the lake, skips them and
acks them; the summary's ``committed_earlier``) gets its event from this attempt, since a failed
attempt emits none: every change that reaches the lake is announced once. Changes skipped for
another reason (a cursor set back by hand, read again) were announced when they were committed.
A declared table's event goes through its asset; declared tables without a commit are taken out of
this run's outlets (Airflow emits an event for every outlet of a successful task); any other
table's through the alias. The event's ``extra``::

    {"destination": "shop", "table": "lake.shop.orders",
     "inserted": 12, "updated": 3, "deleted": 1, "upserted": 14, "appended": 0, "truncated": 0,
     "skipped": 0, "commits": 1,                       # the run's counts for this table
     "start": "mysql-bin.000003:4", "end": "mysql-bin.000003:9120",   # the run's binlog range
     "snapshot_id": "6254170325043210391"}             # Iceberg snapshot after the run's commit

plus ``"read_point": {"tag": "binlog-cdc-read-shop@mysql-bin.000003:9120", "moving_tag":
"binlog-cdc-read-shop", "position": "mysql-bin.000003:9120"}`` when the run's end tagged every table
of the destination at one position (:mod:`..lake.read_point`: read all of them ``VERSION AS OF``
that tag), and ``"resnapshot": {"rows": ..., "start": "file:pos"}`` for a re-snapshotted table (the counts
then hold the changes merged besides it, if any). ``snapshot_id`` is a string of the id's digits (a
64-bit id as a JSON number is rounded by the UI and any JavaScript reader); read the table with
``VERSION AS OF <snapshot_id>``. It is absent only when it could not be read (the task log says why).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from airflow.sdk import Asset, AssetAlias

SCHEME = "iceberg"
ALIAS_PREFIX = "binlog-cdc:"


def asset_uri(parts: Iterable[str]) -> str:
    """``("lake", "shop", "orders")`` -> ``iceberg://lake/shop/orders``."""
    return f"{SCHEME}://" + "/".join(quote(p, safe="") for p in parts)


def table_asset(table: str) -> Asset:
    """The asset of a lake table named as in the run's summary (dotted, parts in backticks where
    needed)."""
    from airflow_provider_binlog.lake.sql import parse_name

    return Asset(uri=asset_uri(parse_name(table)))


def target_asset(target: str, source: str) -> Asset | None:
    """The asset of a route's target; ``None`` for a templated one (``{table}``). A target that is no
    valid table name fails here, when the DAG is parsed."""
    if "{" in target:
        return None
    from airflow_provider_binlog.lake.sql import check_target

    return Asset(uri=asset_uri(check_target(target, source)))


def alias_name(dag_id: str, task_id: str) -> str:
    """The name of a load's alias: ``binlog-cdc:<dag_id>.<task_id>``."""
    return f"{ALIAS_PREFIX}{dag_id}.{task_id}"


def lake_outlets(tables: Any, dag_id: str, task_id: str) -> list[Asset | AssetAlias]:
    """The outlets of a load (see the module docstring): the assets of its literal targets and its alias.

    :param tables: the operator's ``tables`` (a mapping, or a template string rendered at run time).
    """
    outlets: list[Asset | AssetAlias] = []
    if isinstance(tables, Mapping):
        for source, target in tables.items():
            asset = target_asset(target, source)
            if asset is not None and asset not in outlets:
                outlets.append(asset)
    outlets.append(AssetAlias(name=alias_name(dag_id, task_id)))
    return outlets


def committed_tables(summary: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Lake table -> the ``extra`` of its event, for every table the run committed to."""
    common = {
        "destination": summary.get("destination"),
        "start": summary.get("start"),
        "end": summary.get("end"),
    }
    snapshots = summary.get("snapshots") or {}
    earlier = set(summary.get("committed_earlier") or ())  # committed by a failed attempt, unannounced
    found: dict[str, dict[str, Any]] = {}
    tables = summary.get("tables") or {}
    for table, counts in tables.items():
        if counts.get("commits") or table in earlier:
            found[table] = {"destination": common["destination"], "table": table, **counts}
    for table in sorted(earlier - tables.keys()):
        found[table] = {"destination": common["destination"], "table": table}
    for done in summary.get("resnapshots") or ():
        if done.get("gone"):
            continue
        table = done["target"]
        extra = found.setdefault(table, {"destination": common["destination"], "table": table})
        extra["resnapshot"] = {"rows": done.get("rows"), "start": done.get("start")}
    point = summary.get("read_point") or {}
    for table, extra in found.items():
        extra["start"], extra["end"] = common["start"], common["end"]
        if table in snapshots:
            extra["snapshot_id"] = snapshots[table]
        if table in (point.get("tables") or {}):
            extra["read_point"] = {
                "tag": point["point_tag"], "moving_tag": point["tag"], "position": point["position"],
            }  # fmt: skip
    return found


def emit_events(
    outlets: list[Any], outlet_events: Any, summary: Mapping[str, Any]
) -> tuple[list[Any], list[str]]:
    """Record this run's asset events (see the module docstring) in the task's ``outlet_events``.

    :param outlets: the task's outlets.
    :param outlet_events: the task context's ``outlet_events``.
    :param summary: the drain's summary.
    :return: the outlets to keep for this run (declared lake tables without a commit left out), and
        the tables that got no event because the task has neither their asset nor an alias.
    """
    tables = committed_tables(summary)
    declared = {o.uri: o for o in outlets if isinstance(o, Asset) and o.uri.startswith(f"{SCHEME}://")}
    alias = next((o for o in outlets if isinstance(o, AssetAlias)), None)
    emitted: set[str] = set()
    missed: list[str] = []
    for table, extra in tables.items():
        asset = table_asset(table)
        if asset.uri in declared:
            outlet_events[declared[asset.uri]].extra.update(extra)
            emitted.add(asset.uri)
        elif alias is not None:
            outlet_events[alias].add(asset, extra=extra)
        else:
            missed.append(table)
    keep = [o for o in outlets if not (isinstance(o, Asset) and o.uri in declared and o.uri not in emitted)]
    return keep, missed
