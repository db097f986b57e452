package airflow_provider_binlog.iceberg;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A destination's newest mark in a table (airflow_provider_binlog/lake/commits.py, mark_of), read
 * in one py4j call, and the destination's mark tag moved to it. Compiled in the driver's JVM by
 * Janino (airflow_provider_binlog/lake/spark/jvm_helpers.py).
 */
public class MarkReader {
  private static final int TAG_ATTEMPTS = 6;

  /**
   * Refresh table, then walk its snapshots from the current one back along their parents, at most
   * maxDepth of them, to the first whose summary names destination under destinationKey and holds
   * a non-empty orderKey; return {"snapshot-id": its id as text, "summary": its summary} as JSON,
   * or null when none does: the ancestry alone, as marks were read before the tag (see read).
   */
  public String mark(
      org.apache.iceberg.Table table, String destination, String destinationKey, String orderKey, int maxDepth)
      throws Exception {
    table.refresh();
    Map found = newest(table, destination, destinationKey, orderKey, maxDepth);
    return found == null ? null : org.apache.iceberg.util.JsonUtil.mapper().writeValueAsString(found);
  }

  /**
   * The mark as the tag and the ancestry say together (commits.py's module docstring), with the
   * table's properties: {"mark": ... or null, "properties": {...}, "state": ..., "tag-snapshot": id
   * as text or null, "rows": whether the current snapshot holds rows, "intact": whether the walk saw
   * every snapshot from the current one back to the tag (or to the table's first snapshot),
   * "moved": the tag was created or moved by this call}. state is "tagged" (the tagged snapshot is
   * an ancestor of the current one), "gap" (the walk met an expired snapshot before reaching it:
   * taken as an ancestor), "diverged" (it is not an ancestor: the table was rolled back to before
   * it), "untagged" (no tag; a mark in the ancestry) or "none" (neither). With adopt, a mark in the
   * ancestry newer than the tag (or with no tag) gets the tag (not when diverged).
   */
  public String read(
      org.apache.iceberg.Table table, String destination, String destinationKey, String orderKey, String tag,
      int maxDepth, boolean adopt)
      throws Exception {
    Map out = null;
    for (int attempt = 1; ; attempt++) {
      table.refresh();
      out = readOnce(table, destination, destinationKey, orderKey, tag, maxDepth);
      Map found = (Map) out.get("mark");
      String state = (String) out.get("state");
      out.put("moved", Boolean.FALSE);
      if (!adopt || found == null || "diverged".equals(state)) {
        break;
      }
      long id = Long.parseLong((String) found.get("snapshot-id"));
      Object tagged = out.get("tag-snapshot");
      if (tagged != null && Long.parseLong((String) tagged) == id) {
        break;
      }
      try {
        setTag(table.manageSnapshots(), table, tag, id).commit();
        out.put("moved", Boolean.TRUE);
        out.put("tag-snapshot", String.valueOf(id));
        break;
      } catch (org.apache.iceberg.exceptions.CommitFailedException exc) {
        if (attempt >= TAG_ATTEMPTS) {
          throw exc;
        }
      }
    }
    out.put("properties", table.properties());
    return org.apache.iceberg.util.JsonUtil.mapper().writeValueAsString(out);
  }

  /**
   * After a commit of destination that Spark made: move tag to the newest snapshot of
   * destination's in the current ancestry, walking no further back than the tagged snapshot (the
   * tag there already: nothing committed). Returns that snapshot's id as text, or null when the
   * walk found none.
   */
  public String moveTag(
      org.apache.iceberg.Table table, String destination, String destinationKey, String orderKey, String tag,
      int maxDepth)
      throws Exception {
    for (int attempt = 1; ; attempt++) {
      table.refresh();
      org.apache.iceberg.SnapshotRef ref = (org.apache.iceberg.SnapshotRef) table.refs().get(tag);
      long tagged = ref == null ? -1L : ref.snapshotId();
      org.apache.iceberg.Snapshot snap = table.currentSnapshot();
      int depth = 0;
      while (snap != null && depth < maxDepth) {
        if (snap.snapshotId() == tagged) {
          return String.valueOf(tagged);
        }
        if (isMark(snap, destination, destinationKey, orderKey)) {
          break;
        }
        snap = parent(table, snap);
        depth++;
      }
      if (snap == null || depth >= maxDepth) {
        return null;
      }
      try {
        setTag(table.manageSnapshots(), table, tag, snap.snapshotId()).commit();
        return String.valueOf(snap.snapshotId());
      } catch (org.apache.iceberg.exceptions.CommitFailedException exc) {
        if (attempt >= TAG_ATTEMPTS) {
          throw exc;
        }
      }
    }
  }

  /**
   * Move tag to the snapshot txn's last operation made, in txn, then commit txn: the commit and its
   * tag land together or not at all.
   */
  public void commitTagged(org.apache.iceberg.Transaction txn, String tag) {
    org.apache.iceberg.Table table = txn.table();
    org.apache.iceberg.Snapshot snap = table.currentSnapshot();
    if (snap != null) {
      setTag(txn.manageSnapshots(), table, tag, snap.snapshotId()).commit();
    }
    txn.commitTransaction();
  }

