"""A local-file meta manager for single-machine use, compatible with canal's ``meta.dat``.

Layout under ``directory``::

    {directory}/{destination}/meta.dat       canal's FileMixedMetaManager shape: subscriptions,
                                             filters and cursors (LogPosition without "@type")
    {directory}/{destination}/provider.json  everything else (marks, provider records):
                                             {"nodes": {"<path below the client node>": "<utf-8>"
                                                        or {"base64": "..."}}}
    {directory}/{destination}/.lock          flock(2) serialising read-modify-write across processes

``meta.dat`` looks like canal's::

    {"clientDatas":[{"clientIdentity":{"clientId":1001,"destination":"d","filter":"..."},
                     "cursor":{"identity":{...},"postion":{...}}}],"destination":"d"}

Every write re-reads the files under the lock, compares the node's version (a digest of its
bytes) and replaces the file atomically: write a temporary file, ``fsync`` it, ``rename`` it over
the old one, ``fsync`` the directory.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from airflow_provider_binlog.canal.errors import MetaConflictError, MetaError
from airflow_provider_binlog.canal.meta.base import ROOT, MetaManager, Version
from airflow_provider_binlog.canal.meta.model import ClientIdentity, LogPosition, dumps

META_FILE = "meta.dat"
PROVIDER_FILE = "provider.json"


def _digest(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()[:16]


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably (temp file, fsync, rename, fsync dir)."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class FileMetaManager(MetaManager):
    """Meta data in files under ``directory`` (see the module docstring).

    :param directory: the base directory (created if missing).
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self._thread_lock = threading.RLock()

    def __repr__(self) -> str:
        return f"FileMetaManager({self.directory!r})"

    # -- path mapping -------------------------------------------------------------------------

    @staticmethod
    def _split(path: str) -> tuple[str, str]:
        """``/otter/canal/destinations/d/rest`` -> (``d``, ``rest``)."""
        if not path.startswith(ROOT + "/"):
            raise MetaError(f"path outside the canal tree: {path}")
        dest, _, rest = path[len(ROOT) + 1 :].partition("/")
        return dest, rest

    @contextlib.contextmanager
    def _locked(self, dest: str) -> Iterator[str]:
        ddir = os.path.join(self.directory, dest)
        with self._thread_lock:
            os.makedirs(ddir, exist_ok=True)
            with open(os.path.join(ddir, ".lock"), "a+b") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                try:
                    yield ddir
                finally:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    # -- loading and saving ---------------------------------------------------------------------

    def _load(self, ddir: str, dest: str) -> dict[str, bytes]:
        """All nodes of a destination, keyed by the path below the destination node."""
        nodes: dict[str, bytes] = {}
        meta_path = os.path.join(ddir, META_FILE)
        if os.path.exists(meta_path):
            try:
                with open(meta_path, "rb") as fh:
                    meta = json.loads(fh.read())
                for item in meta.get("clientDatas") or []:
                    ident = item.get("clientIdentity") or {}
                    cid = str(int(ident["clientId"]))
                    nodes[cid] = b""
                    nodes[f"{cid}/filter"] = (ident.get("filter") or "").encode()
                    if item.get("cursor"):
                        cursor = LogPosition.from_canal_dict(item["cursor"])
                        nodes[f"{cid}/cursor"] = cursor.to_json().encode()
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise MetaError(f"{meta_path} is not a canal meta.dat: {exc}") from None
        prov_path = os.path.join(ddir, PROVIDER_FILE)
        if os.path.exists(prov_path):
            try:
                with open(prov_path, "rb") as fh:
                    stored = json.loads(fh.read()).get("nodes", {})
                for key, value in stored.items():
                    nodes[key] = (
                        base64.b64decode(value["base64"]) if isinstance(value, dict) else value.encode()
                    )
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise MetaError(f"{prov_path} is malformed: {exc}") from None
        return nodes

    @staticmethod
    def _is_canal_node(key: str) -> bool:
        parts = key.split("/")
        return parts[0].isdigit() and (
            len(parts) == 1 or (len(parts) == 2 and parts[1] in ("filter", "cursor"))
        )

    def _save(self, ddir: str, dest: str, nodes: dict[str, bytes], changed: str) -> None:
        if self._is_canal_node(changed):
            datas = []
            for cid in sorted((k for k in nodes if k.isdigit()), key=int):
                item: dict[str, Any] = {
                    "clientIdentity": ClientIdentity(
                        dest, int(cid), nodes.get(f"{cid}/filter", b"").decode()
                    ).to_canal_dict()
                }
                cursor = nodes.get(f"{cid}/cursor")
                if cursor is not None:
                    item["cursor"] = LogPosition.from_json(cursor).to_canal_dict(with_type=False)
                datas.append(item)
            atomic_write(
                os.path.join(ddir, META_FILE), dumps({"clientDatas": datas, "destination": dest}).encode()
            )
        else:
            out: dict[str, Any] = {}
            for key in sorted(nodes):
                if self._is_canal_node(key):
                    continue
                try:
                    out[key] = nodes[key].decode("utf-8")
                except UnicodeDecodeError:
                    out[key] = {"base64": base64.b64encode(nodes[key]).decode()}
            atomic_write(os.path.join(ddir, PROVIDER_FILE), json.dumps({"nodes": out}, indent=1).encode())

    # -- node operations ------------------------------------------------------------------------

    def _read(self, path: str) -> tuple[bytes | None, Version]:
        dest, rest = self._split(path)
        with self._locked(dest) as ddir:
            nodes = self._load(ddir, dest)
        if not rest:
            return (b"", "dest") if nodes else (None, None)
        data = nodes.get(rest)
        return (None, None) if data is None else (data, _digest(data))

    def _write(self, path: str, data: bytes, expected: Version) -> Version:
        dest, rest = self._split(path)
        if not rest:
            raise MetaError("cannot write the destination node itself")
        with self._locked(dest) as ddir:
            nodes = self._load(ddir, dest)
            old = nodes.get(rest)
            current = None if old is None else _digest(old)
            if current != expected:
                raise MetaConflictError(
                    f"{path} changed since it was read (expected {expected}, found {current})"
                )
            cid = rest.split("/", 1)[0]
            if "/" in rest and cid.isdigit() and cid not in nodes and self._is_canal_node(rest):
                nodes[cid] = b""  # a cursor or filter implies the client entry in meta.dat
            nodes[rest] = bytes(data)
            self._save(ddir, dest, nodes, rest)
        return _digest(data)

    def _delete(self, path: str, expected: Version = ...) -> None:
        dest, rest = self._split(path)
        with self._locked(dest) as ddir:
            nodes = self._load(ddir, dest)
            old = nodes.get(rest)
            if old is not None and expected is not ... and _digest(old) != expected:
                raise MetaConflictError(f"{path} changed since it was read")
            doomed = [k for k in nodes if not rest or k == rest or k.startswith(rest + "/")]
            if not doomed:
                return
            canal = any(self._is_canal_node(k) for k in doomed)
            other = any(not self._is_canal_node(k) for k in doomed)
            for k in doomed:
                del nodes[k]
            if canal:
                self._save(ddir, dest, nodes, "0")
            if other:
                self._save(ddir, dest, nodes, "0/provider")

    def _children(self, path: str) -> list[str]:
        dest, rest = self._split(path)
        with self._locked(dest) as ddir:
            nodes = self._load(ddir, dest)
        prefix = rest + "/" if rest else ""
        return sorted(
            {k[len(prefix) :].split("/", 1)[0] for k in nodes if k.startswith(prefix) and k != rest}
        )
