"""The sink's settings under Confluent's S3-sink option names, validated before any data moves.

Options arrive as strings (Spark options, a ``.properties`` file, a Connect JSON config).
:meth:`SinkConfig.from_options` checks them all and raises :class:`ConfigError` naming the key
and the allowed values, so a bad config fails before Spark starts, not on the first record.

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

from blockgz.codec import Compression
from blockgz.errors import ConfigError
from blockgz.store.settings import OPTION_NAMES as S3_OPTION_NAMES
from blockgz.units import parse_size
from blockgz.writer import DEFAULT_BLOCK_SIZE
from sink.options import bool_option, choice_option, int_option

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
NULL_BEHAVIORS = ("fail", "ignore", "write")

#: Connect and Confluent keys that mean nothing here but are normal in a pasted connector
#: config; they are accepted silently instead of being reported as unknown.
CONNECT_KEYS_IGNORED = frozenset(
    {
        "name",
        "connector.class",
        "tasks.max",
        "storage.class",
        "key.converter",
        "value.converter",
        "key.converter.schemas.enable",
        "schema.compatibility",
        "schema.generator.class",
        "s3.wan.mode",
        "s3.http.send.expect.continue",
        "s3.elastic.buffer.enable",
        "s3.elastic.buffer.init.capacity",
        "s3.send.digest",
        "enable.conditional.writes",
        "rotate.file.on.partition.change",
        "retry.backoff.ms",
        "path",
    }
)

#: Options of the Kafka source, given to the sink when its tasks read Kafka themselves.
SOURCE_PREFIX = "blockgz.source."

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
        "format.bytearray.extension",
        "format.json.envelope",
        "value.converter.schemas.enable",
        "flush.size",
        "flush.size.bytes",
        "rotate.interval.ms",
        "rotate.schedule.interval.ms",
        "behavior.on.null.values",
        "tombstone.encoded.partition",
        "blockgz.manifest.dir",
        "blockgz.epoch",
        "blockgz.test.fault",
    }
)


def _format(options: Mapping[str, Any]) -> str:
    raw = str(options.get("format.class") or "json").strip()
    fmt = FORMATS.get(raw) or FORMATS.get(raw.lower())
    if fmt is None:
        allowed = ", ".join(FORMATS)
        raise ConfigError(f"format.class: {raw!r} is not allowed; allowed: {allowed}")
    if fmt == "avro":
        raise ConfigError(
            "format.class: Avro output is not available yet; allowed today: json, bytearray "
            "(and their io.confluent.connect.s3.format.* class names)"
        )
    return fmt


def _separator(options: Mapping[str, Any]) -> bytes:
    raw = options.get("format.bytearray.separator")
    if raw is None:
        return b"\n"
    # Properties files cannot hold a bare newline, so accept the usual escapes.
    text = str(raw).encode("utf-8").decode("unicode_escape").encode("latin-1")
    if not text:
        raise ConfigError("format.bytearray.separator: must not be empty (default: \\n)")
    return text


def _target(options: Mapping[str, Any]) -> str:
    path = options.get("path")
    if path:
        return str(path).rstrip("/") or str(path)
    bucket = options.get("s3.bucket.name")
    if not bucket:
        raise ConfigError(
            "s3.bucket.name is required (or give a target as path=s3://bucket/prefix "
            "or a local directory)"
        )
    return f"s3://{bucket}"


@dataclass(frozen=True)
class SinkConfig:
    """Every sink setting, typed. Build with :meth:`from_options`; ``options`` keeps the raw map."""

    target_url: str
    name: str = "blockgz"
    topics_dir: str = "topics"
    directory_delim: str = "/"
    file_delim: str = "+"
    offset_pad_width: int = 10
    format: str = "json"
    compression: str = "none"
    compression_level: int = -1
    block_size: int = DEFAULT_BLOCK_SIZE
    block_records: int | None = None
    separator: bytes = b"\n"
    bytearray_extension: str = ".bin"
    json_envelope: bool = False
    flush_size: int | None = None
    flush_size_bytes: int | None = None
    rotate_interval_ms: int | None = None
    rotate_schedule_interval_ms: int | None = None
    null_behavior: str = "fail"
    tombstone_partition: str = "tombstone"
    manifest_dir: str = "_blockgz"
    epoch: str = ""
    options: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SinkConfig:
        """Validate Confluent-named options; unknown keys are logged, never fatal."""
        opts = {str(k): str(v) for k, v in options.items() if v is not None}
        fmt = _format(opts)
        compression = choice_option(opts, "s3.compression.type", COMPRESSIONS, "none")
        level = int_option(opts, "s3.compression.level", -1, -1, 9)
        flush = int_option(opts, "flush.size", 0, 0, None)
        rotate_ms = int_option(opts, "rotate.interval.ms", -1, -1, None)
        schedule_ms = int_option(opts, "rotate.schedule.interval.ms", -1, -1, None)
        if schedule_ms > 0 and not opts.get("timezone"):
            raise ConfigError(
                "rotate.schedule.interval.ms needs timezone (an IANA name such as UTC or "
                "Europe/Berlin): scheduled rotation happens at multiples of the interval "
                "from midnight in that zone"
            )
        size_bytes = opts.get("flush.size.bytes")
        block_size = parse_size(
            opts.get("s3.compression.block.size") or DEFAULT_BLOCK_SIZE,
            name="s3.compression.block.size",
        )
        if block_size < 1:
            raise ConfigError("s3.compression.block.size: must be at least 1 byte")
        block_records = int_option(opts, "s3.compression.block.records", 0, 0, None)
        if (block_records or "s3.compression.block.size" in opts) and compression != "blockgzip":
            raise ConfigError(
                "s3.compression.block.size/.records only apply to s3.compression.type=blockgzip"
            )
        delim = opts.get("directory.delim", "/")
        if not delim:
            raise ConfigError("directory.delim: must not be empty (default: /)")
        topics_dir = opts.get("topics.dir", "topics").strip(delim)
        config = cls(
            target_url=_target(opts),
            name=opts.get("name") or "blockgz",
            topics_dir=topics_dir,
            directory_delim=delim,
            file_delim=opts.get("file.delim", "+") or "+",
            offset_pad_width=int_option(opts, "filename.offset.zero.pad.width", 10, 0, 30),
            format=fmt,
            compression=compression,
            compression_level=level,
            block_size=block_size,
            block_records=block_records or None,
            separator=_separator(opts) if fmt == "bytearray" else b"\n",
            bytearray_extension=opts.get("format.bytearray.extension", ".bin"),
            json_envelope=bool_option(opts, "format.json.envelope", False),
            flush_size=flush or None,
            flush_size_bytes=(
                parse_size(size_bytes, name="flush.size.bytes") or None if size_bytes else None
            ),
            rotate_interval_ms=rotate_ms if rotate_ms > 0 else None,
            rotate_schedule_interval_ms=schedule_ms if schedule_ms > 0 else None,
            null_behavior=choice_option(opts, "behavior.on.null.values", NULL_BEHAVIORS, "fail"),
            tombstone_partition=opts.get("tombstone.encoded.partition", "tombstone"),
            manifest_dir=(opts.get("blockgz.manifest.dir") or "_blockgz").strip("/"),
            epoch=opts.get("blockgz.epoch", ""),
            options=opts,
        )
        if config.json_envelope and fmt != "json":
            raise ConfigError("format.json.envelope only applies to format.class=json")
        config.partitioner()  # validates the partitioner options now, not on the first record
        config.compression_settings()
        config.store_options()
        return config

    def partitioner(self):
        """A fresh partitioner built from the options (validated by :func:`build_partitioner`)."""
        from sink.partitioners import build_partitioner

        return build_partitioner(self.options)

    def columns_read(self) -> tuple[str, ...] | None:
        """The Kafka columns the sink reads with these options, or ``None`` when it may read
        any (the JSON envelope, a custom partitioner). The export job drops the others before
        Spark turns rows into Arrow for the Python writer: fewer bytes through the JVM.

        >>> SinkConfig.from_options({"path": "/tmp/x"}).columns_read()
        ('value', 'topic', 'partition', 'offset')
        >>> SinkConfig.from_options({"path": "/tmp/x", "partitioner.class": "hourly",
        ...                          "locale": "en", "timezone": "UTC"}).columns_read()
        ('value', 'topic', 'partition', 'offset', 'timestamp')
        """
        from sink import partitioners

        partitioner = self.partitioner()
        if self.json_envelope or type(partitioner).__module__ != partitioners.__name__:
            return None
        columns: tuple[str, ...] = ("value", "topic", "partition", "offset")
        if self.rotate_interval_ms or isinstance(partitioner, partitioners.TimeBasedPartitioner):
            columns += ("timestamp",)
        return columns

    def kafka_source_options(self) -> dict[str, str]:
        """The ``blockgz.source.*`` options without the prefix: how sink tasks reach Kafka
        when they are handed offset ranges instead of records (see :mod:`sink.kafka_source`)."""
        return {
            key[len(SOURCE_PREFIX) :]: value
            for key, value in self.options.items()
            if key.startswith(SOURCE_PREFIX)
        }

    def compression_settings(self) -> Compression:
        """The codec and level of gzip members: -1 means ISA-L 1 for blockgzip, zlib 6 for gzip."""
        if self.compression == "blockgzip":
            return (
                Compression()
                if self.compression_level < 0
                else Compression.from_level(self.compression_level)
            )
        return Compression("zlib", 6 if self.compression_level < 0 else self.compression_level)

    def store_options(self) -> dict[str, str]:
        """The S3 settings among the options, for :func:`blockgz.store.open_store`."""
        store = {k: v for k, v in self.options.items() if k in S3_OPTION_NAMES}
        if self.target_url.startswith("s3://"):
            from blockgz.store.settings import S3Settings

            S3Settings.from_options({**store, "s3.bucket.name": self.target_url[5:].split("/")[0]})
        return store

    def make_store(self):
        """Open the target: ``(store, key prefix)``."""
        from blockgz.store import open_store

        return open_store(self.target_url, self.store_options())

    @property
    def extension(self) -> str:
        """The data object's extension, as Confluent names it (``.json``, ``.bin.gz``, ...)."""
        base = ".json" if self.format == "json" else self.bytearray_extension
        return base + ("" if self.compression == "none" else ".gz")


def unknown_options(options: Mapping[str, Any], *known: frozenset[str]) -> list[str]:
    """Keys that no part of blockgz reads (likely typos), for a warning."""
    from sink.partitioners import PARTITIONER_OPTIONS

    names = SINK_OPTION_NAMES | CONNECT_KEYS_IGNORED | frozenset(S3_OPTION_NAMES)
    names |= PARTITIONER_OPTIONS
    for extra in known:
        names |= extra
    return sorted(k for k in options if k not in names and not k.startswith(SOURCE_PREFIX))
