"""The sink's settings under Confluent's S3-sink option names, validated before any data moves.

Options arrive as strings (Spark options, a ``.properties`` file, a Connect JSON config).
:meth:`SinkSettings.from_options` checks them all and raises :class:`ConfigError` naming the key
and the allowed values, so a bad config fails before Spark starts, not on the first record.
What it returns is typed all the way down: nothing later reads the options again. The sink's
own options are declared in :mod:`blockgz.sink.write.options`.

>>> cfg = SinkSettings.from_options({
...     "s3.bucket.name": "quickstart",
...     "format.class": "io.confluent.connect.s3.format.json.JsonFormat",
...     "flush.size": "3",
... })
>>> cfg.format, cfg.compression, cfg.flush_size, cfg.target_url
('json', 'none', 3, 's3://quickstart')
>>> SinkSettings.from_options({"s3.bucket.name": "b", "s3.compression.type": "lz4"})
Traceback (most recent call last):
...
blockgz.errors.ConfigError: s3.compression.type: 'lz4' is not allowed; allowed: none, gzip, ...
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from blockgz.archive.layout import KEY_OPTIONS, Layout
from blockgz.blocks.codecs.gzip_members import Compression
from blockgz.blocks.framing import (
    FRAMING_OPTION,
    FRAMING_OPTIONS,
    Framing,
    LengthPrefixed,
    Separated,
    framing_from_options,
)
from blockgz.blocks.writer import DEFAULT_BLOCK_SIZE
from blockgz.commits.catalog import DEFAULT_EVERY
from blockgz.commits.manifest_log import ManifestLog
from blockgz.errors import ConfigError
from blockgz.formats.base import HEADERS, KEYS, TIMESTAMPS, VALUE, Format
from blockgz.formats.by_name import FORMATS, check_companion_role
from blockgz.formats.compression import COMPRESSIONS, CompressionType
from blockgz.formats.json.json_format import ENVELOPE_OPTION
from blockgz.option_defs import OptionRegistry
from blockgz.options import Options, as_options
from blockgz.sink.convert.converters import JSON, ConverterSettings
from blockgz.sink.deadletter import DeadLetterSettings
from blockgz.sink.iceberg.spec import check_table_settings
from blockgz.sink.partitioning.settings import (
    PARTITIONING_OPTIONS,
    DefaultSettings,
    PartitionerSettings,
)
from blockgz.sink.partitioning.zones import parse_timezone
from blockgz.sink.write.options import (
    INPUT_PREFIX,
    INPUT_READER,
    LISTENER,
    LISTENER_PREFIX,
    SINK_OPTIONS,
)
from blockgz.store import ObjectStore, StoreTarget

log = logging.getLogger("blockgz.sink")


def _format(options: Options, name: str = "format.class", default: str = "json") -> Format:
    return FORMATS.get(options.text(name, default), option=name)


def _separator(options: Options) -> bytes:
    framing = framing_from_options(options)
    return framing.separator if isinstance(framing, Separated) else b"\n"


#: The option sets :func:`_read` looks names up in: the sink's, its key layout's, its
#: bytearray framing's, its partitioner's.
_READ_FROM = OptionRegistry(SINK_OPTIONS, KEY_OPTIONS, FRAMING_OPTIONS, PARTITIONING_OPTIONS)


def _read(opts: Options, name: str) -> Any:
    """``name``'s value as its declaration says (type, default, allowed values)."""
    return _READ_FROM.read(opts, name)


def _companion_settings(opts: Options) -> dict[str, Any]:
    """``store.kafka.keys`` / ``.headers`` / ``.timestamps`` and their formats (Avro by default
    for keys and headers; the value files' format for timestamps, JSON beside bytearray)."""
    keys_format = _format(opts, "keys.format.class", "avro")
    headers_format = _format(opts, "headers.format.class", "avro")
    check_companion_role(keys_format, KEYS, "keys.format.class")
    check_companion_role(headers_format, HEADERS, "headers.format.class")
    value_format = _format(opts)
    timestamps_format = _format(
        opts,
        "timestamps.format.class",
        value_format.name if TIMESTAMPS in value_format.companion_roles else "json",
    )
    check_companion_role(timestamps_format, TIMESTAMPS, "timestamps.format.class")
    return {
        "store_keys": _read(opts, "store.kafka.keys"),
        "store_headers": _read(opts, "store.kafka.headers"),
        # An envelope (and a Parquet file's __kafka_timestamp column) keeps each record's
        # timestamp already (not its type: what a producer can set anyway is CreateTime).
        "store_timestamps": _read(opts, "store.kafka.timestamps")
        and not _read(opts, ENVELOPE_OPTION)
        and not value_format.keeps_timestamps,
        "keys_format": keys_format.name,
        "headers_format": headers_format.name,
        "timestamps_format": timestamps_format.name,
        "key_converter": ConverterSettings.from_options(opts, "key"),
    }


