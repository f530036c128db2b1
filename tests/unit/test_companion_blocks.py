"""A block's companion entries decoded at once give what decoding them one record at a time
gives (:func:`block_with_entries` vs :func:`with_entries`; ``Format.decode_entries`` vs
``decode_entry``), and a bad line still fails as it did alone."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.decode import Record
from blockgz.formats.by_name import FORMATS
from blockgz.reader.reading.companion_entries import block_with_entries, with_entries

JSON = FORMATS.get("json")

entries = st.lists(
    st.one_of(
        st.tuples(st.integers(-(2**70), 2**70), st.integers(-1, 1)).map(lambda p: b"[%d,%d]" % p),
        st.text(max_size=5).map(lambda t: json.dumps(t).encode()),
        st.sampled_from([b"null", b" [1,2]", b"[1, 2]", b"[1.5,0]", b"[1,2] "]),
    ),
    max_size=8,
)


@given(entries)
def test_decode_entries_equals_decode_entry_one_by_one(lines):
    assert JSON.decode_entries(lines) == [JSON.decode_entry(e) for e in lines]


@pytest.mark.parametrize("bad", [b"[1,", b"[01,2]", b"[1,2],[3,4]", b""])
def test_a_bad_line_fails_as_it_does_alone(bad):
    with pytest.raises(ValueError) as alone:
        JSON.decode_entry(bad)
    with pytest.raises(ValueError) as block:
        JSON.decode_entries([b"[1,0]", bad])
    assert str(block.value) == str(alone.value)


def test_a_block_gets_what_each_record_gets():
    refs = tuple(
        ObjectRef(f"t+0+0000000007.{role}.json", "t", 0, 7, f"{role}.json")
        for role in ("headers", "keys", "timestamps")
    )
    records = [Record(7, b"a"), Record.kept(8, b"b", holds=frozenset({"key"})), Record(9, b"c")]
    columns = [
        [b'[{"key":"h","value":"v"}]', b"null", b"[]"],
        [b'"k7"', b'{"base64":"AAE="}', b"null"],
        [b"[5,0]", b"[-1,-1]", b"[6,1]"],
    ]
    block = block_with_entries(records, refs, columns)
    one_by_one = [
        with_entries(r, refs, [column[n] for column in columns]) for n, r in enumerate(records)
    ]
    fields = ("offset", "value", "key", "headers", "timestamp", "timestamp_type", "holds")
    assert [[getattr(r, f) for f in fields] for r in block] == [
        [getattr(r, f) for f in fields] for r in one_by_one
    ]
    assert block[0].headers == [("h", b"v")] and block[1].timestamp is None


def test_a_companion_with_fewer_entries_than_records_is_an_error():
    ref = ObjectRef("t+0+0000000007.timestamps.json", "t", 0, 7, "timestamps.json")
    with pytest.raises(IndexError, match="1 entries for 2 records"):
        block_with_entries([Record(7, b"a"), Record(8, b"b")], (ref,), [[b"[5,0]"]])
