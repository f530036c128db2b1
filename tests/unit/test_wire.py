"""Confluent's wire-format header, read in one place for the sink and the reader."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blockgz.errors import BadRecordError
from blockgz.formats.avro.wire_decode import split_wire_value
from blockgz.sink.convert.converters import AvroConverter
from blockgz.sink.convert.schemas_by_id import RegistrySettings
from blockgz.sink.records import KafkaRecord
from blockgz.wire import HEADER_BYTES, schema_id_of, wire_value


@given(st.integers(0, 2**32 - 1), st.binary(max_size=20))
def test_a_framed_value_gives_back_its_schema_id_and_datum(schema_id, datum):
    framed = wire_value(schema_id, datum)
    assert framed[:1] == b"\x00" and len(framed) == HEADER_BYTES + len(datum)
    assert schema_id_of(framed) == schema_id
    assert split_wire_value(framed, where="t-0@1") == (schema_id, datum)


@pytest.mark.parametrize("value", [b"", b"\x00\x00\x00\x01", b"\x01\x00\x00\x00\x05", b"{}"])
def test_a_value_not_in_the_wire_format_has_no_schema_id(value):
    assert schema_id_of(value) is None


def test_a_schema_id_above_two_to_the_31_stays_unsigned():
    assert schema_id_of(b"\x00\xff\xff\xff\xfe") == 2**32 - 2


@pytest.mark.parametrize("value", [b"\x02\x00\x00\x00\x05x", b"\x00\x00"])
def test_the_sink_and_the_reader_refuse_the_same_values(value):
    converter = AvroConverter(RegistrySettings(url="http://127.0.0.1:1"))
    record = KafkaRecord("t", 0, 1, 0, None, value)
    with pytest.raises(BadRecordError, match="not in Confluent's Avro wire format"):
        converter.decode(record)
    with pytest.raises(BadRecordError, match="not in Confluent's Avro wire format"):
        split_wire_value(value, where="t-0@1")
