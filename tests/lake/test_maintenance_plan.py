"""What maintenance finds due from a table's metadata (``lake/maintenance/plan.py``, pure) and the
policy's settings (``policy.py``)."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_binlog.lake.maintenance.health import Health, MarkAt, RefAt
from airflow_provider_binlog.lake.maintenance.plan import plan
from airflow_provider_binlog.lake.maintenance.policy import ORPHANS_CHECKED, MaintenancePolicy

NOW = 1_800_000_000_000
DAY = 86_400_000


def _health(**changes: object) -> Health:
    base = Health(
        format_version=3, properties={}, sorted=False, snapshots=10, oldest_ms=NOW - 1000, ancestors=10,
        current_id=1, data_files=3, delete_files=2, records=20_000, deleted_rows=100, data_bytes=10**6,
        manifests=4, delete_manifests=2, metadata_versions=9, marks={}, refs={},
    )  # fmt: skip
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_a_healthy_table_has_nothing_due() -> None:
    due = plan(_health(), MaintenancePolicy(), NOW)
    assert due.empty and due.reasons == []


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"data_files": 19}, "19 data files"),
        ({"delete_files": 18}, "18 delete files"),
        ({"deleted_rows": 2001}, "deleted rows 10%"),
    ],
)
def test_compaction_due(changes: dict[str, int], reason: str) -> None:
    due = plan(_health(**changes), MaintenancePolicy(), NOW)
    assert due.compact and not due.rewrite_deletes and any(r.startswith(reason) for r in due.reasons)
    assert plan(_health(**changes, format_version=2), MaintenancePolicy(), NOW).rewrite_deletes
    assert plan(_health(**changes), MaintenancePolicy(compact=False), NOW).empty


def test_small_files_counted_against_what_the_bytes_need() -> None:
    big = 40 * 512 * 1024 * 1024  # 40 target-size files' worth
    assert plan(_health(data_files=96, data_bytes=big), MaintenancePolicy(), NOW).empty
    assert plan(_health(data_files=97, data_bytes=big), MaintenancePolicy(), NOW).compact
    small_target = {"write.target-file-size-bytes": str(10**5)}  # 10 files' worth of 1 MB
    assert plan(_health(data_files=36, properties=small_target), MaintenancePolicy(), NOW).empty
    assert plan(_health(data_files=37, properties=small_target), MaintenancePolicy(), NOW).compact


def test_delete_files_counted_beyond_what_the_bytes_need() -> None:
    big = 40 * 512 * 1024 * 1024  # 40 target-size files, each with a deletion vector
    assert plan(_health(data_files=40, delete_files=40, data_bytes=big), MaintenancePolicy(), NOW).empty
    assert plan(_health(data_files=40, delete_files=57, data_bytes=big), MaintenancePolicy(), NOW).compact


def test_few_deleted_rows_do_not_count_as_a_ratio() -> None:
    assert plan(_health(records=100, deleted_rows=90), MaintenancePolicy(), NOW).empty


def test_manifests() -> None:
    due = plan(_health(manifests=33), MaintenancePolicy(), NOW)
    assert due.rewrite_manifests and not due.compact


def test_expiry_by_age_count_and_marks() -> None:
    policy = MaintenancePolicy(snapshot_age=DAY / 1000)  # a day, 50 kept
    old = NOW - 2 * DAY
    assert plan(_health(snapshots=300, oldest_ms=NOW - DAY), policy, NOW).expiry is None  # young enough
    # in batches of keep_snapshots: half of 99 are past the day (evenly spread over 2 days), 49 of
    # them beyond the 50 kept; of 100, 50
    assert plan(_health(snapshots=99, oldest_ms=old), policy, NOW).expiry is None
    due = plan(_health(snapshots=100, oldest_ms=old), policy, NOW)
    assert due.expiry is not None and due.expiry.retain_last == 50
    # a long history: a tenth of those kept when that is more than keep_snapshots (1,700 snapshots
    # over 17/16 of a day: 100 past it, 1,600 kept, less than 160; over 5/4: 340 past, 1,360 kept)
    assert plan(_health(snapshots=1700, oldest_ms=NOW - DAY - DAY // 16), policy, NOW).expiry is None
    assert plan(_health(snapshots=1700, oldest_ms=NOW - DAY - DAY // 4), policy, NOW).expiry is not None
    assert due.expiry.older_than_ms == NOW - DAY
    deep = {"d1": MarkAt(7, 0, NOW), "d2": MarkAt(8, 120, old)}
    due = plan(_health(snapshots=200, oldest_ms=old, marks=deep), policy, NOW)
    assert due.expiry is not None and due.expiry.retain_last == 121  # d2's newest mark kept
    assert plan(_health(snapshots=200, oldest_ms=old), MaintenancePolicy(expire=False), NOW).expiry is None


def test_expiry_refused_while_a_protected_ref_can_age_out() -> None:
    refs = {"binlog-cdc-mark-d1": RefAt(5, True, 86_400_000), "other": RefAt(6, True, 1)}
    due = plan(_health(snapshots=200, oldest_ms=NOW - 3 * DAY, refs=refs), MaintenancePolicy(), NOW)
    assert due.expiry is None and any("binlog-cdc-mark-d1" in r and "DROP TAG" in r for r in due.reasons)
    refs = {"binlog-cdc-mark-d1": RefAt(5, True, None), "other": RefAt(6, True, 1)}
    assert plan(_health(snapshots=200, oldest_ms=NOW - 3 * DAY, refs=refs), MaintenancePolicy(), NOW).expiry


def test_orphans_every_interval() -> None:
    policy = MaintenancePolicy()  # 7 days, files older than 3 days
    assert plan(_health(oldest_ms=NOW - 6 * DAY), policy, NOW).orphans_older_than_ms is None
    assert plan(_health(oldest_ms=NOW - 7 * DAY), policy, NOW).orphans_older_than_ms == NOW - 3 * DAY
    recent = {ORPHANS_CHECKED: str(NOW - DAY)}
    assert (
        plan(_health(oldest_ms=NOW - 30 * DAY, properties=recent), policy, NOW).orphans_older_than_ms is None
    )
    assert (
        plan(_health(oldest_ms=NOW - 30 * DAY), MaintenancePolicy.light(), NOW).orphans_older_than_ms is None
    )


def test_policy_checks_and_text_form() -> None:
    with pytest.raises(ValueError, match="keep_snapshots >= 2"):
        MaintenancePolicy(keep_snapshots=1)
    with pytest.raises(ValueError, match="orphan_age >= 86400"):
        MaintenancePolicy(orphan_age=3600)
    parsed = MaintenancePolicy.parse(
        "keep_snapshots=100, snapshot_age=3600, compact=false, orphan_interval=none"
    )
    assert parsed == MaintenancePolicy(
        keep_snapshots=100, snapshot_age=3600.0, compact=False, orphan_interval=None
    )
    with pytest.raises(ValueError, match="fields: metadata_versions"):
        MaintenancePolicy.parse("keep=3")
    assert MaintenancePolicy().bounded_properties() == {
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "5",
    }
    assert MaintenancePolicy.off().bounded_properties() == {}
