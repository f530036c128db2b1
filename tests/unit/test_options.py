"""The option reader (``blockgz.options``): typed getters, sizes and their error messages.

Blank or missing means the default; ``get`` keeps the raw text; ranges, choices, flags, sizes,
prefixes and case-insensitive keys; every ConfigError names the key and the allowed values.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blockgz.errors import ConfigError
from blockgz.options import Options, as_options, format_size, parse_size


def getters(options: Options) -> dict[str, object]:
    """Every typed getter on key ``k``, each with a default that cannot come from a value."""
    return {
        "text": options.text("k", "dflt"),
        "integer": options.integer("k", -7, low=0),
        "size": options.size("k", -7),
        "flag": options.flag("k", True),
        "choice": options.choice("k", ("a", "B"), "B"),
    }


DEFAULTS = {"text": "dflt", "integer": -7, "size": -7, "flag": True, "choice": "B"}


@pytest.mark.parametrize("raw", [{}, {"k": None}, {"k": ""}, {"k": "  "}, {"k": "\n\t"}])
def test_missing_or_blank_gives_every_default(raw):
    options = Options(raw)
    assert getters(options) == DEFAULTS
    assert options.given("k") is False


def test_get_keeps_the_raw_text_and_getters_strip():
    options = Options({"sep": "\n", "n": " 42 ", "name": "  x  "})
    assert options.get("sep") == "\n"
    assert options["n"] == " 42 "
    assert options.text("sep", ",") == ","  # blank: the default
    assert options.text("name") == "x"
    assert options.integer("n", None, low=0) == 42
    assert options.given("n") is True


def test_values_become_text_and_none_is_dropped():
    options = Options({" a ": 3, "b": True, "c": False, "d": None})
    assert dict(options) == {"a": "3", "b": "true", "c": "false"}
    assert "d" not in options
    assert options.flag("b", False) is True


@pytest.mark.parametrize(
    ("value", "low", "high", "message"),
    [
        ("4", 5, None, "n: 4 is out of range; allowed: 5 or more"),
        ("11", 0, 10, "n: 11 is out of range; allowed: 0..10"),
        ("-1", 0, 10, "n: -1 is out of range; allowed: 0..10"),
        ("1.5", 0, 10, "n: '1.5' is not a whole number"),
        ("ten", 0, None, "n: 'ten' is not a whole number"),
    ],
)
def test_integer_range_and_messages(value, low, high, message):
    with pytest.raises(ConfigError) as info:
        Options({"n": value}).integer("n", None, low=low, high=high)
    assert str(info.value) == message


def test_integer_bounds_are_inclusive_and_hint_is_shown():
    options = Options({"lo": "0", "hi": "10", "bad": "x"})
    assert options.integer("lo", None, low=0, high=10) == 0
    assert options.integer("hi", None, low=0, high=10) == 10
    with pytest.raises(ConfigError, match=r"^bad: 'x' is not a whole number \(in ms\)$"):
        options.integer("bad", None, low=0, hint="in ms")


@pytest.mark.parametrize(("raw", "expected"), [("aes256", "AES256"), (" AES256 ", "AES256")])
def test_choice_ignores_case_and_returns_the_allowed_spelling(raw, expected):
    assert Options({"c": raw}).choice("c", ("", "AES256", "aws:kms"), "") == expected


def test_choice_error_lists_the_allowed_values():
    with pytest.raises(ConfigError) as info:
        Options({"c": "des"}).choice("c", ("", "AES256", "aws:kms"), "")
    assert str(info.value) == "c: 'des' is not allowed; allowed: '' (none), AES256, aws:kms"


@pytest.mark.parametrize(
    ("raw", "expected"), [("true", True), ("TRUE", True), ("True", True), (" false ", False)]
)
def test_flag_accepts_any_case(raw, expected):
    assert Options({"f": raw}).flag("f", not expected) is expected


@pytest.mark.parametrize("raw", ["yes", "1", "on", "truee"])
def test_flag_rejects_others(raw):
    with pytest.raises(ConfigError) as info:
        Options({"f": raw}).flag("f", False)
    assert str(info.value) == f"f: {raw!r} is not allowed; allowed: true, false"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("7b", 7),
        ("64KiB", 65536),
        ("64 kib", 65536),
        ("1MiB", 1024**2),
        ("2GiB", 2 * 1024**3),
        ("64kB", 64_000),
        ("1 MB", 1_000_000),
        ("3GB", 3_000_000_000),
        (12, 12),
    ],
)
def test_parse_size_units(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "1.5MiB", "-1", "1 TiB", "MiB", "1 M iB"])
def test_parse_size_rejects_and_lists_units(text):
    with pytest.raises(ConfigError, match=r"^part: cannot read .*B, KiB, MiB, GiB .*kB, MB, GB"):
        parse_size(text, name="part")


def test_size_getter_checks_its_minimum():
    options = Options({"s": "1KiB", "t": "0"})
    assert options.size("s", None, low=1024) == 1024
    with pytest.raises(ConfigError, match=r"^t: '0' is too small; allowed: 1 bytes or more$"):
        options.size("t", None)


UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


@given(st.integers(0, 2**42))
def test_format_size_reads_back_within_rounding(num_bytes):
    number, unit = format_size(num_bytes).split(" ")
    assert abs(float(number) * UNITS[unit] - num_bytes) <= 0.05 * UNITS[unit] + 1e-6  # half a digit
    assert unit == "GiB" or float(number) <= 1024


def test_format_size_examples():
    assert [format_size(n) for n in (0, 1023, 1536, 3 * 1024**4)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "3072.0 GiB",
    ]


def test_prefixed_strips_the_prefix():
    options = Options({"kafka.acks": "all", "kafka.linger.ms": "5", "kafkaX": "no", "acks": "1"})
    assert options.prefixed("kafka.") == {"acks": "all", "linger.ms": "5"}
    assert options.prefixed("nothing.") == {}


def test_without_and_merged_make_copies():
    options = Options({"a": "1", "b": "2"})
    assert dict(options.without("a", "zz")) == {"b": "2"}
    assert dict(options.merged({"b": 3, "c": "x"})) == {"a": "1", "b": "3", "c": "x"}
    assert dict(options) == {"a": "1", "b": "2"}


@pytest.mark.parametrize(
    ("given_key", "asked_key"),
    [
        ("maxOffsetsPerTrigger", "maxoffsetspertrigger"),
        ("maxoffsetspertrigger", "maxOffsetsPerTrigger"),
    ],
)
def test_keys_ignore_case(given_key, asked_key):
    options = Options({given_key: "500", "Kafka.Acks": "all"}, keys_ignore_case=True)
    assert options.integer(asked_key, None, low=1) == 500
    assert asked_key in options
    assert options.get(asked_key) == "500"
    assert options.prefixed("KAFKA.") == {"acks": "all"}
    assert "maxOffsetsPerTrigger" not in Options({given_key.lower(): "500"})


def test_as_options_wraps_once():
    options = Options({"a": "1"})
    assert as_options(options) is options
    assert dict(as_options({"a": 1})) == {"a": "1"}
    assert dict(as_options(None)) == {}
