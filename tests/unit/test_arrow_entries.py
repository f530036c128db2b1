"""The vectorized key and header entries give the record path's bytes exactly."""

from __future__ import annotations

import io

import fastavro
import numpy as np
import orjson
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from blockgz.formats.arrow_entries import avro_headers, avro_nullable_bytes, json_text_lines
from blockgz.formats.base import text_or_base64
from blockgz.sink.records import kafka_arrow_schema
from blockgz.sink.write.companions import HEADER_SCHEMA

HEADERS_TYPE = kafka_arrow_schema(True).field("headers").type
NULLABLE_BYTES = fastavro.parse_schema(["null", "bytes"])
HEADERS = fastavro.parse_schema(HEADER_SCHEMA)

keys = st.lists(st.none() | st.binary(max_size=300), max_size=40)
texts = st.lists(st.none() | st.text(max_size=30).map(str.encode), max_size=40)
header_lists = st.lists(
    st.none()
    | st.lists(
        st.fixed_dictionaries(
            {"key": st.text(max_size=20), "value": st.none() | st.binary(max_size=200)}
        ),
        max_size=5,
    ),
    max_size=30,
)


def avro_each(schema, data) -> list[bytes]:
    out = []
    for datum in data:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, schema, datum)
        out.append(buffer.getvalue())
    return out


def split(encoded) -> list[bytes]:
    data, ends = encoded
    starts = np.concatenate(([0], ends)).astype(int)[:-1]
    return [bytes(data[a:b]) for a, b in zip(starts, ends, strict=True)]


def sliced(values, arrow_type, lead: int):
    """The values as a slice of a longer array (the batch path hands on slices)."""
    padding = [values[0]] * lead if values else []
    return pa.array(padding + values + padding, arrow_type).slice(lead, len(values))


@settings(deadline=None)  # the first example pays for numpy's and fastavro's warm-up
@given(keys, st.integers(0, 3))
def test_avro_keys_match_fastavro(values, lead):
    assert split(avro_nullable_bytes(sliced(values, pa.binary(), lead))) == avro_each(
        NULLABLE_BYTES, values
    )


@settings(max_examples=200, deadline=None)
@given(header_lists, st.integers(0, 3))
def test_avro_headers_match_fastavro(values, lead):
    encoded = avro_headers(sliced(values, HEADERS_TYPE, lead))
    assert encoded is not None
    assert split(encoded) == avro_each(HEADERS, [h or [] for h in values])


@settings(deadline=None)
@given(texts, st.integers(0, 3))
def test_json_keys_match_the_record_path_or_decline(values, lead):
    encoded = json_text_lines(sliced(values, pa.binary(), lead))
    expected = [orjson.dumps(text_or_base64(v)) + b"\n" for v in values]
    if encoded is None:  # escapes needed: the record path writes them
        assert any(b'"' in v or b"\\" in v or min(v, default=32) < 32 for v in values if v)
    else:
        assert split(encoded) == expected


def test_json_keys_decline_bytes_that_are_not_text():
    assert json_text_lines(pa.array([b"ok", b"\xff\xfe"], pa.binary())) is None
    # valid UTF-8 as a whole, but the second key starts inside the first's character
    assert json_text_lines(pa.array([b"\xc3", b"\xa9"], pa.binary())) is None


def test_headers_with_a_null_header_key_are_left_to_the_record_path():
    column = pa.array([[{"key": None, "value": b"v"}]], HEADERS_TYPE)
    assert avro_headers(column) is None


def test_long_lengths_take_multi_byte_varints():
    big = b"x" * 70_000  # a three-byte length
    assert split(avro_nullable_bytes(pa.array([big], pa.binary()))) == avro_each(
        NULLABLE_BYTES, [big]
    )
