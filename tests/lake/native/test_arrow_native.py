"""Staged columns built in C (``_columns``) against pyarrow: for random lists of values of every
type it builds (and of the values it must decline: bools, subclasses, out-of-range ints, other time
zones, dates in a timestamp column, text that is not UTF-8...), the C array equals
``pa.array(values, type)``, or C declines and pyarrow builds or refuses the column itself. Pure code."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_binlog.lake.native import arrow_native
from airflow_provider_binlog.lake.types import (
    BIGINT,
    DATE,
    DATETIME,
    DOUBLE,
    INT,
    STRING,
    TIMESTAMP,
    LakeColumn,
)
from airflow_provider_binlog.lake.write.staging import from_columns

pytestmark = pytest.mark.skipif(arrow_native._MODULE is None, reason="the C column builder is not built")

UTC = datetime.timezone.utc
PLUS_2 = datetime.timezone(datetime.timedelta(hours=2))


class Text(str):
    """A str subclass (C takes exact str only)."""


TIMES = st.datetimes(
    min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31, 23, 59, 59)
)
ODD = st.sampled_from([True, False, 1.5, "1", b"x", Decimal("1.0"), Text("t"), 2**31, -(2**31) - 1, 2**63,
                       -(2**63) - 1, datetime.date(2020, 1, 1), "\ud800", float("nan")])  # fmt: skip
VALUES = {
    pa.int32(): st.integers(-(2**31), 2**31 - 1),
    pa.int64(): st.integers(-(2**63), 2**63 - 1),
    pa.float64(): st.floats(allow_nan=True, allow_infinity=True),
    pa.string(): st.text(max_size=20),
    pa.timestamp("us"): TIMES | TIMES.map(lambda d: d.replace(tzinfo=UTC)),
    pa.timestamp("us", tz="UTC"): TIMES.map(lambda d: d.replace(tzinfo=UTC)) | TIMES,
    pa.date32(): st.dates(),
}


def pyarrow_array(arrow_type: pa.DataType, values: list[Any]) -> pa.Array | None:
    try:
        return pa.array(values, type=arrow_type)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_c_arrays_equal_pyarrows(data: st.DataObject) -> None:
    arrow_type = data.draw(st.sampled_from(list(VALUES)))
    odd = data.draw(st.booleans())
    element = VALUES[arrow_type] | st.none() | (ODD if odd else st.nothing())
    if arrow_type == pa.timestamp("us"):  # another zone: C declines, pyarrow takes the instant
        element |= TIMES.map(lambda d: d.replace(tzinfo=PLUS_2, year=max(d.year, 2)))
    values = data.draw(st.lists(element, max_size=40))
    built = arrow_native.array(arrow_type, values)
    expected = pyarrow_array(arrow_type, values)
    if built is None:
        return
    assert expected is not None, values
    built.validate(full=True)
    assert built.type == expected.type and built.null_count == expected.null_count
    assert repr(built.to_pylist()) == repr(expected.to_pylist()), values  # repr: NaN equals NaN


def test_every_date_and_a_timestamp_a_week_over_the_whole_range() -> None:
    """Every day from 0001-01-01 to 9999-12-31 as a date, and one timestamp a week (naive and UTC,
    a time of day and microseconds varying): C's calendar is pyarrow's."""
    first = datetime.date(1, 1, 1)
    days = [first + datetime.timedelta(days=n) for n in range((datetime.date(9999, 12, 31) - first).days + 1)]
    built = arrow_native.array(pa.date32(), days)
    assert built is not None and built.equals(pa.array(days, pa.date32()))
    times = [datetime.datetime.combine(d, datetime.time(n % 24, n % 60, n % 61 % 60, n * 7919 % 10**6))
             for n, d in enumerate(days[::7])]  # fmt: skip
    for arrow_type, values in [(pa.timestamp("us"), times), (pa.timestamp("us", tz="UTC"),
                               [t.replace(tzinfo=UTC) for t in times])]:  # fmt: skip
        built = arrow_native.array(arrow_type, values)
        assert built is not None and built.equals(pa.array(values, arrow_type)), arrow_type


def test_what_c_declines() -> None:
    for arrow_type, values in [
        (pa.int32(), [1, True]),
        (pa.int32(), [2**31]),
        (pa.int64(), [2**63]),
        (pa.float64(), [1.0, 1]),
        (pa.string(), ["a", Text("b")]),
        (pa.string(), ["\ud800"]),
        (pa.string(), ["a", b"b"]),
        (pa.timestamp("us"), [datetime.datetime(2020, 1, 1, tzinfo=PLUS_2)]),
        (pa.timestamp("us"), [datetime.date(2020, 1, 1)]),
        (pa.date32(), [datetime.datetime(2020, 1, 1)]),
        (pa.decimal128(10, 2), [Decimal("1.00")]),  # not a type it builds
    ]:
        assert arrow_native.array(arrow_type, values) is None, (arrow_type, values)


def test_every_kind_is_built_in_c_and_staging_uses_it() -> None:
    now = datetime.datetime(2024, 2, 29, 12, 30, 1, 123456)
    types = {"i": INT, "b": BIGINT, "f": DOUBLE, "s": STRING, "n": DATETIME, "t": TIMESTAMP, "d": DATE}
    columns = [LakeColumn(name, lake_type) for name, lake_type in types.items()]
    values = [[1, None], [2**40, -1], [0.5, None], ["é", None], [now, None], [now.replace(tzinfo=UTC), now],
              [now.date(), None]]  # fmt: skip
    for col, column_values in zip(columns, values, strict=True):
        assert arrow_native.array(col.type.arrow, column_values) is not None, col
    table = from_columns(columns, values)
    first = {"i": 1, "b": 2**40, "f": 0.5, "s": "é", "n": now, "t": now.replace(tzinfo=UTC), "d": now.date()}
    assert table.to_pylist()[0] == first
    assert table.column("t")[1].as_py() == now.replace(tzinfo=UTC)  # a naive value is taken as UTC
