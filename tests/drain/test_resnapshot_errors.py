"""A Spark failure while settling unfinished re-snapshots names each attempt's table, lake table and
``file:pos`` (a pure unit test: the Spark session is a stand-in that fails as a broken catalog does)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_binlog.canal.meta import ClientIdentity, MemoryMetaManager
from airflow_provider_binlog.drain.resnapshot import clean_leftovers
from airflow_provider_binlog.lake.errors import LakeStatementError


class _BrokenSpark:
    """Every call fails with a plain (not ours) exception, as a py4j error would."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"catalog unreachable\n\tat org.example.Catalog.{name}")


def test_settling_leftovers_names_the_attempts() -> None:
    meta, ident = MemoryMetaManager(), ClientIdentity("d")
    meta.subscribe(ident)
    record = {"attempt": "0123456789ab", "target": "lake.db.t", "start": "mysql-bin.000003:1234",
              "source": "db.t", "status": "loading", "chunk": 0, "last_key": None, "rows": 0,
              "pending": None}  # fmt: skip
    meta.update_json(ident, "resnapshot/db.t", lambda _old: record)
    with pytest.raises(LakeStatementError) as failed:
        clean_leftovers(meta, ident, _BrokenSpark(), lambda s, t: f"lake.{s}.{t}")
    message = str(failed.value)
    assert "db.t into lake.db.t" in message and "mysql-bin.000003:1234" in message, message
    assert "catalog unreachable" in message and "org.example" not in message, message
    assert isinstance(failed.value.__cause__, RuntimeError)
