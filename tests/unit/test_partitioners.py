"""Partitioners: encoded partitions, partitioner settings and their configuration errors.

Pure unit tests, no Spark, no store. Expected time paths marked "Joda" were produced by
Joda-Time 2.14.1 running Confluent's ``TimeBasedPartitioner.getPartition`` arithmetic and
``DateTimeFormat`` (same zone, duration, pattern and timestamp), so they pin Confluent's exact
behaviour, quirks included.
"""

from __future__ import annotations

import posixpath
import unicodedata

import pytest

from blockgz.errors import BadRecordError, ConfigError
from blockgz.sink.partitioning.partitioners import (
    DailyPartitioner,
    DefaultPartitioner,
    FieldPartitioner,
    HourlyPartitioner,
    Partitioner,
    TimeBasedPartitioner,
)
from blockgz.sink.partitioning.pathsafe import unescape_path_value
from blockgz.sink.partitioning.settings import PARTITIONER_OPTIONS, build_partitioner
from blockgz.sink.partitioning.timestamps import RecordFieldTimestampExtractor
from tests.unit.partitioning_support import HOURLY, build, ms, rec, time_options


# -- custom classes loaded by name from this module ---------------------------------------------
class ByKeyPartitioner(Partitioner):
    """A custom partitioner: ``key=<record key>``, with a prefix read from its own option."""

    def configure(self, options):
        super().configure(options)
        self.prefix = options.get("bykey.prefix", "key")

    def encode_partition(self, record):
        return f"{self.prefix}={record.key.decode()}"


class NotAPartitioner:
    def encode_partition(self, record):
        return "x"


# -- default ------------------------------------------------------------------------------------
def test_default_partitioner():
    p = build_partitioner({})
    assert isinstance(p, DefaultPartitioner)
    assert p.encode_partition(rec({"a": 1}, partition=7)) == "partition=7"
    assert p.partitioned_path("clicks", "partition=7") == "clicks/partition=7"
    assert p.deterministic is True
    assert p.timestamp(rec({"a": 1})) is None


@pytest.mark.parametrize(
    ("spelling", "cls"),
    [
        ("default", DefaultPartitioner),
        ("DefaultPartitioner", DefaultPartitioner),
        ("io.confluent.connect.storage.partitioner.DefaultPartitioner", DefaultPartitioner),
        ("field", FieldPartitioner),
        ("io.confluent.connect.storage.partitioner.FieldPartitioner", FieldPartitioner),
        ("time", TimeBasedPartitioner),
        ("TimeBased", TimeBasedPartitioner),
        ("io.confluent.connect.storage.partitioner.TimeBasedPartitioner", TimeBasedPartitioner),
        ("daily", DailyPartitioner),
        ("io.confluent.connect.storage.partitioner.DailyPartitioner", DailyPartitioner),
        ("HOURLY", HourlyPartitioner),
        ("io.confluent.connect.storage.partitioner.HourlyPartitioner", HourlyPartitioner),
    ],
)
def test_partitioner_class_aliases(spelling, cls):
    options = time_options(
        **{
            "partitioner.class": spelling,
            "partition.field.name": "a",
            "path.format": HOURLY,
            "partition.duration.ms": "3600000",
        }
    )
    assert type(build_partitioner(options)) is cls


# -- time-based: expected paths -----------------------------------------------------------------
def test_hourly_utc():
    p = build(partitioner_class="hourly", **time_options())
    assert p.encode_partition(rec({})) == "year=2026/month=11/day=22/hour=10"
    assert p.partitioned_path("clicks", "x") == "clicks/x"


def test_daily_kolkata_half_hour_offset():
    p = build(partitioner_class="daily", **time_options(timezone="Asia/Kolkata"))
    # 18:29:59.999Z is 23:59:59.999 IST; 18:30Z is midnight IST (Joda)
    assert p.encode_partition(rec({}, ts=ms("2026-11-22T18:29:59.999"))) == (
        "year=2026/month=11/day=22"
    )
    assert p.encode_partition(rec({}, ts=ms("2026-11-22T18:30"))) == "year=2026/month=11/day=23"


