"""The files the driver's merge plans and writes, passed through Iceberg's JSON
(``lake/content_files.py``): a task's JSON read as the plan needs it, and a deletion vector's JVM
``DeleteFile`` built from JSON equal to the one Iceberg's builder makes. The scan against Spark's
own deletion vectors is in ``test_position_delta.py``."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from airflow_provider_binlog.lake import commits, content_files
from airflow_provider_binlog.lake.java_classes import java_static


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


@pytest.mark.spark
def test_a_deletion_vector_file_built_from_json_is_the_one_the_builder_builds(spark: Any) -> None:
    target = f"lake.c{uuid.uuid4().hex[:8]}.t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {target.rsplit('.', 1)[0]}")
    spark.sql(f"CREATE TABLE {target} (id bigint) USING iceberg TBLPROPERTIES ('format-version' = '3')")
    table = commits.load_iceberg_table(spark, target)
    spec = table.spec()
    vectors = [
        ("/w/a.parquet", content_files.Vector("/w/dv.puffin", 4, 42), 3),
        ("/w/b é.parquet", content_files.Vector("/w/dv.puffin", 46, 1 << 33), 1 << 40),
    ]
    built = content_files.deletion_vector_files(spark, spec, 1 << 34, vectors)
    to_json = java_static(spark, "org.apache.iceberg.ContentFileParser", "toJson")
    for file, (data_file, vector, cardinality) in zip(built, vectors, strict=True):
        expected = (
            java_static(spark, "org.apache.iceberg.FileMetadata", "deleteFileBuilder")(spec)
            .ofPositionDeletes()
            .withFormat(java_static(spark, "org.apache.iceberg.FileFormat", "PUFFIN"))
            .withPath(vector.location)
            .withFileSizeInBytes(1 << 34)
            .withReferencedDataFile(data_file)
            .withContentOffset(vector.offset)
            .withContentSizeInBytes(vector.size)
            .withRecordCount(cardinality)
            .build()
        )
        assert to_json(file, spec) == to_json(expected, spec)
        assert str(file.content()) == "POSITION_DELETES" and str(file.referencedDataFile()) == data_file
    assert content_files.deletion_vector_files(spark, spec, 0, []) == []
