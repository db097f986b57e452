"""``python -m airflow_provider_binlog.cli``: the ``binlog-cdc`` command."""

from __future__ import annotations

import sys

from airflow_provider_binlog.cli import main

sys.exit(main())
