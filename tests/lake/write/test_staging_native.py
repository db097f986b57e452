"""Staging's C paths build the same Arrow arrays as the per-value converters (pure, no Spark)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.types import TIMESTAMP, LakeColumn
from airflow_provider_binlog.lake.write.staging import StagingArea, _array, from_columns

UTC = dt.timezone.utc


@pytest.mark.parametrize(
    "values",
    [
        [dt.datetime(2025, 6, 1, 10, 0, 0, 123456, tzinfo=UTC), None, dt.datetime(1970, 1, 1, tzinfo=UTC)],
        [dt.datetime(2025, 6, 1, 12, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))],  # its instant
        [dt.datetime(2025, 6, 1, 10, 0), dt.datetime(2038, 1, 19, 3, 14, 8, 1)],  # naive: taken as UTC
        [dt.datetime(2025, 6, 1, 10, 0), dt.datetime(2025, 6, 1, 10, 0, tzinfo=UTC), None],  # mixed
    ],
)
def test_timestamp_native_equals_converted(values: list[dt.datetime | None]) -> None:
    assert TIMESTAMP.arrow_native and TIMESTAMP.convert is not None
    converted = pa.array([None if v is None else TIMESTAMP.convert(v) for v in values], type=TIMESTAMP.arrow)
    native = _array(TIMESTAMP, values)
    assert native.equals(converted)
    utc = [None if v is None else (v if v.tzinfo else v.replace(tzinfo=UTC)) for v in values]
    assert native.to_pylist() == [None if v is None else v.astimezone(UTC) for v in utc]


def test_timestamp_not_a_datetime_names_the_column() -> None:
    with pytest.raises(LakeError, match="column 'ts'"):
        from_columns([LakeColumn("ts", TIMESTAMP)], [[dt.datetime(2025, 1, 1, tzinfo=UTC), "not a time"]])


def test_staged_file_reads_back_without_dictionary_or_statistics(tmp_path: object) -> None:
    area = StagingArea(str(tmp_path), "d")
    cols = [LakeColumn("ts", TIMESTAMP)]
    values = [dt.datetime(2025, 6, 1, 10, tzinfo=UTC), None]
    uri, n = area.write_columns("x", cols, [[values]])
    path = f"{area.base}/x/part-0.parquet"
    meta = pq.ParquetFile(path).metadata
    column = meta.row_group(0).column(0)
    assert n == 2 and not column.is_stats_set and "PLAIN" in column.encodings
    assert not any("DICTIONARY" in e for e in column.encodings)
    assert pq.read_table(path).column("ts").to_pylist() == values
    assert uri.startswith("file://")