def test_time_based_15_minutes_floors():
    p = build(
        partitioner_class="time",
        path_format="'hour'=HH/'minute'=mm/",  # the trailing delimiter is stripped
        partition_duration_ms="900000",
        **time_options(),
    )
    assert p.encode_partition(rec({}, ts=ms("2026-11-22T10:15"))) == "hour=10/minute=15"
    assert p.encode_partition(rec({}, ts=ms("2026-11-22T10:29:59.999"))) == "hour=10/minute=15"
    assert p.encode_partition(rec({}, ts=ms("2026-11-22T10:30"))) == "hour=10/minute=30"


JODA_CASES = [
    # zone, duration, UTC time, pattern, Joda's rendering of the bucket start
    ("America/New_York", 3_600_000, "2026-03-08T06:30", "day=08/hour=01/off=-0500"),
    # 03:30 EDT, just after clocks jumped from 02:00 to 03:00: no hour=02 directory
    ("America/New_York", 3_600_000, "2026-03-08T07:30", "day=08/hour=03/off=-0400"),
    # 2 h buckets: local 03:30 floors to 02:00, which does not exist; Joda moves it to 03:00
    ("America/New_York", 7_200_000, "2026-03-08T07:30", "day=08/hour=03/off=-0400"),
    ("America/New_York", 7_200_000, "2026-03-08T06:59:59.999", "day=08/hour=00/off=-0500"),
    # clocks go back at 06:00Z: 01:30 EDT and 01:30 EST share the bucket starting 01:00 EDT
    ("America/New_York", 3_600_000, "2026-11-01T05:30", "day=01/hour=01/off=-0400"),
    ("America/New_York", 3_600_000, "2026-11-01T06:30", "day=01/hour=01/off=-0400"),
    ("America/New_York", 86_400_000, "2026-03-08T04:59:59.999", "day=07/hour=00/off=-0500"),
    ("America/New_York", 86_400_000, "2026-03-08T05:00", "day=08/hour=00/off=-0500"),
    ("America/New_York", 86_400_000, "2026-11-01T12:00", "day=01/hour=00/off=-0400"),
    ("Asia/Kolkata", 86_400_000, "2026-11-22T18:29:59.999", "day=22/hour=00/off=+0530"),
    ("Asia/Kolkata", 86_400_000, "2026-11-22T18:30", "day=23/hour=00/off=+0530"),
    # Havana changes clocks at midnight: local midnight does not exist on 2026-03-08
    ("America/Havana", 86_400_000, "2026-03-08T12:00", "day=08/hour=01/off=-0400"),
    ("America/Havana", 86_400_000, "2026-11-01T12:00", "day=01/hour=00/off=-0400"),
    # east of Greenwich, the ambiguous 02:30 resolves to the later (CET) instant, as in Joda
    ("Europe/Berlin", 7_200_000, "2026-03-29T01:30", "day=29/hour=03/off=+0200"),
    ("Europe/Berlin", 3_600_000, "2026-10-25T00:30", "day=25/hour=02/off=+0100"),
    ("Europe/Berlin", 3_600_000, "2026-10-25T01:30", "day=25/hour=02/off=+0100"),
]


@pytest.mark.parametrize(("zone", "duration", "when", "expected"), JODA_CASES)
def test_time_buckets_match_joda(zone, duration, when, expected):
    p = TimeBasedPartitioner("'day'=dd/'hour'=HH/'off'=Z", duration, "en", zone, "Record")
    assert p.encode_partition(rec({}, ts=ms(when))) == expected


def test_hourly_new_york_across_dst():
    p = build(partitioner_class="hourly", **time_options(timezone="America/New_York"))
    hours = [
        p.encode_partition(rec({}, ts=ms("2026-03-08T05:00") + i * 1_800_000)).rsplit("=", 1)[1]
        for i in range(8)
    ]
    assert hours == ["00", "00", "01", "01", "03", "03", "04", "04"]


