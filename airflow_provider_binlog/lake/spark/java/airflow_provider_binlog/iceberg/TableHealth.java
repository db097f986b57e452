package airflow_provider_binlog.iceberg;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What maintenance decides from (airflow_provider_binlog/lake/maintenance/health.py), read from a
 * table's metadata in one py4j call: no data or delete file is read, only the current snapshot's
 * manifest list. Compiled in the driver's JVM by Janino (airflow_provider_binlog/lake/spark/jvm_helpers.py).
 */
public class TableHealth {
  /**
   * Refresh table, then return as JSON: format-version, properties, sorted (the table has a sort
   * order), snapshots (count), oldest-ms (the oldest snapshot's commit time), ancestors (snapshots
   * back from the current one), current-id, summary (the current snapshot's), manifests and
   * delete-manifests (the current snapshot's), metadata-versions (previous metadata files the
   * current one lists), refs ({name: {snapshot-id, tag, max-ref-age-ms}}) and marks: per
   * destination named under destinationKey with a non-empty orderKey, its newest snapshot among the
   * current snapshot's ancestors: {snapshot-id, depth (0: the current one), timestamp-ms}.
   */
  public String health(org.apache.iceberg.Table table, String destinationKey, String orderKey) throws Exception {
    table.refresh();
    Map out = new LinkedHashMap();
    out.put("format-version", Integer.valueOf(org.apache.iceberg.TableUtil.formatVersion(table)));
    out.put("properties", table.properties());
    out.put("sorted", Boolean.valueOf(!table.sortOrder().isUnsorted()));
    int count = 0;
    Long oldest = null;
    Iterator all = table.snapshots().iterator();
    while (all.hasNext()) {
      org.apache.iceberg.Snapshot s = (org.apache.iceberg.Snapshot) all.next();
      count++;
      if (oldest == null || s.timestampMillis() < oldest.longValue()) {
        oldest = Long.valueOf(s.timestampMillis());
      }
    }
    out.put("snapshots", Integer.valueOf(count));
    out.put("oldest-ms", oldest);
    Map marks = new LinkedHashMap();
    org.apache.iceberg.Snapshot current = table.currentSnapshot();
    out.put("current-id", current == null ? null : String.valueOf(current.snapshotId()));
    out.put("summary", current == null ? new LinkedHashMap() : current.summary());
    int manifests = 0;
    int deleteManifests = 0;
    if (current != null) {
      List all2 = current.allManifests(table.io());
      manifests = all2.size();
      deleteManifests = current.deleteManifests(table.io()).size();
    }
    out.put("manifests", Integer.valueOf(manifests));
    out.put("delete-manifests", Integer.valueOf(deleteManifests));
    int depth = 0;
    org.apache.iceberg.Snapshot snap = current;
    while (snap != null) {
      Map summary = snap.summary();
      Object dest = summary.get(destinationKey);
      Object order = summary.get(orderKey);
      if (dest != null && order != null && ((String) order).length() > 0 && !marks.containsKey(dest)) {
        Map mark = new LinkedHashMap();
        mark.put("snapshot-id", String.valueOf(snap.snapshotId()));
        mark.put("depth", Integer.valueOf(depth));
        mark.put("timestamp-ms", Long.valueOf(snap.timestampMillis()));
        marks.put(dest, mark);
      }
      Long parent = snap.parentId();
      snap = parent == null ? null : table.snapshot(parent.longValue());
      depth++;
    }
    out.put("ancestors", Integer.valueOf(depth));
    out.put("marks", marks);
    Map refs = new LinkedHashMap();
    Iterator names = table.refs().entrySet().iterator();
    while (names.hasNext()) {
      Map.Entry e = (Map.Entry) names.next();
      org.apache.iceberg.SnapshotRef ref = (org.apache.iceberg.SnapshotRef) e.getValue();
      Map r = new LinkedHashMap();
      r.put("snapshot-id", String.valueOf(ref.snapshotId()));
      r.put("tag", Boolean.valueOf(ref.isTag()));
      r.put("max-ref-age-ms", ref.maxRefAgeMs());
      refs.put(e.getKey(), r);
    }
    out.put("refs", refs);
    int versions = 0;
    if (table instanceof org.apache.iceberg.HasTableOperations) {
      versions = ((org.apache.iceberg.HasTableOperations) table).operations().current().previousFiles().size();
    }
    out.put("metadata-versions", Integer.valueOf(versions));
    return org.apache.iceberg.util.JsonUtil.mapper().writeValueAsString(out);
  }
}
