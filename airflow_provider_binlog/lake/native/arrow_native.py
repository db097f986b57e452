"""Staged columns built as Arrow arrays in C (``_columns``, optional).

pyarrow builds an array from a list of Python values at 30-250 ns per value (a timestamp with a
time zone costs the most), and a staged chunk holds one list per column. ``_columns.buffers`` writes
the array's buffers directly when every value is the plain value of the column's Arrow type (see
``_columns.c``); otherwise it declines, and :func:`array` returns ``None`` so that pyarrow builds
the column as before (and raises what does not fit). ``BINLOG_CDC_PURE_PYTHON=1`` turns it off,
as it does the other C extensions.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from airflow_provider_binlog.binlog.values_native import c_extension

_MODULE = c_extension("airflow_provider_binlog.lake._columns")
_KINDS = {
    pa.int32(): 0,
    pa.int64(): 1,
    pa.float64(): 2,
    pa.string(): 3,
    pa.timestamp("us"): 4,
    pa.timestamp("us", tz="UTC"): 4,
    pa.date32(): 5,
}
"""The Arrow types built in C, and their kind in ``_columns.c``."""


def array(arrow_type: pa.DataType, values: list[Any]) -> pa.Array | None:
    """``pa.array(values, type=arrow_type)``, built in C; ``None`` when the C builder is off, does
    not build this type or declines one of the values."""
    kind = _KINDS.get(arrow_type)
    if kind is None or _MODULE is None or type(values) is not list:
        return None
    built = _MODULE.buffers(values, kind)
    if built is None:
        return None
    nulls, validity, data, offsets = built
    buffers = [None if validity is None else pa.py_buffer(validity)]
    if offsets is not None:
        buffers.append(pa.py_buffer(offsets))
    buffers.append(pa.py_buffer(data))
    return pa.Array.from_buffers(arrow_type, len(values), buffers, null_count=nulls)
