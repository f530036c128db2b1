"""Timestamp extractors (``timestamp.extractor``): Wallclock, Record, RecordField and custom ones.

Pure unit tests, no Spark, no store; the extractors are reached through the time-based
partitioners that use them, as a sink configures them.
"""

from __future__ import annotations

import pytest

from blockgz.errors import BadRecordError
from blockgz.sink.partitioning.partitioners import TimeBasedPartitioner
from blockgz.sink.partitioning.settings import build_partitioner
from blockgz.sink.partitioning.timestamps import (
    RecordFieldTimestampExtractor,
    RecordTimestampExtractor,
    TimestampExtractor,
    WallclockTimestampExtractor,
)
from tests.unit.partitioning_support import HOURLY, T, build, ms, rec, time_options


# -- custom classes loaded by name from this module ---------------------------------------------
class FixedExtractor:
    """A custom extractor (duck-typed: only ``extract``) returning ``fixed.ts``."""

    def configure(self, options):
        self.ts = int(options["fixed.ts"])

    def extract(self, record):
        return self.ts


def test_wallclock_is_the_default_and_not_deterministic():
    p = build(partitioner_class="hourly", locale="en", timezone="UTC")
    assert isinstance(p.extractor, WallclockTimestampExtractor)
    assert p.deterministic is False
    p.extractor = WallclockTimestampExtractor(clock=lambda: T / 1000)
    r = rec({}, ts=None)
    assert p.encode_partition(r) == "year=2026/month=11/day=22/hour=10"
    assert p.timestamp(r) == T


@pytest.mark.parametrize(
    "spelling",
    [
        "Wallclock",
        "wallclock",
        "io.confluent.connect.storage.partitioner.TimeBasedPartitioner$WallclockTimestampExtractor",
    ],
)
def test_wallclock_spellings(spelling):
    p = build(partitioner_class="daily", locale="en", timezone="UTC", timestamp_extractor=spelling)
    assert p.deterministic is False


@pytest.mark.parametrize(
    ("spelling", "cls"),
    [
        ("Record", RecordTimestampExtractor),
        ("RECORD", RecordTimestampExtractor),
        (
            "io.confluent.connect.storage.partitioner.TimeBasedPartitioner$RecordTimestampExtractor",
            RecordTimestampExtractor,
        ),
        ("recordfield", RecordFieldTimestampExtractor),
        (
            "io.confluent.connect.storage.partitioner.TimeBasedPartitioner"
            "$RecordFieldTimestampExtractor",
            RecordFieldTimestampExtractor,
        ),
    ],
)
def test_deterministic_extractor_spellings(spelling, cls):
    p = build(partitioner_class="daily", locale="en", timezone="UTC", timestamp_extractor=spelling)
    assert isinstance(p.extractor, cls)
    assert p.deterministic is True


@pytest.mark.parametrize("ts", [None, -1])
def test_record_extractor_needs_a_kafka_timestamp(ts):
    p = build(partitioner_class="hourly", **time_options())
    with pytest.raises(BadRecordError, match=r"clicks-0@5: .*no Kafka timestamp"):
        p.encode_partition(rec({}, ts=ts))


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-22T10:15:00Z",
        "2026-11-22T10:15:00.000+00:00",
        "2026-11-22T11:15+01:00",
        "2026-11-22T05:15:00-05:00",
        "2026-11-22T10:15",  # no offset: UTC
        "2026-11-22T10:15:59,999Z",
        str(T),
        f" {T} ",
        T,
        T + 0.75,  # a fraction is truncated, as Java's longValue
    ],
)
def test_record_field_timestamps(value):
    p = build(
        partitioner_class="hourly",
        locale="en",
        timezone="UTC",
        timestamp_extractor="RecordField",
        timestamp_field="meta.ts",
    )
    r = rec({"meta": {"ts": value}}, ts=None)
    assert p.encode_partition(r) == "year=2026/month=11/day=22/hour=10"
    assert ms("2026-11-22T10:15") <= p.timestamp(r) < ms("2026-11-22T10:16")


def test_record_field_default_field_name_is_timestamp():
    p = build(
        partitioner_class="daily", locale="en", timezone="UTC", timestamp_extractor="RecordField"
    )
    assert p.encode_partition(rec({"timestamp": T})) == "year=2026/month=11/day=22"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"ts": True}, r"'ts' is a boolean"),
        ({"ts": None}, r"'ts' is null"),
        ({"ts": [1]}, r"'ts' is an array"),
        ({"ts": "yesterday"}, r"neither epoch milliseconds nor ISO-8601"),
        ({"ts": "2026-02-30"}, r"neither epoch milliseconds nor ISO-8601"),
        ({"other": 1}, r"'ts' is missing from the value; fields present: other"),
        ([1, 2], r"needs a JSON object value, but the value is an array"),
        (None, r"null \(a tombstone\)"),
    ],
)
def test_record_field_errors(value, message):
    extractor = RecordFieldTimestampExtractor("ts")
    with pytest.raises(BadRecordError, match=message):
        extractor.extract(rec(value))


def test_custom_extractor_module_class():
    p = build_partitioner(
        time_options(
            **{
                "partitioner.class": "daily",
                "timestamp.extractor": "tests.unit.test_timestamps:FixedExtractor",
                "fixed.ts": str(T),
            }
        )
    )
    assert p.encode_partition(rec({}, ts=None)) == "year=2026/month=11/day=22"


def test_custom_extractor_must_return_an_int():
    class Bad(TimestampExtractor):
        def extract(self, record):
            return "soon"

    p = TimeBasedPartitioner(HOURLY, 3_600_000, "en", "UTC", Bad())
    with pytest.raises(BadRecordError, match="must return epoch milliseconds"):
        p.encode_partition(rec({}))
