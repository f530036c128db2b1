"""Which keys of a job's config are settings, and what a mistyped one was probably meant to be.

A user pastes a Confluent S3-sink connector config: every key of Confluent's option table and
of Kafka Connect's framework (``connector.class``, ``tasks.max``, converters, transforms, ...)
is accepted. A key that is none of these but close to a known one is a typo, and an error
with a "did you mean"; anything else is named in one warning.

>>> check_keys(["flush.szie", "tasks.max"])
Traceback (most recent call last):
...
blockgz.errors.ConfigError: flush.szie: not a setting blockgz knows; did you mean flush.size?
>>> check_keys(["transforms.unwrap.type", "my.custom.partitioner.option", "parquet.codec"])
['my.custom.partitioner.option', 'parquet.codec']
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from blockgz.errors import ConfigError
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
        "topics",
        "topics.regex",
    }
)

#: Every option of Confluent's S3 sink (its connector, storage and partitioner configs), so a
#: pasted config is never mistaken for typos; what blockgz does not honour is still warned of.
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
        "s3.credentials.provider.sts.role.arn",
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
        "errors.tolerance",
        "errors.retry.timeout",
        "errors.retry.delay.max.ms",
        "errors.log.enable",
        "errors.log.include.messages",
        "errors.deadletterqueue.topic.name",
        "errors.deadletterqueue.topic.replication.factor",
        "errors.deadletterqueue.context.headers.enable",
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

#: What some part of blockgz reads.
READ = SINK_OPTION_NAMES | frozenset(S3_OPTION_NAMES) | PARTITIONER_OPTIONS | SOURCE_OPTIONS
READ |= JOB_OPTIONS
#: Accepted without a word: Connect's framework, and what is harmless here.
SILENT = CONNECT_KEYS_IGNORED | CONNECT_FRAMEWORK
KNOWN = READ | SILENT | CONFLUENT_S3_OPTIONS
#: Close enough to a known name to be a typo of it (difflib's ratio).
TYPO_CUTOFF = 0.85


def check_keys(keys: Iterable[str]) -> list[str]:
    """Raise :class:`ConfigError` for keys that look like typos; return the keys to warn about
    (unknown ones, and Confluent options blockgz does not read)."""
    keys = sorted(k for k in keys if k not in READ | SILENT and not k.startswith(ACCEPTED_PREFIXES))
    typos = []
    for key in keys:
        close = [] if key in KNOWN else difflib.get_close_matches(key, KNOWN, 1, TYPO_CUTOFF)
        if close:
            typos.append(f"{key}: not a setting blockgz knows; did you mean {close[0]}?")
    if typos:
        raise ConfigError("; ".join(typos))
    return keys