def _format_settings(opts: Options) -> dict[str, Any]:
    fmt = _format(opts)
    converter = ConverterSettings.from_options(opts, "value")
    return {
        "format": fmt.name,
        "value_converter": converter,
        "separator": _separator(opts) if fmt.takes_framing else b"\n",
        "bytearray_framing": _read(opts, FRAMING_OPTION),
        "bytearray_extension": _read(opts, "format.bytearray.extension"),
        "json_envelope": _read(opts, ENVELOPE_OPTION),
        # Without a converter class the flag alone unwraps Connect's envelope (blockgz <= 0.1).
        "unwrap_payload": converter.kind in (None, JSON) and converter.schemas_enable,
        "json_decimal_format": _read(opts, "json.decimal.format"),
        "schema_compatibility": _read(opts, "schema.compatibility"),
        "schema_affix": _read(opts, "s3.schema.partition.affix.type"),
        "avro_codec": _read(opts, "avro.codec"),
        "parquet_codec": _read(opts, "parquet.codec"),
        "parquet_block_size": _read(opts, "parquet.block.size"),
        "connect_meta_data": _read(opts, "connect.meta.data"),
        "avro_index": _read(opts, "blockgz.avro.index"),
        "catalog_every": _read(opts, "blockgz.catalog.every"),
    }


def _compression_settings(opts: Options) -> dict[str, Any]:
    compression = _read(opts, "s3.compression.type")
    block_records = _read(opts, "s3.compression.block.records")
    blocks = COMPRESSIONS.get(compression).indexed or _format(opts).compresses_inside
    if (block_records or opts.given("s3.compression.block.size")) and not blocks:
        indexed = ", ".join(c.name for c in COMPRESSIONS if c.indexed)
        inside = ", ".join(f.name for f in FORMATS if f.compresses_inside)
        raise ConfigError(
            f"s3.compression.block.size/.records only apply to s3.compression.type={indexed} "
            f"and to format.class={inside} (the size of an Avro block)"
        )
    level = _read(opts, "s3.compression.level")
    try:
        COMPRESSIONS.get(compression).codec(level)  # a level the type does not take: refused now
    except ConfigError as exc:
        raise ConfigError(
            f"s3.compression.level={level} (s3.compression.type={compression}): {exc}"
        ) from exc
    return {
        "compression": compression,
        "compression_level": level,
        "block_size": _read(opts, "s3.compression.block.size"),
        "block_records": block_records or None,
    }


def _rotation_settings(opts: Options) -> dict[str, Any]:
    read = SINK_OPTIONS.read
    schedule_ms = read(opts, "rotate.schedule.interval.ms")
    if schedule_ms > 0 and not opts.given("timezone"):
        raise ConfigError(
            "rotate.schedule.interval.ms needs timezone (an IANA name such as UTC or "
            "Europe/Berlin): scheduled rotation happens at multiples of the interval "
            "from midnight in that zone"
        )
    if opts.given("timezone"):
        parse_timezone(opts.text("timezone"))  # checked now, not on the first record
    rotate_ms = read(opts, "rotate.interval.ms")
    max_open = read(opts, "partitioner.max.open.files")
    if max_open == 0:
        raise ConfigError("partitioner.max.open.files: 0 is not allowed; -1 (no limit) or >= 1")
    return {
        "max_open_files": max_open if max_open > 0 else None,
        "rotate_on_partition_change": read(opts, "rotate.file.on.partition.change"),
        # Confluent requires >= 1; leaving it out (no limit) is blockgz's documented extension.
        "flush_size": read(opts, "flush.size"),
        "flush_size_bytes": read(opts, "flush.size.bytes") or None,
        "rotate_interval_ms": rotate_ms if rotate_ms > 0 else None,
        "rotate_schedule_interval_ms": schedule_ms if schedule_ms > 0 else None,
        "timezone": _read(opts, "timezone") or "UTC",
    }


def _null_settings(opts: Options) -> dict[str, Any]:
    return {
        "null_behavior": SINK_OPTIONS.read(opts, "behavior.on.null.values"),
        "tombstone_partition": SINK_OPTIONS.read(opts, "tombstone.encoded.partition"),
    }


def _hook_settings(opts: Options) -> dict[str, Any]:
    return {
        "input_reader": SINK_OPTIONS.read(opts, INPUT_READER),
        "input_options": opts.prefixed(INPUT_PREFIX),
        "listener": SINK_OPTIONS.read(opts, LISTENER),
        "listener_options": opts.prefixed(LISTENER_PREFIX),
    }


def _transform_settings(options: Mapping[str, Any]) -> dict[str, str]:
    """The ``transforms``/``predicates`` keys, checked by building their chain (a class
    blockgz does not run or a bad option is a one-line error here, before Spark starts)."""
    from blockgz.sink.transforms import build_chain

    found = {
        str(k): str(v)
        for k, v in options.items()
        if k in ("transforms", "predicates") or str(k).startswith(("transforms.", "predicates."))
    }
    build_chain(found)
    return found


