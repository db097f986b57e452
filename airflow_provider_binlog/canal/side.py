"""Side clients: a replication client with a replica server id of its own, for short scans beside a
running dump (the server drops an older dump of the same server id)."""

from __future__ import annotations

import dataclasses
from typing import Any

from airflow_provider_binlog.binlog.client import ReplicationClient, _default_server_id


def side_client(client: Any) -> Any:
    """A client with its own replica server id, for scans beside a running dump (a client that
    knows how to copy itself, e.g. :class:`~.archive.ArchiveClient`, makes its own)."""
    side = getattr(client, "side", None)
    if side is not None:
        return side()
    return ReplicationClient(dataclasses.replace(client.config, server_id=_default_server_id()))
