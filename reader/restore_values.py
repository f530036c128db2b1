"""What a replay sends as each value: the bytes the topic held, or a refusal that says why not.

A block-GZIP or bytearray archive keeps each value's bytes, and they go back as they are. An
Avro archive (``AvroFormat``) keeps decoded values, one writer schema per object: what the topic
held were those values in Confluent's wire format (magic byte 0, the schema's registry id, the
Avro binary), which only a schema registry can give an id to. So :class:`AvroToWire` registers
each object's writer schema's id and frames the values with it. The writer schema of an object
is the producer's, plus the ``connect.name`` the export adds as Confluent's AvroData does
(``connect.meta.data``), so the schema is looked up with and without it, under the target
topic's value subject and the archived topic's (Confluent's default ``TopicNameStrategy``): the
registry the archive came from knows it, and answers with the id the records were produced
with, so the bytes are the ones produced. A registry that knows neither gets the schema as the
producer had it registered under the target's subject, and its consumers resolve the new id.
Without a registry an Avro archive is refused in one line (:func:`check_restorable`), never sent
as JSON text.

Keys kept as Avro (Avro ``.keys`` files) are refused the same way: this blockgz does not
re-encode them yet.

>>> from blockgz.format.decode import Record
>>> plain_values([Record(0, b"a"), Record(1, None)])
[b'a', None]
"""

from __future__ import annotations

import bisect
import io
import json
from collections.abc import Iterable
from typing import Any

from blockgz.archive.object_ref import ObjectRef
from blockgz.errors import ConfigError
from blockgz.format.decode import Record
from blockgz.registry import RegistrySettings, schema_texts_from
from blockgz.wire import wire_value


def plain_values(block: list[Record]) -> list[bytes | None]:
    """The values of a block whose values are the topic's bytes."""
    return [r.value for r in block]


def avro_partitions(archive: Any, topic: str, partitions: Iterable[int]) -> list[int]:
    """The partitions of ``topic`` with Avro objects in the archive."""
    return [p for p in partitions if any(r.is_avro for r in archive.objects(topic, p))]


def check_restorable(
    archive: Any, topic: str, partitions: Iterable[int], registry: RegistrySettings | None
) -> bool:
    """Whether values must be re-encoded (an Avro archive); a :class:`ConfigError` in one line
    when they would have to be but no registry is given."""
    avro = avro_partitions(archive, topic, partitions)
    if avro and registry is None:
        raise ConfigError(
            f"{topic!r} is archived as Avro (partitions {avro[:5]}{'...' if len(avro) > 5 else ''}"
            "): its values go back to Kafka in Confluent's wire format, which needs a schema "
            "registry for the ids: pass --schema-registry-url (the target cluster's registry)"
        )
    return bool(avro)


def check_key(record: Record, topic: str) -> None:
    """Refuse a key this blockgz cannot send back as the topic held it (an Avro key)."""
    if record.key is not None and not isinstance(record.key, bytes | bytearray):
        raise ConfigError(
            f"{topic!r} kept its keys as Avro (an Avro .keys file, offset {record.offset}): "
            "sending them back in Confluent's wire format is not supported yet, and sending "
            "anything else would change the records (keys.format.class=bytearray keeps their "
            "bytes)"
        )


class AvroToWire:
    """Avro values of an archived topic, back in Confluent's wire format with ids from
    ``registry``, registered under ``subject``."""

    def __init__(self, archive: Any, topic: str, registry: RegistrySettings, to_topic: str):
        import fastavro

        self.archive = archive
        self.topic = topic
        self.subjects = [f"{to_topic}-value", f"{topic}-value"]
        self.texts = schema_texts_from(registry)
        self._parse = fastavro.parse_schema
        self._write = fastavro.schemaless_writer
        self._refs: dict[int, list[ObjectRef]] = {}
        self._by_object: dict[str, tuple[int, Any]] = {}

    def __call__(self, partition: int, block: list[Record]) -> list[bytes | None]:
        schema_id, parsed = self._schema_of(self._object_of(partition, block[0].offset))
        out: list[bytes | None] = []
        write = self._write
        for record in block:
            if record.value is None:  # a tombstone stays one
                out.append(None)
                continue
            buffer = io.BytesIO()
            write(buffer, parsed, record.value)
            out.append(wire_value(schema_id, buffer.getvalue()))
        return out

    def _id_of(self, text: str) -> int:
        """The registry id of an archived writer schema (see the module's notes)."""
        candidates = [text]
        doc = json.loads(text)
        if isinstance(doc, dict) and doc.get("connect.name") == _full_name(doc):
            producers = {k: v for k, v in doc.items() if k != "connect.name"}
            candidates.insert(0, json.dumps(producers))
        for subject in self.subjects:
            for candidate in candidates:
                found = self.texts.lookup(subject, candidate)
                if found is not None:
                    return found
        return self.texts.register(self.subjects[0], candidates[0])

    def _object_of(self, partition: int, offset: int) -> ObjectRef:
        refs = self._refs.get(partition)
        if refs is None:
            values = [r for r in self.archive.objects(self.topic, partition) if r.role == "value"]
            refs = self._refs[partition] = sorted(values, key=lambda r: r.start_offset)
        at = bisect.bisect_right([r.start_offset for r in refs], offset) - 1
        if at < 0 or not refs[at].is_avro:
            raise ConfigError(
                f"{self.topic}/{partition}@{offset}: not in an Avro object, but the topic's other "
                "objects are Avro; replay the partitions of each format separately"
            )
        return refs[at]

    def _schema_of(self, ref: ObjectRef) -> tuple[int, Any]:
        found = self._by_object.get(ref.key)
        if found is None:
            text = self.archive.avro_schema(ref)
            found = (self._id_of(text), self._parse(json.loads(text)))
            self._by_object[ref.key] = found
        return found


def _full_name(doc: dict[str, Any]) -> str:
    """The full name of a named Avro type.

    >>> _full_name({"name": "Event", "namespace": "com.example"}), _full_name({"name": "a.B"})
    ('com.example.Event', 'a.B')
    """
    name = str(doc.get("name", ""))
    namespace = doc.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"
