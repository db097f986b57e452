"""The files the driver's merge plans, read from Iceberg's JSON (``lake/native/content_files.py``): a
task's JSON read as the plan needs it. The scan against Spark's own deletion vectors is in
``test_position_delta.py``."""

from __future__ import annotations

from airflow_provider_binlog.lake.native import content_files


def test_a_delete_file_that_is_not_a_deletion_vector_is_not_planned() -> None:
    data = {"file-path": "/w/d.parquet", "record-count": 3, "file-format": "PARQUET"}
    vector = {
        "content": "POSITION_DELETES",
        "file-path": "/w/x.puffin",
        "file-format": "PUFFIN",
        "referenced-data-file": "/w/d.parquet",
        "content-offset": 4,
        "content-size-in-bytes": 40,
    }
    planned = content_files.planned_of({"data-file": data, "delete-files": [vector]})
    assert planned == content_files.Planned(
        "/w/d.parquet", 3, True, None, (content_files.Vector("/w/x.puffin", 4, 40),)
    )
    others = (
        {**vector, "file-format": "PARQUET"},  # a v2 position delete file
        {**vector, "content": "EQUALITY_DELETES"},
        {k: v for k, v in vector.items() if k != "referenced-data-file"},
        {k: v for k, v in vector.items() if k != "content-offset"},
    )
    for other in others:
        assert content_files.planned_of({"data-file": data, "delete-files": [vector, other]}).vectors is None
    avro = content_files.planned_of({"data-file": {**data, "file-format": "AVRO", "first-row-id": 7}})
    assert not avro.parquet and avro.first_row_id == 7 and avro.vectors == ()
