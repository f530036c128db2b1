"""Connect's transforms in the write task: a Kafka row becomes a Connect record, runs through
the configured chain (:mod:`blockgz.sink.transforms`), and comes back as a record the writer
takes — after the value converter, before the conversion checks and the partitioner, as in
Connect (converter → transforms → the connector's ``put``).

* A value with a schema (Avro, JsonConverter with schemas, String/ByteArray converters) is a
  Connect struct or primitive; one without (plain JSON, JsonConverter without schemas) a map or
  list; with no converter and a bytearray format, ``bytes``.
* Keys are decoded by ``key.converter`` when one is set (else they are the record's bytes); a
  key the chain leaves alone is written as it came, one it replaces as UTF-8 text (a string),
  its bytes, or JSON (anything else). Header values are bytes; a header a transform adds is
  written the same way.
* A router's topic is the topic of the objects, their keys and manifest entries; the offsets
  committed stay those of the topic-partition read.
* A chain that compiles for the topic (:meth:`Chain.fused
  <blockgz.sink.transforms.chain.Chain.fused>`) runs on schemaless map values without Connect
  records: per record in :meth:`RecordTransformer.apply`, and over a whole batch of plain JSON
  values in :meth:`RecordTransformer.transform_json_values` (the write task's batch path). Both
  give the bytes the chain's records give; a value they cannot take goes through the chain.

>>> from blockgz.sink.write.config import SinkSettings
>>> cfg = SinkSettings.from_options({"path": "/tmp/x", "transforms": "r",
...     "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
...     "transforms.r.regex": "a", "transforms.r.replacement": "b"})
>>> out = RecordTransformer.of(cfg).apply(KafkaRecord("a", 0, 5, 0, None, b'{"x": 1}'))
>>> out.topic, out.offset, out.value, out.json()  # the value untouched: its bytes as they came
('b', 5, b'{"x": 1}', {'x': 1})
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from blockgz.errors import BadRecordError
from blockgz.sink.records import KafkaRecord
from blockgz.sink.transforms import Chain, Header, Record, build_chain
from blockgz.sink.transforms.connect.avro_bridge import avro_value, connect_schema, connect_value
from blockgz.sink.transforms.fused import FusedPlan, run_all

#: Values parsed and serialised at a time by :meth:`RecordTransformer.transform_json_values`
#: (a few hundred KiB, so the maps made for one chunk are freed before the next).
_CHUNK = 1024

if TYPE_CHECKING:
    from blockgz.sink.write.config import SinkSettings


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

    def __init__(self, chain: Chain, config: SinkSettings):
        self.chain = chain
        self.converter = config.value_converter.build() if config.decodes_values else None
        self.raw_bytes = self.converter is None and config.format_for().stores_value_bytes
        self.key_converter = config.key_converter.build()
        self._schemas: dict[str, dict[str, Any]] = {}

    @classmethod
    def of(cls, config: SinkSettings) -> RecordTransformer | None:
        """The transformer of ``config`` (``None`` without ``transforms``)."""
        chain = build_chain(config.transforms)
        return cls(chain, config) if chain else None

    @property
    def json_values(self) -> bool:
        """Whether values are plain JSON parsed by the sink (no converter, not raw bytes) and
        keys are not decoded: then whole batches may go through a fused chain
        (:meth:`transform_json_values`)."""
        return self.converter is None and not self.raw_bytes and self.key_converter is None

    def transform_json_values(
        self, plan: FusedPlan, values: list[bytes], batch: Any
    ) -> list[bytes] | None:
        """The JSON ``values`` of an Arrow ``batch`` of one topic-partition's records (none
        null) through ``plan``, serialised as :meth:`apply` writes them; ``None`` when one of
        them cannot take the fused way (not JSON, not a map, a transform rejects it): the
        caller then runs the records through :meth:`apply`, which says why."""
        if not plan.kernels:
            return values
        count = len(values)
        partition = batch.column("partition")[0].as_py()
        offsets: Sequence[int | None]
        stamps: Sequence[int | None]
        offsets = stamps = [None] * count
        if plan.uses_record:
            offsets, stamps = _offsets_and_stamps(batch)
        kernels, serialise = plan.serialising()  # parsed values need no ``default``
        loads = orjson.loads
        out: list[bytes] = []
        try:
            for start in range(0, count, _CHUNK):
                stop = start + _CHUNK
                parsed = list(map(loads, values[start:stop]))
                done = run_all(kernels, parsed, partition, offsets[start:stop], stamps[start:stop])
                out.extend(serialise(done))
        except (BadRecordError, TypeError, ValueError):
            return None
        return out

    def apply(self, record: KafkaRecord) -> KafkaRecord | None:
        """The transformed record, or ``None`` when the chain drops it; a record that cannot
        be decoded or that a transform rejects raises :class:`StageError`."""
        if record.value is not None and (record.key is None or self.key_converter is None):
            plan = self.chain.fused(record.topic)
            if plan is not None and plan.kernels:
                decoded = self._value_of(record)
                fused = self._apply_fused(plan, record, decoded)
                if fused is not None:
                    return fused
                return self._apply(record, self.to_connect(record, decoded))
        return self._apply(record, self.to_connect(record))

    def _apply_fused(
        self, plan: FusedPlan, record: KafkaRecord, decoded: tuple[Any, Any]
    ) -> TransformedRecord | None:
        """:meth:`apply` of a schemaless map value through a fused chain (as
        :meth:`from_connect` writes it), or ``None`` when it cannot go that way."""
        schema, value = decoded
        if schema is not None or type(value) is not dict:
            return None
        try:
            datum = plan.run(dict(value), record.partition, record.offset, record.timestamp_ms)
            data = orjson.dumps(datum, default=_json_default)
        except (BadRecordError, TypeError, ValueError):
            return None  # the chain names the transform, or from_connect what is wrong
        headers = record.headers
        out = TransformedRecord(
            plan.topic,
            record.partition,
            record.offset,
            record.timestamp_ms,
            record.key,
            data,
            None if headers is None else [(k, _as_bytes(v)) for k, v in headers],
            timestamp_type=record.timestamp_type,
        )
        out.set_decoded(None, datum)
        return out

    def _apply(self, record: KafkaRecord, before: Record) -> KafkaRecord | None:
        """:meth:`apply` through the chain's records."""
        try:
            after = self.chain.apply(before)
        except BadRecordError as exc:
            raise StageError(str(exc), "TRANSFORMATION", record) from None
        if after is None:
            return None
        try:
            return self.from_connect(record, after, before)
        except (TypeError, ValueError) as exc:
            raise StageError(
                f"the transformed record cannot be written ({exc})", "TRANSFORMATION", record
            ) from None

    def to_connect(self, record: KafkaRecord, decoded: tuple[Any, Any] | None = None) -> Record:
        """The Connect record of a Kafka row (the value decoded by the value converter, or
        ``decoded``: what :meth:`_value_of` gave already)."""
        schema, value = self._value_of(record) if decoded is None else decoded
        key_schema, key = self._key_of(record)
        headers = tuple(Header(k, v) for k, v in record.headers or ())
        return Record(
            record.topic,
            record.partition,
            key,
            key_schema,
            value,
            schema,
            record.timestamp_ms,
            headers,
            record.offset,
        )

    def _key_of(self, record: KafkaRecord) -> tuple[Any, Any]:
        """The key as ``key.converter`` decodes it (its bytes without one)."""
        if record.key is None or self.key_converter is None:
            return None, record.key
        key = KafkaRecord(record.topic, record.partition, record.offset, None, None, record.key)
        try:
            self.key_converter.decode(key)
        except BadRecordError as exc:
            message = str(exc).replace("value", "key", 1)
            raise StageError(message, "KEY_CONVERTER", record) from None
        return self._connect_of(key.schema, key.json())

    def _connect_of(self, schema: Any, datum: Any) -> tuple[Any, Any]:
        """A decoded datum and its sink schema as a Connect schema and value."""
        if schema is None:
            return None, datum
        found = self._schemas.get(schema.key)
        if found is None:
            found = self._schemas[schema.key] = connect_schema(schema.json)
        return found, connect_value(schema.json, datum)

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
        return self._connect_of(record.schema, record.json())

    def from_connect(
        self, original: KafkaRecord, record: Record, before: Record | None = None
    ) -> TransformedRecord:
        """The Kafka record the writer takes for a transformed Connect record. ``before`` is
        the record the chain was given: a key or value it did not replace keeps its original
        bytes (and decoded value), so a chain that only routes writes what no chain writes."""
        before_key = original.key if before is None else before.key
        same_value = (
            before is not None
            and record.value is before.value
            and record.value_schema is before.value_schema
        )
        value: Any = None
        value_schema = datum = None
        if same_value and record.value is not None:
            value = original.value
            if not self.raw_bytes:
                value_schema, datum = original.schema, original.json()
        elif record.value is not None:
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
            original.key if record.key is before_key else _as_bytes(record.key),
            value,
            _headers(original, record),
            timestamp_type=original.timestamp_type,
        )
        if record.value is not None and not self.raw_bytes:
            out.set_decoded(value_schema, datum)
        return out


def _offsets_and_stamps(batch: Any) -> tuple[list[int], list[int | None]]:
    """An Arrow batch's offsets and timestamps (epoch ms, ``None`` where there is none), as
    :func:`~blockgz.sink.write.task.records_of` reads them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = batch.column("offset").to_pylist()
    if "timestamp" not in batch.schema.names:
        return offsets, [None] * len(offsets)
    micros = pc.cast(batch.column("timestamp"), pa.int64()).to_pylist()
    return offsets, [None if t is None else t // 1000 for t in micros]


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
