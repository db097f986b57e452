"""Build script for the optional C extensions (row decoder, fold, staged columns) and canal's protobuf
modules (everything else is in pyproject.toml).

``optional=True``: a machine without a C compiler or Python headers still installs the package;
the build prints a warning and :mod:`airflow_provider_binlog.binlog.values` decodes in Python.

``build_py`` generates ``airflow_provider_binlog/canalnet/_pb/`` from ``canalnet/proto/*.proto``
with ``grpc_tools.protoc`` (a build requirement): into the wheel, or into the source tree for an
editable install (``canalnet/generate.py``).
"""

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

_ROOT = Path(__file__).resolve().parent
_PB = Path("airflow_provider_binlog", "canalnet", "_pb")


def _generate(out_dir: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "_canalnet_generate", _ROOT / "airflow_provider_binlog" / "canalnet" / "generate.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate(out_dir)


class BuildPyWithProtos(build_py):
    """``build_py`` that also writes canal's generated protobuf modules."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            _generate(_ROOT / _PB)
        else:
            _generate(Path(self.build_lib) / _PB)


_SLOTS_H = "airflow_provider_binlog/_slots.h"  # shared by the row decoder and the fold
_C_FLAGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]

setup(
    cmdclass={"build_py": BuildPyWithProtos},
    ext_modules=[
        Extension(name, [source], depends=[_SLOTS_H], optional=True, extra_compile_args=_C_FLAGS)
        for name, source in (
            ("airflow_provider_binlog.binlog._rowdecode", "airflow_provider_binlog/binlog/_rowdecode.c"),
            ("airflow_provider_binlog.lake._fold", "airflow_provider_binlog/lake/_fold.c"),
            ("airflow_provider_binlog.lake._columns", "airflow_provider_binlog/lake/_columns.c"),
        )
    ],
)
