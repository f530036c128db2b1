"""Connect's transforms in the write task: a Kafka row becomes a Connect record, runs through
the configured chain (:mod:`blockgz.sink.transforms`), and comes back as a record the writer
takes — after the value converter, before the conversion checks and the partitioner, as in
Connect (converter → transforms → the connector's ``put``).

* A value with a schema (Avro, JsonConverter with schemas, String/ByteArray converters) is a
  Connect struct or primitive; one without (plain JSON, JsonConverter without schemas) a map or
  list; with no converter and a bytearray format, ``bytes``.
* Keys are the record's bytes; a key a transform replaces is written as UTF-8 text (a string)
  or JSON (anything else). Header values are bytes; a header a transform adds is written the
  same way.
* A router's topic is the topic of the objects, their keys and manifest entries; the offsets
  committed stay those of the topic-partition read.

>>> from blockgz.sink.write.config import SinkConfig
>>> cfg = SinkConfig.from_options({"path": "/tmp/x", "transforms": "r",
...     "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
...     "transforms.r.regex": "a", "transforms.r.replacement": "b"})
>>> out = RecordTransformer.of(cfg).apply(KafkaRecord("a", 0, 5, 0, None, b'{"x": 1}'))
>>> out.topic, out.offset, out.value, out.json()
('b', 5, b'{"x":1}', {'x': 1})
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from blockgz.errors import BadRecordError
from blockgz.sink.records import KafkaRecord
from blockgz.sink.transforms import Chain, Header, Record, build_chain
from blockgz.sink.transforms.avro_bridge import avro_value, connect_schema, connect_value

if TYPE_CHECKING:
    from blockgz.sink.write.config import SinkConfig


@dataclass(slots=True)
class TransformedRecord(KafkaRecord):
    """A record a chain returned: its value is decoded already (the writer does not again)."""


class StageError(BadRecordError):
    """A bad record with Connect's name of the stage it failed in (for the dead-letter queue)."""

    def __init__(self, message: str, stage: str, record: KafkaRecord):
        super().__init__(
            message, topic=record.topic, partition=record.partition, offset=record.offset
        )
        self.stage = stage


class RecordTransformer:
    """Runs a sink config's chain on :class:`KafkaRecord` objects."""

    def __init__(self, chain: Chain, config: SinkConfig):
        self.chain = chain
        self.converter = config.value_converter.build() if config.decodes_values else None
        self.raw_bytes = self.converter is None and config.format_for().stores_value_bytes
        self._schemas: dict[str, dict[str, Any]] = {}

    @classmethod
    def of(cls, config: SinkConfig) -> RecordTransformer | None:
        """The transformer of ``config`` (``None`` without ``transforms``)."""
        chain = build_chain(config.transforms)
        return cls(chain, config) if chain else None

    def apply(self, record: KafkaRecord) -> KafkaRecord | None:
        """The transformed record, or ``None`` when the chain drops it; a record that cannot
        be decoded or that a transform rejects raises :class:`StageError`."""
        before = self.to_connect(record)
        try:
            after = self.chain.apply(before)
        except BadRecordError as exc:
            raise StageError(str(exc), "TRANSFORMATION", record) from None
        if after is None:
            return None
        try:
            return self.from_connect(record, after)
        except (TypeError, ValueError) as exc:
            raise StageError(
                f"the transformed record cannot be written ({exc})", "TRANSFORMATION", record
            ) from None

    def to_connect(self, record: KafkaRecord) -> Record:
        """The Connect record of a Kafka row (the value decoded by the value converter)."""
        schema, value = self._value_of(record)
        headers = tuple(Header(k, v) for k, v in record.headers or ())
        return Record(
            record.topic,
            record.partition,
            record.key,
            None,
            value,
            schema,
            record.timestamp_ms,
            headers,
            record.offset,
        )

    def _value_of(self, record: KafkaRecord) -> tuple[Any, Any]:
        if record.value is None:
            return None, None
        if self.raw_bytes:
            return None, bytes(record.value)
        if self.converter is not None:
            try:
                self.converter.decode(record)
            except BadRecordError as exc:
                raise StageError(str(exc), "VALUE_CONVERTER", record) from None
        datum = record.json()
        if record.schema is None:
            return None, datum
        schema = self._schemas.get(record.schema.key)
        if schema is None:
            schema = self._schemas[record.schema.key] = connect_schema(record.schema.json)
        return schema, connect_value(record.schema.json, datum)

    def from_connect(self, original: KafkaRecord, record: Record) -> TransformedRecord:
        """The Kafka record the writer takes for a transformed Connect record."""
        value: Any = None
        value_schema = datum = None
        if record.value is not None:
            if record.value_schema is not None:
                value_schema, datum = avro_value(record.value_schema, record.value)
                value = original.value if original.value is not None else b""
            elif isinstance(record.value, (bytes, bytearray)) and self.raw_bytes:
                value = datum = bytes(record.value)
            else:
                datum = record.value
                value = orjson.dumps(datum, default=_json_default)
        out = TransformedRecord(
            record.topic,
            original.partition if record.partition is None else record.partition,
            original.offset,
            record.timestamp,
            _as_bytes(record.key),
            value,
            _headers(original, record),
            timestamp_type=original.timestamp_type,
        )
        if record.value is not None and not self.raw_bytes:
            out.set_decoded(value_schema, datum)
        return out


def _headers(original: KafkaRecord, record: Record) -> list[tuple[str, bytes | None]] | None:
    """The headers written: ``None`` when the row had none and the chain added none."""
    if not record.headers and original.headers is None:
        return None
    return [(h.key, _as_bytes(h.value)) for h in record.headers]


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        import base64

        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON")


def _as_bytes(value: Any) -> bytes | None:
    """A key or header value as the bytes written (text as UTF-8, anything else as JSON)."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bool):
        return b"true" if value else b"false"
    return orjson.dumps(value, default=_json_default)
