package airflow_provider_binlog.iceberg;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * The JVM side of a merge by the driver (airflow_provider_binlog/lake/native/position_delta.py), in a few
 * py4j calls instead of one per Iceberg builder step. Compiled in the driver's JVM by Janino (Spark's
 * own compiler) when first needed (airflow_provider_binlog/lake/spark/jvm_helpers.py): plain Java without
 * lambdas, try-with-resources, static interface methods or inferred generic types, which Janino does
 * not compile.
 */
public class DriverDelta {
  private static final String HADOOP_FILE_IO = "org.apache.iceberg.hadoop.HadoopFileIO";

  /**
   * What the driver's merge and its inserts check of table, as JSON: its location, whether it is
   * unpartitioned and unsorted, its properties, its schema (SchemaParser's JSON, as text), its
   * format version and its current snapshot's id as text (null: none). The table is not refreshed.
   */
  public String facts(org.apache.iceberg.Table table) throws Exception {
    Map out = new java.util.LinkedHashMap();
    out.put("location", table.location());
    out.put("unpartitioned", Boolean.valueOf(table.spec().isUnpartitioned()));
    out.put("unsorted", Boolean.valueOf(table.sortOrder().isUnsorted()));
    out.put("properties", table.properties());
    out.put("schema", org.apache.iceberg.SchemaParser.toJson(table.schema()));
    out.put("format-version", Integer.valueOf(org.apache.iceberg.TableUtil.formatVersion(table)));
    org.apache.iceberg.Snapshot current = table.currentSnapshot();
    out.put("snapshot-id", current == null ? null : String.valueOf(current.snapshotId()));
    return org.apache.iceberg.util.JsonUtil.mapper().writeValueAsString(out);
  }

  /** The data files of snapshot snapshotId of table within filter, as a list of FileScanTask. */
  public List tasks(org.apache.iceberg.Table table, String snapshotId, org.apache.iceberg.expressions.Expression filter)
      throws Exception {
    // Scan's fluent methods return a type variable, which Janino sees erased: cast each
    org.apache.iceberg.TableScan scan = (org.apache.iceberg.TableScan) table.newScan().useSnapshot(Long.parseLong(snapshotId));
    scan = (org.apache.iceberg.TableScan) scan.filter(filter);
    org.apache.iceberg.io.CloseableIterable planned = scan.planFiles();
    List out = new ArrayList();
    try {
      Iterator it = planned.iterator();
      while (it.hasNext()) {
        out.add(it.next());
      }
    } finally {
      planned.close();
    }
    return out;
  }

  /**
   * The JSON (ScanTaskParser.toJson) of each task in order, as a JSON array, up to the first whose
   * data files, with the ones before it, hold more than maxRows rows (the caller merges no piece
   * over that many: it needs no more of them).
   */
  public String tasksJson(List tasks, String maxRows) {
    long budget = Long.parseLong(maxRows);
    StringBuilder out = new StringBuilder("[");
    for (int i = 0; i < tasks.size() && budget >= 0; i++) {
      org.apache.iceberg.FileScanTask task = (org.apache.iceberg.FileScanTask) tasks.get(i);
      if (i > 0) {
        out.append(',');
      }
      out.append(org.apache.iceberg.ScanTaskParser.toJson(task));
      budget -= task.file().recordCount();
    }
    return out.append(']').toString();
  }

