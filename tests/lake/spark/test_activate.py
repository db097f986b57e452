"""Unit tests of ``lake/spark/session.activate``'s per-thread memory (pure: the JVM call is a stand-in):
a thread makes a session active once, another thread does it again for itself, another session is
made active again, and a stopped session's thread asks anew."""

from __future__ import annotations

import threading
from typing import Any
from unittest import mock

import pytest

from airflow_provider_binlog.lake.spark import session


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, Any]]:
    """``(thread, JVM session)`` of each ``setActiveSession`` sent to the JVM."""
    sent: list[tuple[int, Any]] = []

    def java_static(spark: Any, name: str, member: str) -> Any:
        assert (name, member) == ("org.apache.spark.sql.SparkSession", "setActiveSession")
        return lambda jsession: sent.append((threading.get_ident(), jsession))

    monkeypatch.setattr("airflow_provider_binlog.lake.spark.java_classes.java_static", java_static)
    monkeypatch.setattr(session, "_ACTIVE", threading.local())
    return sent


def _spark() -> Any:
    spark = mock.MagicMock(name="spark")
    spark._jsparkSession = object()
    return spark


def test_a_thread_makes_a_session_active_once(calls: list[tuple[int, Any]]) -> None:
    spark, other = _spark(), _spark()
    for _ in range(3):
        session.activate(spark)
    assert calls == [(threading.get_ident(), spark._jsparkSession)]
    session.activate(other)
    session.activate(spark)
    assert [s for _, s in calls] == [spark._jsparkSession, other._jsparkSession, spark._jsparkSession]


def test_each_thread_makes_it_active_for_itself(calls: list[tuple[int, Any]]) -> None:
    spark = _spark()
    session.activate(spark)
    together = threading.Barrier(2, timeout=30)  # both alive at once: two distinct threads

    def twice() -> None:
        together.wait()
        session.activate(spark)
        session.activate(spark)

    threads = [threading.Thread(target=twice) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 3 and len({thread for thread, _ in calls}) == 3


def test_a_stop_on_the_thread_forgets_it(calls: list[tuple[int, Any]]) -> None:
    spark = _spark()
    spark.sparkContext._accumulatorServer = None
    session.activate(spark)
    session.stop_session(spark)
    session.activate(spark)
    assert len(calls) == 2