def test_pre_1970_buckets_truncate_like_java():
    # Confluent floors with Java's long division, which rounds toward zero before 1970 (Joda)
    p = TimeBasedPartitioner("yyyy-MM-dd-HH", 3_600_000, "en", "UTC", "Record")
    extractor = RecordFieldTimestampExtractor("t")
    p.extractor = extractor
    assert p.encode_partition(rec({"t": ms("1969-12-31T22:30")})) == "1969-12-31-23"


def test_locale_names_and_lowercase():
    options = {
        "partitioner.class": "time",
        "path.format": "MMM/EEEE",
        "partition.duration.ms": "86400000",
        "timezone": "UTC",
        "timestamp.extractor": "Record",
    }
    assert build_partitioner({**options, "locale": "en_US"}).encode_partition(rec({})) == (
        "Nov/Sunday"
    )
    assert build_partitioner({**options, "locale": "de-DE"}).encode_partition(rec({})) == (
        "Nov./Sonntag"
    )
    lowered = build_partitioner({**options, "locale": "en", "partition.path.lowercase": "true"})
    assert lowered.encode_partition(rec({})) == "nov/sunday"


def test_time_partitioner_rejects_unrenderable_timestamps():
    p = TimeBasedPartitioner(HOURLY, 3_600_000, "en", "UTC", RecordFieldTimestampExtractor("t"))
    with pytest.raises(BadRecordError, match=r"clicks-0@5: .*outside the years"):
        p.encode_partition(rec({"t": 10**18}))


# -- field --------------------------------------------------------------------------------------
def test_field_partitioner_nested_and_multiple_fields():
    p = build(partitioner_class="field", partition_field_name=" user.country , type,n,ok,gone")
    value = {"type": "click", "user": {"country": "DE"}, "n": -42, "ok": False, "gone": None}
    assert p.encode_partition(rec(value)) == "user.country=DE/type=click/n=-42/ok=false/gone=null"
    assert p.deterministic is True
    assert p.timestamp(rec(value)) is None


def test_field_partitioner_with_custom_delimiter():
    p = build(partitioner_class="field", partition_field_name="a,b", directory_delim="|")
    assert p.encode_partition(rec({"a": "x|y", "b": "p/q"})) == "a=x%7Cy|b=p%2Fq"
    assert p.partitioned_path("clicks", "a=1|b=2") == "clicks|a=1|b=2"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"b": 1, "c": 2}, r"'a' is missing from the value; fields present: b, c"),
        ({}, r"'a' is missing .*\(none: the object is empty\)"),
        ({"a": 1.5}, r"'a' is a number with a fraction \(1.5\); allowed types: string, integer"),
        ({"a": [1]}, r"'a' is an array; allowed types: string, integer, boolean, null"),
        ({"a": {"x": 1}}, r"'a' is an object; allowed types"),
        ([{"a": 1}], r"needs a JSON object value, but the value is an array"),
        (7, r"needs a JSON object value, but the value is an integer"),
        ("a", r"needs a JSON object value, but the value is a string"),
        (None, r"the value is null \(a tombstone\)"),
    ],
)
def test_field_partitioner_bad_records(value, message):
    p = FieldPartitioner("a")
    with pytest.raises(BadRecordError, match=r"^clicks-0@5: .*" + message):
        p.encode_partition(rec(value))


def test_field_partitioner_nested_missing_lists_the_level():
    p = FieldPartitioner("user.address.country")
    with pytest.raises(BadRecordError, match=r"fields present in 'user': name, age"):
        p.encode_partition(rec({"user": {"name": "x", "age": 3}}))
    with pytest.raises(BadRecordError, match=r"'user' is a string \('x'\), not an object"):
        p.encode_partition(rec({"user": "x"}))


