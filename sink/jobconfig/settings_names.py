"""Which keys of a job's config are settings, and what a mistyped one was probably meant to be.

A user pastes a Confluent S3-sink connector config. Every option of Confluent's table is
:data:`HONOURED` (some part of blockgz reads it and does what it says), :data:`REFUSED` when
its value asks for what blockgz does not do (an error naming it and why), or :data:`WARNED`
(ignoring it is harmless: it is named in the one warning of unread settings). Kafka Connect's
framework keys (``connector.class``, ``tasks.max``, converters, transforms, ...) are accepted.
A key that is none of these but close to a known one is a typo, and an error with a "did you
mean"; anything else is named in the one warning.

Every list here is produced from the options' declarations (:mod:`blockgz.option_defs`): the
source's, the sink's, the store's and the job's own options are declared where they are read,
and Confluent's refused and warned options and Connect's framework keys below; the option sets
an export's config may hold are collected in :data:`EXPORT_OPTION_SETS`.

>>> check_keys(["flush.szie", "tasks.max"])
Traceback (most recent call last):
...
blockgz.errors.ConfigError: flush.szie: not a setting blockgz knows; did you mean flush.size?
>>> check_keys(["transforms.unwrap.type", "my.custom.partitioner.option", "parquet.codec"])
['my.custom.partitioner.option']
>>> check_keys({"storage.class": "HdfsStorage"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.ConfigError: storage.class: blockgz writes through its own S3 store (or to ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from blockgz.archive.layout import KEY_OPTIONS
from blockgz.archive.reader_layout import READER_LAYOUT_OPTIONS
from blockgz.blocks.framing import FRAMING_OPTIONS
from blockgz.commits.manifests import JOB_NAME_OPTIONS
from blockgz.errors import ConfigError
from blockgz.option_defs import TYPO_CUTOFF, NotDone, OptionDef, OptionRegistry, OptionSet
from blockgz.options import Options, as_options
from blockgz.registry import REGISTRY_OPTIONS
from blockgz.sink.convert.converters import CONVERTER_OPTIONS
from blockgz.sink.deadletter import DEAD_LETTER_OPTIONS
from blockgz.sink.iceberg.settings import ICEBERG_OPTIONS
from blockgz.sink.jobconfig.job_options import JOB_OPTIONS as JOB_OPTION_SET
from blockgz.sink.kafka.client_names import kafka_name_problem
from blockgz.sink.kafka.options import SOURCE_OPTIONS as SOURCE_OPTION_SET
from blockgz.sink.partitioning.settings import PARTITIONING_OPTIONS
from blockgz.sink.write.options import SINK_OPTIONS
from blockgz.store import TARGET_OPTIONS
from blockgz.store.settings import OPTION_NAMES as S3_OPTION_NAMES
from blockgz.store.settings import STORE_OPTIONS

__all__ = ["TYPO_CUTOFF", "NotDone", "check_keys", "describe_ignored"]

#: The owners whose options an export's config holds.
EXPORT_OWNERS = ("job", "source", "sink", "store")
S3_STORAGE = "io.confluent.connect.s3.storage.S3Storage"


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


def _not_done(name: str, status: str, reason: str, asks=None, example=None, **more) -> OptionDef:
    owner = "store" if name.startswith("s3.") else "sink"
    return OptionDef(
        name,
        "text",
        "",
        reason,
        owner,
        origin="confluent",
        status=status,
        not_done=NotDone(reason, asks, example or {}),
        **more,
    )


#: Confluent options blockgz will not do, refused at startup when the config asks for them.
#: With a value that asks for nothing (``enable.conditional.writes=false``, the S3Storage
#: class) they are accepted: blockgz then does what they say.
REFUSED_OPTIONS = OptionSet(
    _not_done(
        "enable.conditional.writes",
        "refused",
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
    _not_done(
        "storage.class",
        "refused",
        "blockgz writes through its own S3 store (or to a local directory); the only "
        f"storage.class it stands for is {S3_STORAGE}",
        lambda opts: opts.given("storage.class") and opts.text("storage.class") != S3_STORAGE,
        {"storage.class": "io.confluent.connect.hdfs.storage.HdfsStorage"},
    ),
)

#: Confluent options blockgz does not read where ignoring them is harmless: named in the one
#: warning of unread settings (:func:`check_keys`), with :func:`describe_ignored`'s reasons.
WARNED_OPTIONS = OptionSet(
    _not_done(
        "s3.elastic.buffer.enable",
        "warned",
        "blockgz's part buffer always grows with the data written (it is never preallocated)",
        example={"s3.elastic.buffer.enable": "true"},
    ),
    _not_done(
        "s3.elastic.buffer.init.capacity",
        "warned",
        "blockgz's part buffer starts empty and grows with the data",
        example={"s3.elastic.buffer.init.capacity": "131072"},
    ),
    _not_done(
        "s3.http.send.expect.continue",
        "warned",
        "botocore decides on Expect: 100-continue itself",
        example={"s3.http.send.expect.continue": "false"},
    ),
    _not_done(
        "max.files.scan.limit",
        "warned",
        "it bounds the recovery scan of conditional writes, which blockgz does not do",
        example={"max.files.scan.limit": "100"},
    ),
    _not_done(
        "max.write.duration.ms",
        "warned",
        "a deadline for Connect's put(); a blockgz batch is bounded by maxOffsetsPerTrigger",
        example={"max.write.duration.ms": "60000"},
    ),
    _not_done(
        "retry.backoff.ms",
        "warned",
        "Connect's pause after a retriable error; Spark retries a failed blockgz task "
        "(spark.task.maxFailures) and S3 calls back off by s3.retry.backoff.ms",
        example={"retry.backoff.ms": "5000"},
    ),
    _not_done(
        "shutdown.timeout.ms",
        "warned",
        "hidden and unused by Confluent's S3 sink too",
        example={"shutdown.timeout.ms": "3000"},
    ),
    _not_done(
        "schemas.cache.config",
        "warned",
        "the size of AvroData's schema cache; blockgz's schema cache has no such setting",
        example={"schemas.cache.config": "1000"},
    ),
    _not_done(
        "allow.optional.map.keys",
        "warned",
        "blockgz always accepts optional map keys (an array of key/value records), as with true",
        _is_false("allow.optional.map.keys"),
        {"allow.optional.map.keys": "false"},
    ),
)


def _connect(name: str, doc: str, **more: Any) -> OptionDef:
    return OptionDef(name, "text", "", doc, "sink", origin="connect", status="accepted", **more)


#: Kafka Connect's framework keys: normal in a pasted connector config, accepted as they are.
CONNECT_OPTIONS = OptionSet(
    _connect("connector.class", "the connector's class"),
    _connect("tasks.max", "Connect's task count (Spark's partitions decide here)"),
    _connect("header.converter", "Connect's header converter (headers are kept as bytes)"),
    _connect("header.converter.", "the header converter's settings", prefix=True),
    _connect("config.action.reload", "Connect's reload policy"),
    _connect("transforms", "Connect's single message transforms (run by blockgz.sink.transforms)"),
    _connect("transforms.", "the transforms' settings (checked before Spark)", prefix=True),
    _connect("predicates", "Connect's predicates of the transforms"),
    _connect("predicates.", "the predicates' settings", prefix=True),
    _connect("errors.retry.timeout", "Connect's retry of failed operations"),
    _connect("errors.retry.delay.max.ms", "Connect's retry of failed operations"),
    _connect("schema.generator.class", "Confluent's schema generator of older partitioners"),
    _connect("consumer.override.", "the connector's consumer overrides", prefix=True),
    _connect("producer.override.", "the connector's producer overrides", prefix=True),
    _connect("admin.override.", "the connector's admin client overrides", prefix=True),
)


#: Every option set an export's config may hold: the sets of the parts it runs (the store, the
#: archive's keys, the Kafka source, the sink and what the sink runs, the job) and the names of
#: others (Confluent's refused and warned options, Connect's framework keys). The lookups below
#: go through them (:data:`EXPORT_OPTIONS`); :data:`blockgz.cli.option_sets.ALL_OPTION_SETS`
#: holds them with the readers'.
EXPORT_OPTION_SETS: tuple[OptionSet, ...] = (
    STORE_OPTIONS,
    TARGET_OPTIONS,
    KEY_OPTIONS,
    READER_LAYOUT_OPTIONS,
    FRAMING_OPTIONS,
    JOB_NAME_OPTIONS,
    REGISTRY_OPTIONS,
    SOURCE_OPTION_SET,
    SINK_OPTIONS,
    PARTITIONING_OPTIONS,
    CONVERTER_OPTIONS,
    DEAD_LETTER_OPTIONS,
    ICEBERG_OPTIONS,
    JOB_OPTION_SET,
    REFUSED_OPTIONS,
    WARNED_OPTIONS,
    CONNECT_OPTIONS,
)
EXPORT_OPTIONS = OptionRegistry(*EXPORT_OPTION_SETS)


def source_options() -> frozenset[str]:
    """The options :func:`~blockgz.sink.jobconfig.config.split_options` gives the Kafka source."""
    return frozenset(d.name for d in EXPORT_OPTIONS if d.owner == "source" and not d.prefix)


def job_options() -> frozenset[str]:
    """The export job's own options (given neither to the source nor to the sink)."""
    return frozenset(d.name for d in EXPORT_OPTIONS if d.owner == "job" and not d.prefix)


