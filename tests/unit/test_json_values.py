"""``blockgz.formats.json.values``: msgspec gives Arrow's result, value for value, or the same
refusal."""

from __future__ import annotations

import datetime
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blockgz.errors import BadRecordError
from blockgz.formats.json.values import _arrow_parsed, _msgspec_decoder, parse_json_lines

ITEM = pa.struct([("c", pa.int64())])
VALUE = pa.struct(
    [
        ("s", pa.string()),
        ("i", pa.int64()),
        ("j", pa.int32()),
        ("f", pa.float64()),
        ("b", pa.bool_()),
        ("l", pa.list_(pa.field("element", pa.int64()))),
        ("st", pa.struct([("a", pa.string()), ("items", pa.list_(pa.field("element", ITEM)))])),
        ("d", pa.date32()),
        ("days", pa.list_(pa.field("element", pa.date32()))),
    ]
)
dates = st.dates().map(datetime.date.isoformat)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.integers(-(2**31) - 2, 2**31 + 2)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
any_json = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


def _objects(wrong: st.SearchStrategy) -> st.SearchStrategy:
    """Objects with any of the fields, each of its type or (``wrong``) any JSON value."""
    item = st.none() | st.fixed_dictionaries({}, optional={"c": st.integers() | wrong})
    nested = st.fixed_dictionaries(
        {}, optional={"a": st.text(max_size=8) | wrong, "items": st.lists(item, max_size=3) | wrong}
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "s": st.text(max_size=8) | wrong,
            "i": st.integers(-(2**63), 2**63 - 1) | wrong,
            "j": st.integers(-(2**31), 2**31 - 1) | wrong,
            "f": st.floats(allow_nan=False, allow_infinity=False) | st.integers() | wrong,
            "b": st.booleans() | wrong,
            "l": st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), max_size=3) | wrong,
            "st": st.none() | nested | wrong,
            "d": dates | wrong,
            "days": st.lists(st.none() | dates, max_size=3) | wrong,
            "extra": any_json,
        },
    )


objects = _objects(st.none()) | _objects(any_json)

lines = st.lists(st.none() | objects, min_size=1, max_size=6)


def _outcome(parse):
    try:
        return parse().to_pylist()
    except BadRecordError:
        return "refused"


@settings(max_examples=300, deadline=None)
@given(values=lines, ascii_only=st.booleans())
def test_msgspec_and_arrow_accept_and_refuse_the_same_values(values, ascii_only):
    text = b"".join(json.dumps(v, ensure_ascii=ascii_only).encode() + b"\n" for v in values)
    assert _outcome(lambda: parse_json_lines(text, VALUE)) == _outcome(
        lambda: _arrow_parsed(text, VALUE, "")
    )


def test_msgspec_takes_the_types_it_maps_exactly():
    assert _msgspec_decoder(VALUE) is not None
    for arrow_only in (
        pa.timestamp("us", tz="UTC"),
        pa.float32(),
        pa.binary(),
        pa.decimal128(5, 2),
    ):
        assert _msgspec_decoder(pa.struct([("n", pa.int64()), ("x", arrow_only)])) is None


def test_a_null_first_line_does_not_crash_arrows_reader():
    """Arrow 26 dies with SIGSEGV on a first line ``null`` with an explicit schema; a timestamp
    field sends the block to Arrow."""
    value_type = pa.struct([("ts", pa.timestamp("us", tz="UTC")), ("n", pa.int64())])
    values = parse_json_lines(b'null\n{"n": 1, "ts": "2024-01-01T00:00:00Z"}\n', value_type)
    assert values.to_pylist()[0] == {"ts": None, "n": None}
    assert values.to_pylist()[1]["n"] == 1


def test_field_names_need_not_be_python_identifiers():
    value_type = pa.struct([("user-id", pa.string()), ("class", pa.int64()), ("1", pa.bool_())])
    values = parse_json_lines(b'{"user-id": "u7", "class": 3, "1": true}\n', value_type)
    assert values.to_pylist() == [{"user-id": "u7", "class": 3, "1": True}]


def test_out_of_range_integers_are_refused_with_the_source_named():
    with pytest.raises(BadRecordError, match=r"^topics/t/x\.json\.gz: .*int32"):
        parse_json_lines(
            b'{"n": 3000000000}\n', pa.struct([("n", pa.int32())]), source="topics/t/x.json.gz"
        )


def test_a_key_given_twice_keeps_its_last_value():
    """Documented difference: Arrow's reader refuses such an object; msgspec keeps the last."""
    assert parse_json_lines(b'{"n": 1, "n": 2}\n', pa.struct([("n", pa.int64())])).to_pylist() == [
        {"n": 2}
    ]


def test_blank_lines_are_skipped_as_arrow_skips_them():
    value_type = pa.struct([("n", pa.int64())])
    assert len(parse_json_lines(b'{"n": 1}\n\n{"n": 2}\n', value_type)) == 2


def test_dates_are_read_from_iso_strings_by_both_parsers():
    """Arrow's reader takes a date only as a number of days: it reads them as text, then casts."""
    lines = b'{"d": "2024-02-29", "s": {"d": null}, "l": ["1999-12-31", null]}\nnull\n'
    value_type = pa.struct(
        [("d", pa.date32()), ("s", pa.struct([("d", pa.date32())])),
         ("l", pa.list_(pa.field("element", pa.date32())))]
    )  # fmt: skip
    expected = [
        {
            "d": datetime.date(2024, 2, 29),
            "s": {"d": None},
            "l": [datetime.date(1999, 12, 31), None],
        },
        {"d": None, "s": None, "l": None},
    ]
    assert parse_json_lines(lines, value_type).to_pylist() == expected
    assert _arrow_parsed(lines, value_type, "").to_pylist() == expected
    with_time = pa.struct([*value_type, ("t", pa.timestamp("us", tz="UTC"))])  # Arrow's reader
    assert _msgspec_decoder(with_time) is None
    assert [{k: v for k, v in row.items() if k != "t"} for row in
            parse_json_lines(lines, with_time).to_pylist()] == expected  # fmt: skip


def test_a_date_that_is_not_iso_is_refused():
    with pytest.raises(BadRecordError, match="not YYYY-MM-DD"):
        parse_json_lines(b'{"d": "29/02/2024"}\n', pa.struct([("d", pa.date32())]))


def test_maps_with_string_keys_are_read():
    """Arrow's JSON reader has no maps; msgspec reads them."""
    value_type = pa.struct([("m", pa.map_(pa.string(), pa.int64()))])
    values = parse_json_lines(b'{"m": {"a": 1, "b": null}}\n{"m": null}\n{}\n', value_type)
    assert values.to_pylist() == [{"m": [("a", 1), ("b", None)]}, {"m": None}, {"m": None}]
