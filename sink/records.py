"""Kafka records as the sink sees them, and the exact Arrow schema of Spark's Kafka source.

Spark's Kafka source (and ours, :mod:`blockgz.sink.kafka.source`) produce rows with the columns
``key, value, topic, partition, offset, timestamp, timestampType`` and, with
``includeHeaders=true``, ``headers``. A Python data source must hand Spark Arrow batches
whose schema *equals* Spark's conversion of that schema, so it is spelled out here once.

    >>> r = KafkaRecord("t", 0, 42, 1_700_000_000_000, b"k", b'{"a": 1}')
    >>> r.json()
    {'a': 1}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from blockgz.errors import BadRecordError
from blockgz.kafka.columns import kafka_arrow_schema  # noqa: F401 - re-exported

#: Spark SQL DDL of the Kafka source's rows (what ``readStream.format("kafka")`` gives).
KAFKA_SCHEMA_DDL = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT"
)
KAFKA_HEADERS_DDL = "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"


def kafka_schema_ddl(include_headers: bool) -> str:
    """The DDL of the Kafka rows, with the ``headers`` column when asked for."""
    return KAFKA_SCHEMA_DDL + (", " + KAFKA_HEADERS_DDL if include_headers else "")


_UNPARSED: Any = object()


@dataclass(slots=True)
class KafkaRecord:
    """One Kafka record. ``timestamp_ms`` is epoch milliseconds (``None`` if unknown).

    :meth:`json` parses the value once, on first use, for partitioners and extractors that
    look inside it; a value that is not JSON raises :class:`BadRecordError` naming the record.
    A value converter (:mod:`blockgz.sink.convert`) decodes it instead with :meth:`set_decoded`, and
    then :meth:`json` gives the decoded value (an Avro record as a dict) and ``schema`` its
    :class:`~blockgz.sink.convert.schemas.ValueSchema`.
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None = None
    schema: Any = field(default=None, repr=False, compare=False)
    _parsed: Any = field(default=_UNPARSED, repr=False, compare=False)
    #: Kafka's timestamp type (``0`` CreateTime, ``1`` LogAppendTime; ``None``: not known).
    timestamp_type: int | None = field(default=None, repr=False, compare=False)

    def set_decoded(self, schema: Any, datum: Any) -> None:
        """Record what a converter made of the value: its schema (or ``None``) and data."""
        self.schema = schema
        self._parsed = datum

    def json(self) -> Any:
        """The value parsed as JSON (cached); ``None`` for a null value."""
        if self._parsed is _UNPARSED:
            if self.value is None:
                self._parsed = None
            else:
                self._parsed = parse_json(self.value, self)
        return self._parsed

    def fail(self, message: str) -> BadRecordError:
        """A :class:`BadRecordError` for this record (to ``raise``)."""
        return BadRecordError(
            message, topic=self.topic, partition=self.partition, offset=self.offset
        )


def parse_json(data: bytes, record: KafkaRecord | None = None) -> Any:
    """Parse JSON bytes with orjson (falling back to the stdlib), naming the record on failure."""
    try:
        import orjson

        return orjson.loads(data)
    except ImportError:  # pragma: no cover - orjson is in the [spark] extra
        import json

        try:
            return json.loads(data)
        except ValueError as exc:
            raise _not_json(data, exc, record) from exc
    except ValueError as exc:
        raise _not_json(data, exc, record) from exc


def _not_json(data: bytes, exc: Exception, record: KafkaRecord | None) -> BadRecordError:
    preview = bytes(data[:60])
    message = f"value is not valid JSON ({exc}); it starts with {preview!r}"
    if record is not None:
        return record.fail(message)
    return BadRecordError(message)
