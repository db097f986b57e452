"""Binlog positions: small immutable values with a total order and one string form.

``mysql-bin.000042:1234`` is the canonical form. Files order by their numeric suffix, so
``mysql-bin.000999`` < ``mysql-bin.001000`` even where the suffix width changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

from airflow_provider_binlog.errors import ConfigurationError

_SUFFIX = re.compile(r"\.(\d+)$")


_FILE_NUMBERS: dict[str, int] = {}


def file_number(name: str) -> int:
    """Return the numeric suffix of a binlog file name (``mysql-bin.000042`` -> 42), or 0 if none.

    Remembered per name (the parser asks for every row event's file; a handful of names a run)."""
    n = _FILE_NUMBERS.get(name)
    if n is None:
        m = _SUFFIX.search(name)
        n = int(m.group(1)) if m else 0
        if len(_FILE_NUMBERS) < 4096:
            _FILE_NUMBERS[name] = n
    return n


@total_ordering
@dataclass(frozen=True, slots=True)
class BinlogPosition:
    """A byte offset in a binlog file.

    :param file: binlog file name, e.g. ``mysql-bin.000042``.
    :param pos: byte offset inside that file.
    """

    file: str
    pos: int

    @classmethod
    def parse(cls, text: str) -> BinlogPosition:
        """Parse ``file:position``; raise :class:`ConfigurationError` naming the bad text."""
        name, sep, pos = text.strip().rpartition(":")
        if not sep or not name or not pos.isdigit():
            raise ConfigurationError(
                f"invalid binlog position {text!r}: expected FILE:POSITION, e.g. mysql-bin.000042:1234"
            )
        return cls(name, int(pos))

    @property
    def file_number(self) -> int:
        return file_number(self.file)

    def sort_key(self) -> tuple[int, str, int]:
        return (self.file_number, self.file, self.pos)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        return self.sort_key() < other.sort_key()

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


_new_position = object.__new__
# the slot descriptors' setters (a frozen dataclass guards only __setattr__)
_set_file = vars(BinlogPosition)["file"].__set__
_set_pos = vars(BinlogPosition)["pos"].__set__


def make_position(file: str, pos: int) -> BinlogPosition:
    """``BinlogPosition(file, pos)`` for the parser's per-event positions: the same object, built
    through its slots (a frozen dataclass's ``__init__`` sets each field with
    ``object.__setattr__``: three times the cost)."""
    p = _new_position(BinlogPosition)
    _set_file(p, file)
    _set_pos(p, pos)
    return p
