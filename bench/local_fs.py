"""Benchmark: creating small files through Hadoop's ``file:`` file system in a local Spark driver,
Hadoop's own ``LocalFileSystem`` (the baseline, a ``chmod`` process per file and per checksum file)
against the forkless one of ``lake/spark/local_fs_jar.py``, in the same session and run.

Each pass creates ``--files`` files of ``--size`` bytes in a fresh directory through one file
system, then the other; both write the file and its ``.crc``. Prints the milliseconds per file of
the best pass of each, and their ratio. Every file creation is a few py4j calls from Python in
both, so the figures include that (about 0.2 ms per call).

    .venv/bin/python bench/local_fs.py
    .venv/bin/python bench/local_fs.py --files 500 --passes 5

Measured 2026-11-29 06:40 UTC, 2 cores (load average 2), 200 files of 100 bytes: Hadoop's
17.0-23.6 ms per file, the forkless one 4.7-5.7 ms (an earlier probe of the same loop).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from airflow_provider_binlog.lake.spark import local_fs_jar
from airflow_provider_binlog.lake.spark.session import create_session


def _create(spark: Any, fs: Any, root: str, files: int, size: int) -> float:
    jvm = spark._jvm
    base = jvm.org.apache.hadoop.fs.Path(f"file://{root}")
    payload = bytearray(b"x" * size)
    started = time.perf_counter()
    for i in range(files):
        out = fs.create(jvm.org.apache.hadoop.fs.Path(base, f"f{i}"), False)
        out.write(payload)
        out.close()
    return (time.perf_counter() - started) / files * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--size", type=int, default=100, help="bytes per file")
    ap.add_argument("--passes", type=int, default=3, help="passes per file system (best kept)")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-local-fs-") as tmp:
        spark = create_session(app_name="bench-local-fs", master="local[2]", warehouse=f"{tmp}/wh")
        try:
            if spark.conf.get(local_fs_jar.SETTING, None) != local_fs_jar.FILE_SYSTEM:
                print("the forkless file system is not in use (no javac? BINLOG_CDC_LOCAL_FS=hadoop?)")
                return 1
            jvm = spark._jvm
            conf = spark._jsc.hadoopConfiguration()
            uri = jvm.java.net.URI("file:///")
            hadoop = jvm.org.apache.hadoop.fs.LocalFileSystem()
            hadoop.initialize(uri, conf)
            systems = {"hadoop": hadoop, "forkless": jvm.org.apache.hadoop.fs.FileSystem.get(uri, conf)}
            best: dict[str, float] = {}
            for n in range(args.passes):
                for name, fs in systems.items():
                    ms = _create(spark, fs, f"{tmp}/{name}-{n}", args.files, args.size)
                    best[name] = min(best.get(name, ms), ms)
        finally:
            spark.stop()
    print(
        f"{args.files} files of {args.size} B, best of {args.passes}, load average {load:.1f}: "
        f"Hadoop's LocalFileSystem {best['hadoop']:.2f} ms per file (baseline), "
        f"forkless {best['forkless']:.2f} ms per file = {best['hadoop'] / best['forkless']:.1f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