#: Options of the Kafka source that may appear in the job's config file.
SOURCE_OPTIONS = source_options()
JOB_OPTIONS = job_options()
REFUSED: dict[str, NotDone] = {
    d.name: d.not_done for d in EXPORT_OPTIONS.select(EXPORT_OWNERS, ["refused"]) if d.not_done
}
WARNED: dict[str, NotDone] = {
    d.name: d.not_done for d in EXPORT_OPTIONS.select(EXPORT_OWNERS, ["warned"]) if d.not_done
}
#: Every option of Confluent's S3 sink: the tables of its connector, storage and partitioner
#: configs (kafka-connect-storage-cloud 12.x), with the Connect error settings it documents. Each
#: is in exactly one of :data:`HONOURED`, :data:`REFUSED` and :data:`WARNED`.
CONFLUENT_S3_OPTIONS = frozenset(
    d.name for d in EXPORT_OPTIONS.select(EXPORT_OWNERS) if d.origin == "confluent"
)
#: Kafka Connect's own connector settings, accepted as they are.
CONNECT_FRAMEWORK = frozenset(
    d.name for d in EXPORT_OPTIONS if d.origin == "connect" and not d.prefix
)
#: Prefixes whose keys belong to someone else (Kafka, Spark, converters, transforms, hooks).
ACCEPTED_PREFIXES = EXPORT_OPTIONS.prefixes(EXPORT_OWNERS)
#: What some part of the export reads.
READ = EXPORT_OPTIONS.names(EXPORT_OWNERS, statuses=["read"])
#: Confluent options blockgz reads and does what they say.
HONOURED = CONFLUENT_S3_OPTIONS - REFUSED.keys() - WARNED.keys()
#: Accepted without a word: Connect's framework, and what is harmless here. Confluent's own
#: options are never silent: each is read, refused or warned of.
SILENT = EXPORT_OPTIONS.names(EXPORT_OWNERS, statuses=["accepted"]) - CONFLUENT_S3_OPTIONS
KNOWN = EXPORT_OPTIONS.names(EXPORT_OWNERS) | CONFLUENT_S3_OPTIONS


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
        if key in READ | SILENT | judged or key in KNOWN:
            continue
        slip = case_slip(key)
        if slip:
            errors.append(f"{key}: not a setting blockgz knows; did you mean {slip}?")
        elif key.startswith("kafka."):
            problem = kafka_name_problem(key)
            errors += [problem] if problem else []
        elif close := converter_slip(key):
            errors.append(f"{key}: not a setting of the converter; did you mean {close}?")
        elif key.startswith(ACCEPTED_PREFIXES):
            continue
        elif close := EXPORT_OPTIONS.suggest(key, KNOWN):
            errors.append(f"{key}: not a setting blockgz knows; did you mean {close}?")
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


