"""How a target's pieces reach Iceberg: the merger, the prepared statements, staging, the SQL text and the
write paths (:mod:`.paths`)."""
