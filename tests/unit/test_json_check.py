"""JSON validation without parsing (``blockgz.formats.json.check``): what the sink stores as it
is must be what orjson would have accepted, save numbers beyond a double (valid JSON)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from blockgz.formats.json.check import all_valid, invalid_rows, valid_json

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)

TRICKY = [
    (b'{"a": tru}', False),
    (b'{"a":1} x', False),
    (b'{"a":1}{"b":2}', False),
    (b"", False),
    (b" ", False),
    (b'"\xff"', False),  # not UTF-8 (msgspec alone would take it)
    (b"\xef\xbb\xbf{}", False),  # a byte order mark
    (b'"\\ud800"', False),  # a lone surrogate
    (b"[1,]", False),
    (b"01", False),
    (b'"a\tb"', False),
    (b"[" * 1000 + b"]" * 1000, True),  # deeper than msgspec goes, as deep as orjson
    (b"[" * 1100 + b"]" * 1100, False),
    (b"1e999", True),  # JSON's grammar allows it; orjson alone refuses it
    (b' {"caf\xc3\xa9": [1, 2.5e3, null, true]} ', True),
]


@given(json_values)
def test_whatever_orjson_writes_is_valid(value):
    data = orjson.dumps(value)
    assert valid_json(data)
    assert all_valid([data, data], data + b"\n" + data)
    assert invalid_rows([data]) == []


@pytest.mark.parametrize(("value", "valid"), TRICKY)
def test_tricky_values(value, valid):
    assert valid_json(value) is valid
    assert all_valid([b"[]", value], b"[]\n" + value) is valid
    assert invalid_rows([b"[]", value, b"{}"]) == ([] if valid else [1])


@given(st.binary(max_size=40))
def test_anything_orjson_accepts_is_accepted(data):
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return
    assert valid_json(data)
