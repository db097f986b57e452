package airflow_provider_binlog.iceberg;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A destination's newest mark in a table (airflow_provider_binlog/lake/commits.py, mark_of), read
 * in one py4j call. Compiled in the driver's JVM by Janino (airflow_provider_binlog/lake/jvm_helpers.py).
 */
public class MarkReader {
  /**
   * Refresh table, then walk its snapshots from the current one back along their parents, at most
   * maxDepth of them, to the first whose summary names destination under destinationKey and holds
   * a non-empty orderKey; return {"snapshot-id": its id as text, "summary": its summary} as JSON,
   * or null when none does.
   */
  public String mark(
      org.apache.iceberg.Table table, String destination, String destinationKey, String orderKey, int maxDepth)
      throws Exception {
    Map found = newest(table, destination, destinationKey, orderKey, maxDepth);
    return found == null ? null : org.apache.iceberg.util.JsonUtil.mapper().writeValueAsString(found);
  }

  /**
   * What mark answers (null there) and the table's properties as it was refreshed for it, as one
   * JSON object: {"mark": ..., "properties": {...}} (a run's start reads both of every table).
   */
  public String markAndProperties(
      org.apache.iceberg.Table table, String destination, String destinationKey, String orderKey, int maxDepth)
      throws Exception {
    Map out = new LinkedHashMap();
    out.put("mark", newest(table, destination, destinationKey, orderKey, maxDepth));
    out.put("properties", table.properties());
    return org.apache.iceberg.util.JsonUtil.mapper().writeValueAsString(out);
  }

  private Map newest(
      org.apache.iceberg.Table table, String destination, String destinationKey, String orderKey, int maxDepth) {
    table.refresh();
    org.apache.iceberg.Snapshot snap = table.currentSnapshot();
    int depth = 0;
    while (snap != null && depth < maxDepth) {
      Map summary = snap.summary();
      Object order = summary.get(orderKey);
      if (destination.equals(summary.get(destinationKey)) && order != null && ((String) order).length() > 0) {
        Map out = new LinkedHashMap();
        out.put("snapshot-id", String.valueOf(snap.snapshotId()));
        out.put("summary", summary);
        return out;
      }
      Long parent = snap.parentId();
      snap = parent == null ? null : table.snapshot(parent.longValue());
      depth++;
    }
    return null;
  }
}
