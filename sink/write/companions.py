"""The ``.keys`` and ``.headers`` files beside a value file (``store.kafka.keys/headers``).

As Confluent names them: a value file ``t+0+0000000042.json.gz`` gets
``t+0+0000000042.keys.<ext>`` and ``t+0+0000000042.headers.<ext>`` (the format's extension,
compressed as the value file is; Avro compresses inside), with one entry per value record in
the same order. They open, rotate and close with their value file, and are committed before the
batch manifest like it. An entry is encoded *before* its value is written, so a key that cannot
be written fails (or is dead-lettered) without leaving the files out of step.

Entries by format:

* keys, Avro: ``["null", <key schema>]``; the key schema is the key converter's (an Avro key's
  registry schema, ``string``, ``bytes``), ``bytes`` without one. A key whose schema differs from
  the file's starts new files (as Confluent rotates on a key schema change).
* keys, JSON: the decoded key as Connect's JSON; raw keys as text, or ``{"base64": ...}``.
* keys, bytearray: the raw bytes, framed as the value file; a null key cannot be written.
* headers, Avro: ``{"type": "array", "items": Header}`` with ``Header = {key: string,
  value: ["null", bytes]}`` (no headers: an empty array); headers, JSON:
  ``[{"key": ..., "value": text or {"base64"}}]`` or ``null``.

>>> import tempfile
>>> from blockgz.store import LocalStore
>>> from sink.records import KafkaRecord
>>> from sink.write.config import SinkConfig
>>> cfg = SinkConfig.from_options({"path": tempfile.mkdtemp(), "store.kafka.keys": "true",
...                                "keys.format.class": "json"})
>>> files = Companions.open(cfg, cfg.make_store()[0], "t/t+0+0000000000.json", "t", 0, "p")
>>> record = KafkaRecord("t", 0, 0, 0, b"user-1", b"{}")
>>> files.write(files.encode(record), 0)
>>> [(f.key, f.role, f.records) for f in files.close()]
[('t/t+0+0000000000.keys.json', 'keys', 1)]
"""

from __future__ import annotations

from typing import Any

import orjson

from blockgz.archive.manifests import WrittenFile
from blockgz.format.framing import NEWLINE
from blockgz.store.base import ObjectStore
from sink.convert.connect_json import render_json
from sink.convert.schemas import BYTES_SCHEMA, ValueSchema
from sink.records import KafkaRecord
from sink.write import arrow_entries
from sink.write.config import SinkConfig
from sink.write.encoders import text_or_base64

HEADER_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "record",
        "name": "Header",
        "namespace": "io.blockgz",
        "fields": [
            {"name": "key", "type": "string"},
            {"name": "value", "type": ["null", "bytes"]},
        ],
    },
}
#: Not nullable: Kafka does not tell "no headers" from an empty list, and a union around the
#: array costs fastavro twice the time of the array itself.
HEADERS_SCHEMA = ValueSchema.from_json(HEADER_SCHEMA)


def companion_key(value_key: str, value_extension: str, role: str, extension: str) -> str:
    """``…+0000000042.json.gz`` -> ``…+0000000042.keys.<extension>``.

    >>> companion_key("t/t+0+0000000042.json.gz", ".json.gz", "keys", ".avro")
    't/t+0+0000000042.keys.avro'
    """
    return value_key[: len(value_key) - len(value_extension)] + f".{role}{extension}"


