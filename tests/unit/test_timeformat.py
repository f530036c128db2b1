"""Joda-Time ``path.format`` patterns and ISO-8601 parsing
(``blockgz.sink.partitioning.timeformat``).

Expected renderings and parses marked "Joda" were produced by Joda-Time 2.14.1 (``DateTimeFormat``
and ``ISODateTimeFormat.dateTimeParser()``), so they pin Confluent's exact behaviour.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from blockgz.errors import ConfigError
from blockgz.sink.partitioning.isotime import parse_iso_millis
from blockgz.sink.partitioning.timeformat import compile_pattern, tokenize


@pytest.mark.parametrize(
    ("pattern", "when", "expected"),
    [
        # Joda: Y is year-of-era and x the ISO week-year; 2024-12-31 is in week 1 of 2025
        ("YYYY xxxx ww e EEE D", "2024-12-31T10:00", "2024 2025 01 2 Tue 366"),
        ("yy YY xx", "2024-12-31T10:00", "24 24 25"),
        ("h K k H a", "2026-11-22T00:00", "12 0 24 0 AM"),
        ("h K k H a", "2026-11-22T12:00", "12 0 12 12 PM"),
        ("G C M MM MMM MMMM d dd DDD", "2026-02-05T00:00", "AD 20 2 02 Feb February 5 05 036"),
        ("HH:mm:ss.SSS S SS SSSS", "2026-02-05T07:08:09.456", "07:08:09.456 4 45 4560"),
        ("'it''s' '' yyyy", "2026-02-05T00:00", "it's ' 2026"),
        ("Z ZZ ZZZ z zzzz", "2026-02-05T00:00", "+0000 +00:00 UTC UTC Coordinated Universal Time"),
        ("'unterminated yyyy", "2026-02-05T00:00", "unterminated yyyy"),
        ("é-yyyy_#1", "2026-02-05T00:00", "é-2026_#1"),
    ],
)
def test_compile_pattern_like_joda(pattern, when, expected):
    dt = datetime.fromisoformat(when).replace(tzinfo=UTC)
    assert compile_pattern(pattern, "en")(dt) == expected


def test_compile_pattern_zone_names():
    from zoneinfo import ZoneInfo

    dt = datetime(2026, 7, 1, 12, tzinfo=ZoneInfo("Asia/Kolkata"))
    assert compile_pattern("z|zzzz|Z|ZZ|ZZZ", "en")(dt) == (
        "IST|India Standard Time|+0530|+05:30|Asia/Kolkata"
    )


@pytest.mark.parametrize("letter", list("ABFIJLNOPQRTUVWXbcfgijlnopqrtuv"))
def test_unsupported_letters(letter):
    with pytest.raises(ConfigError, match=r"path.format: unsupported pattern letter .*supported"):
        compile_pattern(f"'x'={letter}", "en")


def test_tokenize():
    assert tokenize("'year'=YYYY/'month'=MM") == ["year=", ("Y", 4), "/month=", ("M", 2)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # all checked against Joda's ISODateTimeFormat.dateTimeParser() (default zone UTC)
        ("2026-11-22T10:15:30.123456Z", 1795342530123),
        ("2026-11-22T10:15:30,5+05:30", 1795322730500),
        ("2026-11", 1793491200000),
        ("2026-326", 1795305600000),
        ("2026-W47", 1794787200000),
        ("2026-11-22T10.5Z", 1795343400000),
        ("2026-11-22T10:15:30-0800", 1795371330000),
        ("2026-1-5T1:2:3Z", 1767574923000),
        ("T10:15Z", 36900000),
        ("1969-12-31T23:59:59.999Z", -1),
    ],
)
def test_parse_iso_millis_like_joda(text, expected):
    assert parse_iso_millis(text) == expected


@pytest.mark.parametrize(
    "text", ["2026-11-22T24:00Z", "2026-02-30", "2026-11-22 10:15Z", "20261122T101500Z", "x"]
)
def test_parse_iso_millis_rejects(text):
    with pytest.raises(ValueError):
        parse_iso_millis(text)


@pytest.mark.parametrize(
    ("short", "zone"),
    [("PST", "America/Los_Angeles"), ("ECT", "Europe/Paris"), ("IST", "Asia/Kolkata")],
)
def test_java_short_zone_ids_map_as_java_maps_them(short, zone):
    from zoneinfo import ZoneInfo

    from blockgz.sink.partitioning.zones import parse_timezone

    assert parse_timezone(short) == ZoneInfo(zone)


def test_java_fixed_short_ids_are_offsets():
    from blockgz.sink.partitioning.zones import parse_timezone

    assert parse_timezone("EST").utcoffset(None) == timedelta(hours=-5)
