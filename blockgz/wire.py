"""Confluent's wire format: the one place that reads (and writes) its 5-byte header.

A value serialized by Confluent's ``KafkaAvroSerializer`` (and its JSON Schema and Protobuf
peers) starts with the magic byte ``0`` and the writer schema's Schema Registry id (4 bytes,
big-endian); the serialized datum follows. The sink's ``AvroConverter``
(:mod:`blockgz.sink.convert.converters`) and the reader's decoding of values a bytearray export kept
as they came (:mod:`blockgz.formats.avro.wire_decode`) both take the header apart here.

>>> framed = wire_value(5, b"\\x0e")
>>> framed
b'\\x00\\x00\\x00\\x00\\x05\\x0e'
>>> schema_id_of(framed), framed[HEADER_BYTES:]
(5, b'\\x0e')
>>> schema_id_of(b"{}") is None
True
"""

from __future__ import annotations

import struct

#: The first byte of every value in the wire format.
MAGIC_BYTE = 0

#: The header: the magic byte, then the schema id as an unsigned 32-bit big-endian integer.
_HEADER = struct.Struct(">BI")

#: How many bytes the header takes; the serialized datum starts here.
HEADER_BYTES = _HEADER.size


def schema_id_of(value: bytes | bytearray | memoryview) -> int | None:
    """The registry id of the schema ``value`` was written with; ``None`` when ``value`` is
    not in the wire format (shorter than the header, or another first byte).

    >>> schema_id_of(b"\\x00\\x00\\x01\\x00\\x02rest")
    65538
    >>> schema_id_of(b"\\x01\\x00\\x00\\x00\\x05") is None
    True
    """
    if len(value) < HEADER_BYTES:
        return None
    magic, schema_id = _HEADER.unpack_from(value)
    return schema_id if magic == MAGIC_BYTE else None


def wire_value(schema_id: int, datum: bytes) -> bytes:
    """``datum`` behind the header for ``schema_id``, as Confluent's serializers frame it."""
    return _HEADER.pack(MAGIC_BYTE, schema_id) + datum