  /**
   * The row delta of a piece, not committed: the data file at dataLocation (null: none) with its
   * metrics from its footer, each deletion vector of the piece (their spec in json: "vectors", a
   * list of {task, referenced, offset, length, cardinality} in one Puffin file "puffin" of
   * "puffin-size" bytes) replacing the deletion vectors of its task's data file, the checks of
   * Spark's MERGE under serializable isolation from snapshot "snapshot-id" within filter, and
   * "properties" in the snapshot's summary.
   */
  public org.apache.iceberg.RowDelta delta(
      org.apache.iceberg.Table table,
      String dataLocation,
      List tasks,
      org.apache.iceberg.expressions.Expression filter,
      String json)
      throws Exception {
    Map spec = (Map) org.apache.iceberg.util.JsonUtil.mapper().readValue(json, Map.class);
    org.apache.iceberg.RowDelta op = table.newRowDelta();
    if (dataLocation != null) {
      op.addRows(dataFile(table, dataLocation));
    }
    List referenced = new ArrayList();
    List vectors = (List) spec.get("vectors");
    for (int i = 0; i < vectors.size(); i++) {
      Map vector = (Map) vectors.get(i);
      String data = (String) vector.get("referenced");
      op.addDeletes(
          org.apache.iceberg.FileMetadata.deleteFileBuilder(table.spec())
              .ofPositionDeletes()
              .withFormat(org.apache.iceberg.FileFormat.PUFFIN)
              .withPath((String) spec.get("puffin"))
              .withFileSizeInBytes(((Number) spec.get("puffin-size")).longValue())
              .withReferencedDataFile(data)
              .withContentOffset(((Number) vector.get("offset")).longValue())
              .withContentSizeInBytes(((Number) vector.get("length")).longValue())
              .withRecordCount(((Number) vector.get("cardinality")).longValue())
              .build());
      org.apache.iceberg.FileScanTask task =
          (org.apache.iceberg.FileScanTask) tasks.get(((Number) vector.get("task")).intValue());
      if (!task.file().location().equals(data)) {
        throw new IllegalArgumentException("task " + vector.get("task") + " is not of " + data);
      }
      Iterator old = task.deletes().iterator();
      while (old.hasNext()) {
        op.removeDeletes((org.apache.iceberg.DeleteFile) old.next());
      }
      referenced.add(data);
    }
    op.conflictDetectionFilter(filter)
        .validateDataFilesExist(referenced)
        .validateFromSnapshot(Long.parseLong((String) spec.get("snapshot-id")))
        .validateDeletedFiles()
        .validateNoConflictingDeleteFiles()
        .validateNoConflictingDataFiles();
    Map properties = (Map) spec.get("properties");
    Iterator entries = properties.entrySet().iterator();
    while (entries.hasNext()) {
      Map.Entry entry = (Map.Entry) entries.next();
      op.set((String) entry.getKey(), (String) entry.getValue());
    }
    return op;
  }

  /**
   * The DataFile of Parquet file location of table, its metrics read from its footer under the
   * table's metrics settings. A table whose files go through Hadoop is read with its file IO's
   * configuration (ParquetUtil.fileMetrics would parse Hadoop's XML defaults again per file).
   */
  public org.apache.iceberg.DataFile dataFile(org.apache.iceberg.Table table, String location) throws Exception {
    org.apache.iceberg.io.FileIO io = table.io();
    org.apache.iceberg.io.InputFile source = io.newInputFile(location);
    org.apache.iceberg.MetricsConfig config = org.apache.iceberg.MetricsConfig.forTable(table);
    org.apache.iceberg.Metrics metrics;
    if (io.getClass().getName().equals(HADOOP_FILE_IO)) {
      org.apache.hadoop.conf.Configuration conf = ((org.apache.iceberg.hadoop.HadoopFileIO) io).conf();
      org.apache.iceberg.shaded.org.apache.parquet.hadoop.ParquetFileReader reader =
          org.apache.iceberg.shaded.org.apache.parquet.hadoop.ParquetFileReader.open(
              conf, new org.apache.hadoop.fs.Path(location));
      org.apache.iceberg.shaded.org.apache.parquet.hadoop.metadata.ParquetMetadata footer;
      try {
        footer = reader.getFooter();
      } finally {
        reader.close();
      }
      metrics = org.apache.iceberg.parquet.ParquetUtil.footerMetrics(footer, java.util.Collections.emptyList().stream(), config);
    } else {
      metrics = org.apache.iceberg.parquet.ParquetUtil.fileMetrics(source, config);
    }
    return org.apache.iceberg.DataFiles.builder(table.spec())
        .withInputFile(source)
        .withFormat(org.apache.iceberg.FileFormat.PARQUET)
        .withMetrics(metrics)
        .build();
  }
}
