"""Benchmark: the driver's data-file writes (``lake/native/file_append.py``) with dictionary pages for every
column, for the strings and binaries only (the product's choice), and for none.

Reads up to 200k rows per table from the data files of a lake that ``bench/end_to_end.py --keep``
left behind and writes them again as the driver does (zstd, 65,536-row parts), best CPU time of 3
per choice, with the file size::

    .venv/bin/python -u bench/end_to_end.py --workload insert --changes 300000 --base 100000 \\
        --no-baseline --no-verify --keep          # prints its work dir
    .venv/bin/python bench/parquet_dictionary.py /tmp/binlog-cdc-bench-XXXX
"""

from __future__ import annotations

import argparse
import glob
import io
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

PART_ROWS = 65_536


def write_cpu(table: pa.Table, **options: Any) -> tuple[float, int]:
    """Best CPU seconds of 3 writes of ``table`` and the file's bytes."""
    best, size = float("inf"), 0
    for _ in range(3):
        sink = io.BytesIO()
        t0 = time.process_time()
        with pq.ParquetWriter(sink, table.schema, compression="zstd", **options) as writer:
            for batch in table.to_batches(PART_ROWS):
                writer.write_table(pa.Table.from_batches([batch]))
        best = min(best, time.process_time() - t0)
        size = len(sink.getvalue())
    return best, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work_dir", help="the work directory bench/end_to_end.py --keep left")
    ap.add_argument("--rows", type=int, default=200_000, help="rows per table (at most)")
    args = ap.parse_args()
    by_table: dict[str, list[str]] = {}
    for path in sorted(glob.glob(f"{args.work_dir}/**/data/*.parquet", recursive=True)):
        by_table.setdefault(path.split("/data/")[0].rsplit("/", 1)[1], []).append(path)
    if not by_table:
        raise SystemExit(f"no data files under {args.work_dir}")
    for name, paths in sorted(by_table.items()):
        parts, rows = [], 0
        for path in paths:
            if rows >= args.rows:
                break
            parts.append(pq.read_table(path))
            rows += parts[-1].num_rows
        table = pa.concat_tables(parts).combine_chunks().slice(0, args.rows)
        strings = [f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_binary(f.type)]
        print(f"{name}: {table.num_rows:,} rows, {table.num_columns} columns ({len(strings)} strings)")
        for label, options in (
            ("every column", {}),
            ("strings only", {"use_dictionary": strings}),
            ("none", {"use_dictionary": False}),
        ):
            cpu, size = write_cpu(table, **options)
            print(f"  dictionary for {label:13s} {cpu * 1000:7.1f} CPU-ms  {size / 1e6:6.2f} MB")


if __name__ == "__main__":
    main()
