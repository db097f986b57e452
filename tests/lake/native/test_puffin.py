"""Puffin files laid out in Python (``lake/native/puffin.py``): the same bytes and footer as Iceberg's JVM
``PuffinWriter`` writes for the same blobs, and read back by Iceberg's ``PuffinReader``."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_binlog.lake.native import puffin
from airflow_provider_binlog.lake.spark.java_classes import java_class, java_static

BLOBS = [
    puffin.Blob(b"\x00\x01abc", {"referenced-data-file": "/w/a é.parquet", "cardinality": "3"}),
    puffin.Blob(bytes(range(256)) * 3, {"referenced-data-file": "/w/b.parquet", "cardinality": "1"}),
    puffin.Blob(b"z", {}),
]
FIELDS = [2147483645]


def test_the_layout_holds_each_blob_at_its_offset_and_the_footer_describes_them() -> None:
    content, spans = puffin.encode("deletion-vector-v1", FIELDS, BLOBS, "me")
    assert content[:4] == b"PFA1" and content[-4:] == b"PFA1"
    assert [content[o : o + n] for o, n in spans] == [b.data for b in BLOBS]
    assert spans[0][0] == 4 and spans[1][0] == 4 + len(BLOBS[0].data)
    footer = puffin.decode_footer(content)
    assert footer["properties"] == {"created-by": "me"}
    blobs = footer["blobs"]
    assert isinstance(blobs, list)
    assert [(b["offset"], b["length"]) for b in blobs] == spans
    assert [b.get("properties", {}) for b in blobs] == [dict(b.properties) for b in BLOBS]
    assert "properties" not in blobs[2], "a blob without properties names none (as Iceberg writes it)"
    assert all(b["fields"] == FIELDS and b["snapshot-id"] == b["sequence-number"] == -1 for b in blobs)


@pytest.mark.parametrize("damage", ["head", "tail", "flags", "length"])
def test_a_damaged_file_is_not_read_as_a_footer(damage: str) -> None:
    content = bytearray(puffin.encode("t", FIELDS, BLOBS[:1], "me")[0])
    if damage == "head":
        content[0:4] = b"XXXX"
    elif damage == "tail":
        content[-1:] = b"X"
    elif damage == "flags":
        content[-8] = 1  # a compressed footer: not what this module writes
    else:
        content[-12:-8] = (len(content)).to_bytes(4, "little")
    with pytest.raises(ValueError, match="Puffin"):
        puffin.decode_footer(bytes(content))


def _jvm_written(spark: Any, path: str) -> bytes:
    output = java_static(spark, "org.apache.iceberg.Files", "localOutput")(path)
    writer = java_static(spark, "org.apache.iceberg.puffin.Puffin", "write")(output).createdBy("me").build()
    fields = java_static(spark, "java.util.List", "of")(FIELDS[0])
    blob = java_class(spark, "org.apache.iceberg.puffin.Blob")
    wrap = java_static(spark, "java.nio.ByteBuffer", "wrap")
    for b in BLOBS:
        props = java_class(spark, "java.util.LinkedHashMap")()  # in the order given (Map.of's is not defined)
        for key, value in b.properties.items():
            props.put(key, value)
        writer.write(blob("deletion-vector-v1", fields, -1, -1, wrap(b.data), None, props))
    writer.finish()
    writer.close()
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.spark
def test_the_bytes_equal_what_icebergs_writer_writes(spark: Any, tmp_path: Any) -> None:
    jvm = _jvm_written(spark, str(tmp_path / "jvm.puffin"))
    ours, _ = puffin.encode("deletion-vector-v1", FIELDS, BLOBS, "me")
    assert puffin.decode_footer(ours) == puffin.decode_footer(jvm)
    assert ours == jvm


@pytest.mark.spark
def test_icebergs_reader_reads_the_blobs_and_their_metadata(spark: Any, tmp_path: Any) -> None:
    path = tmp_path / "ours.puffin"
    content, spans = puffin.encode("deletion-vector-v1", FIELDS, BLOBS, "me")
    path.write_bytes(content)
    source = java_static(spark, "org.apache.iceberg.Files", "localInput")(str(path))
    reader = java_static(spark, "org.apache.iceberg.puffin.Puffin", "read")(source).build()
    try:
        metadata = reader.fileMetadata()
        assert str(metadata.properties().get("created-by")) == "me"
        listed = metadata.blobs()
        blobs = [listed.get(i) for i in range(int(listed.size()))]
        assert [(int(b.offset()), int(b.length())) for b in blobs] == spans
        assert [str(b.type()) for b in blobs] == ["deletion-vector-v1"] * 3
        assert [int(b.inputFields().get(0)) for b in blobs] == FIELDS * 3
        assert [
            {str(k): str(b.properties().get(k)) for k in b.properties().keySet().toArray()} for b in blobs
        ] == [dict(b.properties) for b in BLOBS]
        for b, expected in zip(blobs, BLOBS, strict=True):
            pairs = reader.readAll(java_static(spark, "java.util.List", "of")(b))
            data = pairs.iterator().next().second()
            assert bytes(java_static(spark, "org.apache.iceberg.util.ByteBuffers", "toByteArray")(data)) == (
                expected.data
            )
    finally:
        reader.close()
