"""Path escaping of partition values (``blockgz.sink.partitioning.pathsafe``).

Escaped values are safe as one key segment, match Hive's escaping for ASCII, and round-trip.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blockgz.sink.partitioning.pathsafe import escape_path_value, unescape_path_value


@given(st.text())
def test_escape_is_safe_and_round_trips(value):
    escaped = escape_path_value(value)
    assert "/" not in escaped
    assert "=" not in escaped
    assert "+" not in escaped
    assert escaped not in (".", "..")
    assert not any(unicodedata.category(c) == "Cc" for c in escaped)
    escaped.encode("utf-8")
    assert unescape_path_value(escaped) == value


@given(st.text(), st.text(alphabet="|!~;,@$&()<>-_.:' ", min_size=1, max_size=3))
def test_escape_with_extra_delimiters(value, extra):
    escaped = escape_path_value(value, extra)
    assert not set(extra) & set(escaped)
    assert unescape_path_value(escaped) == value


def test_escape_rejects_lone_surrogates_and_hex_extras():
    with pytest.raises(ValueError, match="lone surrogate"):
        escape_path_value("a\ud800b")
    with pytest.raises(ValueError, match="hex digits"):
        escape_path_value("a", extra="A")


def test_escape_matches_hive_for_ascii():
    assert escape_path_value("\"#%'*/:=?\\\x7f{[]^\x01") == (
        "%22%23%25%27%2A%2F%3A%3D%3F%5C%7F%7B%5B%5D%5E%01"
    )
    assert escape_path_value("plain-value_1.2 @,") == "plain-value_1.2 @,"