  private static org.apache.iceberg.ManageSnapshots setTag(
      org.apache.iceberg.ManageSnapshots manage, org.apache.iceberg.Table table, String tag, long id) {
    org.apache.iceberg.SnapshotRef ref = (org.apache.iceberg.SnapshotRef) table.refs().get(tag);
    return ref == null ? manage.createTag(tag, id) : manage.replaceTag(tag, id);
  }

  private Map readOnce(
      org.apache.iceberg.Table table, String destination, String destinationKey, String orderKey, String tag,
      int maxDepth) {
    Map out = new LinkedHashMap();
    org.apache.iceberg.Snapshot current = table.currentSnapshot();
    out.put("rows", Boolean.valueOf(hasRows(current)));
    org.apache.iceberg.SnapshotRef ref = (org.apache.iceberg.SnapshotRef) table.refs().get(tag);
    org.apache.iceberg.Snapshot tagged = ref == null ? null : table.snapshot(ref.snapshotId());
    out.put("tag-snapshot", tagged == null ? null : String.valueOf(tagged.snapshotId()));
    Map found = null;
    boolean reached = false;
    boolean below = false;
    boolean root = false;
    Long missing = null;
    org.apache.iceberg.Snapshot snap = current;
    int depth = 0;
    while (snap != null && depth < maxDepth) {
      if (tagged != null && snap.snapshotId() == tagged.snapshotId()) {
        reached = true;
        if (found == null) {
          found = entry(snap);
        }
        break;
      }
      if (tagged != null && snap.sequenceNumber() < tagged.sequenceNumber()) {
        below = true;
        break;
      }
      if (found == null && isMark(snap, destination, destinationKey, orderKey)) {
        found = entry(snap);
        if (tagged == null) {
          break;
        }
      }
      Long parentId = snap.parentId();
      if (parentId == null) {
        root = true;
        break;
      }
      org.apache.iceberg.Snapshot next = table.snapshot(parentId.longValue());
      if (next == null) {
        missing = parentId;
        break;
      }
      snap = next;
      depth++;
    }
    String state;
    if (tagged == null) {
      state = found == null ? "none" : "untagged";
      out.put("intact", Boolean.valueOf(found != null || root || current == null));
    } else if (reached) {
      state = "tagged";
      out.put("intact", Boolean.TRUE);
    } else if (below || root || current == null || (missing != null && ancestorOf(table, tagged, missing.longValue(), maxDepth))) {
      state = "diverged";
      found = newest(table, destination, destinationKey, orderKey, maxDepth);
      out.put("intact", Boolean.FALSE);
    } else {
      state = "gap";  // an expired snapshot between: the tagged one is taken as an ancestor
      if (found == null) {
        found = entry(tagged);
      }
      out.put("intact", Boolean.FALSE);
    }
    out.put("state", state);
    out.put("mark", found);
    return out;
  }

  /** Whether the snapshot with id is tagged or one of its ancestors (known to the table or not). */
  private static boolean ancestorOf(
      org.apache.iceberg.Table table, org.apache.iceberg.Snapshot tagged, long id, int maxDepth) {
    org.apache.iceberg.Snapshot snap = tagged;
    int depth = 0;
    while (snap != null && depth < maxDepth) {
      if (snap.snapshotId() == id) {
        return true;
      }
      Long parentId = snap.parentId();
      if (parentId == null) {
        return false;
      }
      if (parentId.longValue() == id) {
        return true;
      }
      snap = table.snapshot(parentId.longValue());
      depth++;
    }
    return false;
  }

  private static boolean hasRows(org.apache.iceberg.Snapshot snap) {
    if (snap == null) {
      return false;
    }
    Object total = snap.summary().get("total-records");
    return total == null || Long.parseLong((String) total) > 0L;
  }

  private static boolean isMark(
      org.apache.iceberg.Snapshot snap, String destination, String destinationKey, String orderKey) {
    Map summary = snap.summary();
    Object order = summary.get(orderKey);
    return destination.equals(summary.get(destinationKey)) && order != null && ((String) order).length() > 0;
  }

  private static Map entry(org.apache.iceberg.Snapshot snap) {
    Map out = new LinkedHashMap();
    out.put("snapshot-id", String.valueOf(snap.snapshotId()));
    out.put("summary", snap.summary());
    return out;
  }

  private static org.apache.iceberg.Snapshot parent(org.apache.iceberg.Table table, org.apache.iceberg.Snapshot snap) {
    Long parentId = snap.parentId();
    return parentId == null ? null : table.snapshot(parentId.longValue());
  }

  private Map newest(
      org.apache.iceberg.Table table, String destination, String destinationKey, String orderKey, int maxDepth) {
    org.apache.iceberg.Snapshot snap = table.currentSnapshot();
    int depth = 0;
    while (snap != null && depth < maxDepth) {
      if (isMark(snap, destination, destinationKey, orderKey)) {
        return entry(snap);
      }
      snap = parent(table, snap);
      depth++;
    }
    return null;
  }
}
