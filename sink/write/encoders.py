"""Record encoders: what one Kafka record becomes inside an object (without the separator).

Each format hands out its own (:meth:`blockgz.formats.base.Format.encoder`); the encoders live
with their formats:

* ``json`` (:mod:`blockgz.formats.json.json_format`): :class:`JsonValueEncoder` (each value as one
JSON
  line, as Confluent's JsonFormat writes schemaless JSON), :class:`JsonEnvelopeEncoder`
  (``format.json.envelope=true``: each value wrapped with its Kafka metadata) and
  :class:`ConnectJsonEncoder` (values a converter decoded, as Confluent writes Connect records);
* ``bytearray`` (:mod:`blockgz.formats.bytearray.bytearray_format`): :class:`ByteArrayEncoder`, the
raw bytes;
* ``avro`` (:mod:`blockgz.formats.avro.avro_format`): :class:`AvroDatumEncoder`, the decoded value
for the
  Avro container writer.

>>> from blockgz.formats.json.json_format import JsonEnvelopeEncoder, JsonValueEncoder
>>> from blockgz.sink.records import KafkaRecord
>>> enc = JsonValueEncoder()
>>> enc.encode(KafkaRecord("t", 0, 7, 0, None, b'{"a": 1}'))
b'{"a": 1}'
>>> enc.encode(KafkaRecord("t", 0, 8, 0, None, b'{"a":\\n 2}'))
b'{"a":2}'
>>> JsonEnvelopeEncoder().encode(KafkaRecord("t", 0, 9, 1000, b"k", b'[1]'))
b'{"topic":"t","partition":0,"offset":9,"timestamp":1000,"key":"k","value":[1]}'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from blockgz.formats.base import RecordEncoder

if TYPE_CHECKING:
    from blockgz.sink.write.config import SinkSettings


def encoder_for(config: SinkSettings) -> RecordEncoder:
    """The encoder of a sink config: its format's (``format.class``, with the envelope and
    payload settings).

    >>> from blockgz.sink.write.config import SinkSettings
    >>> settings = SinkSettings.from_options({"path": "/tmp/x", "format.class": "bytearray"})
    >>> type(encoder_for(settings))
    <class 'blockgz.formats.bytearray.bytearray_format.ByteArrayEncoder'>
    """
    return config.format_for().encoder(config)


__all__ = ["encoder_for"]