def _check_combinations(config: SinkSettings, opts: Options) -> None:
    """Settings that are fine alone but not together."""
    fmt = config.format_for()
    if config.json_envelope:
        _only_for(fmt, ENVELOPE_OPTION)
    if config.bytearray_framing != "separator":
        _only_for(fmt, FRAMING_OPTION)
        if opts.given("format.bytearray.separator"):
            raise ConfigError(
                "format.bytearray.separator cannot be used with "
                "format.bytearray.framing=length-prefixed (records carry their length instead)"
            )
    fmt.check(config, opts)
    if config.schema_affix != "NONE" and not config.value_converter.has_schema:
        raise ConfigError(
            f"s3.schema.partition.affix.type={config.schema_affix} puts the value schema's name "
            "in the path, so values need a schema: set value.converter (AvroConverter, or "
            "JsonConverter with schemas.enable=true)"
        )
    config.compression_settings()
    check_table_settings(opts, config.extension, config.partitioning)


def _only_for(fmt: Format, option: str) -> None:
    """Refuse ``option`` unless ``fmt`` is a format that takes it."""
    if option not in fmt.own_options:
        takers = ", ".join(f.name for f in FORMATS if option in f.own_options)
        raise ConfigError(f"{option} only applies to format.class={takers}")


@dataclass(frozen=True)
class SinkSettings:
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
    parquet_codec: str = "snappy"
    parquet_block_size: int = 4 * 1024 * 1024
    connect_meta_data: bool = True
    avro_index: bool = True
    #: Compact the manifest log into the catalog after every this many batches (0: never).
    catalog_every: int = DEFAULT_EVERY
    store_keys: bool = False
    store_headers: bool = False
    store_timestamps: bool = True
    keys_format: str = "avro"
    headers_format: str = "avro"
    timestamps_format: str = "json"
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
    partitioning: PartitionerSettings = field(default_factory=DefaultSettings)
    epoch: str = ""
    dead_letters: DeadLetterSettings = field(default_factory=DeadLetterSettings)
    #: ``module:function`` turning the task's input rows into Kafka records, with its options.
    input_reader: str = ""
    input_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: ``module:Class`` told about each finished object and committed batch, with its options.
    listener: str = ""
    listener_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: Connect's ``transforms``/``predicates`` settings (:mod:`blockgz.sink.transforms`).
    transforms: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SinkSettings:
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
            transforms=_transform_settings(options),
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

        >>> SinkSettings.from_options({"path": "/tmp/x"}).columns_read()
        ('value', 'topic', 'partition', 'offset', 'timestamp', 'timestampType')
        >>> SinkSettings.from_options({"path": "/tmp/x", "store.kafka.timestamps": "false"}
        ...                         ).columns_read()
        ('value', 'topic', 'partition', 'offset', 'timestamp')
        """
        if (
            self.json_envelope
            or self.partitioning.plugin_options
            or self.dead_letters.enabled
            or self.store_keys
            or self.store_headers
            or self.transforms
        ):
            return None  # the record's key and headers are kept (or transformed)
        kept = ("value", "topic", "partition", "offset", "timestamp")
        return (*kept, "timestampType") if self.store_timestamps else kept

    def compression_settings(self) -> Compression:
        """The codec and level of gzip members: -1 means ISA-L 1 for blockgzip, zlib 6 for gzip."""
        return self.compression_type.codec(self.compression_level)

    def format_for(self, role: str = VALUE) -> Format:
        """The format of the ``role`` files: the values' (``format.class``), or the ``keys``
        / ``headers`` / ``timestamps`` companions' (``keys.format.class`` ...).

        >>> cfg = SinkSettings.from_options({"path": "/tmp/x", "keys.format.class": "json"})
        >>> cfg.format_for().name, cfg.format_for("keys").name, cfg.format_for("headers").name
        ('json', 'json', 'avro')
        """
        names = {
            VALUE: self.format,
            KEYS: self.keys_format,
            HEADERS: self.headers_format,
            TIMESTAMPS: self.timestamps_format,
        }
        return FORMATS.get(names[role])

    @property
    def compression_type(self) -> CompressionType:
        """``s3.compression.type``."""
        return COMPRESSIONS.get(self.compression)

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
        """Whether tasks record the directories they write ahead (:mod:`blockgz.commits.intents`):
        under a field or time partitioner, whose objects may land in any directory."""
        return not self.partitioner().partition_directories

    @property
    def extension(self) -> str:
        """The data object's extension, as Confluent names it (``.json``, ``.bin.gz``, ...)."""
        return self.extension_of(self.format)

    def extension_of(self, fmt: str | Format) -> str:
        """The extension of a file in format ``fmt`` (values, keys or headers), compressed
        as the value files are (Avro compresses inside).

        >>> SinkSettings.from_options({"path": "/tmp/x", "s3.compression.type": "gzip"}
        ...                         ).extension_of("bytearray")
        '.bin.gz'
        """
        if isinstance(fmt, str):
            fmt = FORMATS.get(fmt)
        return fmt.object_extension(self)

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
        if kind is None or self.format_for().stores_value_bytes:
            return False
        return not (kind == JSON and not self.value_converter.schemas_enable)
