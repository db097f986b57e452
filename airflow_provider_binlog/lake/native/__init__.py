"""The driver's own Iceberg writer (no Spark job): position deltas, insert files, Puffin deletion vectors,
and the C fast paths' Python faces."""
