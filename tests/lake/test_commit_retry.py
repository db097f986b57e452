"""The commit retry loop of ``lake/commits.py`` as pure code: the JVM table and Spark stand-ins are
fakes (the real conflicts, against PostgreSQL's JDBC catalog, are in ``test_jdbc_catalog.py`` and
``test_concurrent_writers.py``)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from airflow_provider_binlog.canal.change import OrderKey
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.errors import LakeStatementError

PROPS = commits.mark_properties("dest", OrderKey(1, 40, -1, 0), None, None, None)


class _JavaError(Exception):
    """A py4j error stand-in: ``java_exception`` with a class name and a cause chain."""

    def __init__(self, *names: str) -> None:
        super().__init__("An error occurred while calling o52.sql.")
        self.java_exception = _Java(list(names))


class _Java:
    def __init__(self, names: list[str]) -> None:
        self.names = names

    def getClass(self) -> Any:
        name = self.names[0]
        return type("C", (), {"getName": staticmethod(lambda: name)})()

    def getCause(self) -> _Java | None:
        return _Java(self.names[1:]) if len(self.names) > 1 else None

    def getMessage(self) -> str:
        return "Found conflicting files that can contain records matching true"


class _Snapshot:
    def __init__(self, summary: dict[str, str]) -> None:
        self._summary = summary

    def summary(self) -> dict[str, str]:
        return self._summary

    def parentId(self) -> None:
        return None


class _Table:
    def __init__(self) -> None:
        self.current: _Snapshot | None = None
        self.refreshed = 0
        self.tags_moved: list[str] = []  # the targets whose mark tag commit() moved (commits.move_tag)

    def refresh(self) -> None:
        self.refreshed += 1

    def currentSnapshot(self) -> _Snapshot | None:
        return self.current


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> _Table:
    fake = _Table()
    monkeypatch.setattr(commits, "load_iceberg_table", lambda spark, name: fake)
    monkeypatch.setattr(commits, "commit_properties", lambda spark, props: contextlib.nullcontext())
    monkeypatch.setattr(commits, "move_tag", lambda spark, target, props: fake.tags_moved.append(target))
    monkeypatch.setattr(commits.time, "sleep", lambda s: None)
    monkeypatch.delenv(commits.RETRY_ENV, raising=False)
    return fake


class _Spark:
    class catalog:
        @staticmethod
        def refreshTable(name: str) -> None:
            pass


VALIDATION = "org.apache.iceberg.exceptions.ValidationException"


def test_a_conflict_is_retried_until_the_statement_commits(table: _Table) -> None:
    runs: list[int] = []

    def statement() -> None:
        runs.append(1)
        if len(runs) < 3:  # wrapped by Spark, as a failed write job is
            raise _JavaError("org.apache.spark.SparkException", VALIDATION)

    before = commits.conflicts_retried
    assert commits.commit(_Spark(), "`lake`.`db`.`t`", PROPS, statement, "f:4 to f:40") is True  # type: ignore[arg-type]
    assert len(runs) == 3 and commits.conflicts_retried == before + 2
    assert table.refreshed >= 2  # the mark read, then the table as it is now, before each retry
    assert table.tags_moved == ["`lake`.`db`.`t`"]  # once, after the attempt that committed


def test_a_conflicting_commit_that_landed_is_not_run_again(table: _Table) -> None:
    runs: list[int] = []

    def statement() -> None:
        runs.append(1)
        table.current = _Snapshot(dict(PROPS, **{"added-records": "3"}))  # it did commit
        raise _JavaError("org.apache.iceberg.exceptions.CommitStateUnknownException")

    assert commits.commit(_Spark(), "t", PROPS, statement) is False  # type: ignore[arg-type]
    assert runs == [1]
    assert table.tags_moved == ["t"]  # the commit landed: its tag moves all the same


def test_another_destinations_newer_commit_is_not_taken_for_ours(table: _Table) -> None:
    """Only the newest snapshot of OUR destination counts; with a different order key it is not ours."""
    table.current = _Snapshot(commits.mark_properties("dest", OrderKey(1, 39, -1, 0), None, None, None))
    runs: list[int] = []

    def statement() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise _JavaError("org.apache.iceberg.exceptions.CommitFailedException")

    assert commits.commit(_Spark(), "t", PROPS, statement) is True  # type: ignore[arg-type]
    assert len(runs) == 2


def test_a_conflict_whose_changes_a_newer_mark_covers_is_not_run_again(table: _Table) -> None:
    """Another consumer of the destination (this one was cut off) committed past this statement:
    running it again would put older images over newer ones."""
    runs: list[int] = []

    def statement() -> None:
        runs.append(1)
        table.current = _Snapshot(commits.mark_properties("dest", OrderKey(1, 41, -1, 0), None, None, None))
        raise _JavaError(VALIDATION)

    assert commits.commit(_Spark(), "t", PROPS, statement) is False  # type: ignore[arg-type]
    assert runs == [1]
    swap = dict(PROPS, **{commits.PREFIX + "resnapshot": "0123456789ab"})  # a swap: only its own commit
    runs.clear()
    once = commits.CommitRetry(attempts=2, wait=0)
    with pytest.raises(commits.CommitConflictError):
        commits.commit(_Spark(), "t", swap, statement, retry=once)  # type: ignore[arg-type]
    assert runs == [1, 1]


def test_other_errors_are_not_retried(table: _Table) -> None:
    runs: list[int] = []

    def statement() -> None:
        runs.append(1)
        raise _JavaError("org.apache.spark.sql.AnalysisException")

    with pytest.raises(LakeStatementError) as raised:
        commits.commit(_Spark(), "t", PROPS, statement, "f:4 to f:40")  # type: ignore[arg-type]
    assert runs == [1]
    assert str(raised.value).startswith("commit to t (changes f:4 to f:40) failed in Spark: _JavaError")
    assert isinstance(raised.value.__cause__, _JavaError)


def test_the_bound_and_its_message(table: _Table, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(commits.RETRY_ENV, "attempts=2,wait=0")

    def statement() -> None:
        raise _JavaError(VALIDATION)

    with pytest.raises(commits.CommitConflictError, match=r"`t` \(changes f:4 to f:40\).*after 2 attempts"):
        commits.commit(_Spark(), "`t`", PROPS, statement, "f:4 to f:40")  # type: ignore[arg-type]


def test_retry_settings() -> None:
    assert commits.CommitRetry.parse("attempts=8, max_wait=20") == commits.CommitRetry(8, 0.5, 20.0)
    with pytest.raises(ValueError, match="unknown setting 'tries'"):
        commits.CommitRetry.parse("tries=3")
    with pytest.raises(ValueError):
        commits.CommitRetry(attempts=0)
    policy = commits.CommitRetry(attempts=10, wait=1.0, max_wait=5.0)
    for attempt in range(1, 10):
        full = min(5.0, 2 ** (attempt - 1))
        assert full / 2 <= policy.delay(attempt) <= full
    assert commits.conflict_class(RuntimeError("no JVM here")) is None
    assert commits.conflict_class(_JavaError("java.io.IOException", VALIDATION)) == VALIDATION
