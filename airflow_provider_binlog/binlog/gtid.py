"""GTID values: MySQL GTID sets (with 8.4+ tags) and MariaDB GTID positions.

MySQL text form (one string form, the server's own): ``uuid:1-5:7:tag:1-3,uuid2:1-9``. Each
source UUID lists its untagged intervals first, then each tag (lower case, sorted) with its
intervals; UUIDs are sorted and joined by ``,`` (the server joins with ``,\\n``; both parse).

Binary form (``Gtid_set::encode``, used by PREVIOUS_GTIDS_LOG_EVENT and COM_BINLOG_DUMP_GTID)::

    untagged: u64 n_sids
              per sid: uuid[16] u64 n_intervals (u64 start, u64 end_exclusive)*
    tagged:   u64 (format=1 in bits 56-63 and 0-7, n_tsids in bits 8-55)
              per tsid: uuid[16] varlen(len(tag)) tag u64 n_intervals (u64 start, u64 end_exclusive)*

``varlen`` is the mysql::serialization unsigned integer: the count of trailing one bits of the
first byte plus one is the byte count ``n``; the value is the little-endian ``n`` bytes shifted
right by ``n`` (9 bytes: ``0xff`` then a plain u64).

MariaDB text form: ``domain-server-sequence``, lists comma separated (``0-1-100,1-2-7``).
"""

from __future__ import annotations

import re
import struct
import uuid as uuid_mod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from airflow_provider_binlog.binlog.errors import DecodeError
from airflow_provider_binlog.binlog.reader import Reader
from airflow_provider_binlog.errors import ConfigurationError

U64 = struct.Struct("<Q")
INTERVAL = struct.Struct("<QQ")

_TAG = re.compile(r"^[a-z_][a-z0-9_]{0,31}$")
_INTERVAL = re.compile(r"^(\d+)(?:-(\d+))?$")
_UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_MARIADB_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")

TAGGED_FORMAT = 1


# --------------------------------------------------------------------------- varlen integers


def read_varlen_uint(r: Reader) -> int:
    """Read one mysql::serialization variable-length unsigned integer."""
    first = r.buf[r.need(1)]
    n = 1
    while n < 9 and first & (1 << (n - 1)):
        n += 1
    if n == 9:
        return r.u64()
    r.pos -= 1
    return r.uint(n) >> n


def read_varlen_int(r: Reader) -> int:
    """Read one mysql::serialization signed integer (zig-zag: sign in the lowest bit)."""
    u = read_varlen_uint(r)
    return -(u >> 1) - 1 if u & 1 else u >> 1


def write_varlen_uint(value: int) -> bytes:
    """Encode ``value`` (0 <= value < 2**64) as a mysql::serialization varlen integer."""
    if value < 0 or value >= 1 << 64:
        raise ValueError(f"varlen integer out of range: {value}")
    for n in range(1, 9):
        if value < 1 << (7 * n):
            return ((value << n) | ((1 << (n - 1)) - 1)).to_bytes(n, "little")
    return b"\xff" + U64.pack(value)


# --------------------------------------------------------------------------- MySQL


def _norm_uuid(text: str) -> str:
    t = text.strip().lower()
    if not _UUID.match(t):
        raise ConfigurationError(f"invalid server UUID {text!r} in GTID")
    return str(uuid_mod.UUID(t))


def _norm_tag(text: str) -> str:
    t = text.strip().lower()
    if not _TAG.match(t):
        raise ConfigurationError(f"invalid GTID tag {text!r}: expected [a-z_][a-z0-9_]{{0,31}}")
    return t


