"""Scan planning and split reading (what the Spark reader runs), on local archives.

The rows a planned scan reads must be exactly the archived records its conditions allow, and
the plan must touch only the blocks that can hold them.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blockgz.reader import open_archive
from blockgz.reader.spark.scan_plan import IntRange, ScanFilter, plan_scan
from blockgz.reader.spark.scan_read import split_batches
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from blockgz.store import LocalStore
from testkit import archives
from testkit.archives import build_partition, export_batches, input_records
from testkit.batches import arrow_batches


def rows_of(archive, splits, scan: ScanFilter, value_type=None) -> list[tuple]:
    out = []
    for split in splits:
        for batch in split_batches(archive, split, scan.offsets, value_type=value_type):
            d = batch.to_pydict()
            out += list(zip(d["topic"], d["partition"], d["offset"], d["value"], strict=True))
    return out


def scan_rows(root, scan: ScanFilter, **plan) -> list[tuple]:
    with open_archive(str(root)) as archive:
        return rows_of(archive, plan_scan(archive, scan, **plan), scan)


@pytest.fixture(scope="module")
def field_archive(tmp_path_factory):
    root = tmp_path_factory.mktemp("field")
    records = input_records(200)
    export_batches(str(root), records, "field", batches=4)
    return root, records


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_filter_reads_exactly_the_records_it_allows(field_archive, data):
    root, records = field_archive
    scan = ScanFilter()
    if data.draw(st.booleans()):
        scan = scan.with_range("partition", points=[data.draw(st.integers(0, 2))])
    if data.draw(st.booleans()):
        scan = scan.with_range("offset", low=data.draw(st.integers(0, 300)))
    if data.draw(st.booleans()):
        scan = scan.with_range("offset", high=data.draw(st.integers(0, 300)))
    if data.draw(st.booleans()):
        scan = scan.with_range("offset", points=data.draw(st.lists(st.integers(0, 300))))
    if data.draw(st.booleans()):
        scan = scan.with_topics(data.draw(st.sampled_from([["ev"], ["other"], ["ev", "x"]])))
    topic_ok = scan.topics is None or "ev" in scan.topics
    expected = [
        ("ev", r.partition, r.offset, r.value)
        for r in records
        if topic_ok and scan.partitions.contains(r.partition) and scan.offsets.contains(r.offset)
    ]
    # A DataFrame has no order: objects of interleaved partitions are read one after another.
    assert sorted(scan_rows(root, scan, split_bytes=2_000)) == sorted(expected)


def test_ten_offsets_read_one_sidecar_and_one_range(tmp_path):
    store = LocalStore(tmp_path)
    expected = build_partition(store, objects=3, records_per_object=400, block_size=4096)
    scan = ScanFilter().with_range("offset", low=450, high=459)
    with open_archive(str(tmp_path)) as archive:
        splits = plan_scan(archive, scan)
        planned = archive.store.requests
        assert (planned.lists, planned.gets) == (1, 1)  # the partition's listing; one sidecar
        (piece,) = [p for s in splits for p in s.pieces]
        assert len(piece.chunks) <= 2  # the blocks holding 450..459, neighbours
        rows = rows_of(archive, splits, scan)
        assert archive.store.requests.ranged_gets == 1  # neighbouring blocks: one range
    assert [(o, v) for _, _, o, v in rows] == [(o, expected[o]) for o in range(450, 460)]


def test_large_objects_are_read_by_many_splits_of_whole_blocks(tmp_path):
    store = LocalStore(tmp_path)
    expected = build_partition(store, objects=1, records_per_object=3000, block_size=4096)
    with open_archive(str(tmp_path)) as archive:
        splits = plan_scan(archive, ScanFilter(), split_bytes=20_000)
        assert len(splits) > 5
        assert all(s.compressed_bytes <= 20_000 for s in splits)
        rows = rows_of(archive, splits, ScanFilter())
    assert [(o, v) for _, _, o, v in rows] == sorted(expected.items())


def test_plain_gzip_objects_are_read_whole(tmp_path):
    config = SinkSettings.from_options(
        {"path": str(tmp_path), "flush.size": "25", "s3.compression.type": "gzip"}
    )
    records = [KafkaRecord("g", 0, n, 0, None, b'{"n":%d}' % n) for n in range(100)]
    write_task(config, iter(arrow_batches(records)))
    scan = ScanFilter().with_range("offset", low=30, high=60)
    with open_archive(str(tmp_path)) as archive:
        splits = plan_scan(archive, scan)
        assert all(p.whole for s in splits for p in s.pieces)
        rows = rows_of(archive, splits, scan)
    assert [o for _, _, o, _ in rows] == list(range(30, 61))


def test_envelopes_and_companions_fill_key_headers_and_timestamp(tmp_path):
    records = [
        KafkaRecord("e", 0, n, 1_000 + n, b"k%d" % n, b'{"n":%d}' % n, [("h", b"%d" % n)])
        for n in range(30)
    ]
    for options in (
        {"format.json.envelope": "true"},
        {"store.kafka.keys": "true", "store.kafka.headers": "true"},
    ):
        root = tmp_path / str(len(options))
        config = SinkSettings.from_options(
            {"path": str(root), "flush.size": "10", "s3.compression.type": "blockgzip", **options}
        )
        write_task(config, iter(arrow_batches(records)))
        scan = ScanFilter().with_range("offset", low=12, high=14)
        with open_archive(str(root)) as archive:
            (batch,) = [
                b for s in plan_scan(archive, scan) for b in split_batches(archive, s, scan.offsets)
            ]
        d = batch.to_pydict()
        assert d["key"] == [b"k12", b"k13", b"k14"], options
        assert d["headers"] == [[{"key": "h", "value": b"%d" % n}] for n in (12, 13, 14)]
        if "format.json.envelope" in options:
            assert [t.timestamp() for t in d["timestamp"]] == [1.012, 1.013, 1.014]


def test_values_parse_into_a_given_struct(tmp_path):
    store = LocalStore(tmp_path)
    rng = random.Random(3)
    config = SinkSettings.from_options({"path": str(tmp_path), "s3.compression.type": "blockgzip"})
    records = [
        KafkaRecord(
            "j", 0, n, 0, None, b'{"n": %d, "s": "x%d", "extra": %d}' % (n, n, rng.random())
        )
        for n in range(50)
    ]
    write_task(config, iter(arrow_batches(records)))
    del store
    value_type = pa.struct([("n", pa.int64()), ("s", pa.string())])
    scan = ScanFilter().with_range("offset", points=[3, 40])
    with open_archive(str(tmp_path)) as archive:
        rows = rows_of(archive, plan_scan(archive, scan), scan, value_type)
    assert [v for *_, v in rows] == [{"n": 3, "s": "x3"}, {"n": 40, "s": "x40"}]


def test_an_empty_value_parses_as_nulls_in_its_own_row(tmp_path):
    """Arrow's JSON reader skips blank lines; the row count check sends such a block to the
    record reader, so every offset keeps its row."""
    from blockgz import BlockGzipUpload

    with BlockGzipUpload(
        LocalStore(tmp_path), "topics/e/partition=0/e+0+0000000000.json.gz"
    ) as out:
        for value in (b'{"n": 0}', b"", b'{"n": 2}', b'{"n": 3}'):
            out.write(value)
    value_type = pa.struct([("n", pa.int64())])
    scan = ScanFilter()
    with open_archive(str(tmp_path)) as archive:
        rows = rows_of(archive, plan_scan(archive, scan), scan, value_type)
    assert [(o, v) for _, _, o, v in rows] == [
        (0, {"n": 0}), (1, {"n": None}), (2, {"n": 2}), (3, {"n": 3})
    ]  # fmt: skip


@pytest.mark.parametrize(
    "value_type",
    [
        pa.struct([("n", pa.int64())]),  # msgspec
        pa.struct([("n", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))]),  # Arrow's reader
    ],
)
def test_a_json_null_value_parses_as_a_row_of_nulls(tmp_path, value_type):
    """A first value ``null`` used to kill the Python worker (SIGSEGV in Arrow's reader)."""
    from blockgz import BlockGzipUpload

    with BlockGzipUpload(
        LocalStore(tmp_path), "topics/e/partition=0/e+0+0000000000.json.gz"
    ) as out:
        for value in (b"null", b'{"n": 1}', b"null"):
            out.write(value)
    scan = ScanFilter()
    with open_archive(str(tmp_path)) as archive:
        rows = rows_of(archive, plan_scan(archive, scan), scan, value_type)
    assert [(o, v["n"]) for _, _, o, v in rows] == [(0, None), (1, 1), (2, None)]


def test_int_ranges():
    both = IntRange().narrowed(low=5).narrowed(high=9).narrowed(points=[1, 6, 7, 12])
    assert [v for v in range(15) if both.contains(v)] == [6, 7]
    assert both.overlaps(7, 20) and not both.overlaps(8, 20) and both.start == 6
    assert IntRange(low=5, high=4).empty


def test_pushed_conditions_narrow_the_scan():
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        IsNotNull,
        LessThan,
        LessThanOrEqual,
        StringStartsWith,
    )

    from blockgz.reader.spark.archive_source import narrowed

    scan = ScanFilter()
    for condition in (
        EqualTo(("topic",), "orders"),
        In(("partition",), (0, 2)),
        GreaterThan(("offset",), 9),
        LessThanOrEqual(("offset",), 20),
        GreaterThanOrEqual(("partition",), 1),
        LessThan(("offset",), 15),
        IsNotNull(("offset",)),  # understood by no one: no change
        StringStartsWith(("topic",), "ord"),
        EqualTo(("value", "x"), 1),  # a nested column: no change
    ):
        scan = narrowed(scan, condition)
    assert scan.topics == {"orders"}
    assert [p for p in range(5) if scan.partitions.contains(p)] == [2]
    assert [o for o in range(30) if scan.offsets.contains(o)] == list(range(10, 15))
    assert narrowed(ScanFilter(), EqualTo(("offset",), True)) == ScanFilter()  # a boolean


