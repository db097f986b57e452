"""Build script for the optional C row decoder (everything else is in pyproject.toml).

``optional=True``: a machine without a C compiler or Python headers still installs the package;
the build prints a warning and :mod:`airflow_provider_binlog.binlog.values` decodes in Python.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "airflow_provider_binlog.binlog._rowdecode",
            ["airflow_provider_binlog/binlog/_rowdecode.c"],
            optional=True,
            extra_compile_args=[
                "-O2",
                "-Wall",
                "-Wextra",
                "-Wno-unused-parameter",
                "-Wno-missing-field-initializers",
            ],
        )
    ]
)