def _merge(intervals: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return tuple((a, b) for a, b in out)


@dataclass(frozen=True, slots=True, order=True)
class MysqlGtid:
    """One MySQL GTID: ``uuid:gno`` or, tagged (8.4+), ``uuid:tag:gno``."""

    uuid: str
    gno: int
    tag: str = ""

    @classmethod
    def parse(cls, text: str) -> MysqlGtid:
        parts = text.strip().split(":")
        if len(parts) == 2 and parts[1].isdigit():
            return cls(_norm_uuid(parts[0]), int(parts[1]))
        if len(parts) == 3 and parts[2].isdigit():
            return cls(_norm_uuid(parts[0]), int(parts[2]), _norm_tag(parts[1]))
        raise ConfigurationError(f"invalid MySQL GTID {text!r}: expected UUID:N or UUID:TAG:N")

    def __str__(self) -> str:
        return f"{self.uuid}:{self.tag}:{self.gno}" if self.tag else f"{self.uuid}:{self.gno}"


# key: (uuid, tag); value: merged inclusive intervals
_SetItems = tuple[tuple[tuple[str, str], tuple[tuple[int, int], ...]], ...]


@dataclass(frozen=True, slots=True)
class MysqlGtidSet:
    """An immutable MySQL GTID set.

    :param items: ``((uuid, tag), ((start, end), ...))`` pairs, sorted, intervals inclusive and merged.
    """

    items: _SetItems = ()

    @classmethod
    def _build(cls, mapping: dict[tuple[str, str], list[tuple[int, int]]]) -> MysqlGtidSet:
        return cls(tuple((key, _merge(iv)) for key, iv in sorted(mapping.items()) if iv))

    @classmethod
    def parse(cls, text: str) -> MysqlGtidSet:
        """Parse the server's text form (empty string -> empty set)."""
        mapping: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for chunk in text.replace("\n", "").split(","):
            chunk = chunk.strip()
            if not chunk:
                continue
            parts = chunk.split(":")
            uid = _norm_uuid(parts[0])
            tag = ""
            if len(parts) < 2:
                raise ConfigurationError(f"invalid GTID set {text!r}: {chunk!r} has no intervals")
            for part in parts[1:]:
                part = part.strip()
                m = _INTERVAL.match(part)
                if m:
                    start = int(m.group(1))
                    end = int(m.group(2)) if m.group(2) else start
                    if start < 1 or end < start:
                        raise ConfigurationError(f"invalid GTID interval {part!r} in {text!r}")
                    mapping.setdefault((uid, tag), []).append((start, end))
                else:
                    tag = _norm_tag(part)
        return cls._build(mapping)

    def _mapping(self) -> dict[tuple[str, str], list[tuple[int, int]]]:
        return {key: list(iv) for key, iv in self.items}

    def __str__(self) -> str:
        groups: list[str] = []
        current: str | None = None
        pieces: list[str] = []
        for (uid, tag), intervals in self.items:
            if uid != current:
                if current is not None:
                    groups.append(":".join(pieces))
                current, pieces = uid, [uid]
            if tag:
                pieces.append(tag)
            pieces.extend(f"{a}" if a == b else f"{a}-{b}" for a, b in intervals)
        if current is not None:
            groups.append(":".join(pieces))
        return ",".join(groups)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __contains__(self, gtid: object) -> bool:
        if isinstance(gtid, str):
            gtid = MysqlGtid.parse(gtid)
        if not isinstance(gtid, MysqlGtid):
            return False
        for key, intervals in self.items:
            if key == (gtid.uuid, gtid.tag):
                return any(a <= gtid.gno <= b for a, b in intervals)
        return False

    def add(self, gtid: MysqlGtid | str) -> MysqlGtidSet:
        """Return this set with one more GTID."""
        if isinstance(gtid, str):
            gtid = MysqlGtid.parse(gtid)
        mapping = self._mapping()
        mapping.setdefault((gtid.uuid, gtid.tag), []).append((gtid.gno, gtid.gno))
        return self._build(mapping)

    def union(self, other: MysqlGtidSet) -> MysqlGtidSet:
        mapping = self._mapping()
        for key, iv in other.items:
            mapping.setdefault(key, []).extend(iv)
        return self._build(mapping)

    __or__ = union

    def issubset(self, other: MysqlGtidSet) -> bool:
        return other.union(self) == other

    @property
    def tagged(self) -> bool:
        return any(tag for (_, tag), _ in self.items)

    def encode(self) -> bytes:
        """The binary form (``Gtid_set::encode``): untagged layout unless a tag is present."""
        out = bytearray()
        if self.tagged:
            out += U64.pack((TAGGED_FORMAT << 56) | (len(self.items) << 8) | TAGGED_FORMAT)
            for (uid, tag), intervals in self.items:
                out += uuid_mod.UUID(uid).bytes
                out += write_varlen_uint(len(tag)) + tag.encode("ascii")
                out += U64.pack(len(intervals))
                for a, b in intervals:
                    out += INTERVAL.pack(a, b + 1)
            return bytes(out)
        # untagged: one entry per uuid
        out += U64.pack(len(self.items))
        for (uid, _), intervals in self.items:
            out += uuid_mod.UUID(uid).bytes
            out += U64.pack(len(intervals))
            for a, b in intervals:
                out += INTERVAL.pack(a, b + 1)
        return bytes(out)

    @classmethod
    def decode(cls, r: Reader) -> MysqlGtidSet:
        """Read the binary form from ``r`` (tagged or untagged); raises DecodeError on bad bytes."""
        head = r.u64()
        tagged = (head >> 56) == TAGGED_FORMAT
        if (head >> 56) not in (0, TAGGED_FORMAT):
            raise DecodeError(f"unknown GTID set format {head >> 56}")
        n_sids = (head >> 8) & ((1 << 48) - 1) if tagged else head
        # each entry takes at least 24 bytes: refuse absurd counts before looping
        if n_sids * 24 > r.remaining():
            raise DecodeError(f"GTID set claims {n_sids} sources, only {r.remaining()} bytes left")
        mapping: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for _ in range(n_sids):
            uid = str(uuid_mod.UUID(bytes=r.bytes(16)))
            tag = ""
            if tagged:
                raw = r.bytes(read_varlen_uint(r))
                try:
                    tag = raw.decode("ascii").lower()
                except UnicodeDecodeError:
                    raise DecodeError(f"GTID tag is not ASCII: {raw!r}") from None
            n = r.u64()
            if n * 16 > r.remaining():
                raise DecodeError(f"GTID set claims {n} intervals, only {r.remaining()} bytes left")
            lst = mapping.setdefault((uid, tag), [])
            for _ in range(n):
                a, b = r.u64(), r.u64()
                if b <= a:
                    raise DecodeError(f"invalid GTID interval [{a}, {b})")
                lst.append((a, b - 1))
        return cls._build(mapping)


# --------------------------------------------------------------------------- MariaDB


@dataclass(frozen=True, slots=True, order=True)
class MariadbGtid:
    """A MariaDB GTID ``domain-server-sequence``."""

    domain_id: int
    server_id: int
    seq_no: int

    @classmethod
    def parse(cls, text: str) -> MariadbGtid:
        m = _MARIADB_GTID.match(text.strip())
        if not m:
            raise ConfigurationError(f"invalid MariaDB GTID {text!r}: expected DOMAIN-SERVER-SEQUENCE")
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3)))

    def __str__(self) -> str:
        return f"{self.domain_id}-{self.server_id}-{self.seq_no}"