def test_field_partitioner_non_json_value():
    with pytest.raises(BadRecordError, match=r"clicks-0@5: value is not valid JSON"):
        FieldPartitioner("a").encode_partition(rec(raw=b"\x00not json"))


def test_field_partitioner_lists_at_most_20_present_fields():
    value = {f"f{i}": i for i in range(25)}
    with pytest.raises(BadRecordError, match=r"f19, \.\.\. \(5 more\)"):
        FieldPartitioner("a").encode_partition(rec(value))


HOSTILE = [
    "../../etc",
    "a/b",
    "x=y",
    "%2F",
    "line\nbreak",
    "..",
    ".",
    "...",
    "",
    "ünïcödé/名前",
    "tab\tand\x00nul",
    "back\\slash",
    "+plus+",
    "C:\\windows",
    "?#*'\"{[]}^",
    "\x7f\x85",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_values_stay_in_their_segment(hostile):
    p = build(partitioner_class="field", partition_field_name="f,g")
    encoded = p.encode_partition(rec({"f": hostile, "g": "tail"}))
    segments = encoded.split("/")
    assert len(segments) == 2
    assert segments[1] == "g=tail"
    name, sep, escaped = segments[0].partition("=")
    assert (name, sep) == ("f", "=")
    assert unescape_path_value(escaped) == hostile
    assert escaped not in (".", "..")
    assert not any(unicodedata.category(c) == "Cc" for c in encoded)
    path = p.partitioned_path("clicks", encoded)
    assert posixpath.normpath(path).startswith("clicks/f=")
    assert posixpath.normpath(path).count("/") == 2


def test_empty_value_keeps_confluent_form():
    assert FieldPartitioner("f").encode_partition(rec({"f": ""})) == "f="


def test_field_lowercase_option():
    p = build(
        partitioner_class="field",
        partition_field_name="Region,Code",
        partition_path_lowercase="TRUE",
    )
    assert p.encode_partition(rec({"Region": "EU-West/Ä", "Code": 7})) == (
        "region=eu-west%2Fä/code=7"
    )
    default = build(partitioner_class="default", partition_path_lowercase="true")
    assert default.encode_partition(rec({})) == "partition=0"


# -- custom partitioners ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec",
    [
        "tests.unit.test_partitioners:ByKeyPartitioner",
        "tests.unit.test_partitioners.ByKeyPartitioner",
    ],
)
def test_custom_partitioner_loads_and_is_configured(spec):
    p = build_partitioner(
        {"partitioner.class": spec, "bykey.prefix": "customer", "directory.delim": "!"}
    )
    assert isinstance(p, ByKeyPartitioner)
    assert p.encode_partition(rec({})) == "customer=k"
    assert p.partitioned_path("clicks", "customer=k") == "clicks!customer=k"
    assert p.deterministic is True


