"""Meta managers: where a destination's cursor, in-flight marks and provider records live.

Three back ends behind :class:`~.base.MetaManager`: :class:`~.memory.MemoryMetaManager`,
:class:`~.file.FileMetaManager` (canal's ``meta.dat``) and
:class:`~.zookeeper.ZooKeeperMetaManager` (canal's znode layout). The layout is documented in
:mod:`.base`. The ZooKeeper back end is imported lazily so that kazoo stays optional here.
"""

from __future__ import annotations

from airflow_provider_binlog.canal.meta.base import MetaManager, Version, Versioned
from airflow_provider_binlog.canal.meta.file import FileMetaManager
from airflow_provider_binlog.canal.meta.memory import MemoryMetaManager
from airflow_provider_binlog.canal.meta.model import ClientIdentity, LogPosition, PositionRange

__all__ = [
    "ClientIdentity",
    "FileMetaManager",
    "LogPosition",
    "MemoryMetaManager",
    "MetaManager",
    "PositionRange",
    "Version",
    "Versioned",
]
