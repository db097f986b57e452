"""An in-process meta manager (tests, single runs); nothing survives the process."""

from __future__ import annotations

import threading

from airflow_provider_binlog.canal.errors import MetaConflictError
from airflow_provider_binlog.canal.meta.base import MetaManager, Version


class MemoryMetaManager(MetaManager):
    """Nodes in a dict, versions counting up from 0 as in ZooKeeper."""

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[bytes, int]] = {}
        self._lock = threading.Lock()

    def _read(self, path: str) -> tuple[bytes | None, Version]:
        with self._lock:
            node = self._nodes.get(path)
        return (None, None) if node is None else node

    def _write(self, path: str, data: bytes, expected: Version) -> Version:
        with self._lock:
            node = self._nodes.get(path)
            current = None if node is None else node[1]
            if current != expected:
                raise MetaConflictError(f"{path} changed: expected version {expected}, found {current}")
            version = 0 if node is None else node[1] + 1
            self._nodes[path] = (bytes(data), version)
            return version

    def _delete(self, path: str, expected: Version = ...) -> None:
        with self._lock:
            node = self._nodes.get(path)
            if node is not None and expected is not ... and node[1] != expected:
                raise MetaConflictError(f"{path} changed: expected version {expected}, found {node[1]}")
            prefix = path + "/"
            for key in [k for k in self._nodes if k == path or k.startswith(prefix)]:
                del self._nodes[key]

    def _children(self, path: str) -> list[str]:
        prefix = path + "/"
        with self._lock:
            return sorted({k[len(prefix) :].split("/", 1)[0] for k in self._nodes if k.startswith(prefix)})
