"""The drain: one run of a destination, from binlog batches to Iceberg commits (no Airflow import).

* :mod:`.context`: :class:`~.context.DestinationContext`, what every step reads of the destination
  (meta store, identity, client, running node, filter, routes), built once;
* :mod:`.run`: :class:`~.run.Drain` owns one run (running node, snapshot, stop point, subscribe,
  reconcile, the loop, the run record, the summary);
* :mod:`.loop`: :class:`~.loop.ChunkLoop`, the exactly-once loop (fold, take, commit in a second
  thread, ack in order);
* :mod:`.reconcile`: what the lake holds of an earlier attempt's un-acked batches;
* :mod:`.source`: the stop point and the source tables the routes match;
* :mod:`.snapshot`: which tables need a snapshot, and taking it;
* :mod:`.collector`: the cyclic garbage collector paused during a drain;
* :mod:`.wiring`: ZooKeeper client, meta manager, running node and instance from plain config.

A run from plain configuration (what the CLI, the dev tools and the benchmarks do)::

    wiring = Wiring(meta_dir="/data/meta")
    routes = Routes({"shop.*": "lake.shop.{table}"})
    settings = RunSettings(limits=Limits())
    fields = run_fields(routes, settings, None)
    instance = wiring.instance(InstanceConfig("shop", source, routes.filter(), **fields))
    try:
        summary = Drain(instance, routes, settings, spark=make_spark,
                        connect=lambda: source_connection(source)).run(stop_at="head")
    finally:
        wiring.close()
"""

from __future__ import annotations

from airflow_provider_binlog.drain.collector import CollectorPause
from airflow_provider_binlog.drain.context import DestinationContext, run_fields, store_capacity
from airflow_provider_binlog.drain.loop import ChunkLoop, Limits
from airflow_provider_binlog.drain.run import Drain, RunSettings
from airflow_provider_binlog.drain.wiring import Wiring, ZooKeeperConfig, source_connection

__all__ = [
    "ChunkLoop",
    "CollectorPause",
    "DestinationContext",
    "Drain",
    "Limits",
    "RunSettings",
    "Wiring",
    "ZooKeeperConfig",
    "run_fields",
    "source_connection",
    "store_capacity",
]
