"""Errors of the binlog layer: decoding, checksums, the replication connection."""

from __future__ import annotations

from airflow_provider_binlog.errors import BinlogCdcError


class BinlogError(BinlogCdcError):
    """Root of the binlog layer's errors."""


class DecodeError(BinlogError):
    """Bytes that do not decode as the event they claim to be.

    :param message: what is wrong.
    :param event_type: MySQL's name of the event type being decoded, when known.
    :param position: ``file:position`` of the event's first byte, when known.
    """

    def __init__(self, message: str, *, event_type: str | None = None, position: str | None = None) -> None:
        self.reason = message
        self.event_type = event_type
        self.position = position
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.event_type:
            where.append(self.event_type)
        if self.position:
            where.append(f"at {self.position}")
        return f"{self.reason} ({' '.join(where)})" if where else self.reason

    def located(self, *, event_type: str | None, position: str | None) -> DecodeError:
        """Return a copy of this error that names the event type and position (keeps existing ones)."""
        err = type(self).__new__(type(self))
        DecodeError.__init__(
            err,
            self.reason,
            event_type=self.event_type or event_type,
            position=self.position or position,
        )
        return err


class ChecksumError(DecodeError):
    """An event's CRC32 does not match its bytes."""


class SchemaMismatchDecodeError(DecodeError):
    """The columns known for a table (the schema history, ``information_schema``) do not match its
    TABLE_MAP (count or type family) where the binlog leaves names out: the bytes are not damaged,
    what is known about the table is."""


class UnsupportedError(BinlogError):
    """A feature of the server or the binlog this client does not support (e.g. binlog encryption)."""


class ConnectionLostError(BinlogError):
    """The replication connection dropped. Retryable from :attr:`position`, the last complete position.

    :param position: the binlog position after the last completely received event (a
        :class:`~airflow_provider_binlog.binlog.position.BinlogPosition`), or ``None`` if nothing
        was received yet.
    """

    retryable = True

    def __init__(self, message: str, position: object | None = None) -> None:
        self.position = position
        super().__init__(f"{message} (last complete position: {position})" if position else message)


class ServerError(BinlogError):
    """The server refused a request (bad credentials, missing privilege, purged binlog...).

    :param code: the MySQL error code, when the server sent one.
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        self.code = code
        super().__init__(message)


class PurgedBinlogError(ServerError):
    """The requested binlog file is no longer on the server."""
