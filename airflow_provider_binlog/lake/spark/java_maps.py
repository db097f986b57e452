"""A JVM ``Map<String, String>`` (an Iceberg snapshot's summary, a table's properties) read into
Python in one py4j call.

Iterating a Java map through py4j costs two or three round trips per key (the iterator's
``hasNext`` and ``next``, then ``get``): 25-35 ms for the twenty keys of a commit's summary,
paid per table for every mark a run reads. Serialized to JSON in the JVM by Iceberg's own mapper
(``org.apache.iceberg.util.JsonUtil``, on every driver this product runs on) it is one call of
about a millisecond, and exact for any text a value holds.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.lake.spark.java_classes import java_static

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def string_map(spark: SparkSession, jmap: Any) -> dict[str, str]:
    """The entries of the JVM map ``jmap`` (string keys and values; a ``null`` value reads ``None``)."""
    text = java_static(spark, "org.apache.iceberg.util.JsonUtil", "mapper")().writeValueAsString(jmap)
    loaded = json.loads(text)
    if not isinstance(loaded, dict):
        raise TypeError(f"not a map: {type(loaded).__name__}")
    return loaded
