"""The lake's switches: the product's one settings object (:mod:`airflow_provider_binlog.settings`),
under the name the lake's modules import (``from airflow_provider_binlog.lake import settings``)."""

from __future__ import annotations

from airflow_provider_binlog.settings import (
    ENV_NAMES,
    FIELDS,
    OFF,
    LakeSettings,
    Settings,
    current,
    env_name,
    from_env,
)

__all__ = ["ENV_NAMES", "FIELDS", "OFF", "LakeSettings", "Settings", "current", "env_name", "from_env"]
