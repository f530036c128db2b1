"""Confluent's Avro wire format on the read side: framing and the subject that shapes values.

Decoding through a real registry is in ``tests/integration/test_spark_reader.py``.
"""

from __future__ import annotations

import pickle

import pytest

from blockgz.errors import BadRecordError, ConfigError
from blockgz.formats.avro.wire_decode import WireAvroValues, split_wire_value, wire_subject
from blockgz.registry import RegistrySettings


def test_the_header_gives_the_schema_id_big_endian():
    assert split_wire_value(b"\x00\x00\x01\x00\x02rest", where="t-0@1") == (65538, b"rest")


@pytest.mark.parametrize("value", [b'{"n":1}', b"\x00\x00\x01", b"\x01\x00\x00\x00\x01xx"])
def test_a_value_without_the_header_is_refused_naming_the_record(value):
    with pytest.raises(BadRecordError, match=r"t-0@1: the value is not in Confluent's Avro"):
        split_wire_value(value, where="t-0@1")


@pytest.mark.parametrize("value", [None, b""])
def test_a_tombstone_is_a_null_value_without_asking_the_registry(value):
    unreachable = RegistrySettings(url="http://127.0.0.1:1")
    assert WireAvroValues(unreachable, '"long"').decode(value, where="t-0@1") is None


def test_the_subject_is_the_option_else_the_one_topic_s():
    assert wire_subject({"value.subject": "orders-v"}, ["a", "b"]) == "orders-v"
    assert wire_subject({}, ["orders"]) == "orders-value"
    with pytest.raises(ConfigError, match=r"set value.subject.*found 2: a, b"):
        wire_subject({}, ["a", "b"])


def test_it_pickles_as_its_settings_and_reader_schema():
    values = WireAvroValues(RegistrySettings(url="http://r:8081"), '"long"')
    values._writers[3] = object()  # parsed schemas stay behind: executors parse their own
    copy = pickle.loads(pickle.dumps(values))
    assert (copy.settings, copy.reader_schema, copy._writers) == (values.settings, '"long"', {})
