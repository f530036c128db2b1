"""The sink's settings under Confluent's S3-sink option names, validated before any data moves.

Options arrive as strings (Spark options, a ``.properties`` file, a Connect JSON config).
:meth:`SinkConfig.from_options` checks them all and raises :class:`ConfigError` naming the key
and the allowed values, so a bad config fails before Spark starts, not on the first record.
What it returns is typed all the way down: nothing later reads the options again.

>>> cfg = SinkConfig.from_options({
...     "s3.bucket.name": "quickstart",
...     "format.class": "io.confluent.connect.s3.format.json.JsonFormat",
...     "flush.size": "3",
... })
>>> cfg.format, cfg.compression, cfg.flush_size, cfg.target_url
('json', 'none', 3, 's3://quickstart')
>>> SinkConfig.from_options({"s3.bucket.name": "b", "s3.compression.type": "zstd"})
Traceback (most recent call last):
...
blockgz.errors.ConfigError: s3.compression.type: 'zstd' is not allowed; allowed: none, gzip, ...
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from blockgz.archive.catalog import DEFAULT_EVERY
from blockgz.archive.layout import Layout
from blockgz.archive.log import ManifestLog
from blockgz.errors import ConfigError
from blockgz.format.codec import Compression
from blockgz.format.framing import (
    FRAMING_OPTION,
    FRAMINGS,
    Framing,
    LengthPrefixed,
    Separated,
    framing_from_options,
)
from blockgz.format.writer import DEFAULT_BLOCK_SIZE
from blockgz.options import Options, as_options
from blockgz.store import ObjectStore, StoreTarget
from sink.convert.connect_json import DECIMAL_FORMATS
from sink.convert.converters import BYTEARRAY, JSON, ConverterSettings
from sink.convert.evolution import COMPATIBILITIES
from sink.partitioning.settings import PartitionerSettings
from sink.partitioning.zones import parse_timezone
from sink.write.deadletter import STORE_OPTION, DeadLetterSettings

log = logging.getLogger("blockgz.sink")

FORMATS = {
    "json": "json",
    "bytearray": "bytearray",
    "avro": "avro",
    "io.confluent.connect.s3.format.json.JsonFormat": "json",
    "io.confluent.connect.s3.format.bytearray.ByteArrayFormat": "bytearray",
    "io.confluent.connect.s3.format.avro.AvroFormat": "avro",
}
COMPRESSIONS = ("none", "gzip", "blockgzip")
#: ``s3.schema.partition.affix.type``: where ``schema_name=<name>`` goes in the encoded partition.
AFFIXES = ("NONE", "PREFIX", "SUFFIX")
#: fastavro's names of the Avro container codecs (Confluent has null, deflate, snappy, bzip2).
AVRO_CODECS = ("null", "deflate", "snappy", "bzip2", "xz", "zstandard")
NULL_BEHAVIORS = ("fail", "ignore", "write")

#: Connect and Confluent keys that mean nothing here but are normal in a pasted connector
#: config; they are accepted silently instead of being reported as unknown.
CONNECT_KEYS_IGNORED = frozenset(
    {
        "name",
        "connector.class",
        "tasks.max",
        "key.converter.schemas.enable",
        "schema.generator.class",
        "path",
    }
)

#: The two hooks of the sink (see :mod:`sink.write.hooks`) and the prefixes of their options.
INPUT_READER = "blockgz.input.reader"
INPUT_PREFIX = "blockgz.source."
LISTENER = "blockgz.write.listener"
LISTENER_PREFIX = "blockgz.write.listener."
#: Set by ``blockgz export`` (not by users): the token of the lease the job holds, and its
#: time to live; the driver's commit renews the lease before each manifest
#: (:mod:`blockgz.archive.lease`).
LEASE_TOKEN = "blockgz.lease.token"
LEASE_TTL = "blockgz.lease.ttl.ms"

SINK_OPTION_NAMES = frozenset(
    {
        "name",
        "path",
        "topics.dir",
        "directory.delim",
        "file.delim",
        "filename.offset.zero.pad.width",
        "format.class",
        "s3.compression.type",
        "s3.compression.level",
        "s3.compression.block.size",
        "s3.compression.block.records",
        "format.bytearray.separator",
        FRAMING_OPTION,
        "format.bytearray.extension",
        "format.json.envelope",
        "value.converter",
        "value.converter.schemas.enable",
        "key.converter",
        "schema.compatibility",
        "avro.codec",
        "connect.meta.data",
        "enhanced.avro.schema.support",
        "json.decimal.format",
        "blockgz.avro.index",
        "blockgz.catalog.every",
        "errors.tolerance",
        "errors.deadletterqueue.topic.name",
        "errors.deadletterqueue.topic.replication.factor",
        "errors.deadletterqueue.context.headers.enable",
        "errors.log.enable",
        "errors.log.include.messages",
        "report.null.values.to.dlq",
        STORE_OPTION,
        "flush.size",
        "flush.size.bytes",
        "partitioner.max.open.files",
        "rotate.file.on.partition.change",
        "store.kafka.keys",
        "store.kafka.headers",
        "keys.format.class",
        "headers.format.class",
        "s3.schema.partition.affix.type",
        "rotate.interval.ms",
        "rotate.schedule.interval.ms",
        "behavior.on.null.values",
        "tombstone.encoded.partition",
        "blockgz.manifest.dir",
        "blockgz.epoch",
        LEASE_TOKEN,
        LEASE_TTL,
        INPUT_READER,
        LISTENER,
    }
)


def _format(options: Options, name: str = "format.class", default: str = "json") -> str:
    raw = options.text(name, default)
    fmt = FORMATS.get(raw) or FORMATS.get(raw.lower())
    if fmt is None:
        allowed = ", ".join(FORMATS)
        raise ConfigError(f"{name}: {raw!r} is not allowed; allowed: {allowed}")
    return fmt


def _separator(options: Options) -> bytes:
    framing = framing_from_options(options)
    return framing.separator if isinstance(framing, Separated) else b"\n"


def _companion_settings(opts: Options) -> dict[str, Any]:
    """``store.kafka.keys`` / ``store.kafka.headers`` and their formats (Avro by default)."""
    keys_format = _format(opts, "keys.format.class", "avro")
    headers_format = _format(opts, "headers.format.class", "avro")
    if headers_format == "bytearray":
        raise ConfigError(
            "headers.format.class=bytearray is not allowed (as in Confluent: headers are "
            "key/value lists); allowed: avro, json"
        )
    return {
        "store_keys": opts.flag("store.kafka.keys", False),
        "store_headers": opts.flag("store.kafka.headers", False),
        "keys_format": keys_format,
        "headers_format": headers_format,
        "key_converter": ConverterSettings.from_options(opts, "key"),
    }


def _format_settings(opts: Options) -> dict[str, Any]:
    fmt = _format(opts)
    converter = ConverterSettings.from_options(opts, "value")
    return {
        "format": fmt,
        "value_converter": converter,
        "separator": _separator(opts) if fmt == "bytearray" else b"\n",
        "bytearray_framing": opts.choice(FRAMING_OPTION, FRAMINGS, "separator"),
        "bytearray_extension": opts.get("format.bytearray.extension", ".bin"),
        "json_envelope": opts.flag("format.json.envelope", False),
        # Without a converter class the flag alone unwraps Connect's envelope (blockgz <= 0.1).
        "unwrap_payload": converter.kind in (None, JSON) and converter.schemas_enable,
        "json_decimal_format": opts.choice("json.decimal.format", DECIMAL_FORMATS, "BASE64"),
        "schema_compatibility": opts.choice("schema.compatibility", COMPATIBILITIES, "NONE"),
        "schema_affix": opts.choice("s3.schema.partition.affix.type", AFFIXES, "NONE"),
        "avro_codec": opts.choice("avro.codec", AVRO_CODECS, "null"),
        "connect_meta_data": opts.flag("connect.meta.data", True),
        "avro_index": opts.flag("blockgz.avro.index", True),
        "catalog_every": opts.integer("blockgz.catalog.every", DEFAULT_EVERY, low=0),
    }


def _compression_settings(opts: Options) -> dict[str, Any]:
    compression = opts.choice("s3.compression.type", COMPRESSIONS, "none")
    block_records = opts.integer("s3.compression.block.records", 0, low=0)
    blocks = compression == "blockgzip" or _format(opts) == "avro"
    if (block_records or opts.given("s3.compression.block.size")) and not blocks:
        raise ConfigError(
            "s3.compression.block.size/.records only apply to s3.compression.type=blockgzip "
            "and to format.class=avro (the size of an Avro block)"
        )
    return {
        "compression": compression,
        "compression_level": opts.integer("s3.compression.level", -1, low=-1, high=9),
        "block_size": opts.size("s3.compression.block.size", DEFAULT_BLOCK_SIZE),
        "block_records": block_records or None,
    }


def _rotation_settings(opts: Options) -> dict[str, Any]:
    schedule_ms = opts.integer("rotate.schedule.interval.ms", -1, low=-1)
    if schedule_ms > 0 and not opts.given("timezone"):
        raise ConfigError(
            "rotate.schedule.interval.ms needs timezone (an IANA name such as UTC or "
            "Europe/Berlin): scheduled rotation happens at multiples of the interval "
            "from midnight in that zone"
        )
    if opts.given("timezone"):
        parse_timezone(opts.text("timezone"))  # checked now, not on the first record
    rotate_ms = opts.integer("rotate.interval.ms", -1, low=-1)
    max_open = opts.integer("partitioner.max.open.files", -1, low=-1)
    if max_open == 0:
        raise ConfigError("partitioner.max.open.files: 0 is not allowed; -1 (no limit) or >= 1")
    return {
        "max_open_files": max_open if max_open > 0 else None,
        "rotate_on_partition_change": opts.flag("rotate.file.on.partition.change", True),
        # Confluent requires >= 1; leaving it out (no limit) is blockgz's documented extension.
        "flush_size": opts.integer("flush.size", None, low=1, hint="leave it out for no limit"),
        "flush_size_bytes": opts.size("flush.size.bytes", 0, low=0) or None,
        "rotate_interval_ms": rotate_ms if rotate_ms > 0 else None,
        "rotate_schedule_interval_ms": schedule_ms if schedule_ms > 0 else None,
        "timezone": opts.text("timezone", "UTC"),
    }


def _null_settings(opts: Options) -> dict[str, Any]:
    return {
        "null_behavior": opts.choice("behavior.on.null.values", NULL_BEHAVIORS, "fail"),
        "tombstone_partition": opts.get("tombstone.encoded.partition", "tombstone"),
    }


def _hook_settings(opts: Options) -> dict[str, Any]:
    return {
        "input_reader": opts.text(INPUT_READER),
        "input_options": opts.prefixed(INPUT_PREFIX),
        "listener": opts.text(LISTENER),
        "listener_options": opts.prefixed(LISTENER_PREFIX),
    }


def _check_combinations(config: SinkConfig, opts: Options) -> None:
    """Settings that are fine alone but not together."""
    if config.json_envelope and config.format != "json":
        raise ConfigError("format.json.envelope only applies to format.class=json")
    if config.bytearray_framing != "separator":
        if config.format != "bytearray":
            raise ConfigError("format.bytearray.framing only applies to format.class=bytearray")
        if opts.given("format.bytearray.separator"):
            raise ConfigError(
                "format.bytearray.separator cannot be used with "
                "format.bytearray.framing=length-prefixed (records carry their length instead)"
            )
    kind = config.value_converter.kind
    if config.format == "avro":
        _check_avro(config, opts)
    if config.schema_affix != "NONE" and not config.value_converter.has_schema:
        raise ConfigError(
            f"s3.schema.partition.affix.type={config.schema_affix} puts the value schema's name "
            "in the path, so values need a schema: set value.converter (AvroConverter, or "
            "JsonConverter with schemas.enable=true)"
        )
    if config.format == "bytearray" and kind not in (None, BYTEARRAY):
        raise ConfigError(
            f"format.class=bytearray writes the value's bytes as they are, so value.converter "
            f"must be org.apache.kafka.connect.converters.ByteArrayConverter or left out; got "
            f"{opts.text('value.converter')!r} (use format.class=json or avro for decoded values)"
        )
    config.compression_settings()


def _check_avro(config: SinkConfig, opts: Options) -> None:
    if not config.value_converter.has_schema:
        raise ConfigError(
            "format.class=avro needs values with a schema; set value.converter to "
            "io.confluent.connect.avro.AvroConverter (with value.converter.schema.registry.url), "
            "org.apache.kafka.connect.json.JsonConverter (schemas.enable=true), StringConverter "
            "or ByteArrayConverter"
        )
    if config.compression != "none":
        raise ConfigError(
            f"s3.compression.type={config.compression} cannot be used with format.class=avro "
            "(as in Confluent): Avro compresses inside the container; set avro.codec to one of "
            + ", ".join(AVRO_CODECS)
        )
    if config.null_behavior == "write" and not config.store_keys:
        raise ConfigError(
            "behavior.on.null.values=write with format.class=avro needs store.kafka.keys=true "
            "(as in Confluent: a tombstone is kept as its key, and an Avro value file holds "
            "records of its schema, which a tombstone has none of); or set "
            "behavior.on.null.values to fail or ignore"
        )


@dataclass(frozen=True)
class SinkConfig:
    """Every sink setting, typed. Build with :meth:`from_options`."""

    target: StoreTarget
    name: str = "blockgz"
    layout: Layout = field(default_factory=Layout)
    format: str = "json"
    compression: str = "none"
    compression_level: int = -1
    block_size: int = DEFAULT_BLOCK_SIZE
    block_records: int | None = None
    separator: bytes = b"\n"
    bytearray_framing: str = "separator"
    bytearray_extension: str = ".bin"
    json_envelope: bool = False
    unwrap_payload: bool = False
    value_converter: ConverterSettings = field(default_factory=ConverterSettings)
    json_decimal_format: str = "BASE64"
    schema_compatibility: str = "NONE"
    avro_codec: str = "null"
    connect_meta_data: bool = True
    avro_index: bool = True
    #: Compact the manifest log into the catalog after every this many batches (0: never).
    catalog_every: int = DEFAULT_EVERY
    store_keys: bool = False
    store_headers: bool = False
    keys_format: str = "avro"
    headers_format: str = "avro"
    key_converter: ConverterSettings = field(default_factory=ConverterSettings)
    flush_size: int | None = None
    flush_size_bytes: int | None = None
    rotate_interval_ms: int | None = None
    rotate_schedule_interval_ms: int | None = None
    max_open_files: int | None = None
    rotate_on_partition_change: bool = True
    schema_affix: str = "NONE"
    timezone: str = "UTC"
    null_behavior: str = "fail"
    tombstone_partition: str = "tombstone"
    partitioning: PartitionerSettings = field(default_factory=PartitionerSettings)
    epoch: str = ""
    dead_letters: DeadLetterSettings = field(default_factory=DeadLetterSettings)
    #: ``module:function`` turning the task's input rows into Kafka records, with its options.
    input_reader: str = ""
    input_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: ``module:Class`` told about each finished object and committed batch, with its options.
    listener: str = ""
    listener_options: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SinkConfig:
        """Validate Confluent-named options; unknown keys are for the caller to report."""
        opts = as_options(options)
        layout = Layout.from_options(opts)
        config = cls(
            target=StoreTarget.from_options(opts),
            name=opts.text("name", "blockgz"),
            layout=layout,
            partitioning=PartitionerSettings.from_options(opts, layout),
            epoch=opts.text("blockgz.epoch"),
            dead_letters=DeadLetterSettings.from_options(opts),
            **_format_settings(opts),
            **_companion_settings(opts),
            **_compression_settings(opts),
            **_rotation_settings(opts),
            **_null_settings(opts),
            **_hook_settings(opts),
        )
        _check_combinations(config, opts)
        return config

    def partitioner(self):
        """A fresh partitioner (each write task builds its own)."""
        return self.partitioning.build()

    def columns_read(self) -> tuple[str, ...] | None:
        """The Kafka columns the sink reads with these options, or ``None`` when it may read
        any (the JSON envelope, a user's partitioner or extractor). The export job drops the
        others before Spark turns rows into Arrow for the Python writer: fewer bytes through
        the JVM.

        ``timestamp`` is always read: each file's manifest entry keeps its time range.

        >>> SinkConfig.from_options({"path": "/tmp/x"}).columns_read()
        ('value', 'topic', 'partition', 'offset', 'timestamp')
        """
        if (
            self.json_envelope
            or self.partitioning.plugin_options
            or self.dead_letters.enabled
            or self.store_keys
            or self.store_headers
        ):
            return None  # the record's key and headers are kept
        return ("value", "topic", "partition", "offset", "timestamp")

    def compression_settings(self) -> Compression:
        """The codec and level of gzip members: -1 means ISA-L 1 for blockgzip, zlib 6 for gzip."""
        if self.compression == "blockgzip":
            return (
                Compression()
                if self.compression_level < 0
                else Compression.from_level(self.compression_level)
            )
        return Compression("zlib", 6 if self.compression_level < 0 else self.compression_level)

    @property
    def target_url(self) -> str:
        return self.target.url

    def make_store(self) -> tuple[ObjectStore, str]:
        """Open the target: ``(store, key prefix)``."""
        return self.target.open()

    def manifest_log(
        self, store: ObjectStore | None = None, prefix: str = "", *, epoch: str | None = None
    ) -> ManifestLog:
        """The job's manifests (in ``store``, or in a newly opened target store), written
        under ``epoch`` (default: this config's)."""
        if store is None:
            store, prefix = self.make_store()
        epoch = self.epoch if epoch is None else epoch
        return ManifestLog(
            store, prefix, self.layout, self.name, epoch=epoch, intents=self.records_intents
        )

    @property
    def records_intents(self) -> bool:
        """Whether tasks record the directories they write ahead (:mod:`blockgz.archive.intents`):
        under a field or time partitioner, whose objects may land in any directory."""
        from sink.partitioning.partitioners import DefaultPartitioner

        return type(self.partitioner()) is not DefaultPartitioner

    @property
    def extension(self) -> str:
        """The data object's extension, as Confluent names it (``.json``, ``.bin.gz``, ...)."""
        return self.extension_of(self.format)

    def extension_of(self, fmt: str) -> str:
        """The extension of a file in format ``fmt`` (values, keys or headers), compressed
        as the value files are (Avro compresses inside)."""
        if fmt == "avro":
            return ".avro"
        base = ".json" if fmt == "json" else self.bytearray_extension
        return base + ("" if self.compression == "none" else ".gz")

    @property
    def keeps_tombstone_keys_only(self) -> bool:
        """``behavior.on.null.values=write`` with ``store.kafka.keys``: a tombstone is kept as
        its key (and headers) under ``tombstone.encoded.partition``, no value file, as in
        Confluent. Without keys stored, blockgz writes the null value itself (JSON ``null``,
        an empty bytearray record), so the tombstone is not lost."""
        return self.null_behavior == "write" and self.store_keys

    @property
    def framing(self) -> Framing:
        """How records sit in an object: after the separator, or after their length."""
        if self.bytearray_framing == "length-prefixed":
            return LengthPrefixed()
        return Separated(self.separator)

    @property
    def decodes_values(self) -> bool:
        """Whether a value converter must decode each value before it is written (it must
        unless the format takes the bytes as they are: JSON text, or bytearray)."""
        kind = self.value_converter.kind
        if kind is None or self.format == "bytearray":
            return False
        return not (kind == JSON and not self.value_converter.schemas_enable)
