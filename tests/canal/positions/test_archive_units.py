"""The binlog archive's listing, reading and gap plan without a server
(:mod:`airflow_provider_binlog.canal.positions.archive`): a local directory and the same through
``pyarrow.fs`` (``file://``), the names it ignores, and the plan's gaps against a stand-in server list (the
integration test with a real server and Spark is ``tests/faults/test_archive_backfill.py``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_binlog.binlog.files import read_binlog_file, read_binlog_stream
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.positions.archive import ArchiveClient, ArchiveGapError, BinlogArchive

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "binlog" / "mariadb-bin.000001"


@pytest.fixture
def archive_dir(tmp_path: Path) -> Path:
    for n in (1, 2, 3, 5):
        shutil.copy(FIXTURE, tmp_path / f"mariadb-bin.{n:06d}")
    (tmp_path / "mariadb-bin.index").write_text("x")
    (tmp_path / "other-bin.000004").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    return tmp_path


@pytest.mark.parametrize("scheme", ["", "file://"])
def test_listing_and_reading(archive_dir: Path, scheme: str) -> None:
    archive = BinlogArchive(f"{scheme}{archive_dir}")
    names = [f"mariadb-bin.{n:06d}" for n in (1, 2, 3, 5)]
    assert archive.files("mariadb-bin") == names
    assert archive.files() == [*names[:3], "other-bin.000004", names[3]]
    assert archive.size(names[0]) == FIXTURE.stat().st_size
    with archive.open(names[0]) as f:
        got = [(e.type_name, e.pos) for e in read_binlog_stream(f, names[0])]
    assert got == [(e.type_name, e.pos) for e in read_binlog_file(FIXTURE)] and len(got) > 5


class _Server:
    """The two calls the plan makes of a server: its binlog list and its address."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.config: Any = type("C", (), {"address": "db:3306"})()

    def binlog_files(self) -> list[tuple[str, int]]:
        return [(n, 100) for n in self.names]


def test_plan_and_gaps(archive_dir: Path) -> None:
    archive = BinlogArchive(str(archive_dir))
    client = ArchiveClient(_Server(["mariadb-bin.000004", "mariadb-bin.000005"]), archive)
    assert [n for n, _ in client.binlog_files()] == [f"mariadb-bin.{n:06d}" for n in (1, 2, 3, 4, 5)]
    plan = client.plan(BinlogPosition("mariadb-bin.000002", 330))
    assert plan.archived == ("mariadb-bin.000002", "mariadb-bin.000003")
    assert plan.live == BinlogPosition("mariadb-bin.000004", 4)
    inside = client.plan(
        BinlogPosition("mariadb-bin.000001", 4), stop_at=BinlogPosition("mariadb-bin.000002", 9)
    )
    assert inside.archived == ("mariadb-bin.000001", "mariadb-bin.000002") and inside.live is None
    assert client.plan(BinlogPosition("mariadb-bin.000004", 4)).archived == ()

    later = ArchiveClient(_Server(["mariadb-bin.000007"]), archive)
    with pytest.raises(ArchiveGapError) as gap:
        later.plan(BinlogPosition("mariadb-bin.000001", 4))
    assert "mariadb-bin.000004, mariadb-bin.000006 missing" in str(gap.value), gap.value
    assert "before the server's oldest binlog mariadb-bin.000007 on db:3306" in str(gap.value)
    with pytest.raises(ArchiveGapError, match="neither in the binlog archive"):
        later.plan(BinlogPosition("mariadb-bin.000000", 4))


def test_the_archive_client_takes_every_argument_of_the_servers_dump() -> None:
    """The reader calls ``dump`` the same way on either client: a keyword the server's dump takes
    and the archive's does not breaks every archive backfill (``annotate_rows`` once did)."""
    import inspect

    from airflow_provider_binlog.binlog.client import ReplicationClient

    live = inspect.signature(ReplicationClient.dump).parameters
    archive = inspect.signature(ArchiveClient.dump).parameters
    assert set(live) <= set(archive), set(live) - set(archive)
    for name, param in live.items():
        assert archive[name].kind == param.kind and archive[name].default == param.default, name
