"""The core layers import without Airflow and without PySpark, the drain without Airflow (and, until a
run starts Spark, without PySpark), the lake without Airflow; no module of the core imports Airflow or
the Airflow layer, not even lazily (DESIGN.md: imports point down only)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "airflow_provider_binlog"

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


CORE = ("binlog", "canal", "canalnet", "lake", "drain")
"""The core: no Airflow. What it measures it returns, or tells an observer the Airflow layer gives it
(``drain/observe.py:RunObserver``, implemented with Airflow's ``Stats`` by
``operators/metrics.py:RunMetrics``)."""
AIRFLOW_LAYER = ("hooks", "operators", "sensors", "triggers", "get_provider_info")


def _core_imports_of_airflow(root: Path) -> list[str]:
    """``file:line imports NAME`` for every import of Airflow or of the Airflow layer in the core
    under ``root`` (anywhere in a file: lazy and ``TYPE_CHECKING`` imports included)."""
    layer = {f"{PACKAGE}.{name}" for name in AIRFLOW_LAYER}
    found = []
    for top in CORE:
        for path in sorted((root / PACKAGE / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
                else:
                    continue
                for name in names:
                    parts = name.split(".")
                    if parts[0] == "airflow" or ".".join(parts[:2]) in layer:
                        found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
                        break
    return found


def test_the_core_never_imports_airflow_or_the_airflow_layer() -> None:
    """Not even lazily: the metrics the operator sends (``operators/metrics.py``) reach the core only
    as an observer it is handed."""
    assert (ROOT / PACKAGE / "lake" / "write" / "merge.py").exists()  # the tree is read
    assert _core_imports_of_airflow(ROOT) == []


def test_an_airflow_import_in_the_core_is_reported(tmp_path: Path) -> None:
    for top in CORE:
        (tmp_path / PACKAGE / top).mkdir(parents=True)
    (tmp_path / PACKAGE / "drain" / "bad.py").write_text(
        "def f():\n"
        "    from airflow.sdk import Variable\n"
        "    from airflow_provider_binlog.operators import metrics\n"
    )
    assert _core_imports_of_airflow(tmp_path) == [
        f"{PACKAGE}/drain/bad.py:2 imports airflow.sdk",
        f"{PACKAGE}/drain/bad.py:3 imports {PACKAGE}.operators",
    ]


CANALNET_BLOCKER = BLOCKER.replace('("airflow", "pyspark", "py4j")', '("airflow",)').replace(
    "import airflow_provider_binlog.binlog as b, airflow_provider_binlog.canal as c",
    "import airflow_provider_binlog.lake as b, airflow_provider_binlog.canalnet as c",
)


def test_lake_and_canalnet_import_without_airflow() -> None:
    """Every module of ``lake/`` and ``canalnet/`` imports with Airflow blocked (PySpark allowed)."""
    out = subprocess.run(
        [sys.executable, "-c", CANALNET_BLOCKER], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    for module in ("lake.write.merge", "lake.commits", "lake.maintenance", "canalnet.server"):
        assert f"'{PACKAGE}.{module}'" in out.stdout, out.stdout
