"""The training run of the driver's class archive (:mod:`.class_archive`): a local session whose JVM
writes the archive when it exits, after merges that load the classes a task's driver loads (the
driver's own insert and MERGE, and Spark's MERGE).

Run by :func:`.class_archive.build` as a child process (the archive is written by that process's
JVM at exit)::

    python -m airflow_provider_binlog.lake.spark.training PATH

:func:`training_changes` is also the workload of ``bench/spark_start.py``.
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import os
import tempfile
from pathlib import Path
from typing import Any

from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
from airflow_provider_binlog.binlog.constants import ColumnType as T
from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange
from airflow_provider_binlog.lake import commits
from airflow_provider_binlog.lake.errors import LakeError
from airflow_provider_binlog.lake.native import position_delta
from airflow_provider_binlog.lake.spark.session import create_session, driver_java_options
from airflow_provider_binlog.lake.write.merge import ChangeMerger


def training_changes(rows: int = 200) -> list[RowChange]:
    """``rows`` inserts, then updates of every third row, a key change and deletes of every fifth
    row (from the third), over one column of most lake types."""
    utf8, binary = 45, 63
    cols = (
        ColumnDef("id", T.LONGLONG, nullable=False),
        ColumnDef("u", T.LONG, unsigned=True),
        ColumnDef("ub", T.LONGLONG, unsigned=True),
        ColumnDef("s", T.SHORT),
        ColumnDef("dec", T.NEWDECIMAL, precision=12, scale=2),
        ColumnDef("dbl", T.DOUBLE),
        ColumnDef("flt", T.FLOAT),
        ColumnDef("vc", T.VARCHAR, collation=utf8, charset="utf-8"),
        ColumnDef("txt", T.BLOB, collation=utf8, charset="utf-8"),
        ColumnDef("bin", T.VARCHAR, collation=binary),
        ColumnDef("enm", T.ENUM, enum_values=("a", "b")),
        ColumnDef("st", T.SET, set_values=("x", "y")),
        ColumnDef("d", T.DATE),
        ColumnDef("tm", T.TIME2, fsp=6),
        ColumnDef("dt", T.DATETIME2, fsp=6),
        ColumnDef("ts", T.TIMESTAMP2, fsp=3),
        ColumnDef("js", T.JSON),
        ColumnDef("bit", T.BIT, meta=1 << 8),
        ColumnDef("yr", T.YEAR),
    )
    schema = TableSchema("train", "t", cols, ("id",))
    utc = datetime.timezone.utc

    def image(i: int, rev: int) -> dict[str, Any]:
        return {
            "id": i, "u": i * 7, "ub": 2**63 + i, "s": i % 300, "dec": decimal.Decimal(i).scaleb(-2) + rev,
            "dbl": i / 3, "flt": float(i), "vc": f"v{i}-{rev}", "txt": "t" * (i % 50),
            "bin": bytes([i % 256]), "enm": "ab"[i % 2], "st": "x,y" if i % 2 else "",
            "d": datetime.date(2025, 1 + i % 12, 1 + i % 28), "tm": datetime.timedelta(seconds=i),
            "dt": datetime.datetime(2025, 1, 1, 0, 0, i % 60, i), "js": {"k": i, "l": [rev]},
            "ts": datetime.datetime(2025, 1, 1, tzinfo=utc) + datetime.timedelta(milliseconds=i),
            "bit": i % 256, "yr": 2000 + i % 100,
        }  # fmt: skip

    changes: list[RowChange] = []

    def add(op: Op, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        n = len(changes)
        pos = BinlogPosition("mysql-bin.000001", 4 + 100 * n)
        changes.append(
            RowChange(
                "train", "train", "t", op, before, after, ("id",), pos,
                BinlogPosition(pos.file, pos.pos + 100), None, 1_700_000_000 + n, OrderKey(1, pos.pos, -1, 0),
                schema,
            )
        )  # fmt: skip

    for i in range(rows):
        add(Op.INSERT, None, image(i, 0))
    for i in range(0, rows, 3):
        add(Op.UPDATE, image(i, 0), image(i, 1))
    add(Op.UPDATE, image(1, 0), image(rows * 10, 0))  # a key change
    for i in range(2, rows, 5):
        add(Op.DELETE, image(i, 0), None)
    return changes


def train(output: Path) -> None:
    """Run the training workload in a local session whose JVM writes ``output`` when it exits."""
    with tempfile.TemporaryDirectory(prefix="binlog-cdc-cds-") as work:
        options = f"{driver_java_options(local=True)} -XX:ArchiveClassesAtExit={output}"
        spark = create_session(
            master="local[2]", warehouse=str(Path(work) / "warehouse"),
            conf={"spark.driver.extraJavaOptions": options},
        )  # fmt: skip
        proc = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
        changes = training_changes()
        third = len(changes) // 3
        stage = str(Path(work) / "stage")
        merger = ChangeMerger(spark, "train", {"train.t": "lake.train.t"}, staging_root=stage)
        # a create + insert (the driver's file), a MERGE by the driver, then one by Spark (a piece
        # the driver leaves to it: a large table, a composite key...)
        parts = (changes[:third], changes[third : 2 * third], changes[2 * third :])
        try:
            for part, by_driver in zip(parts, ("on", "on", "off"), strict=True):
                os.environ[position_delta.POSITION_DELTA_ENV] = by_driver
                merger.add_many(part)
                merger.commit(merger.take(), part[-1].end_position)
        finally:
            os.environ.pop(position_delta.POSITION_DELTA_ENV, None)
            merger.close()
        rows = spark.table("lake.train.t").collect()
        if len(rows) != 160:  # 200 inserted, 40 deleted (one key moved)
            raise LakeError(f"training merge read back {len(rows)} rows")
        commits.read_mark(spark, "lake.train.t", "train")
        spark.stop()
        # the JVM exits when its stdin closes; it writes the archive on the way out
        proc.stdin.close()
        proc.wait(timeout=300)


def main(argv: list[str] | None = None) -> int:
    """``PATH``: run the training workload; this process's JVM writes the archive to ``PATH``."""
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_binlog.lake.spark.training")
    parser.add_argument("output", type=Path, help="where the JVM writes the archive at exit")
    args = parser.parse_args(argv)
    train(args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
