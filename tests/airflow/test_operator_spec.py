"""The operator's parameters are one run specification (pure, no service): the signature lists
exactly the spec's fields with the same defaults, the attributes are the spec's (checked and
normalised there), the spec is rebuilt from the rendered attributes, and one factory picks the source."""

from __future__ import annotations

import dataclasses
import inspect

from airflow_provider_binlog.lake.maintenance.policy import MaintenancePolicy
from airflow_provider_binlog.operators.binlog_to_spark import BinlogToSparkOperator
from airflow_provider_binlog.operators.canal_source import CanalSource
from airflow_provider_binlog.operators.sources import BinlogSource, open_source
from airflow_provider_binlog.operators.spec import FIELDS, RunSpec


def test_the_signature_lists_the_spec_fields_with_their_defaults() -> None:
    sig = inspect.signature(BinlogToSparkOperator.__init__)
    listed = [p for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert [p.name for p in listed] == list(FIELDS)
    for f in dataclasses.fields(RunSpec):
        default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        assert sig.parameters[f.name].default == default, f.name


def test_the_attributes_are_the_spec_and_the_rendered_ones_make_the_run_spec() -> None:
    op = BinlogToSparkOperator(
        task_id="load", destination="shop", tables={"shop.a": "lake.shop.a"}, start_from="{{ ds }}"
    )
    assert isinstance(op.maintenance, MaintenancePolicy)  # normalised by the spec
    op.start_from, op.max_rows_per_commit = "mysql-bin.000001:4", 100  # as rendered / set by hand
    spec = op.spec()
    assert spec.start_from == "mysql-bin.000001:4" and spec.limits().max_rows_per_commit == 100
    settings = spec.settings("r", "dag/load/r/try-1", 1)
    assert settings.limits.max_rows_per_commit == 100 and settings.maintenance is op.maintenance
    routing = spec.routing()
    assert routing.routes.target_for("shop", "a") == "lake.shop.a" and routing.filter.matches("shop", "a")


def test_one_factory_picks_the_source() -> None:
    binlog = RunSpec(
        destination="shop", tables={"shop.a": "lake.shop.a"}, zookeeper_conn_id=None, meta_dir="/x"
    )
    canal = dataclasses.replace(binlog, canal_conn_id="canal_default")
    for spec, kind in ((binlog, BinlogSource), (canal, CanalSource)):
        source = open_source(
            spec, spec.settings("r", "", 1), spec.routing(), spark=lambda: None, report=print
        )
        assert type(source) is kind and source.instance is None
        source.close()