# -- configuration errors -----------------------------------------------------------------------
CONFIG_ERRORS = [
    # options, the key the message must name, a fragment of the allowed values it must list
    ({"partitioner.class": "foo"}, "partitioner.class", "default, field, time"),
    (
        {"partitioner.class": "io.confluent.connect.storage.partitioner.FieldAndTimePartitioner"},
        "partitioner.class",
        "not available in blockgz; allowed: default",
    ),
    ({"partitioner.class": "no_such_module_x:Thing"}, "partitioner.class", "module:Class"),
    (
        {"partitioner.class": "tests.unit.test_partitioners:Missing"},
        "partitioner.class",
        "allowed:",
    ),
    (
        {"partitioner.class": "tests.unit.test_partitioners:NotAPartitioner"},
        "partitioner.class",
        "not a subclass of blockgz.sink.partitioning.partitioners.Partitioner",
    ),
    ({"partitioner.class": "field"}, "partition.field.name", "comma list of field names"),
    ({"partitioner.class": "field", "partition.field.name": "a,,b"}, "partition.field.name", "a"),
    (
        {"partitioner.class": "field", "partition.field.name": "user..country"},
        "partition.field.name",
        "dotted path to a nested field",
    ),
    (
        {"partitioner.class": "field", "partition.field.name": "a,b,a"},
        "partition.field.name",
        "each field once",
    ),
    ({"partitioner.class": "time"}, "path.format, partition.duration.ms, locale, timezone", "e.g."),
    ({"partitioner.class": "hourly", "locale": "en"}, "timezone", "IANA name"),
    ({"partitioner.class": "daily", "timezone": "UTC"}, "locale", "locale=en"),
    *[
        (
            time_options(
                **{
                    "partitioner.class": "time",
                    "path.format": HOURLY,
                    "partition.duration.ms": bad,
                }
            ),
            "partition.duration.ms",
            "whole number of milliseconds > 0",
        )
        for bad in ("0", "-1", "abc", "1h", "1.5")
    ],
    (
        time_options(
            **{"partitioner.class": "time", "path.format": "/", "partition.duration.ms": "1"}
        ),
        "path.format",
        "Joda-Time pattern",
    ),
    (
        time_options(
            **{"partitioner.class": "time", "path.format": "'q'=Q", "partition.duration.ms": "1"}
        ),
        "path.format",
        "supported (Joda-Time DateTimeFormat): G C Y y x w M d D E e a K h H k m s S z Z",
    ),
    (time_options(**{"partitioner.class": "daily", "locale": "xx_YY"}), "locale", "en_US"),
    (
        time_options(**{"partitioner.class": "daily", "timezone": "Mars/Olympus"}),
        "timezone",
        "UTC, an IANA name",
    ),
    (
        time_options(**{"partitioner.class": "daily", "timezone": "europe/berlin"}),
        "timezone",
        "did you mean Europe/Berlin?",
    ),
    (
        time_options(**{"partitioner.class": "daily", "timestamp.extractor": "Kafka"}),
        "timestamp.extractor",
        "Wallclock, Record, RecordField",
    ),
    (
        time_options(**{"partitioner.class": "daily", "timestamp.extractor": "nope_mod.X"}),
        "timestamp.extractor",
        "cannot import module 'nope_mod'",
    ),
    (
        time_options(
            **{
                "partitioner.class": "daily",
                "timestamp.extractor": "RecordField",
                "timestamp.field": "a.",
            }
        ),
        "timestamp.field",
        "dotted path",
    ),
    ({"partition.path.lowercase": "yes"}, "partition.path.lowercase", "allowed: true, false"),
    ({"directory.delim": ""}, "directory.delim", "punctuation characters other than % . - _"),
    ({"directory.delim": "%"}, "directory.delim", "punctuation characters other than % . - _"),
    ({"directory.delim": "a"}, "directory.delim", "punctuation characters other than % . - _"),
]


@pytest.mark.parametrize(("options", "key", "allowed"), CONFIG_ERRORS)
def test_config_errors_name_the_key_and_allowed_values(options, key, allowed):
    with pytest.raises(ConfigError) as info:
        build_partitioner(options)
    message = str(info.value)
    assert message.startswith(key) or f"needs {key}" in message, message
    assert "allowed" in message or "e.g." in message, message
    assert allowed in message, message


def test_partitioner_options_lists_every_key():
    assert {
        "partitioner.class",
        "partition.field.name",
        "path.format",
        "partition.duration.ms",
        "locale",
        "timezone",
        "timestamp.extractor",
        "timestamp.field",
        "directory.delim",
        "partition.path.lowercase",
    } <= PARTITIONER_OPTIONS


def test_daily_and_hourly_ignore_path_format_and_duration():
    p = build_partitioner(
        time_options(
            **{"partitioner.class": "daily", "path.format": "HH", "partition.duration.ms": "60000"}
        )
    )
    assert p.encode_partition(rec({})) == "year=2026/month=11/day=22"


def test_daily_with_custom_delimiter():
    p = DailyPartitioner("en", "UTC", "Record", directory_delim="'")
    assert p.encode_partition(rec({})) == "year=2026'month=11'day=22"
