"""Lake table maintenance that knows the load: bounded history, compaction when due (issue #43).

``maintain(spark, tables, policy)`` (:mod:`.maintain`) reads each table's metadata once
(:mod:`.health`: snapshot count and ages, the current snapshot's file and delete totals, manifests,
refs, each destination's newest mark), decides what is due (:mod:`.plan`, pure) and runs only that,
as Iceberg's Spark procedures (:mod:`.actions`), in this order:

==============================  ====================================================================
``rewrite_data_files``          data files beyond ``2 x needed + max_small_files`` (needed: the
                                table's bytes over ``write.target-file-size-bytes``), or more than
                                ``max_delete_files + needed`` delete files, or deleted rows over
                                ``max_delete_ratio`` (from ``min_deleted_rows`` on): bin-pack
                                (``sort`` where the table has a sort order), every file with a
                                delete rewritten (deletion vectors folded).
``rewrite_position_delete_files``  after that rewrite on a format-version 2 table.
``rewrite_manifests``           more than ``max_manifests`` manifests in the current snapshot.
``expire_snapshots``            at least ``keep_snapshots`` (or a tenth of those kept, if more)
                                snapshots past ``snapshot_age`` beyond those kept (estimated from
                                the count and the oldest's age): expiry runs in batches, its cost
                                (a scan of what the kept snapshots reach) shared by that many runs.
``remove_orphan_files``         every ``orphan_interval``, files older than ``orphan_age``.
==============================  ====================================================================

A healthy table costs one metadata read (the current manifest list) and nothing else. The summary
says per table what ran and why, files rewritten and added, bytes, snapshots expired, seconds.

**The default policy** (:class:`MaintenancePolicy`):

* ``metadata_versions=5``: tables the product creates get
  ``write.metadata.delete-after-commit.enabled=true`` and ``write.metadata.previous-versions-max=5``;
  an existing table without either gets them at its next load run (logged once; a value its owner
  set is kept, :mod:`.bounded`, so tables created with 20 before keep 20). Measured before: 400 runs
  left 403 metadata files, 148 MB. Nothing reads an earlier ``metadata.json`` (marks, tags, time
  travel and rollback are snapshots, kept in the current one), and each holds every kept snapshot
  (~1.5 KB each: 460 KB at a day of ``*/5``), so 20 of them were 9 of a day's 20 MB
  (``docs/soak-2026-12-02.md``); 5 are 2.3 MB.
* ``snapshot_age=6 hours``, ``keep_snapshots=50``: a snapshot younger than 6 hours is never expired
  (time travel and a consumer reading ``VERSION AS OF`` the run's ``snapshot_id`` within that, a
  load that planned on an older snapshot), nor one of the newest 50, nor each destination's newest
  marked snapshot (``retain_last`` reaches back to it), nor a tagged one (Iceberg keeps tags; the
  destinations' mark tags ``binlog-cdc-mark-<d>`` are never removed or moved, and a ``binlog-cdc-``
  ref with a maximum age stops expiry on its table). Interval reruns need no old snapshot (the
  marks, tagged, make a replay a no-op). Iceberg's own default age is 5 days (1,440 snapshots at
  ``*/5``, about 1.8 MB in every ``metadata.json``). A day (290 snapshots at ``*/5``) was the
  default before: its metadata folder reached 20.4 MB (4.4 manifests of 8 KB and a 5 KB manifest
  list a kept snapshot, ``metadata.json`` 466 KB) and each expiry, whose cost follows the kept
  history (it reads every manifest the kept snapshots reach), 7.7-32 s, 0.15-0.5 s a run in
  batches of 50; at 6 hours (72-122 snapshots) 6.8 MB and 3-11 s an expiry
  (``docs/soak-2026-12-02.md``). Longer time travel: a larger ``snapshot_age`` or a tag.
* ``max_small_files=16``, ``max_delete_files=16``, ``max_delete_ratio=0.1`` (from 1,000 deleted
  rows): a table loaded every 5 minutes gets a data file and deletion vectors per run; compacting
  after about 16 keeps a scan near a compacted table's (400 runs uncompacted: ``count(*)`` 3.45 s
  against 0.16 s).
* ``max_manifests=32``.
* ``orphan_age=3 days`` (at least one day: a running commit's new files are minutes old, and
  staging lives outside table locations, see :mod:`..staging`), ``orphan_interval=7 days`` (counted
  from the table's oldest snapshot until the first removal, then from the table property
  ``binlog-cdc.maintenance.orphans-checked-ms``).

**With a running load.** Each action is one atomic Iceberg commit validated against what committed
after it read the table: a rewrite that lost to a load's commit is retried (``attempts``), a load
that lost to a rewrite is retried by :func:`..commits.commit` with its mark checked again; no row
is lost, resurrected or doubled. Partial progress stays off (a rewrite commits whole or not at
all). A load that planned on a snapshot a compaction replaced still finds it: ``keep_snapshots``
is at least 2 and no snapshot younger than ``snapshot_age`` is expired.

Where it runs: :class:`~..operators.maintenance.BinlogLakeMaintenanceOperator` (its own task),
``binlog-cdc maintain`` (the CLI), and at the end of every load run with
:meth:`MaintenancePolicy.light` (the operator's ``maintenance`` parameter; orphans left to the
maintenance task).
"""

from __future__ import annotations

from airflow_provider_binlog.lake.maintenance.actions import MaintenanceError
from airflow_provider_binlog.lake.maintenance.maintain import maintain, maintain_table
from airflow_provider_binlog.lake.maintenance.policy import DEFAULT_POLICY, MaintenancePolicy

__all__ = ["DEFAULT_POLICY", "MaintenanceError", "MaintenancePolicy", "maintain", "maintain_table"]
