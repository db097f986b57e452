"""The core layers import without Airflow and without PySpark, the drain without Airflow (and, until a
run starts Spark, without PySpark) (DESIGN.md: imports point down only)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCKER = textwrap.dedent(
    """
    import importlib.abc, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("airflow", "pyspark", "py4j"):
                raise ImportError(f"layering violation: {name} imported")
            return None

    sys.meta_path.insert(0, Block())
    import pkgutil, importlib
    import airflow_provider_binlog.binlog as b, airflow_provider_binlog.canal as c
    for pkg in (b, c):
        for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            importlib.import_module(mod.name)
    print("ok", sorted(m for m in sys.modules if m.startswith("airflow_provider_binlog")))
    """
)


def test_binlog_and_canal_import_without_airflow_and_pyspark() -> None:
    out = subprocess.run([sys.executable, "-c", BLOCKER], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "airflow_provider_binlog.binlog" in out.stdout
    assert "airflow_provider_binlog.canal" in out.stdout


def test_blocker_really_blocks() -> None:
    code = BLOCKER.replace(
        "import airflow_provider_binlog.binlog as b", "import pyspark, airflow_provider_binlog.binlog as b"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode != 0
    assert "layering violation: pyspark" in out.stderr


DRAIN_BLOCKER = BLOCKER.replace(
    "import airflow_provider_binlog.binlog as b, airflow_provider_binlog.canal as c",
    "import airflow_provider_binlog.drain as b, airflow_provider_binlog.drain as c",
)


def test_drain_imports_without_airflow() -> None:
    """Every drain module imports with Airflow (and PySpark) blocked: the CLI, the dev tools and the
    benchmarks run drains without Airflow."""
    out = subprocess.run([sys.executable, "-c", DRAIN_BLOCKER], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    for module in ("run", "loop", "wiring", "snapshot", "source", "reconcile", "collector"):
        assert f"airflow_provider_binlog.drain.{module}" in out.stdout, out.stdout
    assert not any(name.startswith("'airflow_provider_binlog.operators") for name in out.stdout.split())


def test_drain_blocker_really_blocks_airflow() -> None:
    code = DRAIN_BLOCKER.replace(
        "import airflow_provider_binlog.drain as b", "import airflow.sdk, airflow_provider_binlog.drain as b"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode != 0
    assert "layering violation: airflow" in out.stderr


LAKE_BLOCKER = BLOCKER.replace(
    "import airflow_provider_binlog.binlog as b, airflow_provider_binlog.canal as c",
    "import airflow_provider_binlog.lake as b, airflow_provider_binlog.lake as c",
)


def test_lake_imports_without_airflow_and_without_pyspark_until_a_session_starts() -> None:
    """Every lake module, its sub-packages' included, imports with Airflow and PySpark blocked:
    PySpark is imported when a session starts (``lake/spark/session.py``), not when a module loads."""
    out = subprocess.run([sys.executable, "-c", LAKE_BLOCKER], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    for module in (
        "spark.session",
        "write.paths",
        "write.merge",
        "native.position_delta",
        "ddl.ddl",
        "settings",
    ):
        assert f"airflow_provider_binlog.lake.{module}" in out.stdout, out.stdout
    for package in ("shards", "verify", "maintenance"):
        assert f"'airflow_provider_binlog.lake.{package}." in out.stdout, out.stdout