@dataclass(frozen=True, slots=True)
class MariadbGtidList:
    """A MariaDB GTID position or list: GTIDs in the server's order, comma separated.

    As a replication position (``@@gtid_binlog_pos``, ``@slave_connect_state``) it holds one GTID per
    domain; :meth:`advance` keeps it that way.
    """

    gtids: tuple[MariadbGtid, ...] = ()

    @classmethod
    def parse(cls, text: str) -> MariadbGtidList:
        return cls(tuple(MariadbGtid.parse(p) for p in text.split(",") if p.strip()))

    def __str__(self) -> str:
        return ",".join(str(g) for g in self.gtids)

    def __bool__(self) -> bool:
        return bool(self.gtids)

    def __iter__(self) -> Iterator[MariadbGtid]:
        return iter(self.gtids)

    def domain(self, domain_id: int) -> MariadbGtid | None:
        """The (last) GTID of a replication domain, if any."""
        found = None
        for g in self.gtids:
            if g.domain_id == domain_id:
                found = g
        return found

    def advance(self, gtid: MariadbGtid | str) -> MariadbGtidList:
        """Return the position after ``gtid``: its domain's entry replaced, domains sorted."""
        if isinstance(gtid, str):
            gtid = MariadbGtid.parse(gtid)
        others = [g for g in self.gtids if g.domain_id != gtid.domain_id]
        return MariadbGtidList(tuple(sorted([*others, gtid])))

    def reached(self, other: MariadbGtidList) -> bool:
        """True when every domain of ``other`` is at or past its sequence number here."""
        for g in other.gtids:
            mine = self.domain(g.domain_id)
            if mine is None or mine.seq_no < g.seq_no:
                return False
        return True
