"""Hypothesis: damaged binlogs (bit flips, truncation) raise only DecodeError, located, and quickly.

Every fixture binlog is damaged and read to the end. With checksums verified a flip is a
ChecksumError; with verification off the damaged bytes reach the body decoders (TABLE_MAP and the
row event headers included), which must still fail only with DecodeError naming the event and
position. Row images decode lazily, outside the parser; their fuzzing belongs to the row tests.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_binlog.binlog.errors import DecodeError, UnsupportedError
from airflow_provider_binlog.binlog.files import read_binlog_stream

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "binlog"
DATA = {p.name: p.read_bytes() for p in sorted(FIXTURES.iterdir()) if p.name != "README.md"}
NAMES = sorted(DATA)
TIME_LIMIT = 5.0


def consume(raw: bytes, verify: bool) -> None:
    started = time.monotonic()
    try:
        for event in read_binlog_stream(io.BytesIO(raw), "fuzz.000001", verify_checksum=verify):
            getattr(event.body, "status", None)  # QUERY status variables decode lazily
    except DecodeError as exc:
        assert exc.position is not None and exc.position.startswith("fuzz.000001:"), exc
        assert exc.event_type is not None or "header" in str(exc) or "magic" in str(exc), exc
    except UnsupportedError as exc:
        # only reachable when a flipped type code happens to be START_ENCRYPTION_EVENT
        assert "START_ENCRYPTION_EVENT" in str(exc)
    assert time.monotonic() - started < TIME_LIMIT


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_bit_flips_raise_only_decode_errors(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(NAMES))
    raw = bytearray(DATA[name])
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(4, len(raw) - 1))
        raw[i] ^= 1 << data.draw(st.integers(0, 7))
    consume(bytes(raw), verify=data.draw(st.booleans()))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_truncation_raises_only_decode_errors(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(NAMES))
    raw = DATA[name]
    cut = data.draw(st.integers(0, len(raw) - 1))
    consume(raw[:cut], verify=True)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_bytes_inside_events_raise_only_decode_errors(data: st.DataObject) -> None:
    """Overwrite a stretch of bytes (sizes and counts included) with random ones, checksums off."""
    name = data.draw(st.sampled_from(NAMES))
    raw = bytearray(DATA[name])
    start = data.draw(st.integers(4, len(raw) - 1))
    junk = data.draw(st.binary(min_size=1, max_size=16))
    raw[start : start + len(junk)] = junk
    consume(bytes(raw[: len(DATA[name])]), verify=False)


def test_a_damaged_query_status_inside_a_transaction_payload_is_located() -> None:
    """A case the random test found: a zero byte in a QUERY_EVENT's status variables inside a
    TRANSACTION_PAYLOAD_EVENT (whose inner events carry no ``log_pos``) is named by the payload's
    position."""
    raw = bytearray(DATA["transaction_compression.000001"])
    raw[380:381] = b"\x00"
    consume(bytes(raw), verify=False)
