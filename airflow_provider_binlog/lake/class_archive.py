"""A class-data-sharing archive for the local Spark driver JVM, built once per machine.

A task's driver JVM spends most of its start and of its first statements loading, verifying and
linking some 20,000 classes (Spark, Catalyst, Iceberg, Parquet, Hadoop). Java 13 and later can
dump the classes a JVM loaded into an archive when it exits (``-XX:ArchiveClassesAtExit``) and map
them, already parsed and verified, into the next JVM (``-XX:SharedArchiveFile``). A session start
plus its first two commits then takes 0.6x the wall time and JVM CPU (``bench/spark_start.py``).

* **Built by** ``python -m airflow_provider_binlog.lake.jars`` (``dev.sh setup``; the container image
  runs it too): a training run in a child process starts a local session with
  ``-XX:ArchiveClassesAtExit``, merges a few changes of every column type into a throwaway Iceberg
  table through :class:`..merge.ChangeMerger`, reads it back, stops, and waits for its JVM to write
  the archive at exit; the file is then renamed into place (a killed build leaves no archive, at
  most a temporary file that the next build removes).
* **Used by** :func:`..session.session_conf` for a local master when the user sets no
  ``spark.driver.extraJavaOptions`` and an archive for this machine's JVM and jars exists. Without
  one, Spark starts as it always did. ``BINLOG_CDC_CLASS_ARCHIVE=off`` turns it off.
* **Kept in** :func:`..jars.cache_dir` as ``spark-driver-<key>.jsa`` (about 160 MB). The key hashes
  what the JVM checks when it maps an archive: the ``java`` binary, and the name, size and mtime of
  every jar on the driver's class path (Spark's ``jars/``, from ``$SPARK_HOME`` when set, and the
  local Iceberg jars, which a local driver has on its class path for this reason). A new Java,
  PySpark or Iceberg gives a new key, so a stale archive is never handed to a JVM (which would
  refuse it with a warning and start slowly); building removes the archives of the same install's
  earlier jars (another virtual environment's archive stays). A user's
  own ``spark.driver.extraClassPath`` or ``spark.driver.extraJavaOptions`` leaves it unused.
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from airflow_provider_binlog.lake import jars
from airflow_provider_binlog.lake.errors import LakeError

ARCHIVE_ENV = "BINLOG_CDC_CLASS_ARCHIVE"
PREFIX = "spark-driver-"
SUFFIX = ".jsa"
FORMAT = "driver class path v1"
"""Part of the key: changes when what the training run loads, or how, changes."""


def enabled() -> bool:
    """Whether archives are used and built (``BINLOG_CDC_CLASS_ARCHIVE`` is not ``off``/``0``/``false``)."""
    return os.environ.get(ARCHIVE_ENV, "").strip().lower() not in ("off", "0", "false", "no")


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not os.path.exists(found):
        return None
    return Path(os.path.realpath(found))


def _fingerprint(path: Path) -> str:
    st = path.stat()
    return f"{path.name}:{st.st_size}:{st.st_mtime_ns}"


def archive_key() -> str | None:
    """The key of this machine's archive (see the module docstring), ``<where>-<what>``: a hash of
    where the JVM and the jars are installed, then of their sizes and mtimes; ``None`` without a
    JVM or jars."""
    java = _java()
    if java is None:
        return None
    spark_home = os.environ.get("SPARK_HOME")  # spark-submit takes Spark's jars from there when set
    spark_jars = Path(spark_home) / "jars" if spark_home else jars.pyspark_jars_dir()
    try:
        classpath = sorted(spark_jars.glob("*.jar")) + jars.local_jars(build=False)
    except LakeError:
        return None
    where = [FORMAT, str(java), str(spark_jars), *(str(p) for p in classpath if p.parent != spark_jars)]
    what = [_fingerprint(java), *(_fingerprint(p) for p in classpath)]
    return f"{_hash(where)}-{_hash(what)}"


def _hash(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def archive_path() -> Path | None:
    """The archive for this machine's JVM and jars, or ``None`` (no key)."""
    key = archive_key()
    return None if key is None else _path_for(key)


