"""Capture the golden bytes in all_types.json from a real MariaDB (run by hand; needs mariadbd).

    .venv/bin/python tests/binlog/golden/capture.py

Runs all_types.sql on two throwaway servers (``binlog_row_metadata=FULL`` and ``MINIMAL``), and
stores for each one the TABLE_MAP and row event bodies (hex, header and checksum stripped) and, per
statement, the table as ``SELECT`` showed it afterwards (normalised to the decoder's value contract,
see binlog_capture.normalize_select). test_values_golden.py decodes the bytes offline.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parents[2])]

from binlog_capture import binlog_events, master_position, select_rows, sql_statements, to_json  # noqa: E402

from airflow_provider_binlog.binlog.constants import CHECKSUM_LEN, EVENT_HEADER_LEN  # noqa: E402
from airflow_provider_binlog.dev.services import MariaDbServer  # noqa: E402


def capture(row_metadata: str) -> dict[str, Any]:
    server = MariaDbServer(server_id=21, row_metadata=row_metadata).start()
    try:
        server.execute("CREATE DATABASE golden")
        conn = server.connect("golden")
        snapshots = []
        with conn.cursor() as cur:
            start = master_position(cur)
            for sql in sql_statements(HERE / "all_types.sql"):
                cur.execute(sql)
                if sql.split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE"):
                    rows = select_rows(cur, "all_types")[1]
                    snapshots.append({str(k): to_json(v) for k, v in rows.items()})
            cur.execute("SHOW VARIABLES LIKE 'version'")
            version = cur.fetchone()[1]
            cur.execute("FLUSH BINARY LOGS")
        conn.close()
        events = []
        for ev in binlog_events(server.datadir, start, "golden"):
            raw = (server.datadir / ev.file).read_bytes()[ev.pos : ev.end_pos]
            events.append(
                {"type": ev.header.type_code, "name": ev.type_name,
                 "body": raw[EVENT_HEADER_LEN : len(raw) - CHECKSUM_LEN].hex()}
            )  # fmt: skip
        return {"server": version, "row_metadata": row_metadata, "events": events, "snapshots": snapshots}
    finally:
        server.stop()


def main() -> None:
    out = {"full": capture("FULL"), "minimal": capture("MINIMAL")}
    (HERE / "all_types.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {HERE / 'all_types.json'}")


if __name__ == "__main__":
    main()
