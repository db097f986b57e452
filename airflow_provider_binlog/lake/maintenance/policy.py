"""The maintenance policy: one frozen dataclass, its defaults justified in the package docstring."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
ORPHANS_CHECKED = "binlog-cdc.maintenance.orphans-checked-ms"
"""Table property: when maintenance last removed orphan files (epoch ms), so it runs only when due."""

PROTECTED_REF_PREFIX = "binlog-cdc-"
"""Maintenance never removes or moves a ref whose name starts with this: the destinations' mark tags
(:data:`~airflow_provider_binlog.lake.commits.MARK_TAG_PREFIX` plus the destination) among them."""

HOUR = 3600.0
DAY = 24 * HOUR


@dataclass(frozen=True, slots=True)
class MaintenancePolicy:
    """What maintenance keeps and when it acts (see the package docstring for the defaults' reasons).

    :param metadata_versions: ``write.metadata.previous-versions-max`` given to tables the product
        creates or commits to (with ``write.metadata.delete-after-commit.enabled=true``); ``None``:
        table properties left alone.
    :param snapshot_age: seconds; a snapshot younger than this is never expired.
    :param keep_snapshots: the newest snapshots of the current branch always kept (at least 2: the
        one a compaction replaced stays readable for a load that planned on it).
    :param expire: expire snapshots at all.
    :param compact: rewrite data files (bin-pack, or sort where the table has a sort order) when due.
    :param max_small_files: data files a table may hold beyond twice what its bytes need
        (``write.target-file-size-bytes``) before a compaction is due.
    :param max_delete_files: delete files (deletion vectors, position or equality delete files) a
        table may hold beyond the data files its bytes need before a compaction folds them into
        its data files.
    :param max_delete_ratio: deleted rows (``total-position-deletes`` / ``total-records``) that make a
        compaction due whatever the delete file count.
    :param min_deleted_rows: ``max_delete_ratio`` counts from this many deleted rows on (a few
        deleted rows cost a scan nothing, whatever their ratio in a small table).
    :param max_manifests: manifests of the current snapshot before ``rewrite_manifests`` is due.
    :param orphan_age: seconds; an unreferenced file younger than this is never removed (it may be
        a running commit's, or staged); at least one day.
    :param orphan_interval: seconds between two orphan file removals of a table; ``None``: never.
    :param attempts: runs of an action that conflicts with another writer (a load's commit).
    """

    metadata_versions: int | None = 5
    snapshot_age: float = 6 * HOUR
    keep_snapshots: int = 50
    expire: bool = True
    compact: bool = True
    max_small_files: int = 16
    max_delete_files: int = 16
    max_delete_ratio: float = 0.1
    min_deleted_rows: int = 1000
    max_manifests: int = 32
    orphan_age: float = 3 * DAY
    orphan_interval: float | None = 7 * DAY
    attempts: int = 4

    def __post_init__(self) -> None:
        problems = []
        if self.metadata_versions is not None and self.metadata_versions < 1:
            problems.append("metadata_versions >= 1 (or None)")
        if self.keep_snapshots < 2:
            problems.append("keep_snapshots >= 2")
        if self.snapshot_age < 0:
            problems.append("snapshot_age >= 0")
        if self.orphan_age < DAY:
            problems.append("orphan_age >= 86400 (one day: longer than any commit or staging lives)")
        if min(self.max_small_files, self.max_delete_files, self.max_manifests) < 1:
            problems.append("max_small_files, max_delete_files, max_manifests >= 1")
        if not 0 < self.max_delete_ratio <= 1:
            problems.append("0 < max_delete_ratio <= 1")
        if self.attempts < 1:
            problems.append("attempts >= 1")
        if problems:
            raise ValueError(f"MaintenancePolicy: {'; '.join(problems)}")

    @classmethod
    def light(cls) -> MaintenancePolicy:
        """The policy a load applies at the end of its run by default: bounded metadata, expiry and
        compaction when due; orphan removal (a listing of the table's folder) is left to the
        maintenance task."""
        return cls(orphan_interval=None)

    @classmethod
    def off(cls) -> MaintenancePolicy:
        """Nothing: no table property set, nothing expired or rewritten."""
        return cls(metadata_versions=None, expire=False, compact=False, orphan_interval=None)

    def replace(self, **changes: object) -> MaintenancePolicy:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def bounded_properties(self) -> dict[str, str]:
        """The table properties that bound a table's metadata (empty: ``metadata_versions`` is ``None``)."""
        if self.metadata_versions is None:
            return {}
        return {DELETE_AFTER_COMMIT: "true", PREVIOUS_VERSIONS_MAX: str(self.metadata_versions)}

    @classmethod
    def parse(cls, text: str) -> MaintenancePolicy:
        """``keep_snapshots=100,snapshot_age=3600,compact=false`` (any field; the rest default)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, object] = {}
        for item in filter(None, (x.strip() for x in text.split(","))):
            key, sep, value = (p.strip() for p in item.partition("="))
            if key not in fields or not sep:
                raise ValueError(f"maintenance policy: cannot read {item!r}; fields: {', '.join(fields)}")
            default = getattr(cls(), key)
            if value.lower() in ("none", "off") and key in ("metadata_versions", "orphan_interval"):
                kwargs[key] = None
            elif isinstance(default, bool):
                kwargs[key] = value.lower() in ("1", "true", "yes", "on")
            elif isinstance(default, int):
                kwargs[key] = int(value)
            else:
                kwargs[key] = float(value)
        return cls(**kwargs)  # type: ignore[arg-type]


DEFAULT_POLICY = MaintenancePolicy()


def policy_of(value: Any, light: bool = True) -> MaintenancePolicy | None:
    """A policy from an operator parameter: ``True`` (:meth:`~MaintenancePolicy.light`, or the
    default with ``light=False``), ``False``/``None`` (none), a policy, a mapping of its fields or
    its text form (:meth:`~MaintenancePolicy.parse`)."""
    if value is True:
        return MaintenancePolicy.light() if light else MaintenancePolicy()
    if value is False or value is None:
        return None
    if isinstance(value, MaintenancePolicy):
        return value
    if isinstance(value, Mapping):
        return MaintenancePolicy(**value)
    if isinstance(value, str):
        return MaintenancePolicy.parse(value)
    raise ValueError(f"maintenance: True, False, a MaintenancePolicy, a mapping or text, not {value!r}")
