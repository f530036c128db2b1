"""``format.class=avro`` (Confluent's ``AvroFormat``): Avro container files, ``.avro``.

Values need a schema (a value converter that gives one); each file holds records of one schema
and compresses inside (``avro.codec``), so ``s3.compression.type`` must stay ``none``, while
``s3.compression.block.size/.records`` size its blocks, which an ``.index.json`` sidecar makes
seekable (``blockgz.avro.index``). The object writer is
:class:`~blockgz.formats.avro.writer.AvroObjectWriter`.

* keys files: ``["null", <key schema>]``; the key schema is the key converter's (an Avro key's
  registry schema, ``string``, ``bytes``), ``bytes`` without one. A key whose schema differs from
  the file's starts new files (as Confluent rotates on a key schema change).
* headers files: ``{"type": "array", "items": Header}`` with ``Header = {key: string,
  value: ["null", bytes]}`` (no headers: an empty array).
* timestamps files: ``{"type": "record", "name": "Timestamp", "fields": [timestamp: long,
  type: int]}`` (Kafka's epoch ms and timestamp type id; ``-1``: none).

>>> fmt = AvroFormat()
>>> fmt.compresses_inside, fmt.one_schema_per_object, fmt.encode_headers(None, [("h", b"1")])
(True, True, [{'key': 'h', 'value': b'1'}])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from blockgz.blocks.avro.block_index import AVRO_CODECS
from blockgz.errors import ConfigError
from blockgz.formats.base import (
    HEADERS,
    KEYS,
    TIMESTAMPS,
    Format,
    FormatSettings,
    RecordEncoder,
    StreamDecoder,
    require_schema_values,
)

if TYPE_CHECKING:
    from blockgz.formats.output import OutputObject
    from blockgz.store.base import ObjectStore


class AvroFormat(Format):
    """Avro object container files (``.avro``): one schema per file, records in Avro blocks
    whose codec (``avro.codec``) compresses them; never gzip-wrapped."""

    name = "avro"
    aliases = ("io.confluent.connect.s3.format.avro.AvroFormat",)
    default_extension = ".avro"
    compresses_inside = True
    needs_value_schema = True
    #: Each object holds records of one schema (a new schema starts a new object).
    one_schema_per_object = True
    companion_roles = frozenset({KEYS, HEADERS, TIMESTAMPS})

    def check(self, settings: Any, options: Any) -> None:
        require_schema_values(settings, "avro")
        if settings.compression_type.compresses:
            raise ConfigError(
                f"s3.compression.type={settings.compression} cannot be used with "
                "format.class=avro (as in Confluent): Avro compresses inside the container; set "
                "avro.codec to one of " + ", ".join(AVRO_CODECS)
            )
        if settings.null_behavior == "write" and not settings.store_keys:
            raise ConfigError(
                "behavior.on.null.values=write with format.class=avro needs store.kafka.keys=true "
                "(as in Confluent: a tombstone is kept as its key, and an Avro value file holds "
                "records of its schema, which a tombstone has none of); or set "
                "behavior.on.null.values to fail or ignore"
            )

    def encoder(self, settings: FormatSettings) -> RecordEncoder:
        return AvroDatumEncoder()

    def open_writer(
        self, store: ObjectStore, key: str, settings: FormatSettings, **kw: Any
    ) -> OutputObject:
        """An Avro container file (:meth:`Format.open_writer`'s arguments; the place,
        ``topic``, ``partition`` and ``encoded_partition``, goes to the writer as it is)."""
        from blockgz.formats.avro.writer import AvroObjectWriter

        schema, companion = kw.pop("schema", None), kw.pop("companion", False)
        assert schema is not None  # the config check makes sure values have schemas
        return AvroObjectWriter(
            store,
            key,
            schema,
            codec=settings.avro_codec,
            block_size=settings.block_size,
            block_records=settings.block_records,
            indexed=settings.avro_index,
            connect_meta_data=settings.connect_meta_data and not companion,
            **kw,
        )

    def stream_decoder(self) -> StreamDecoder:
        """An Avro container file's records, each as a Python value (fastavro's reader)."""
        import fastavro

        return fastavro.reader

    def encode_key(self, record: Any, schema: Any, key: Any, *, decoded: bool, writer: Any) -> Any:
        return key

    def encode_headers(self, record: Any, headers: Any) -> Any:
        return [{"key": k, "value": v} for k, v in headers or ()]

    def encode_timestamp(self, timestamp: int, kind: int) -> Any:
        return {"timestamp": timestamp, "type": kind}

    def encode_timestamp_column(self, stamps: Any, kinds: Any) -> tuple[Any, Any] | None:
        from blockgz.formats.arrow_entries import avro_timestamps

        return avro_timestamps(stamps, kinds)

    def encode_column(self, role: str, column: Any) -> tuple[Any, Any] | None:
        from blockgz.formats import arrow_entries

        if role == KEYS:
            return arrow_entries.avro_nullable_bytes(column)
        return arrow_entries.avro_headers(column)

    def column_entries(self, role: str, entries: list[Any]) -> list[Any]:
        return [h or [] for h in entries] if role == HEADERS else entries


class AvroDatumEncoder(RecordEncoder):
    """The decoded value itself: the Avro container writer encodes it with the file's schema."""

    def encode(self, record: Any) -> Any:
        return record.json()

    def encode_tombstone(self, record: Any) -> bytes:
        raise record.fail("a null value cannot be written to an Avro file")