def test_pushed_timestamp_conditions_become_a_window_of_whole_milliseconds():
    import datetime as dt

    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan

    from blockgz.reader.spark.archive_source import narrowed

    at = dt.datetime(2026, 11, 24, 12, 0, 0, 250, tzinfo=dt.UTC)  # 0.25 ms past a ms
    ms = int(at.replace(microsecond=0).timestamp()) * 1000
    scan = narrowed(ScanFilter(), GreaterThan(("timestamp",), at))
    scan = narrowed(scan, LessThan(("timestamp",), at + dt.timedelta(seconds=1)))
    assert (scan.times.low, scan.times.high) == (ms + 1, ms + 1000)
    exact = at.replace(microsecond=0)
    scan = narrowed(ScanFilter(), GreaterThanOrEqual(("timestamp",), exact))
    scan = narrowed(scan, LessThan(("timestamp",), exact + dt.timedelta(hours=1)))
    assert (scan.times.low, scan.times.high) == (ms, ms + 3_599_999)
    scan = narrowed(ScanFilter(), In(("timestamp",), (at, at + dt.timedelta(hours=1))))
    assert (scan.times.low, scan.times.high) == (ms, ms + 3_600_001)
    naive = narrowed(ScanFilter(), EqualTo(("timestamp",), at.replace(tzinfo=None)))
    day = 24 * 3600 * 1000  # no zone: any zone's instant stays inside
    assert (naive.times.low, naive.times.high) == (ms - day, ms + 1 + day)
    assert narrowed(ScanFilter(), EqualTo(("timestamp",), "noon")) == ScanFilter()


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(low_hour=st.integers(-1, 4), hours=st.integers(0, 3))
def test_a_time_window_plans_only_objects_that_can_hold_it(hourly_archive, low_hour, hours):
    """Hourly objects (Record timestamps): a window plans only the objects of its hours, and
    every record in the window is among the rows (Spark then drops the rest by the condition)."""
    root, records = hourly_archive
    low = archives.T0 + low_hour * archives.HOUR
    high = low + hours * archives.HOUR + 59_000
    scan = ScanFilter().with_range("timestamp", low=low, high=high)
    with open_archive(str(root), {"committed": "true"}) as archive:
        splits = plan_scan(archive, scan, split_bytes=2_000)
        rows = set(rows_of(archive, splits, scan))
    wanted = {
        ("ev", r.partition, r.offset, r.value) for r in records if low <= r.timestamp_ms <= high
    }
    assert wanted <= rows
    window_dirs = {f"hour={h % 24:02d}/" for h in range(low_hour, low_hour + hours + 1)}
    planned = {p.ref.key for s in splits for p in s.pieces}
    assert all(any(d in key for d in window_dirs) for key in planned), planned
    record_hours = {(r.timestamp_ms - archives.T0) // archives.HOUR for r in records}
    if not record_hours & set(range(low_hour, low_hour + hours + 1)):
        assert not splits


@pytest.fixture(scope="module")
def hourly_archive(tmp_path_factory):
    root = tmp_path_factory.mktemp("hourly")
    records = input_records(150)
    export_batches(str(root), records, "hourly", batches=3)
    return root, records


@pytest.mark.parametrize("committed", ["true", "false"])
def test_a_time_window_plans_only_the_blocks_whose_index_places_them_in_it(tmp_path, committed):
    """One object holding 300 seconds in blocks of 3 records: the object's time range cannot
    prune it, its blocks' ranges can, with or without the manifests."""
    archives.seconds_archive(str(tmp_path), 300, block_records=3)
    scan = ScanFilter().with_range("timestamp", low=archives.T0 + 31_000, high=archives.T0 + 45_999)
    with open_archive(str(tmp_path), {"committed": committed}) as archive:
        splits = plan_scan(archive, scan)
        rows = rows_of(archive, splits, scan)
    chunks = [c for s in splits for p in s.pieces for _, c in p.chunks]
    assert [c.first_record_offset for c in chunks] == [30, 33, 36, 39, 42, 45]
    assert {o for _, _, o, _ in rows} >= set(range(31, 46))
    assert len(rows) == 18  # whole blocks: Spark drops the rest by the condition


def test_a_query_naming_its_partition_lists_the_partition_not_the_topic(tmp_path, monkeypatch):
    """On S3 every request is a round trip: a query that names its topic and partition goes
    straight to the partition's listing (no listing of the topic's directory), once the one
    listing of the job directories found no export whose catalog names the objects (where
    one does, the partition is not listed at all: issue 44's cold seek in 3 requests)."""
    import threading

    store = LocalStore(tmp_path)
    expected = build_partition(store, objects=3, records_per_object=400, block_size=4096)
    calls: list[tuple[str, str, str]] = []
    for name in ("list", "list_prefixes"):
        original = getattr(LocalStore, name)

        def recorded(self, prefix, *args, _original=original, _name=name, **kwargs):
            calls.append((_name, prefix, threading.current_thread().name))
            return _original(self, prefix, *args, **kwargs)

        monkeypatch.setattr(LocalStore, name, recorded)
    scan = (
        ScanFilter()
        .with_topics(["orders"])
        .with_range("partition", points=[0])
        .with_range("offset", low=450, high=459)
    )
    with open_archive(str(tmp_path)) as archive:
        splits = plan_scan(archive, scan)
        rows = rows_of(archive, splits, scan)
    assert [(o, v) for _, _, o, v in rows] == [(o, expected[o]) for o in range(450, 460)]
    listed = [prefix for _, prefix, _ in calls]
    assert not any(p.rstrip("/").endswith("topics/orders") for p in listed), listed
    (partition_listing,) = [c for c in calls if "partition=0" in c[1]]
    assert [c[1] for c in calls] == ["_blockgz/", partition_listing[1]], calls