def _path_for(key: str) -> Path:
    return jars.cache_dir() / f"{PREFIX}{key}{SUFFIX}"


def existing_archive() -> Path | None:
    """The archive a local driver should map, if archives are on and it was built."""
    if not enabled():
        return None
    path = archive_path()
    return path if path is not None and path.is_file() else None


def build(force: bool = False, timeout: float = 600.0) -> Path | None:
    """Build this machine's archive unless it exists; return its path (``None`` when off or no JVM).

    :param force: rebuild even when it exists.
    :param timeout: seconds the training run may take.
    :raises LakeError: the training run failed or its JVM wrote no archive.
    """
    if not enabled():
        return None
    key = archive_key()
    if key is None:
        return None
    target = _path_for(key)
    if target.is_file() and not force:
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        for left in target.parent.glob(f".{PREFIX}*.tmp"):  # of a build killed over `timeout` ago
            if time.time() - left.stat().st_mtime > timeout:
                left.unlink(missing_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{PREFIX}", suffix=".tmp", dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise LakeError(f"cannot write the class archive into {target.parent}: {exc}") from None
    tmp = Path(tmp_name)
    tmp.unlink()  # the JVM creates it at exit
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "airflow_provider_binlog.lake.class_archive", "--train", str(tmp)],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if proc.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            tail = (proc.stdout + proc.stderr).strip()[-2000:]
            raise LakeError(f"the JVM class archive training run failed ({proc.returncode}): {tail}")
        os.replace(tmp, target)
    except subprocess.TimeoutExpired:
        raise LakeError(f"the JVM class archive training run took over {timeout:.0f} s") from None
    finally:
        tmp.unlink(missing_ok=True)
    where = key.split("-")[0]  # archives of this install's earlier jars (those of others stay)
    for old in target.parent.glob(f"{PREFIX}{where}-*{SUFFIX}"):
        if old != target:
            old.unlink(missing_ok=True)
    return target


# ------------------------------------------------------------------------------ the training run


def training_changes(rows: int = 200) -> list[Any]:
    """``rows`` inserts, then updates of every third row, a key change and deletes of every fifth
    row (from the third), over one column of most lake types."""
    from airflow_provider_binlog.binlog.columns import ColumnDef, TableSchema
    from airflow_provider_binlog.binlog.constants import ColumnType as T
    from airflow_provider_binlog.binlog.position import BinlogPosition
    from airflow_provider_binlog.canal.change import Op, OrderKey, RowChange

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

    changes: list[Any] = []

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
    from airflow_provider_binlog.lake import commits
    from airflow_provider_binlog.lake.merge import ChangeMerger
    from airflow_provider_binlog.lake.session import create_session, driver_java_options

    with tempfile.TemporaryDirectory(prefix="binlog-cdc-cds-") as work:
        options = f"{driver_java_options(local=True)} -XX:ArchiveClassesAtExit={output}"
        spark = create_session(
            master="local[2]", warehouse=str(Path(work) / "warehouse"),
            conf={"spark.driver.extraJavaOptions": options},
        )  # fmt: skip
        proc = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
        changes = training_changes()
        half = len(changes) // 2
        stage = str(Path(work) / "stage")
        merger = ChangeMerger(spark, "train", {"train.t": "lake.train.t"}, staging_root=stage)
        try:
            for part in (changes[:half], changes[half:]):  # a create + insert, then a MERGE
                merger.add_many(part)
                merger.commit(merger.take(), part[-1].end_position)
        finally:
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
    """``--train PATH``: the child process of :func:`build`; without it, build and print the path."""
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_binlog.lake.class_archive")
    parser.add_argument("--train", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--force", action="store_true", help="rebuild even when the archive exists")
    args = parser.parse_args(argv)
    if args.train is not None:
        train(args.train)
        return 0
    started = time.monotonic()
    try:
        path = build(force=args.force)
    except LakeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if path is None:
        print("no class archive: turned off, or no java/jars found", file=sys.stderr)
    else:
        print(f"{path} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
