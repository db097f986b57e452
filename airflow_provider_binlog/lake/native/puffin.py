"""Puffin files, as Iceberg's ``PuffinWriter`` writes them, made in Python (issue #20).

A merge by the driver (:mod:`.position_delta`) keeps its deletion vectors as the blobs of one Puffin
file. Written through Iceberg's JVM writer, that file cost about 30 py4j round trips per table and
commit (a location, an output file, a writer, then a blob, a buffer and a property map per vector,
and the footer read back), a fifth of a small table's merge. Here the bytes are laid out in
Python and the caller writes them with pyarrow, like the piece's data file; the JVM is asked
nothing.

The layout (Iceberg's Puffin spec): the magic ``PFA1``, each blob's bytes, then the footer: the
magic, the footer payload (the JSON of the blobs' metadata and the file's properties,
uncompressed), the payload's length (4 bytes, little-endian), 4 bytes of flags (none set: the
payload is not compressed) and the magic again. A blob's metadata names its type, the field ids
it is computed from, its snapshot id and sequence number (``-1``: not known when written, as for
deletion vectors), its offset and length in the file and its properties. Blobs are stored
uncompressed (no ``compression-codec``), as Iceberg stores deletion vectors. Readers of a deletion
vector go to its offset and length, which the delete file's metadata records; the footer is what
tools that list a Puffin file's blobs read.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MAGIC = b"PFA1"
FLAGS = bytes(4)
"""No flag set: the footer payload is not compressed."""
UNKNOWN = -1
"""The snapshot id and sequence number of a blob written before its commit."""


@dataclass(frozen=True, slots=True)
class Blob:
    """One blob: its bytes (stored as they are) and its properties."""

    data: bytes
    properties: Mapping[str, str]


def encode(
    blob_type: str, fields: Sequence[int], blobs: Sequence[Blob], created_by: str
) -> tuple[bytes, list[tuple[int, int]]]:
    """The bytes of a Puffin file holding ``blobs`` of ``blob_type`` over the field ids ``fields``,
    ``created-by`` ``created_by``; and each blob's ``(offset, length)`` in it, in order."""
    out = bytearray(MAGIC)
    spans = []
    metadata = []
    for blob in blobs:
        offset, length = len(out), len(blob.data)
        out += blob.data
        spans.append((offset, length))
        meta: dict[str, object] = {
            "type": blob_type,
            "fields": [int(f) for f in fields],
            "snapshot-id": UNKNOWN,
            "sequence-number": UNKNOWN,
            "offset": offset,
            "length": length,
        }
        if blob.properties:
            meta["properties"] = dict(blob.properties)
        metadata.append(meta)
    footer = {"blobs": metadata, "properties": {"created-by": created_by}}
    payload = json.dumps(footer, separators=(",", ":"), ensure_ascii=False).encode()
    out += MAGIC + payload + struct.pack("<i", len(payload)) + FLAGS + MAGIC
    return bytes(out), spans


def decode_footer(content: bytes) -> dict[str, object]:
    """The footer payload of a Puffin file's bytes, parsed (for checks and tests).

    :raises ValueError: not a Puffin file, or a compressed footer.
    """
    if content[:4] != MAGIC or content[-4:] != MAGIC:
        raise ValueError("not a Puffin file (magic)")
    if content[-8:-4] != FLAGS:
        raise ValueError("a compressed Puffin footer")
    (length,) = struct.unpack("<i", content[-12:-8])
    start = len(content) - 12 - length
    if length < 0 or start < 8 or content[start - 4 : start] != MAGIC:
        raise ValueError("not a Puffin file (footer)")
    loaded = json.loads(content[start : start + length])
    if not isinstance(loaded, dict):
        raise ValueError("not a Puffin footer")
    return loaded
