"""Errors of canal's network protocol (server and client), under the one hierarchy."""

from __future__ import annotations

from airflow_provider_binlog.canal.errors import CanalError


class CanalProtocolError(CanalError):
    """A peer broke canal's protocol (bad frame, unexpected packet)."""


class CanalServerError(CanalError):
    """A canal server answered with an error (its ``Ack.error_code`` and message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"canal server error {code}: {message}")
        self.code = code


class CanalAuthError(CanalServerError):
    """The server refused the account."""
