"""The meta-manager interface: where a destination's cursor, marks and small records live.

All three back ends (memory, local file, ZooKeeper) store the same tree of small nodes, canal's
own layout plus one subtree of this provider's::

    /otter/canal/destinations/{destination}/{clientId}                 client node (subscribed)
    /otter/canal/destinations/{destination}/{clientId}/filter          filter string, raw UTF-8
    /otter/canal/destinations/{destination}/{clientId}/cursor          LogPosition JSON (canal's)
    /otter/canal/destinations/{destination}/{clientId}/mark/{batchId:010d}
                                                                        PositionRange JSON, one per
                                                                        batch handed out, not acked
    /otter/canal/destinations/{destination}/{clientId}/running         EPHEMERAL, see canal.ha
    /otter/canal/destinations/{destination}/{clientId}/provider/{key}  this provider's records:
        runs/{run_id}            JSON {"start": LogPosition, "end": LogPosition, "state": ...}
        snapshot/{schema.table}  JSON snapshot progress of one table
        schema/...               schema history (see canal.schema)
        epoch                    bumped by every acquire of the running node (see canal.ha)

Every write is compare-and-set: readers get a ``(value, version)`` pair and writers pass the
version they read (``None`` = "must not exist yet"); a lost race raises
:class:`~airflow_provider_binlog.canal.errors.MetaConflictError`. Versions are opaque: the
znode version in ZooKeeper, a counter in memory, a content digest in the file store.

Fencing: :meth:`MetaManager.attach_fence` hands a client's HA node to the manager. The ZooKeeper
manager then makes every cursor and mark write or delete of that client conditional on the
holder's :class:`Fence` (the epoch node still at the version its acquire left), so a consumer that
lost the destination to another cannot move the cursor any more. The memory and file managers have
no HA node and ignore it.
"""

from __future__ import annotations

import contextlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from airflow_provider_binlog.canal.errors import MetaConflictError, MetaError
from airflow_provider_binlog.canal.meta.model import ClientIdentity, LogPosition, PositionRange
from airflow_provider_binlog.errors import ConfigurationError

ROOT = "/otter/canal/destinations"
MARK_FORMAT = "{:010d}"
_KEY_SEGMENT = re.compile(r"^[A-Za-z0-9_.@:=+-]+$")
_NAME = re.compile(r"^[^/\x00]+$")

Version = Any
"""An opaque node version; ``None`` means "the node does not exist"."""


class Versioned(NamedTuple):
    """A stored value with the version to pass back to a compare-and-set write."""

    value: Any
    version: Version


@dataclass(frozen=True)
class Fence:
    """A holder's fencing token.

    :param path: the epoch node (``{client}/provider/epoch``).
    :param version: the epoch node's version as the holder's acquire left it.
    :param session_id: the ZooKeeper session the holder acquired with (``None`` when unknown).
    """

    path: str
    version: int
    session_id: int | None = None


class FenceSource(Protocol):
    """What hands out a client's current fencing token: its HA node (:class:`~..ha.RunningNode`)."""

    def fence(self) -> Fence | None:
        """The token of the last acquire, or ``None`` when never acquired (writes are not fenced)."""


def destination_path(destination: str) -> str:
    if not _NAME.match(destination) or destination in (".", ".."):
        raise ConfigurationError(f"invalid destination name {destination!r}")
    return f"{ROOT}/{destination}"


def client_path(client: ClientIdentity) -> str:
    return f"{destination_path(client.destination)}/{client.client_id}"


def check_key(key: str) -> str:
    """Validate a provider record key (``/``-separated segments of ``[A-Za-z0-9_.@:=+-]``)."""
    parts = key.split("/")
    if not key or any(not _KEY_SEGMENT.match(p) or p in (".", "..") for p in parts):
        raise ConfigurationError(f"invalid meta key {key!r}")
    return key