def case_slip(key: str) -> str | None:
    """The known name (or the key under a known prefix) ``key`` differs from only in case:
    names are exact, as Connect's are, so ``Flush.Size`` is a slip of ``flush.size``.

    >>> case_slip("Flush.Size"), case_slip("Kafka.acks"), case_slip("flush.size")
    ('flush.size', 'kafka.acks', None)
    """
    lowered = key.lower()
    for name in KNOWN:
        if name.lower() == lowered and name != key:
            return name
    for prefix in ACCEPTED_PREFIXES:
        if lowered.startswith(prefix.lower()) and not key.startswith(prefix):
            return prefix + key[len(prefix) :]
    return None


#: The converters' settings blockgz reads (beside the declared ones): the registry's.
CONVERTER_SETTINGS = frozenset(REGISTRY_OPTIONS)
CONVERTER_FAMILIES = ("key.converter.", "value.converter.")


def converter_slip(key: str) -> str | None:
    """The converter setting a ``key.converter.*``/``value.converter.*`` key is probably a
    misspelling of (``value.converter.schema.registry.urls``), or ``None``.

    >>> converter_slip("value.converter.schemas.enabled"), converter_slip("key.converter.x")
    ('value.converter.schemas.enable', None)
    """
    for family in CONVERTER_FAMILIES:
        if key.startswith(family):
            pool = {family + name for name in CONVERTER_SETTINGS}
            pool |= {name for name in KNOWN if name.startswith(family)}
            return None if key in pool else EXPORT_OPTIONS.suggest(key, pool)
    return None


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
