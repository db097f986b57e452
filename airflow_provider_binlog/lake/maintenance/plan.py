"""What is due on a table, decided from its :class:`~.health.Health` alone (no Spark): pure, so the
thresholds are tested without a table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from airflow_provider_binlog.lake.maintenance.health import Health
from airflow_provider_binlog.lake.maintenance.policy import (
    ORPHANS_CHECKED,
    PROTECTED_REF_PREFIX,
    MaintenancePolicy,
)

EXPIRE_SLACK = 0.1
"""Expiry batches: it is due once it would remove at least ``keep_snapshots`` snapshots, or this
fraction of those it keeps when that is more (:func:`expiry_batch`)."""


def expiry_batch(kept: float, policy: MaintenancePolicy) -> int:
    """How many snapshots an expiry must be able to remove before it is due, when it would keep
    ``kept``: ``max(keep_snapshots, EXPIRE_SLACK * kept)``.

    An expiry's cost hardly depends on how many snapshots it removes: the procedure reads every
    manifest the kept snapshots reach to know which files are still live (a few seconds for a few
    hundred snapshots on ``local[2]``). Run every few runs, that cost is paid again each time
    (``bench/soak.py``: 26 expiries of about 5 snapshots in 200 runs, 3.4 s each, 0.44 s a run, more
    than the run's own merge); batched by ``keep_snapshots`` it is shared by that many runs. The
    history stays bounded: at most ``keep_snapshots`` (or a tenth) more than the policy keeps."""
    return max(1, policy.keep_snapshots, math.ceil(EXPIRE_SLACK * kept))


def expirable(health: Health, expiry: Expiry, now_ms: int) -> float:
    """About how many snapshots ``expiry`` would remove at ``now_ms``, from the snapshot count and
    the oldest snapshot's age alone (commits taken as evenly spread from the oldest to now): those
    older than ``older_than``, beyond the ``retain_last`` newest."""
    if health.oldest_ms is None or health.oldest_ms >= expiry.older_than_ms:
        return 0.0
    span = now_ms - health.oldest_ms
    if span <= 0:
        old = float(health.snapshots)
    else:
        old = health.snapshots * min(1.0, (expiry.older_than_ms - health.oldest_ms) / span)
    return max(0.0, min(old, float(health.snapshots - expiry.retain_last)))


@dataclass(frozen=True, slots=True)
class Expiry:
    """The arguments of one ``expire_snapshots``: ``older_than`` (epoch ms) and ``retain_last``."""

    older_than_ms: int
    retain_last: int


@dataclass(frozen=True, slots=True)
class Plan:
    """The actions due, in the order they run, and why (one line each)."""

    compact: bool = False
    rewrite_deletes: bool = False
    rewrite_manifests: bool = False
    expiry: Expiry | None = None
    orphans_older_than_ms: int | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.compact
            or self.rewrite_deletes
            or self.rewrite_manifests
            or self.expiry is not None
            or self.orphans_older_than_ms is not None
        )


def expiry_for(health: Health, policy: MaintenancePolicy, now_ms: int) -> Expiry:
    """``expire_snapshots`` arguments that keep every snapshot younger than ``snapshot_age``, the
    newest ``keep_snapshots`` and each destination's newest marked snapshot (``retain_last`` reaches
    back to the deepest of them). Tagged snapshots Iceberg keeps by itself."""
    retain = policy.keep_snapshots
    for mark in health.marks.values():
        retain = max(retain, mark.depth + 1)
    return Expiry(older_than_ms=now_ms - int(policy.snapshot_age * 1000), retain_last=retain)


def protected_refs_problem(health: Health, table: str = "<table>") -> str | None:
    """Why expiry must not run on this table: a ``binlog-cdc-`` ref with a maximum age, which
    Iceberg's expiry would remove once it passed; ``None`` when there is none."""
    aged = sorted(
        name
        for name, ref in health.refs.items()
        if name.startswith(PROTECTED_REF_PREFIX) and ref.max_ref_age_ms is not None
    )
    if not aged:
        return None
    again = "; ".join(
        f"ALTER TABLE {table} DROP TAG `{name}`; "
        f"ALTER TABLE {table} CREATE TAG `{name}` AS OF VERSION {health.refs[name].snapshot_id}"
        for name in aged
    )
    return (
        f"the refs {', '.join(aged)} have a max-ref-age-ms, so expire_snapshots could remove them: no "
        f"expiry on this table until they have none (stop the table's loads, then: {again})"
    )


def plan(health: Health, policy: MaintenancePolicy, now_ms: int, table: str = "<table>") -> Plan:
    """The actions due on a table in ``health``'s state at ``now_ms`` (see the package docstring).

    :param table: the table's name, for the remedies in the reasons."""
    reasons: list[str] = []
    compact = rewrite_deletes = rewrite_manifests = False
    if policy.compact and health.current_id is not None:
        allowed = 2 * health.needed_files + policy.max_small_files
        if health.data_files > allowed:
            compact = True
            reasons.append(
                f"{health.data_files} data files (more than {allowed} for {health.data_bytes} bytes)"
            )
        # deletion vectors are one per data file: counted beyond the files the bytes need (a large
        # table's vectors are judged by the deleted rows' ratio)
        deletes_allowed = policy.max_delete_files + health.needed_files
        if health.delete_files > deletes_allowed:
            compact = True
            reasons.append(f"{health.delete_files} delete files (more than {deletes_allowed})")
        ratio = health.deleted_rows / health.records if health.records else 0.0
        if health.deleted_rows >= policy.min_deleted_rows and ratio > policy.max_delete_ratio:
            compact = True
            reasons.append(f"deleted rows {ratio:.0%} of the rows (more than {policy.max_delete_ratio:.0%})")
        # v2 position delete files a data rewrite leaves (deletes of files it did not take)
        rewrite_deletes = compact and health.format_version < 3
        if health.manifests > policy.max_manifests:
            rewrite_manifests = True
            reasons.append(f"{health.manifests} manifests (more than {policy.max_manifests})")
    expiry = None
    if policy.expire and health.oldest_ms is not None:
        candidate = expiry_for(health, policy, now_ms)
        removable = expirable(health, candidate, now_ms)
        if removable >= expiry_batch(health.snapshots - removable, policy):
            problem = protected_refs_problem(health, table)
            if problem is None:
                expiry = candidate
                reasons.append(
                    f"{health.snapshots} snapshots, about {removable:.0f} older than "
                    f"{policy.snapshot_age:.0f} s beyond the {candidate.retain_last} kept"
                )
            else:
                reasons.append(f"expiry skipped: {problem}")
    orphans = None
    if policy.orphan_interval is not None and health.current_id is not None:
        try:  # never removed: counted from the oldest snapshot (a new table has nothing old)
            last = int(health.properties.get(ORPHANS_CHECKED) or health.oldest_ms or now_ms)
        except ValueError:
            last = health.oldest_ms or now_ms
        if now_ms - last >= policy.orphan_interval * 1000:
            orphans = now_ms - int(policy.orphan_age * 1000)
            reasons.append(f"orphan files not removed for {(now_ms - last) / 1000:.0f} s")
    return Plan(compact, rewrite_deletes, rewrite_manifests, expiry, orphans, reasons)