class MetaManager(ABC):
    """Cursor, marks and provider records of destinations, over a tree of versioned nodes.

    Subclasses implement the five node operations; everything else is shared.
    """

    # -- node operations (back end) -----------------------------------------------------------

    @abstractmethod
    def _read(self, path: str) -> tuple[bytes | None, Version]:
        """Return ``(data, version)``; ``(None, None)`` when the node does not exist."""

    @abstractmethod
    def _write(self, path: str, data: bytes, expected: Version) -> Version:
        """Create (``expected is None``) or replace (version must match) a node; return the new
        version; raise :class:`MetaConflictError` when the node's version differs."""

    @abstractmethod
    def _delete(self, path: str, expected: Version = ...) -> None:
        """Delete a node and its children (``...`` = whatever its version); missing is fine."""

    @abstractmethod
    def _children(self, path: str) -> list[str]:
        """Names of the direct children of a node (empty when it does not exist)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (the injected ZooKeeper client is not stopped)."""

    def _fenced_write(self, client: ClientIdentity, path: str, data: bytes, expected: Version) -> Version:
        """:meth:`_write` of a cursor or mark of ``client``; a back end that fences overrides it."""
        return self._write(path, data, expected)

    def _fenced_delete(self, client: ClientIdentity, path: str, expected: Version = ...) -> None:
        """:meth:`_delete` of a cursor or mark of ``client``; a back end that fences overrides it."""
        self._delete(path, expected)

    # -- fencing ------------------------------------------------------------------------------

    def attach_fence(self, client: ClientIdentity, source: FenceSource | None) -> None:  # noqa: B027
        """Fence ``client``'s cursor and mark writes with ``source``'s token (``None`` detaches).

        Only the ZooKeeper manager fences (see the module docstring); the others ignore it.
        """

    # -- subscriptions ------------------------------------------------------------------------

    def subscribe(self, client: ClientIdentity) -> None:
        """Create the client node and store its filter (idempotent)."""
        path = client_path(client)
        if self._read(path)[0] is None:
            with contextlib.suppress(MetaConflictError):  # created concurrently: fine
                self._write(path, b"", None)
        fdata, fversion = self._read(path + "/filter")
        wanted = client.filter.encode()
        if fdata != wanted:
            self._write(path + "/filter", wanted, fversion)

    def unsubscribe(self, client: ClientIdentity) -> None:
        """Remove the client node with its cursor, marks and records."""
        self._delete(client_path(client))

    def has_subscribed(self, client: ClientIdentity) -> bool:
        return self._read(client_path(client))[0] is not None

    def subscriptions(self, destination: str) -> list[ClientIdentity]:
        """The clients subscribed to a destination, with their stored filters."""
        out = []
        base = destination_path(destination)
        for name in sorted(self._children(base)):
            if not name.isdigit():
                continue
            fdata, _ = self._read(f"{base}/{name}/filter")
            out.append(ClientIdentity(destination, int(name), (fdata or b"").decode()))
        return out

    # -- cursor -------------------------------------------------------------------------------

    def get_cursor(self, client: ClientIdentity) -> Versioned:
        """The acked cursor: ``Versioned(LogPosition | None, version)``."""
        data, version = self._read(client_path(client) + "/cursor")
        if data is None:
            return Versioned(None, None)
        return Versioned(LogPosition.from_json(data), version)

    def set_cursor(self, client: ClientIdentity, position: LogPosition, expected: Version) -> Version:
        """Compare-and-set the cursor.

        :param expected: the version returned by :meth:`get_cursor` or the last :meth:`set_cursor`.
        :return: the new version.
        :raises MetaConflictError: the cursor changed since ``expected``.
        """
        path = client_path(client) + "/cursor"
        return self._fenced_write(client, path, position.to_json().encode(), expected)

    def delete_cursor(self, client: ClientIdentity, expected: Version = ...) -> None:
        """Forget the cursor (the next start uses the configured start position); with
        ``expected``, only if it is still that version."""
        self._fenced_delete(client, client_path(client) + "/cursor", expected)

    def min_cursor(self, destination: str) -> LogPosition | None:
        """The smallest cursor over the destination's clients (where canal resumes the parser)."""
        best: LogPosition | None = None
        for client in self.subscriptions(destination):
            pos = self.get_cursor(client).value
            if pos is None or pos.binlog_position is None:
                continue
            if best is None or pos.binlog_position < best.binlog_position:
                best = pos
        return best

    # -- marks --------------------------------------------------------------------------------

    def _mark_path(self, client: ClientIdentity, batch_id: int) -> str:
        return f"{client_path(client)}/mark/{MARK_FORMAT.format(batch_id)}"

    def add_mark(self, client: ClientIdentity, batch_id: int, positions: PositionRange) -> None:
        """Record a batch handed out (fails with :class:`MetaConflictError` if the id exists)."""
        self._fenced_write(client, self._mark_path(client, batch_id), positions.to_json().encode(), None)

    def remove_mark(self, client: ClientIdentity, batch_id: int) -> None:
        self._fenced_delete(client, self._mark_path(client, batch_id))

    def remove_marks(self, client: ClientIdentity, batch_ids: Sequence[int]) -> None:
        """:meth:`remove_mark` of each (a back end that can removes them in one operation)."""
        for batch_id in batch_ids:
            self.remove_mark(client, batch_id)

    def marks(self, client: ClientIdentity) -> dict[int, PositionRange]:
        """Batches recorded as in flight, by id, oldest first."""
        out: dict[int, PositionRange] = {}
        base = client_path(client) + "/mark"
        for name in sorted(self._children(base)):
            if not name.isdigit():
                continue
            data, _ = self._read(f"{base}/{name}")
            if data is not None:
                out[int(name)] = PositionRange.from_json(data)
        return dict(sorted(out.items()))

    def clear_marks(self, client: ClientIdentity) -> None:
        for batch_id in self.marks(client):
            self.remove_mark(client, batch_id)

    # -- provider records ---------------------------------------------------------------------

    def _record_path(self, client: ClientIdentity, key: str) -> str:
        return f"{client_path(client)}/provider/{check_key(key)}"

    def get_value(self, client: ClientIdentity, key: str) -> Versioned:
        """A provider record's bytes and version (``(None, None)`` when absent)."""
        data, version = self._read(self._record_path(client, key))
        return Versioned(data, version)

    def set_value(self, client: ClientIdentity, key: str, data: bytes, expected: Version) -> Version:
        """Compare-and-set a provider record (``expected=None``: create)."""
        return self._write(self._record_path(client, key), data, expected)

    def delete_value(self, client: ClientIdentity, key: str) -> None:
        self._delete(self._record_path(client, key))

    def list_keys(self, client: ClientIdentity, prefix: str) -> list[str]:
        """Names directly under the record key ``prefix``, sorted."""
        return sorted(self._children(self._record_path(client, prefix)))

    def get_json(self, client: ClientIdentity, key: str) -> Versioned:
        data, version = self.get_value(client, key)
        if data is None:
            return Versioned(None, None)
        try:
            return Versioned(json.loads(data), version)
        except ValueError as exc:
            raise MetaError(f"meta record {key!r} is not JSON: {exc}") from None

    def set_json(self, client: ClientIdentity, key: str, value: Any, expected: Version) -> Version:
        return self.set_value(client, key, json.dumps(value, sort_keys=True).encode(), expected)

    def update_json(self, client: ClientIdentity, key: str, update: Any, attempts: int = 10) -> Any:
        """Read-modify-write a JSON record with retries on conflict.

        :param update: ``f(old_value_or_None) -> new_value``.
        :return: the value written.
        """
        for _ in range(attempts):
            old, version = self.get_json(client, key)
            new = update(old)
            try:
                self.set_json(client, key, new, version)
                return new
            except MetaConflictError:
                continue
        raise MetaConflictError(f"meta record {key!r} kept changing; gave up after {attempts} attempts")

    # -- run records --------------------------------------------------------------------------

    def record_run(self, client: ClientIdentity, run_id: str, **fields: Any) -> dict[str, Any]:
        """Merge ``fields`` into the record of run ``run_id`` (``provider/runs/{run_id}``).

        Positions may be passed as :class:`LogPosition`; they are stored in canal's dict form.
        """
        clean = {k: (v.to_canal_dict() if isinstance(v, LogPosition) else v) for k, v in fields.items()}

        def merge(old: dict[str, Any] | None) -> dict[str, Any]:
            return {**(old or {}), **clean}

        result: dict[str, Any] = self.update_json(client, f"runs/{check_key(run_id)}", merge)
        return result

    def runs(self, client: ClientIdentity) -> dict[str, dict[str, Any]]:
        """All run records of a client, by run id."""
        return {
            run_id: self.get_json(client, f"runs/{run_id}").value for run_id in self.list_keys(client, "runs")
        }
