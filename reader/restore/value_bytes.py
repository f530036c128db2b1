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

Keys kept in Avro ``.keys`` files go back the same way, under the key subjects
(``<topic>-key``), with the key's schema (the file's is ``["null", <key schema>]``). Entries
whose schema is plain ``bytes`` or ``string`` were not Avro in Kafka (the ByteArray and String
converters, or no key converter): they go back as those bytes, or that text's UTF-8.

>>> from blockgz.blocks.decode import Record
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
from blockgz.blocks.decode import Record
from blockgz.errors import ConfigError
from blockgz.registry import RegistrySettings, schema_texts_from
from blockgz.wire import wire_value


def plain_values(block: list[Record]) -> list[bytes | None]:
    """The values of a block whose values are the topic's bytes."""
    return [r.value for r in block]


#: Schemas of entries that were not Avro in Kafka: the ByteArrayConverter's ``bytes`` (the
#: bytes as they were) and the StringConverter's ``string`` (its UTF-8). Where the export
#: recorded the AvroConverter (:mod:`blockgz.reader.restore.origins`), such entries get an id
#: too; in archives written before it recorded converters they come back as those bytes.
PLAIN: dict[str, Any] = {"bytes": bytes, "string": lambda text: text.encode()}


class AvroToWire:
    """Avro values of an archived topic, back in Confluent's wire format with ids from
    ``registry``, registered under ``subject``."""

    def __init__(self, archive: Any, topic: str, registry: RegistrySettings, to_topic: str):
        import fastavro

        self.archive = archive
        self.topic = topic
        self.subjects = {
            role: [f"{to_topic}-{suffix}", f"{topic}-{suffix}"]
            for role, suffix in (("value", "value"), ("keys", "key"))
        }
        self.texts = schema_texts_from(registry)
        self._parse = fastavro.parse_schema
        self._write = fastavro.schemaless_writer
        self._refs: dict[int, list[ObjectRef]] = {}  # per partition, by start offset
        self._starts: dict[int, list[int]] = {}
        self._by_object: dict[tuple[str, bool], tuple[int, Any]] = {}

    def __call__(
        self, partition: int, block: list[Record], *, avro: bool = False
    ) -> list[bytes | None]:
        """The values of ``block`` in Confluent's wire format (a tombstone stays ``None``);
        ``avro``: they were Avro in Kafka whatever their schema (the export recorded the
        AvroConverter), so a ``string`` or ``bytes`` schema gets an id too."""
        return self._encoded("value", partition, block, [r.value for r in block], avro)

    def keys(
        self, partition: int, block: list[Record], *, avro: bool = False
    ) -> list[bytes | None]:
        """The keys of ``block`` in Confluent's wire format (a null key stays ``None``)."""
        return self._encoded("keys", partition, block, [r.key for r in block], avro)

    def _encoded(
        self, role: str, partition: int, block: list[Record], data: list[Any], avro: bool = False
    ) -> list[bytes | None]:
        ref = self._object_of(role, partition, block[0].offset)
        schema_id, parsed = self._schema_of(role, ref, plain_ok=not avro)
        if (
            isinstance(parsed, str) and parsed in PLAIN
        ):  # ByteArrayConverter / StringConverter: no registry was involved
            return [None if d is None else PLAIN[parsed](d) for d in data]
        out: list[bytes | None] = []
        write = self._write
        for datum in data:
            if datum is None:
                out.append(None)
                continue
            buffer = io.BytesIO()
            write(buffer, parsed, datum)
            out.append(wire_value(schema_id, buffer.getvalue()))
        return out

    def _id_of(self, role: str, text: str) -> int:
        """The registry id of an archived writer schema (see the module's notes)."""
        candidates = [text]
        doc = json.loads(text)
        if isinstance(doc, dict) and doc.get("connect.name") == _full_name(doc):
            producers = {k: v for k, v in doc.items() if k != "connect.name"}
            candidates.insert(0, json.dumps(producers))
        for subject in self.subjects[role]:
            for candidate in candidates:
                found = self.texts.lookup(subject, candidate)
                if found is not None:
                    return found
        return self.texts.register(self.subjects[role][0], candidates[0])

    def _object_of(self, role: str, partition: int, offset: int) -> ObjectRef:
        """The ``role`` object holding ``offset``: a value object, or the ``.keys`` file beside
        it."""
        refs = self._refs.get(partition)
        if refs is None:
            mine = [r for r in self.archive.objects(self.topic, partition) if r.role == "value"]
            refs = self._refs[partition] = sorted(mine, key=lambda r: r.start_offset)
            self._starts[partition] = [r.start_offset for r in refs]
        at = bisect.bisect_right(self._starts[partition], offset) - 1
        found = None if at < 0 else refs[at]
        if found is not None and role != "value":
            found = next((c for c in found.companions if c.role == role), None)
        if found is None or not _avro(found):
            raise ConfigError(
                f"{self.topic}/{partition}@{offset}: its {role} are not in an Avro object, but "
                "other objects of the topic are Avro; replay the partitions of each format apart"
            )
        return found

    def _schema_of(self, role: str, ref: ObjectRef, *, plain_ok: bool = True) -> tuple[int, Any]:
        cache = (ref.key, plain_ok)
        found = self._by_object.get(cache)
        if found is None:
            doc = json.loads(self.archive.avro_schema(ref))
            if role == "keys":  # a .keys file holds ["null", <the key's schema>]
                doc = next(b for b in doc if b != "null") if isinstance(doc, list) else doc
            if plain_ok and isinstance(doc, str) and doc in PLAIN:  # bytes or text: no id
                found = (-1, doc)
                self._by_object[cache] = found
                return found
            text = json.dumps(doc)
            # A primitive parses to its name: wrapped, so it is not taken for a plain entry.
            parsed = self._parse(doc) if isinstance(doc, (dict, list)) else {"type": doc}
            found = (self._id_of(role, text), parsed)
            self._by_object[cache] = found
        return found


