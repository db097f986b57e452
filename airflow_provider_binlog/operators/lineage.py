"""OpenLineage datasets of a :class:`~.binlog_to_spark.BinlogToSparkOperator` run, built from the run's
summary alone (pure functions; the OpenLineage provider calls the operator's
``get_openlineage_facets_on_complete``, which calls :func:`operator_lineage`).

What a COMPLETE event holds:

* **inputs**: the source tables whose changes the run committed (and the tables it re-snapshotted),
  per the OpenLineage naming spec for MySQL (MariaDB too): namespace ``mysql://{host}:{port}`` of the
  source connection (host and port only: never its login or password), name ``{database}.{table}``;
  a ``schema`` facet with the columns as the binlog described them (``LONG``, ``NEWDECIMAL(12,2)``,
  ``VARCHAR``, ``... UNSIGNED``: the TABLE_MAP's ``MYSQL_TYPE_<name>``) when the run met a change
  of the table.
* **outputs**: the lake tables the run committed to. The spec's table has no row of its own for
  Iceberg; an Iceberg table is a directory of files, so (as OpenLineage's Spark integration names
  Iceberg tables) it is named by the table's *location* under the spec's storage rows, and the
  catalog name (``lake.shop.orders``) is a ``symlinks`` identifier of type ``TABLE`` in the same
  namespace. The rows applied (location -> namespace, name):

  * local file system, ``/wh/shop/orders`` or ``file:/wh/shop/orders`` -> ``file``, ``/wh/shop/orders``
  * remote file system, ``file://host/wh/t`` -> ``file://host``, ``/wh/t``
  * S3, ``s3://bucket/wh/t`` (``s3a``, ``s3n`` alike) -> ``s3://bucket``, ``wh/t`` (the object key)
  * GCS, ``gs://bucket/wh/t`` -> ``gs://bucket``, ``wh/t``
  * HDFS, ``hdfs://namenode:8020/wh/t`` -> ``hdfs://namenode:8020``, ``/wh/t``
  * ABFSS, ``abfss://c@svc.dfs.core.windows.net/wh/t`` -> ``abfss://c@svc.dfs.core.windows.net``, ``wh/t``
  * any other ``scheme://authority/path`` -> ``scheme://authority``, ``/path``

  Facets: ``schema`` (the lake columns and their Spark/Iceberg types after the run, the option
  columns like ``_binlog_op`` included), ``outputStatistics`` with ``rowCount`` = the row changes the
  run merged into it (inserted + updated + deleted, rows a TRUNCATE removed included, + appended
  for append-only tables, + rows a re-snapshot loaded), and ``columnLineage``: each lake column
  that a source table has by name comes from it unchanged (``DIRECT``/``IDENTITY``; the lake
  writes a row's value of the same-named source column, mapped to the lake type), and ``version``
  = the Iceberg snapshot id after the run's commit (the summary's ``snapshots``).

A run that committed nothing has no inputs and no outputs. The summary's ``lineage`` comes from
:mod:`airflow_provider_binlog.lake.verify.describe`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

MYSQL_PORT = 3306
_COUNTED = ("inserted", "updated", "deleted", "appended")


def source_namespace(host: str | None, port: int | None) -> str:
    """``mysql://{host}:{port}`` (port 3306 when the connection has none).

    :raises ValueError: no host.
    """
    if not host:
        raise ValueError("the source connection has no host: no OpenLineage namespace for it")
    return f"mysql://{host}:{port or MYSQL_PORT}"


def location_dataset(location: str) -> tuple[str, str]:
    """``(namespace, name)`` of an Iceberg table at ``location`` (the table in the module docstring).

    :raises ValueError: an empty location.
    """
    if not location:
        raise ValueError("an Iceberg table without a location has no OpenLineage name")
    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    if scheme in ("", "file"):
        host = parts.netloc
        path = parts.path if scheme else location
        return ("file" if host in ("", "localhost") else f"file://{host}"), path
    if scheme in ("s3", "s3a", "s3n", "gs", "abfss"):
        return f"{'s3' if scheme.startswith('s3') else scheme}://{parts.netloc}", parts.path.lstrip("/")
    return f"{scheme}://{parts.netloc}", parts.path


def row_count(counts: Mapping[str, Any] | None, loaded: int = 0) -> int:
    """The row changes a run merged into one table (see the module docstring)."""
    return sum(int((counts or {}).get(k) or 0) for k in _COUNTED) + loaded


def operator_lineage(summary: Mapping[str, Any] | None, namespace: str) -> Any:
    """The :class:`OperatorLineage` of a run's summary (empty when it committed nothing).

    :param summary: what the operator returned (its XCom).
    :param namespace: the source's namespace (:func:`source_namespace`).
    """
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import (
        column_lineage_dataset as cl,
    )
    from openlineage.client.facet_v2 import (
        dataset_version_dataset,
        output_statistics_output_dataset,
        schema_dataset,
        symlinks_dataset,
    )

    def schema(columns: list[list[str]]) -> Any:
        return schema_dataset.SchemaDatasetFacet(
            fields=[schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in columns]
        )

    lineage: Mapping[str, Any] = (summary or {}).get("lineage") or {}
    tables: Mapping[str, Any] = (summary or {}).get("tables") or {}
    snapshots: Mapping[str, Any] = (summary or {}).get("snapshots") or {}
    loaded: dict[str, int] = {}
    for r in (summary or {}).get("resnapshots") or ():
        if not r.get("gone"):
            loaded[r["target"]] = loaded.get(r["target"], 0) + int(r.get("rows") or 0)
    inputs: dict[str, Any] = {}
    outputs = []
    for target, described in sorted(lineage.items()):
        sources: Mapping[str, list[list[str]] | None] = described.get("sources") or {}
        for source, columns in sorted(sources.items()):
            if source not in inputs or (columns and not inputs[source].facets):
                found = {"schema": schema(columns)} if columns else {}
                inputs[source] = InputDataset(namespace=namespace, name=source, facets=found)
        ns, name = location_dataset(described.get("location") or "")
        lake_columns = [list(c) for c in described.get("columns") or ()]
        by_name = {
            c: [s for s, cols in sorted(sources.items()) if cols and any(n == c for n, _ in cols)]
            for c, _ in lake_columns
        }
        identity = [cl.Transformation(type="DIRECT", subtype="IDENTITY")]
        fields = {
            c: cl.Fields(
                inputFields=[cl.InputField(namespace, s, c, transformations=list(identity)) for s in found]
            )
            for c, found in by_name.items()
            if found
        }
        facets: dict[str, Any] = {
            "schema": schema(lake_columns),
            "symlinks": symlinks_dataset.SymlinksDatasetFacet(
                identifiers=[symlinks_dataset.Identifier(namespace=ns, name=target, type="TABLE")]
            ),
        }
        if fields:
            facets["columnLineage"] = cl.ColumnLineageDatasetFacet(fields=fields)
        snapshot = snapshots.get(target)
        if snapshot is not None:
            version = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(snapshot))
            facets["version"] = version
        stats = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=row_count(tables.get(target), loaded.get(target, 0))
        )
        outputs.append(
            OutputDataset(namespace=ns, name=name, facets=facets, outputFacets={"outputStatistics": stats})
        )
    return OperatorLineage(inputs=list(inputs.values()), outputs=outputs)
