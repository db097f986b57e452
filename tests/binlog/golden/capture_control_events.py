"""Capture control_events.json (raw MariaDB binlog events) by running control_events.sql on a
throwaway server (run by hand; needs mariadbd)::

    .venv/bin/python tests/binlog/golden/capture_control_events.py

The events the SQL wrote are stored whole (header, body, CRC32) as hex with their file and offset,
plus the FORMAT_DESCRIPTION, GTID_LIST and BINLOG_CHECKPOINT events each file begins with (the
harness's own user setup before them is left out); test_events_golden.py decodes them offline.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[2])]

from airflow_provider_binlog.dev.services import MariaDbServer  # noqa: E402


def statements(path: Path) -> list[str]:
    text = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("--"))
    return [s.strip() for s in text.split(";\n") if s.strip().rstrip(";")]


def main() -> None:
    server = MariaDbServer(server_id=77).start()
    assert server.basedir is not None
    load_file = server.basedir / "load.txt"  # read by the server for LOAD DATA INFILE
    load_file.write_text("loaded 1\nloaded 2\n")
    try:
        conn = server.connect()
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            start_file, start_pos = cur.fetchone()[:2]
            for sql in statements(HERE / "control_events.sql"):
                cur.execute(sql.rstrip(";").replace("{LOAD_FILE}", str(load_file)))
            cur.execute("SELECT VERSION()")
            version = cur.fetchone()[0]
            cur.execute("SHOW BINARY LOGS")
            files = [row[0] for row in cur.fetchall()]
        conn.close()
        events = []
        for name in files:
            data = (server.datadir / name).read_bytes()
            pos = 4
            while pos + 19 <= len(data):
                size = int.from_bytes(data[pos + 9 : pos + 13], "little")
                preamble = data[pos + 4] in (15, 161, 163)  # FDE, BINLOG_CHECKPOINT, GTID_LIST
                if preamble or name != start_file or pos >= start_pos:
                    events.append({"file": name, "pos": pos, "hex": data[pos : pos + size].hex()})
                pos += size
    finally:
        server.stop()
    out = {"server": version, "server_id": 77, "events": events}
    (HERE / "control_events.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(events)} events from {version}")


if __name__ == "__main__":
    main()