class Companions:
    """The keys and/or headers files of one value file."""

    def __init__(self, config: SinkConfig, writers: dict[str, Any], key_converter=None):
        self.config = config
        self.writers = writers
        self.key_converter = key_converter
        #: The last record's decoded key: accepts() and encode() ask for the same record.
        self._decoded: tuple[KafkaRecord, tuple[ValueSchema, Any]] | None = None

    @classmethod
    def open(
        cls,
        config: SinkConfig,
        store: ObjectStore,
        value_key: str,
        topic: str,
        partition: int,
        encoded: str,
        *,
        first: KafkaRecord | None = None,
        key_converter=None,
    ) -> Companions:
        """The companions a value file at ``value_key`` needs (none: an empty set);
        an Avro keys file takes the schema of the ``first`` record's key."""
        decoded = None
        if first is not None and config.store_keys:
            decoded = (first, decode_key(key_converter, first))
        key_schema = decoded[1][0] if decoded is not None else None
        writers: dict[str, Any] = {}
        roles = [
            (role, fmt)
            for role, fmt, wanted in (
                ("keys", config.keys_format, config.store_keys),
                ("headers", config.headers_format, config.store_headers),
            )
            if wanted
        ]
        for role, fmt in roles:
            key = companion_key(value_key, config.extension, role, config.extension_of(fmt))
            schema = None
            if fmt == "avro":
                schema = HEADERS_SCHEMA if role == "headers" else _nullable(key_schema)
            writers[role] = _open_writer(config, store, key, fmt, schema, topic, partition, encoded)
        companions = cls(config, writers, key_converter)
        companions._decoded = decoded
        return companions

    def __bool__(self) -> bool:
        return bool(self.writers)

    # -- entries ------------------------------------------------------------------------------
    def _key(self, record: KafkaRecord) -> tuple[ValueSchema, Any]:
        if self._decoded is None or self._decoded[0] is not record:
            self._decoded = (record, decode_key(self.key_converter, record))
        return self._decoded[1]

    def accepts(self, record: KafkaRecord) -> bool:
        """Whether the record's key fits the keys file (an Avro keys file has one schema)."""
        writer = self.writers.get("keys")
        if writer is None or self.config.keys_format != "avro" or record.key is None:
            return True
        return _nullable(self._key(record)[0]).same_as(writer.schema)

    def encode(self, record: KafkaRecord) -> dict[str, Any]:
        """Each companion's entry for ``record``, encoded (may raise naming the record)."""
        entries: dict[str, Any] = {}
        if "keys" in self.writers:
            schema, key = self._key(record)
            fmt = self.config.keys_format
            if fmt == "avro":
                entries["keys"] = key
            elif fmt == "json":
                if self.key_converter is None:
                    entries["keys"] = orjson.dumps(text_or_base64(key))
                else:
                    entries["keys"] = b"null" if key is None else render_json(schema.json, key)
            else:
                if key is None:
                    raise record.fail(
                        "the key is null, which a bytearray keys file cannot hold; set "
                        "keys.format.class=json or avro"
                    )
                data = key if isinstance(key, bytes) else str(key).encode()
                separator = self.writers["keys"].separator
                if separator is not None and separator in data:
                    raise record.fail(
                        f"the key contains the record separator {separator!r}; set "
                        "format.bytearray.framing=length-prefixed or keys.format.class=json"
                    )
                entries["keys"] = data
        if "headers" in self.writers:
            headers = record.headers
            if self.config.headers_format == "avro":
                entries["headers"] = [{"key": k, "value": v} for k, v in headers or ()]
            else:
                entries["headers"] = orjson.dumps(
                    None
                    if headers is None
                    else [{"key": k, "value": text_or_base64(v)} for k, v in headers]
                )
        return entries

    def write(self, entries: dict[str, Any], offset: int) -> None:
        for role, entry in entries.items():
            self.writers[role].write(entry, offset)

    def write_run(self, keys: Any, headers: Any, offsets) -> None:
        """A run of records at once (the sink's batch path): the run's raw ``keys`` and
        ``headers`` as Arrow arrays (binary; ``list<struct<key, value>>``). Entries are laid
        out from the Arrow buffers (:mod:`sink.write.arrow_entries`) where they can be, else
        made one by one; both give the same bytes."""
        for role, column in (("keys", keys), ("headers", headers)):
            writer = self.writers.get(role)
            if writer is None:
                continue
            assert column is not None, f"the batch path needs the run's {role}"
            fmt = self.config.keys_format if role == "keys" else self.config.headers_format
            encoded = _encode_column(role, fmt, column)
            if encoded is not None:
                data, ends = encoded
                if fmt == "avro":
                    writer.write_encoded(data, ends, offsets)
                else:
                    writer.write_framed(memoryview(data), ends, offsets)
                continue
            entries = column.to_pylist()
            if fmt == "avro":
                if role == "headers":
                    entries = [h or [] for h in entries]
                writer.write_many(entries, offsets)
                continue
            dumps = orjson.dumps
            if role == "keys":
                lines = [dumps(text_or_base64(k)) for k in entries]
            else:
                lines = [
                    b"null"
                    if h is None
                    else dumps([{"key": e["key"], "value": text_or_base64(e["value"])} for e in h])
                    for h in entries
                ]
            writer.write_lines(lines, offsets)

    # -- finishing ----------------------------------------------------------------------------
    def close(self) -> list[WrittenFile]:
        """Finish each file (data, then its index) and describe it, ``role`` set."""
        done = []
        for role, writer in self.writers.items():
            written = writer.close()
            done.append(
                WrittenFile(**{**written.to_dict(), "role": role})  # type: ignore[arg-type]
            )
        return done

    def abort(self) -> None:
        for writer in self.writers.values():
            writer.abort()


def _encode_column(role: str, fmt: str, column: Any):
    """The run's entries laid out from Arrow (``None``: made one by one instead)."""
    if role == "keys":
        if fmt == "avro":
            return arrow_entries.avro_nullable_bytes(column)
        if fmt == "json":
            return arrow_entries.json_text_lines(column)
        return None
    return arrow_entries.avro_headers(column) if fmt == "avro" else None


def decode_key(converter, record: KafkaRecord) -> tuple[ValueSchema, Any]:
    """The record's key and its schema, decoded by the key converter (raw bytes without one)."""
    if record.key is None:
        return BYTES_SCHEMA, None
    if converter is None:
        return BYTES_SCHEMA, bytes(record.key)
    probe = KafkaRecord(record.topic, record.partition, record.offset, None, None, record.key)
    try:
        converter.decode(probe)
    except Exception as exc:
        raise record.fail(f"the key cannot be decoded: {exc}") from None
    return probe.schema or BYTES_SCHEMA, probe.json()


def _nullable(schema: ValueSchema | None) -> ValueSchema:
    inner = (schema or BYTES_SCHEMA).json
    return ValueSchema.from_json(
        ["null", inner], schema_id=schema.id if schema is not None else None
    )


def _open_writer(config, store, key, fmt, schema, topic, partition, encoded):
    from sink.write.avro_writer import AvroObjectWriter
    from sink.write.object_writer import ObjectWriter

    if fmt == "avro":
        return AvroObjectWriter(
            store,
            key,
            schema,
            codec=config.avro_codec,
            block_size=config.block_size,
            block_records=config.block_records,
            indexed=config.avro_index,
            connect_meta_data=False,
            topic=topic,
            partition=partition,
            encoded_partition=encoded,
        )
    return ObjectWriter(
        store,
        key,
        config.compression,
        config.compression_settings(),
        framing=NEWLINE if fmt == "json" else config.framing,
        block_size=config.block_size,
        block_records=config.block_records,
        topic=topic,
        partition=partition,
        encoded_partition=encoded,
    )
