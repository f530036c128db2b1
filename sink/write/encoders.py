"""Record encoders: what one Kafka record becomes inside an object (without the separator).

* ``json`` writes each value as one JSON line, as Confluent's JsonFormat does for schemaless
  JSON. A value must be valid JSON; it is written byte for byte unless it spans lines, in which
  case it is re-serialised compactly. ``value.converter.schemas.enable=true`` unwraps Connect's
  ``{"schema": ..., "payload": ...}`` envelope and writes the payload, as Confluent does.
  ``format.json.envelope=true`` wraps each value with its Kafka metadata instead.
* ``bytearray`` writes the raw value bytes, as Confluent's ByteArrayFormat does.
* Values a converter decoded (:mod:`sink.convert`) are written as Confluent's JsonFormat
  writes Connect records (:class:`ConnectJsonEncoder`), or handed to the Avro container writer
  as they are (:class:`AvroDatumEncoder`).

>>> from sink.records import KafkaRecord
>>> enc = JsonValueEncoder()
>>> enc.encode(KafkaRecord("t", 0, 7, 0, None, b'{"a": 1}'))
b'{"a": 1}'
>>> enc.encode(KafkaRecord("t", 0, 8, 0, None, b'{"a":\\n 2}'))
b'{"a":2}'
>>> JsonEnvelopeEncoder().encode(KafkaRecord("t", 0, 9, 1000, b"k", b'[1]'))
b'{"topic":"t","partition":0,"offset":9,"timestamp":1000,"key":"k","value":[1]}'
"""

from __future__ import annotations

import base64
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

import orjson

from sink.convert.connect_json import render_json
from sink.records import KafkaRecord, parse_json

if TYPE_CHECKING:
    from sink.write.config import SinkConfig


class RecordEncoder(ABC):
    """Turns a record into the bytes stored for it; ``None`` values are tombstones."""

    #: Whether :meth:`passes_through` can ever say yes (else runs are not even tried).
    may_pass_through = False

    @abstractmethod
    def encode(self, record: KafkaRecord) -> bytes: ...

    @abstractmethod
    def encode_tombstone(self, record: KafkaRecord) -> bytes:
        """What ``behavior.on.null.values=write`` stores for a record whose value is null."""

    def rejected(self, values: list[bytes]) -> list[int]:
        """The indexes of the values that cannot be stored as they are (in one pass): the
        batch path writes the runs between them, each of them goes record by record."""
        return list(range(len(values)))

    def passes_through(self, values: list[bytes], framed: bytes) -> bool:
        """Whether each of ``values`` (none null) is stored exactly as it is.

        ``framed`` is the values joined and terminated by the separator. ``True`` lets the
        sink write a whole batch at once; ``False`` sends it through :meth:`encode` record by
        record, which also names the record behind any error. Encoders that change values
        keep this default.
        """
        return False


class JsonValueEncoder(RecordEncoder):
    """The value as one line of JSON (validated; re-serialised only when it spans lines)."""

    def __init__(self, *, unwrap_payload: bool = False):
        self.unwrap_payload = unwrap_payload
        self.may_pass_through = not unwrap_payload

    def encode(self, record: KafkaRecord) -> bytes:
        value = record.value
        assert value is not None
        if self.unwrap_payload:
            return orjson.dumps(_payload(record))
        parsed = record.json()  # validates; cached for partitioners that look inside
        if b"\n" in value or b"\r" in value:
            return orjson.dumps(parsed)
        return value

    def encode_tombstone(self, record: KafkaRecord) -> bytes:
        return b"null"

    def rejected(self, values: list[bytes]) -> list[int]:
        if not self.may_pass_through:
            return super().rejected(values)
        loads, bad = orjson.loads, []
        for i, value in enumerate(values):
            try:
                loads(value)
            except orjson.JSONDecodeError:
                bad.append(i)
        joined = b"".join(values)
        if b"\n" in joined or b"\r" in joined:  # valid, but written re-serialised on one line
            bad = sorted({*bad, *(i for i, v in enumerate(values) if b"\n" in v or b"\r" in v)})
        return bad

    def passes_through(self, values: list[bytes], framed: bytes) -> bool:
        """Single-line, valid JSON values are stored byte for byte."""
        if not self.may_pass_through or framed.count(b"\n") != len(values) or b"\r" in framed:
            return False
        loads = orjson.loads
        try:
            for value in values:
                loads(value)
        except orjson.JSONDecodeError:
            return False  # encode() names the record
        return True


