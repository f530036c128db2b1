"""Which keys of a job's config are settings, and what a mistyped one was probably meant to be.

A user pastes a Confluent S3-sink connector config. Every option of Confluent's table is
:data:`HONOURED` (some part of blockgz reads it and does what it says), :data:`REFUSED` when
its value asks for what blockgz does not do (an error naming it and why), or :data:`WARNED`
(ignoring it is harmless: it is named in the one warning of unread settings). Kafka Connect's
framework keys (``connector.class``, ``tasks.max``, converters, transforms, ...) are accepted.
A key that is none of these but close to a known one is a typo, and an error with a "did you
mean"; anything else is named in the one warning.

>>> check_keys(["flush.szie", "tasks.max"])
Traceback (most recent call last):
...
blockgz.errors.ConfigError: flush.szie: not a setting blockgz knows; did you mean flush.size?
>>> check_keys(["transforms.unwrap.type", "my.custom.partitioner.option", "parquet.codec"])
['my.custom.partitioner.option', 'parquet.codec']
>>> check_keys({"storage.class": "HdfsStorage"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.ConfigError: storage.class: blockgz writes through its own S3 store (or to ...
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from blockgz.errors import ConfigError
from blockgz.options import Options, as_options
from blockgz.store.settings import OPTION_NAMES as S3_OPTION_NAMES
from sink.partitioning.settings import PARTITIONER_OPTIONS
from sink.write.config import CONNECT_KEYS_IGNORED, SINK_OPTION_NAMES

#: Options of Spark's Kafka source that may appear in the job's config file.
SOURCE_OPTIONS = frozenset(
    {
        "startingOffsets",
        "maxOffsetsPerTrigger",
        "minOffsetsPerTrigger",
        "failOnDataLoss",
        "includeHeaders",
        "minPartitions",
        "assign",
        "subscribe",
        "subscribePattern",
    }
)
JOB_OPTIONS = frozenset(
    {
        "blockgz.trigger.interval",
        "blockgz.checkpoint.dir",
        "blockgz.tasks.read.kafka",
        "blockgz.preflight",
        "blockgz.executor.env.forward",
        "blockgz.spark.kafka.jars",
        "blockgz.resume",
        "blockgz.lease.ttl.ms",
        "blockgz.lease.takeover",
        "blockgz.share.topics",
        "topics",
        "topics.regex",
    }
)

#: Every option of Confluent's S3 sink: the tables of its connector, storage and partitioner
#: configs (kafka-connect-storage-cloud 12.x), with the Connect error settings it documents. Each
#: is in exactly one of :data:`HONOURED`, :data:`REFUSED` and :data:`WARNED`.
CONFLUENT_S3_OPTIONS = frozenset(
    [
        "allow.optional.map.keys",
        "avro.codec",
        "aws.access.key.id",
        "aws.secret.access.key",
        "behavior.on.null.values",
        "connect.meta.data",
        "directory.delim",
        "enable.conditional.writes",
        "enhanced.avro.schema.support",
        "errors.deadletterqueue.context.headers.enable",
        "errors.deadletterqueue.topic.name",
        "errors.deadletterqueue.topic.replication.factor",
        "errors.tolerance",
        "file.delim",
        "filename.offset.zero.pad.width",
        "flush.size",
        "format.bytearray.extension",
        "format.bytearray.separator",
        "format.class",
        "headers.format.class",
        "json.decimal.format",
        "keys.format.class",
        "locale",
        "max.files.scan.limit",
        "max.write.duration.ms",
        "parquet.codec",
        "partition.duration.ms",
        "partition.field.name",
        "partitioner.class",
        "partitioner.max.open.files",
        "path.format",
        "report.null.values.to.dlq",
        "retry.backoff.ms",
        "rotate.file.on.partition.change",
        "rotate.interval.ms",
        "rotate.schedule.interval.ms",
        "s3.acl.canned",
        "s3.bucket.name",
        "s3.compression.level",
        "s3.compression.type",
        "s3.credentials.provider.class",
        "s3.credentials.provider.sts.region",
        "s3.credentials.provider.sts.role.arn",
        "s3.credentials.provider.sts.role.external.id",
        "s3.credentials.provider.sts.role.session.name",
        "s3.elastic.buffer.enable",
        "s3.elastic.buffer.init.capacity",
        "s3.http.send.expect.continue",
        "s3.object.behavior.on.tagging.error",
        "s3.object.tagging",
        "s3.object.tagging.key.value.pairs",
        "s3.part.retries",
        "s3.part.size",
        "s3.path.style.access.enabled",
        "s3.proxy.password",
        "s3.proxy.url",
        "s3.proxy.user",
        "s3.region",
        "s3.retry.backoff.ms",
        "s3.schema.partition.affix.type",
        "s3.send.digest",
        "s3.sse.customer.key",
        "s3.sse.kms.key.id",
        "s3.ssea.name",
        "s3.wan.mode",
        "schema.compatibility",
        "schemas.cache.config",
        "shutdown.timeout.ms",
        "storage.class",
        "store.kafka.headers",
        "store.kafka.keys",
        "store.url",
        "timestamp.extractor",
        "timestamp.field",
        "timezone",
        "tombstone.encoded.partition",
        "topics.dir",
    ]
)

#: Kafka Connect's own connector settings, accepted as they are.
CONNECT_FRAMEWORK = frozenset(
    {
        "name",
        "connector.class",
        "tasks.max",
        "key.converter",
        "value.converter",
        "header.converter",
        "config.action.reload",
        "transforms",
        "predicates",
        "errors.retry.timeout",
        "errors.retry.delay.max.ms",
        "errors.log.enable",
        "errors.log.include.messages",
    }
)
#: Prefixes whose keys belong to someone else (Kafka, Spark, converters, transforms, hooks).
ACCEPTED_PREFIXES = (
    "kafka.",
    "spark.",
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "transforms.",
    "predicates.",
    "consumer.override.",
    "producer.override.",
    "admin.override.",
    "blockgz.source.",
    "blockgz.write.listener.",
)

S3_STORAGE = "io.confluent.connect.s3.storage.S3Storage"


@dataclass(frozen=True)
class NotDone:
    """A Confluent option blockgz does not do: why, and when a config asks for it."""

    reason: str
    #: Whether the options ask for what blockgz does not do (default: the key is there).
    asks: Callable[[Options], bool] | None = None
    #: A config that asks for it (the tests and the docs show it).
    example: Mapping[str, str] = field(default_factory=dict)

    def applies(self, name: str, opts: Options) -> bool:
        return name in opts and (self.asks is None or self.asks(opts))


def _is_true(name: str) -> Callable[[Options], bool]:
    return lambda opts: opts.text(name).lower() == "true"


def _is_false(name: str) -> Callable[[Options], bool]:
    return lambda opts: opts.text(name).lower() == "false"


def _conditional_writes_act(opts: Options) -> bool:
    """When Confluent sends If-None-Match (its ``shouldEnableConditionalWrites``)."""
    schedule = opts.text("rotate.schedule.interval.ms", "-1")
    return (
        opts.text("enable.conditional.writes", "true").lower() == "true"
        and schedule not in ("-1", "")
        and not _is_true("store.kafka.keys")(opts)
        and not _is_true("store.kafka.headers")(opts)
    )


#: Confluent options blockgz will not do, refused at startup when the config asks for them.
#: With a value that asks for nothing (``enable.conditional.writes=false``, the S3Storage
#: class) they are accepted: blockgz then does what they say.
REFUSED: dict[str, NotDone] = {
    "enable.conditional.writes": NotDone(
        "blockgz recovers by writing a replayed batch again over its own objects (the same "
        "keys), and If-None-Match: * would refuse every such replay with 412 (blockgz has no "
        "next-free-offset scan, max.files.scan.limit); set enable.conditional.writes=false "
        "(Confluent sends If-None-Match only with rotate.schedule.interval.ms)",
        _conditional_writes_act,
        {
            "enable.conditional.writes": "true",
            "rotate.schedule.interval.ms": "600000",
            "timezone": "UTC",
        },
    ),
    "storage.class": NotDone(
        "blockgz writes through its own S3 store (or to a local directory); the only "
        f"storage.class it stands for is {S3_STORAGE}",
        lambda opts: opts.given("storage.class") and opts.text("storage.class") != S3_STORAGE,
        {"storage.class": "io.confluent.connect.hdfs.storage.HdfsStorage"},
    ),
}

#: Confluent options blockgz does not read where ignoring them is harmless: named in the one
#: warning of unread settings (:func:`check_keys`), with :func:`describe_ignored`'s reasons.
WARNED: dict[str, NotDone] = {
    "s3.elastic.buffer.enable": NotDone(
        "blockgz's part buffer always grows with the data written (it is never preallocated)",
        example={"s3.elastic.buffer.enable": "true"},
    ),
    "s3.elastic.buffer.init.capacity": NotDone(
        "blockgz's part buffer starts empty and grows with the data",
        example={"s3.elastic.buffer.init.capacity": "131072"},
    ),
    "s3.http.send.expect.continue": NotDone(
        "botocore decides on Expect: 100-continue itself",
        example={"s3.http.send.expect.continue": "false"},
    ),
    "max.files.scan.limit": NotDone(
        "it bounds the recovery scan of conditional writes, which blockgz does not do",
        example={"max.files.scan.limit": "100"},
    ),
    "max.write.duration.ms": NotDone(
        "a deadline for Connect's put(); a blockgz batch is bounded by maxOffsetsPerTrigger",
        example={"max.write.duration.ms": "60000"},
    ),
    "retry.backoff.ms": NotDone(
        "Connect's pause after a retriable error; Spark retries a failed blockgz task "
        "(spark.task.maxFailures) and S3 calls back off by s3.retry.backoff.ms",
        example={"retry.backoff.ms": "5000"},
    ),
    "shutdown.timeout.ms": NotDone(
        "hidden and unused by Confluent's S3 sink too",
        example={"shutdown.timeout.ms": "3000"},
    ),
    "schemas.cache.config": NotDone(
        "the size of AvroData's schema cache; blockgz's schema cache has no such setting",
        example={"schemas.cache.config": "1000"},
    ),
    "parquet.codec": NotDone(
        "only used by ParquetFormat, which blockgz does not write (format.class refuses it)",
        example={"parquet.codec": "snappy"},
    ),
    "enhanced.avro.schema.support": NotDone(
        "blockgz writes the value's Avro schema as it is (enum symbols and namespaces kept), "
        "as with true",
        _is_false("enhanced.avro.schema.support"),
        {"enhanced.avro.schema.support": "false"},
    ),
    "allow.optional.map.keys": NotDone(
        "blockgz always accepts optional map keys (an array of key/value records), as with true",
        _is_false("allow.optional.map.keys"),
        {"allow.optional.map.keys": "false"},
    ),
}

#: What some part of blockgz reads.
READ = SINK_OPTION_NAMES | frozenset(S3_OPTION_NAMES) | PARTITIONER_OPTIONS | SOURCE_OPTIONS
READ |= JOB_OPTIONS
#: Confluent options blockgz reads and does what they say (the sink's own, still being added
#: to :data:`~sink.write.config.SINK_OPTION_NAMES`, are warned of as unread until they are).
HONOURED = CONFLUENT_S3_OPTIONS - REFUSED.keys() - WARNED.keys()
#: Accepted without a word: Connect's framework, and what is harmless here. Confluent's own
#: options are never silent: each is read, refused or warned of.
SILENT = (CONNECT_KEYS_IGNORED | CONNECT_FRAMEWORK) - CONFLUENT_S3_OPTIONS
KNOWN = READ | SILENT | CONFLUENT_S3_OPTIONS
#: Close enough to a known name to be a typo of it (difflib's ratio).
TYPO_CUTOFF = 0.85


def check_keys(keys: Iterable[str] | Mapping[str, Any]) -> list[str]:
    """Raise :class:`ConfigError` for keys that look like typos and for :data:`REFUSED`
    options the config asks for; return the keys to warn about (unknown ones, the
    :data:`WARNED` ones, Confluent options blockgz does not read yet, and S3 settings given
    with a local target).

    Give the options (a mapping) to have values checked; with bare keys, only names are.
    """
    opts = as_options(keys) if isinstance(keys, Mapping) else Options(dict.fromkeys(keys, ""))
    judged = REFUSED.keys() | WARNED.keys()
    errors = []
    for key in sorted(opts):
        if key in READ | SILENT | judged or key.startswith(ACCEPTED_PREFIXES) or key in KNOWN:
            continue
        close = difflib.get_close_matches(key, KNOWN, 1, TYPO_CUTOFF)
        if close:
            errors.append(f"{key}: not a setting blockgz knows; did you mean {close[0]}?")
    errors += [f"{k}: {r.reason}" for k, r in sorted(REFUSED.items()) if r.applies(k, opts)]
    if errors:
        raise ConfigError("; ".join(errors))
    warn = {k for k, w in WARNED.items() if w.applies(k, opts)}
    warn |= {
        k for k in opts if k not in READ | SILENT | judged and not k.startswith(ACCEPTED_PREFIXES)
    }
    if _local_target(opts):
        warn |= {k for k in S3_OPTION_NAMES if k in opts}
    return sorted(warn)


def _local_target(opts: Options) -> bool:
    """Whether the export writes to a local directory (``path`` is not an ``s3://`` URL)."""
    path = opts.text("path")
    return bool(path) and not path.startswith("s3://")


def describe_ignored(keys: Iterable[str]) -> str:
    """The keys :func:`check_keys` returned, each with why it is ignored, for the warning.

    >>> print(describe_ignored(["my.option", "shutdown.timeout.ms"]))  # doctest: +ELLIPSIS
    my.option (not a setting blockgz knows), shutdown.timeout.ms (hidden and unused by ...
    """
    parts = []
    for key in keys:
        if key in WARNED:
            why = WARNED[key].reason
        elif key in S3_OPTION_NAMES:
            why = "an S3 setting, and the target is a local directory"
        elif key in CONFLUENT_S3_OPTIONS:
            why = "a Confluent option blockgz does not read yet"
        else:
            why = "not a setting blockgz knows"
        parts.append(f"{key} ({why})")
    return ", ".join(parts)
