"""Avro values in Confluent's wire format, decoded through the Schema Registry.

A topic produced with Confluent's ``KafkaAvroSerializer`` and archived with
``format.class=bytearray`` keeps each value as the producer sent it: magic byte ``0``, the
writer schema's registry id (4 bytes, big-endian), then the Avro binary. To read such values
into columns, each is decoded with its own writer schema (fetched once per id and process) and
resolved to one *reader* schema, the subject's newest version, so values written under older
compatible versions come back in today's shape (new fields get their defaults), as a consumer
with that schema would see them.

>>> import io, fastavro
>>> schema = {"type": "record", "name": "E", "fields": [{"name": "n", "type": "long"}]}
>>> out = io.BytesIO()
>>> fastavro.schemaless_writer(out, schema, {"n": 7})
>>> split_wire_value(b"\\x00\\x00\\x00\\x00\\x05" + out.getvalue(), where="t-0@3")
(5, b'\\x0e')
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

from blockgz.errors import BadRecordError, ConfigError
from blockgz.registry import RegistrySettings, schema_texts_from
from blockgz.wire import HEADER_BYTES, schema_id_of


def split_wire_value(value: bytes, *, where: str) -> tuple[int, bytes]:
    """``(schema id, Avro binary)`` of a value in Confluent's wire format
    (:mod:`blockgz.wire`)."""
    schema_id = schema_id_of(value)
    if schema_id is None:
        raise BadRecordError(
            f"{where}: the value is not in Confluent's Avro wire format (magic byte 0 and a "
            f"schema id); it starts {bytes(value[:8])!r}. Leave value.format=avro out to read "
            "the values as bytes"
        )
    return schema_id, bytes(value[HEADER_BYTES:])


class WireAvroValues:
    """Decodes wire-format values into ``reader_schema``'s shape. Pickles as its settings and
    reader schema: each executor fetches writer schemas itself, once per id and process."""

    def __init__(self, settings: RegistrySettings, reader_schema: str):
        self.settings = settings
        self.reader_schema = reader_schema
        self._reader: Any = None
        self._writers: dict[int, Any] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        return (WireAvroValues, (self.settings, self.reader_schema))

    @classmethod
    def for_subject(cls, settings: RegistrySettings, subject: str) -> WireAvroValues:
        """Values read in the shape of the newest schema registered under ``subject``."""
        _, text = schema_texts_from(settings).latest(subject)
        return cls(settings, text)

    def decode(self, value: bytes | None, *, where: str) -> Any:
        """The value as Python data in the reader schema's shape; ``None`` for a tombstone
        (a null value, or the empty record a bytearray export keeps for one)."""
        import fastavro
        from fastavro.read import SchemaResolutionError

        if not value:
            return None
        schema_id, body = split_wire_value(value, where=where)
        writer = self._writer(schema_id)
        try:
            return fastavro.schemaless_reader(io.BytesIO(body), writer, self._reader)
        except SchemaResolutionError as exc:
            raise BadRecordError(
                f"{where}: schema id {schema_id} cannot be read as the subject's newest "
                f"schema ({exc})"
            ) from exc
        except (EOFError, ValueError, IndexError, UnicodeDecodeError) as exc:
            raise BadRecordError(
                f"{where}: the value does not decode with schema id {schema_id} "
                f"({type(exc).__name__}: {exc})"
            ) from exc

    def _writer(self, schema_id: int) -> Any:
        import fastavro

        if self._reader is None:
            self._reader = fastavro.parse_schema(json.loads(self.reader_schema))
        found = self._writers.get(schema_id)
        if found is None:
            # Parsed apart from the reader schema: two versions define the same names.
            text = schema_texts_from(self.settings).get(schema_id)
            found = self._writers[schema_id] = fastavro.parse_schema(json.loads(text))
        return found


def wire_subject(options: Mapping[str, str], topics: list[str]) -> str:
    """The subject whose newest schema shapes the values: ``value.subject``, else
    ``<topic>-value`` of the one topic read (Confluent's ``TopicNameStrategy``)."""
    subject = (options.get("value.subject") or "").strip()
    if subject:
        return subject
    if len(topics) == 1:
        return f"{topics[0]}-value"
    raise ConfigError(
        "value.format=avro with a schema registry needs the subject whose newest schema shapes "
        f"the values: set value.subject, or topics to one topic (found {len(topics)}: "
        f"{', '.join(topics[:5]) or 'none'}; its subject would be <topic>-value)"
    )
