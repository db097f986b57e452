"""The lake layer: Spark session, MySQL -> Iceberg types, Parquet staging and the exactly-once MERGE.

PySpark is imported only inside this package. What the Airflow operator calls::

    from airflow_provider_binlog.lake.session import create_session
    from airflow_provider_binlog.lake.merge import ChangeMerger, TargetOptions, committed_marks

    spark = create_session(master=None, warehouse=None, catalog="lake", conf={...})
    with ChangeMerger(spark, destination, {"shop.orders": "lake.shop.orders"}, TargetOptions()) as merger:
        for batch_id, entries, end_position in drained_batches:   # entries in binlog order
            counts = merger.merge(entries, end_position)          # {target: TableCounts}; commits in chunks
            store.ack(batch_id)                                  # only after merge() returned
    committed_marks(spark, ["lake.shop.orders"], destination)    # {target: CommittedMark | None}

Modules: :mod:`.jars` (Iceberg runtime and relocated Jackson), :mod:`.session`, :mod:`.types`,
:mod:`.staging`, :mod:`.sql` (identifier quoting), :mod:`.commits` (snapshot-property layout) and
:mod:`.merge`.
"""
