"""The peer's glue of ``bench/peer.py`` (python-mysql-replication + pyiceberg): its lake equals the
source on a tiny workload, and the bench says how to get pyiceberg when it is missing.

pyiceberg is not a dependency of the product (CI does not install it): the lake test is skipped
without it, with the install command as the reason.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import end_to_end  # noqa: E402
import peer  # noqa: E402


def test_bench_says_how_to_get_pyiceberg_when_missing() -> None:
    hide = (
        "import runpy, sys; sys.modules['pyiceberg'] = None; sys.argv = ['peer.py']; "
        f"runpy.run_path({str(BENCH / 'peer.py')!r}, run_name='__main__')"
    )
    done = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "pip install --target /tmp/peerlib 'pyiceberg[sql-sqlite,pyarrow]'" in done.stderr
    assert "pip install -e '.[bench]'" in done.stderr


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.skipif(peer.missing() is not None, reason=peer.missing() or "")
def test_peer_glue_lake_equals_source(
    mariadb: Any, spark: Any, database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(end_to_end, "SCHEMA", database)  # the generator's statements name it
    kinds = end_to_end.table_kinds(None)
    with mariadb.connect() as conn, conn.cursor() as cur:
        for name, kind in kinds.items():
            cur.execute(
                end_to_end.DDL[kind].replace("bench.`{name}`", f"`{database}`.`{name}`").format(name=name)
            )
        cur.execute("SHOW MASTER STATUS")
        start = "{}:{}".format(*cur.fetchone()[:2])
    w = end_to_end.Workload(5, kinds)
    end_to_end.run_sql(mariadb, end_to_end.base_statements(w, 300, 40, 100))
    end_to_end.run_sql(mariadb, end_to_end.mixed_statements(w, 600, 40, 100))
    (f, p, *_), *_ = mariadb.execute("SHOW MASTER STATUS")
    settings = {"host": mariadb.host, "port": mariadb.port, "user": mariadb.root_user,
                "passwd": mariadb.root_password}  # fmt: skip
    sources = [f"{database}.{t}" for t in kinds]
    # folds of 200 changes: later folds update and delete rows earlier commits wrote
    summary = peer.peer_drain(settings, start, f"{f}:{p}", str(tmp_path / "peer"), sources, chunk=200)
    assert summary["changes"] == 900
    assert summary["commits"] > 2 * len(sources)
    with mariadb.connect() as conn:
        diffs = peer.verify_peer(conn, spark, str(tmp_path / "check"), summary["metadata"])
    assert [d.source for d in diffs] == sorted(sources)
    assert all(d.equal for d in diffs), "\n".join(d.describe() for d in diffs)
