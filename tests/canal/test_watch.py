"""The asset watcher's pure parts (:mod:`airflow_provider_binlog.canal.watch`): folding transactions
into one range, where the next scan starts, the watermark's compare-and-set (a range is recorded by
one watcher only), a range pending until Airflow stored its event, the filter the sensor and the
operator share."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.committed import Committed
from airflow_provider_binlog.canal.meta.memory import MemoryMetaManager
from airflow_provider_binlog.canal.meta.model import ClientIdentity
from airflow_provider_binlog.canal.positions.start import StartPoint
from airflow_provider_binlog.canal.watch import ChangeRange, Report, Watcher, fold, read_from, tables_filter
from airflow_provider_binlog.errors import ConfigurationError

P = BinlogPosition.parse


def test_fold_makes_one_range_of_a_burst_and_none_of_nothing() -> None:
    assert fold([]) is None
    burst = [
        Committed("mysql-bin.000001:100", "mysql-bin.000001:300", {"shop.orders": 2}),
        Committed("mysql-bin.000001:400", "mysql-bin.000002:120", {"shop.orders": 1, "shop.customers": 3}),
    ] + [
        Committed(f"mysql-bin.000002:{p}", f"mysql-bin.000002:{p + 50}", {"shop.orders": 1})
        for p in range(200, 1000, 100)
    ]
    got = fold(burst)
    assert got == ChangeRange(
        "mysql-bin.000001:100", "mysql-bin.000002:950", {"shop.orders": 11, "shop.customers": 3}, 10
    )
    assert got is not None and got.changes == 14


def test_read_from_takes_the_later_of_cursor_watermark_and_scan() -> None:
    cursor = StartPoint(P("mysql-bin.000002:500"), None, (2, 500, 1 << 62, 1 << 62), "cursor")
    assert read_from(cursor, None, None) is cursor
    assert read_from(cursor, P("mysql-bin.000002:400")) is cursor  # the load is past the watermark
    assert read_from(cursor, P("mysql-bin.000002:500")) is cursor  # a tie keeps the cursor's skip
    later = read_from(cursor, P("mysql-bin.000002:900"), P("mysql-bin.000003:4"))
    assert later == StartPoint(P("mysql-bin.000003:4"), None, None, "watermark")  # no skip: an end
    by_gtid = StartPoint(None, "0-1-42", None, "cursor")
    assert read_from(by_gtid, None) is by_gtid
    assert read_from(by_gtid, P("mysql-bin.000002:900")).position == P("mysql-bin.000002:900")


def _report(version: object) -> Report:
    found = ChangeRange("mysql-bin.000001:100", "mysql-bin.000001:300", {"shop.orders": 2}, 1)
    return Report(found, "mysql-bin.000001:4", version)


def test_the_watermark_is_recorded_once_and_a_second_watcher_loses() -> None:
    meta = MemoryMetaManager()
    instance = SimpleNamespace(
        meta=meta, identity=ClientIdentity("shop", 1001), config=SimpleNamespace(destination="shop")
    )
    one, two = Watcher(instance, "lake"), Watcher(instance, "lake")
    assert one.watermark() == (None, None)
    assert one.commit(_report(None)) is True
    assert two.commit(_report(None)) is False  # both computed it against "no watermark": one reports
    mark, version = two.watermark()
    assert mark is not None and mark["to"] == "mysql-bin.000001:300" and mark["counts"] == {"shop.orders": 2}
    assert two.commit(_report(version)) is True  # against the current version it goes through
    other = Watcher(instance, "other")  # another name: its own watermark
    assert other.watermark() == (None, None)
    payload = _report(None).payload("shop", "lake")
    assert payload == {
        "destination": "shop", "watcher": "lake", "from": "mysql-bin.000001:100",
        "to": "mysql-bin.000001:300", "after": "mysql-bin.000001:4", "tables": ["shop.orders"],
        "counts": {"shop.orders": 2}, "changes": 2, "transactions": 1, "first": False,
    }  # fmt: skip
    with pytest.raises(ConfigurationError, match="invalid meta key"):
        Watcher.check_name("../x")


def test_a_pending_range_is_announced_again_until_confirmed_then_never() -> None:
    """The state machine: reported -> pending (announce) -> reported (confirm, once Airflow stored
    the event); a restart finds the pending range and announces that same range, not a new one."""
    meta = MemoryMetaManager()
    instance = SimpleNamespace(
        meta=meta,
        identity=ClientIdentity("shop", 1001),
        config=SimpleNamespace(destination="shop"),
        running=None,
    )
    first = Watcher(instance, "lake")
    assert first.commit(_report(None)) is True  # an earlier range, reported
    mark, version = first.watermark()
    found = ChangeRange("mysql-bin.000001:400", "mysql-bin.000002:90", {"shop.orders": 3, "shop.items": 1}, 2)
    report = Report(found, "mysql-bin.000001:300", version, mark=mark)

    pending_version = first.announce(report)
    assert pending_version is not None
    mark, _ = first.watermark()
    assert mark is not None and mark["to"] == "mysql-bin.000001:300", mark  # the stored range's end stays
    assert (
        mark["pending"]["to"] == "mysql-bin.000002:90" and mark["pending"]["after"] == "mysql-bin.000001:300"
    )
    assert Watcher(instance, "lake").announce(report) is None  # computed against the old version: loses

    # the trigger stops before Airflow stored the event: the next run announces the same range again
    restarted = Watcher(instance, "lake")
    restarted.unread_before = lambda end: True  # type: ignore[method-assign]  # the changes are not loaded
    again = restarted.poll()
    assert again is not None and again.again is True and again.version == pending_version
    assert again.range == found and again.payload("shop", "lake") == report.payload("shop", "lake")
    again_version = restarted.announce(again)
    assert again_version is not None
    assert first.confirm(report, pending_version) is False  # the first run's ack is stale now
    assert restarted.confirm(again, again_version) is True  # Airflow stored it: reported
    mark, _ = restarted.watermark()
    assert mark is not None and "pending" not in mark and mark["to"] == "mysql-bin.000002:90", mark
    assert mark["counts"] == {"shop.orders": 3, "shop.items": 1}
    assert Report.pending(mark, None) is None
    assert restarted.confirm(again, again_version) is False  # once only

    # pending again, but a load has read the range meanwhile (the cursor is past its end)
    later = ChangeRange("mysql-bin.000002:200", "mysql-bin.000002:400", {"shop.orders": 1}, 1)
    mark, version = restarted.watermark()
    assert restarted.announce(Report(later, "mysql-bin.000002:90", version, mark=mark)) is not None
    instance.pin_start = lambda: StartPoint(P("mysql-bin.000002:400"), None, None, "cursor")
    assert Watcher(instance, "lake").poll() is None  # not announced again ...
    mark, _ = restarted.watermark()
    assert mark is not None and "pending" not in mark and mark["to"] == "mysql-bin.000002:400", (
        mark
    )  # ... reported


@pytest.mark.parametrize(
    ("tables", "exclude", "matched", "unmatched"),
    [
        (
            {"shop.orders": "lake.shop.orders", "shop.*": "lake.shop.{table}"},
            "shop.tmp_*",
            ["orders", "items"],
            ["tmp_a"],
        ),
        (["shop.orders", "shop.cust*"], None, ["orders", "customers"], ["items"]),
        ("shop\\.orders", ["shop.orders"], [], ["orders"]),
    ],
)
def test_tables_filter_takes_the_operators_tables_and_exclude(
    tables: object, exclude: object, matched: list[str], unmatched: list[str]
) -> None:
    flt = tables_filter(tables, exclude)  # type: ignore[arg-type]
    assert all(flt.matches("shop", t) for t in matched), flt
    assert not any(flt.matches("shop", t) for t in unmatched), flt
