"""The write paths' order of trial (pure: fake paths; the real ones run in tests/lake/native/ and
tests/lake/write/test_merge.py)."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.write import paths


@dataclasses.dataclass
class Fake:
    name: str
    takes: bool
    asked: list[str]

    def write(self, piece: paths.StagedPiece, table: paths.PlannedTable) -> bool:
        self.asked.append(self.name)
        return self.takes


def _piece() -> paths.StagedPiece:
    return paths.StagedPiece(
        spark=None,  # type: ignore[arg-type]  # no path here reaches Spark
        target="lake.db.t",
        use_view=lambda: "v",
        read=lambda: [],
        written=[],
        keys=("id",),
        ranges={},
        properties={},
        upserts=1,
        merge="MERGE",
        insert="SELECT",
        insert_columns=["id"],
        new_keys=False,
        single_key=True,
        soft_delete=False,
    )


def test_the_first_path_that_takes_the_piece_commits_it() -> None:
    asked: list[str] = []
    order = [Fake("a", False, asked), Fake("b", True, asked), Fake("c", True, asked)]
    assert paths.write(_piece(), paths.PlannedTable(None, None), order) is order[1]
    assert asked == ["a", "b"]


def test_a_piece_no_path_takes_names_the_table_and_the_paths() -> None:
    with pytest.raises(LakeError, match=r"lake\.db\.t \(tried a, b\)"):
        paths.write(_piece(), paths.PlannedTable(None, None), [Fake("a", False, []), Fake("b", False, [])])


def test_inserts_before_merges_and_the_driver_before_spark() -> None:
    assert [p.name for p in paths.ORDER] == [
        "driver insert file",
        "Spark insert",
        "driver position delta",
        "Spark MERGE",
    ]
    # a piece that must merge is no insert path's; Spark's MERGE takes it when the driver does not
    must_merge = paths.PlannedTable(None, None)
    assert not paths.DriverInsertFile().write(_piece(), must_merge)
    assert not paths.SparkInsert().write(_piece(), must_merge)
    assert not paths.DriverPositionDelta().write(dataclasses.replace(_piece(), single_key=False), must_merge)
