"""The CLI's JSON output is RFC 8259 JSON: big numbers as archived, non-finite doubles as
strings, never ``NaN``/``Infinity`` (issue 41)."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from blockgz.blocks.decode import Record
from blockgz.cli.json_text import RawNumber, dumps, parse_stored


def strict(text: str):
    def refuse(name: str):
        raise AssertionError(f"not JSON: {name} in {text}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "stored",
    ["1e999", "-1e999", "[1E+400, 2]", '{"a": {"b": [0.5, 9e9999]}}', "12345678901234567890"],
)
def test_a_stored_json_value_comes_out_as_its_text(stored):
    assert json.loads(dumps(parse_stored(stored))) == json.loads(stored)  # same numbers
    assert dumps(parse_stored(stored)).replace(" ", "") == stored.replace(" ", "")


@pytest.mark.parametrize("stored", ["NaN", "Infinity", "-Infinity", "[NaN]", '{"x": Infinity}'])
def test_python_only_constants_are_not_json_text(stored):
    with pytest.raises(ValueError, match="is not JSON text"):
        parse_stored(stored)


def test_non_finite_doubles_are_strings_and_everything_else_stays():
    doc = {"d": [math.nan, math.inf, -math.inf], "n": 1.25, "big": RawNumber("1e999")}
    assert '\n "n": 1.25,\n "big": 1e999\n}' in dumps(doc, indent=1)  # json.dumps' keywords
    assert strict(dumps(doc)) == {"d": ["NaN", "Infinity", "-Infinity"], "n": 1.25, "big": math.inf}


def test_a_string_that_looks_like_a_placeholder_is_left_alone():
    doc = {"a": RawNumber("1e999"), "b": "\x00not-a-token:0\x00"}
    assert strict(dumps(doc))["b"] == "\x00not-a-token:0\x00"


@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )
)
def test_any_decoded_value_prints_as_strict_json(value):
    strict(dumps(value))


def test_seek_and_cat_print_decoded_nan_as_strict_json(monkeypatch):
    """A decoded double (Avro, Parquet) that is NaN or infinite, in both outputs."""
    from blockgz.cli.read import _echo_records

    records = [Record(5, {"d": math.nan, "e": -math.inf}), Record(6, b"1e999")]

    def echo(output: str) -> list[str]:
        runner = CliRunner()
        with runner.isolation() as (out, _err, *_):
            _echo_records(records, output, json_values=True)
            return out.getvalue().decode().splitlines()

    as_json = echo("json")
    assert [strict(line) for line in as_json] == [
        {"offset": 5, "value": {"d": "NaN", "e": "-Infinity"}},
        {"offset": 6, "value": math.inf},
    ]
    assert as_json[1] == '{"offset": 6, "value": 1e999}'
    assert echo("raw") == ['{"d": "NaN", "e": "-Infinity"}', "1e999"]
