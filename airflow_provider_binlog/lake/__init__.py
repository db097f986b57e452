"""The lake layer: Spark session, MySQL -> Iceberg types, Parquet staging and the exactly-once MERGE.

PySpark is imported only inside this package. What the Airflow operator calls::

    from airflow_provider_binlog.lake.spark.session import create_session
    from airflow_provider_binlog.lake.write.merge import ChangeMerger, TargetOptions, committed_marks

    spark = create_session(master=None, warehouse=None, catalog="lake", conf={...})
    with ChangeMerger(spark, destination, {"shop.orders": "lake.shop.orders"}, TargetOptions()) as merger:
        for batch_id, entries, end_position in drained_batches:   # entries in binlog order
            counts = merger.merge(entries, end_position)          # {target: TableCounts}; commits in chunks
            store.ack(batch_id)                                  # only after merge() returned
    committed_marks(spark, ["lake.shop.orders"], destination)    # {target: CommittedMark | None}

Modules, from the bottom up: :mod:`.errors`, :mod:`.sql` (identifier quoting), :mod:`.types`
(MySQL -> Iceberg types), :mod:`.options` (target options, counts, metadata columns),
:mod:`.merge_sql` (the SQL text, pure), :mod:`.collapse` and :mod:`.pending` (folding, pure),
:mod:`.routes` (source -> target), :mod:`.jars`, :mod:`.class_archive`, :mod:`.session`,
:mod:`.commits` (snapshot-property layout, marks), :mod:`.staging` (Parquet, temp views),
:mod:`.ddl` (table DDL), :mod:`.jvm_helpers` (Java helpers compiled in the driver's JVM by
Janino), :mod:`.puffin` (Puffin files), :mod:`.position_delta` (a piece merged by the driver),
:mod:`.statements` (a target's commit prepared), :mod:`.runner` (targets
side by side, table locks), :mod:`.merge` (:class:`~.merge.ChangeMerger`, the coordinator), then
:mod:`.snapshot`, :mod:`.verify` and :mod:`.training` (the class archive's training run).
"""