def _avro(ref: ObjectRef) -> bool:
    """Whether ``ref`` (a value object or a ``.keys`` file) is an Avro container file: of a
    format that compresses inside, as :attr:`ObjectRef.is_avro` asks of value objects."""
    from blockgz.formats.by_name import format_of_extension

    fmt = format_of_extension(ref.extension, ref.bytearray_extension)
    return fmt is not None and fmt.compresses_inside and not fmt.indexes_itself


def _full_name(doc: dict[str, Any]) -> str:
    """The full name of a named Avro type.

    >>> _full_name({"name": "Event", "namespace": "com.example"}), _full_name({"name": "a.B"})
    ('com.example.Event', 'a.B')
    """
    name = str(doc.get("name", ""))
    namespace = doc.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


class KafkaBytes:
    """What a replay sends as the values and keys of an archived topic: per block, the bytes
    Kafka held, from each file's recorded converter (:mod:`blockgz.reader.restore.origins`),
    with the Avro entries through :class:`AvroToWire`. Made by :meth:`check`, which refuses in
    one line, before anything is sent, an archive whose entries cannot be given back."""

    def __init__(self, origins: dict[int, list[tuple[int, str, str]]], wire: AvroToWire | None):
        #: Per partition, ``(start offset, value origin, keys origin)`` of each value object.
        self.origins = origins
        self._starts = {p: [start for start, _, _ in found] for p, found in origins.items()}
        self.wire = wire

    @classmethod
    def check(
        cls,
        archive: Any,
        topic: str,
        partitions: Iterable[int],
        registry: RegistrySettings | None,
        to_topic: str,
    ) -> KafkaBytes:
        """The values' and keys' origins of ``partitions``; a :class:`ConfigError` in one line
        when some cannot be restored, or need a registry and none is given."""
        from blockgz.reader.restore.origins import REFUSE, origin_of

        origins: dict[int, list[tuple[int, str, str]]] = {}
        needs_registry: dict[str, list[int]] = {}
        for partition in partitions:
            found = []
            labels = recorded_converters(archive, topic, partition)
            for ref in archive.objects(topic, partition):
                keys_ref = next((c for c in ref.companions if c.role == "keys"), None)
                value = origin_of(ref.format, labels.get(ref.key), "value")
                key = "raw" if keys_ref is None else origin_of(
                    keys_ref.format, labels.get(keys_ref.key), "keys"
                )  # fmt: skip
                for role, origin in (("value", value), ("keys", key)):
                    if origin.startswith(REFUSE):
                        raise ConfigError(
                            f"{topic}/{partition}: cannot restore the bytes Kafka held: "
                            f"{origin[len(REFUSE) :]}"
                        )
                    if origin in ("avro", "registry-or-plain"):
                        needs_registry.setdefault(role, []).append(partition)
                found.append((ref.start_offset, value, key))
            origins[partition] = found
        if needs_registry and registry is None:
            roles = sorted(needs_registry)
            what = " and ".join("values" if r == "value" else "keys" for r in roles)
            some = sorted({p for ps in needs_registry.values() for p in ps})
            raise ConfigError(
                f"{topic!r} kept its {what} as Avro (partitions {some[:5]}"
                f"{'...' if len(some) > 5 else ''}): they go back to Kafka in Confluent's wire "
                "format, which needs a schema registry for the ids: pass --schema-registry-url "
                "(the target cluster's registry)"
            )
        wire = None
        if needs_registry:
            assert registry is not None
            wire = AvroToWire(archive, topic, registry, to_topic)
        return cls(origins, wire)

    @property
    def avro_keys(self) -> bool:
        """Whether some keys go back through the registry (their bytes depend on its ids)."""
        return any(k in ("avro", "registry-or-plain") for f in self.origins.values() for *_, k in f)

    def values(self, partition: int, block: list[Record]) -> list[bytes | None] | None:
        """The values of ``block`` as Kafka held them; ``None``: the records' own."""
        return self._converted(partition, block, 1)

    def keys(self, partition: int, block: list[Record]) -> list[bytes | None] | None:
        """The keys of ``block`` as Kafka held them; ``None``: the records' own."""
        return self._converted(partition, block, 2)

    def _converted(self, partition: int, block: list[Record], which: int) -> Any:
        from blockgz.reader.restore.origins import converter_of

        if not block:
            return None
        found = self.origins.get(partition)
        if not found:
            return None
        at = max(bisect.bisect_right(self._starts[partition], block[0].offset) - 1, 0)
        origin = found[at][1] if which == 1 else found[at][2]
        if origin in ("avro", "registry-or-plain"):
            assert self.wire is not None
            encode = self.wire if which == 1 else self.wire.keys
            return encode(partition, block, avro=origin == "avro")
        convert = converter_of(origin)
        if convert is None:
            return None
        return [convert(r.value if which == 1 else r.key) for r in block]


def recorded_converters(archive: Any, topic: str, partition: int) -> dict[str, str]:
    """Object key -> the converter its manifest entry recorded, for the partition's value
    objects and their companions; empty where no export's catalog knows the partition."""
    refs = archive.objects(topic, partition)
    if not any(r.converter for r in refs):
        source = archive.locator.catalog_source()
        if source is None or not source.has(topic, partition):
            return {}
        refs = source.refs(topic, partition)
    return {
        r.key: r.converter
        for ref in refs
        for r in (ref, *ref.companions)
        if r.converter is not None
    }