class JsonEnvelopeEncoder(RecordEncoder):
    """``{"topic", "partition", "offset", "timestamp", "key", "headers"?, "value"}`` per line.

    Keys and header values are UTF-8 text when they decode as such, otherwise
    ``{"base64": "..."}``, so nothing is lost either way.
    """

    def __init__(self, *, unwrap_payload: bool = False):
        self.unwrap_payload = unwrap_payload

    def _wrap(self, record: KafkaRecord, value: Any) -> bytes:
        doc: dict[str, Any] = {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp_ms,
            "key": text_or_base64(record.key),
        }
        if record.headers:
            doc["headers"] = [[k, text_or_base64(v)] for k, v in record.headers]
        doc["value"] = value
        return orjson.dumps(doc)

    def encode(self, record: KafkaRecord) -> bytes:
        value = _payload(record) if self.unwrap_payload else record.json()
        return self._wrap(record, value)

    def encode_tombstone(self, record: KafkaRecord) -> bytes:
        return self._wrap(record, None)


class ConnectJsonEncoder(RecordEncoder):
    """A decoded value with a schema as one line of Connect's JSON (see
    :func:`~sink.convert.connect_json.render_json`); with ``envelope`` wrapped like
    :class:`JsonEnvelopeEncoder`. Values without a schema are written as plain JSON."""

    def __init__(self, *, decimal_format: str = "BASE64", envelope: bool = False):
        self.decimal_format = decimal_format
        self.envelope = JsonEnvelopeEncoder() if envelope else None

    def encode(self, record: KafkaRecord) -> bytes:
        schema = record.schema
        if schema is None:
            line = orjson.dumps(record.json())
        else:
            try:
                line = render_json(schema.json, record.json(), self.decimal_format)
            except (TypeError, ValueError, AttributeError) as exc:
                raise record.fail(f"cannot write the value as JSON ({exc})") from None
        if self.envelope is not None:
            return self.envelope._wrap(record, orjson.Fragment(line))
        return line

    def encode_tombstone(self, record: KafkaRecord) -> bytes:
        if self.envelope is not None:
            return self.envelope.encode_tombstone(record)
        return b"null"


class AvroDatumEncoder(RecordEncoder):
    """The decoded value itself: the Avro container writer encodes it with the file's schema."""

    def encode(self, record: KafkaRecord) -> Any:
        return record.json()

    def encode_tombstone(self, record: KafkaRecord) -> bytes:
        raise record.fail("a null value cannot be written to an Avro file")


class ByteArrayEncoder(RecordEncoder):
    """The raw value bytes. With a separator, a value holding it would break framing, so it is
    refused; with ``separator=None`` (length-prefixed framing) any bytes are fine."""

    def __init__(self, separator: bytes | None = b"\n"):
        self.separator = separator
        self.may_pass_through = separator is not None

    def encode(self, record: KafkaRecord) -> bytes:
        value = record.value
        assert value is not None
        if self.separator is not None and self.separator in value:
            raise record.fail(
                f"value contains the record separator {self.separator!r}, which would split it "
                "into several records; set format.bytearray.framing=length-prefixed (any bytes), "
                "or a format.bytearray.separator that cannot occur in the values"
            )
        return value

    def encode_tombstone(self, record: KafkaRecord) -> bytes:
        return b""

    def rejected(self, values: list[bytes]) -> list[int]:
        sep = self.separator
        if sep is None:
            return super().rejected(values)
        return [i for i, value in enumerate(values) if sep in value]

    def passes_through(self, values: list[bytes], framed: bytes) -> bool:
        """Values without the separator are stored as they are."""
        sep = self.separator
        if sep is None:
            return False
        if len(sep) == 1:
            return framed.count(sep) == len(values)
        # Overlapping multi-byte separators make counting ambiguous: look in each value.
        return not any(sep in value for value in values)


def _payload(record: KafkaRecord) -> Any:
    doc = record.json()
    if not isinstance(doc, dict) or "payload" not in doc:
        raise record.fail(
            "value.converter.schemas.enable=true but the value is not a "
            '{"schema": ..., "payload": ...} envelope'
        )
    return doc["payload"]


def text_or_base64(data: bytes | None) -> Any:
    """Bytes as JSON: UTF-8 text when they decode, else ``{"base64": ...}`` (nothing lost)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def encoder_for(config: SinkConfig) -> RecordEncoder:
    """The encoder of a sink config (``format.class``, its envelope and payload settings)."""
    if config.format == "avro":
        return AvroDatumEncoder()
    if config.format == "json" and config.decodes_values:
        return ConnectJsonEncoder(
            decimal_format=config.json_decimal_format, envelope=config.json_envelope
        )
    if config.format == "json":
        if config.json_envelope:
            return JsonEnvelopeEncoder(unwrap_payload=config.unwrap_payload)
        return JsonValueEncoder(unwrap_payload=config.unwrap_payload)
    if config.format == "bytearray":
        length_prefixed = config.bytearray_framing == "length-prefixed"
        return ByteArrayEncoder(None if length_prefixed else config.separator)
    raise AssertionError(f"format {config.format!r} passed validation but has no encoder")


__all__ = [
    "AvroDatumEncoder",
    "ByteArrayEncoder",
    "ConnectJsonEncoder",
    "JsonEnvelopeEncoder",
    "JsonValueEncoder",
    "RecordEncoder",
    "encoder_for",
    "parse_json",
]
