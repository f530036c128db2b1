"""The options of the ``blockgz-kafka`` source: Spark's Kafka source names, validated.

No pyspark import here, so the export job checks a config before Spark starts.

>>> parse_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t"}).strategy
'subscribe'
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from blockgz.errors import ConfigError
from blockgz.kafka.security import librdkafka_settings
from blockgz.option_defs import OptionSet, declarer
from blockgz.options import Options
from blockgz.sink.kafka.holding import HOLD_MODES, HOLD_RULES, HoldRules

log = logging.getLogger("blockgz.kafka_source")

SOURCE_NAME = "blockgz-kafka"

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]
StartSpec = Literal["earliest", "latest", "s3"] | Offsets

EARLIEST = -2  # in startingOffsets JSON, as in Spark
LATEST = -1
FETCH_QUEUE_BACKOFF_MS = 10
#: librdkafka's local queue bound (``queued.max.messages.kbytes``) for a consumer that reads
#: known offset ranges. By default (64 MiB, 100k messages) it prefetches far past the range's
#: end and the task throws that away: a 62.5k-record range of a 250k-record partition fetched
#: 142k-164k records (2.3-2.6x), which the broker served and librdkafka parsed (issue 44).
#: 2 MiB bounds the over-read to ~3 MiB (74.7k records) and keeps a fetch in flight.
QUEUE_KBYTES = 2048

#: librdkafka's ``reconnect.backoff.ms`` for every client the export makes, unless the job
#: sets it. A new client's first request goes out on its bootstrap connection; librdkafka
#: (2.10 on, 2.16 here) retires that connection once the broker's id is known, the request is
#: lost ("Broker handle destroyed without termination") and is sent again only after a pause
#: that follows this setting: the first request of a new client took 54-55 ms (median of 25)
#: at librdkafka's 100 ms, 14-16 ms at 10. Reconnecting to a broker that is down still backs
#: off exponentially, up to ``reconnect.backoff.max.ms``.
RECONNECT_BACKOFF_MS = 10

STRATEGIES = ("subscribe", "subscribePattern", "assign")
#: The source's ``isolation.level`` where ``kafka.isolation.level`` is not set: Spark's Kafka
#: source reads as Java's consumer does, librdkafka's default is ``read_committed``.
DEFAULT_ISOLATION = "read_uncommitted"
#: librdkafka's consumer-only settings an export may carry in ``kafka.*``: left out of an admin
#: client's configuration (:meth:`SourceSettings.admin_config`).
CONSUMER_ONLY = frozenset(
    {
        "isolation.level",
        "auto.offset.reset",
        "enable.auto.commit",
        "enable.partition.eof",
        "fetch.wait.max.ms",
        "fetch.min.bytes",
        "fetch.max.bytes",
        "fetch.queue.backoff.ms",
        "max.partition.fetch.bytes",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "group.id",
        "session.timeout.ms",
        "check.crcs",
    }
)
EMIT_MODES = ("records", "ranges")
#: How many topic-partitions' offset ranges one Spark task may read, and the size (offsets)
#: from which a range gets a task of its own.
RANGES_PER_TASK = "blockgz.ranges.per.task"
GROUP_RECORDS = 10_000
#: Set by ``blockgz export``: the topic ids the run holds to (:mod:`blockgz.sink.kafka.lives`).
TOPIC_IDS = "blockgz.topic.ids"
#: librdkafka settings the source owns (Spark rejects the same ones on its Kafka source).
_REJECTED_KAFKA = {
    "auto.offset.reset": "set the source option startingOffsets instead",
    "enable.auto.commit": "the source never commits offsets to Kafka; Spark's checkpoint has them",
    "key.deserializer": "keys are always binary; cast them in the query",
    "value.deserializer": "values are always binary; cast them in the query",
    "interceptor.classes": "Java interceptors do not exist in librdkafka",
}
#: Spark Kafka source options this source does not implement but can safely run without.
_IGNORED = (
    "endingOffsets",
    "endingOffsetsByTimestamp",
    "endingTimestamp",
    "minPartitions",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "maxRecordsPerPartition",
)
#: Spark Kafka source options that would change which records are read: refused.
_UNSUPPORTED = ("startingTimestamp", "startingOffsetsByTimestamp")


_source = declarer("source", "spark")

_SPARK_ONLY = "Spark's Kafka source reads it; the blockgz-kafka source ignores it (a warning)"
#: The source's options, under Spark's Kafka source names (matched ignoring case: Spark
#: lower-cases a data source's options).
SOURCE_OPTIONS = OptionSet(
    _source(
        "kafka.",
        "text",
        "",
        "the Kafka consumer's settings (librdkafka names; the Java client's security "
        "names are translated, see [Security](#security))",
        prefix=True,
    ),
    _source(
        "kafka.bootstrap.servers", "text", "", "host:port list of the Kafka brokers (required)"
    ),
    _source(
        "subscribe",
        "text",
        "",
        "a comma list of topics (one of subscribe, subscribePattern, assign)",
    ),
    _source("subscribePattern", "text", "", "a regex of topics"),
    _source("assign", "text", "", 'partitions as JSON: `{"topicA": [0, 1]}`'),
    _source(
        "startingOffsets",
        "text",
        "latest",
        "`earliest`, `latest`, `s3` (what the blockgz sink's manifests committed) or "
        "per-partition JSON offsets; `blockgz export` defaults it to `earliest`",
    ),
    _source(
        "maxOffsetsPerTrigger",
        "int",
        None,
        "at most this many offsets per micro-batch",
        low=1,
        shown="no limit",
    ),
    _source("failOnDataLoss", "flag", True, "fail when offsets the job needs are gone"),
    _source(
        "includeHeaders",
        "flag",
        False,
        "read the records' headers (`blockgz export` sets it where headers are kept)",
    ),
    _source(
        "kafkaConsumer.pollTimeoutMs", "int", 120_000, "bounds every wait on the broker", low=1
    ),
    _source(
        "groupIdPrefix",
        "text",
        "blockgz-kafka-source",
        "the prefix of the consumer group's name (the group never commits)",
    ),
    _source(
        "blockgz.emit",
        "choice",
        "records",
        "`ranges`: one offset-range row per topic-partition (what `blockgz export` uses with "
        "`blockgz.tasks.read.kafka`)",
        allowed=EMIT_MODES,
        origin="blockgz",
    ),
    _source(
        RANGES_PER_TASK,
        "int",
        32,
        "at most this many topic-partitions' offset ranges in one Spark task: beyond 64 ranges "
        f"in a batch, ranges of fewer than {GROUP_RECORDS:,} offsets are packed together in "
        "partition order (a task per topic-partition costs tens of milliseconds each at "
        "thousands of partitions); `1`: a task per topic-partition, as Spark's Kafka source "
        "plans",
        low=1,
        origin="blockgz",
    ),
    _source(
        TOPIC_IDS,
        "text",
        "",
        "set by `blockgz export`, not by users: JSON of each topic's Kafka topic id when the "
        "run started; a different id before a batch (the topic was recreated) stops the query",
        origin="blockgz",
        internal=True,
    ),
    _source(
        "blockgz.hold.partial.files",
        "choice",
        "auto",
        "hold a partition's records back until they fill a file (`flush.size`) or a time "
        "rotation (`rotate.interval.ms`, `rotate.schedule.interval.ms`) closes it, so a running "
        "export writes files as large as Confluent's sink does; `auto`: in a running export "
        "with a time rotation set; `true`: also with `flush.size` alone (a remainder then waits "
        "for `flush.size` records, as in Confluent) and in `--once` runs; `false`: every "
        "micro-batch closes its files. With Spark's Kafka source a running export that holds "
        "sets Spark's `minOffsetsPerTrigger` and `maxTriggerDelay` from these settings instead "
        "(totals per trigger, not per partition)",
        allowed=HOLD_MODES,
        origin="blockgz",
    ),
    _source(
        HOLD_RULES,
        "text",
        "",
        "set by `blockgz export`, not by users: JSON of the sink's rotation settings the "
        "source plans held partial files with",
        origin="blockgz",
        internal=True,
    ),
    *(_source(name, "text", "", _SPARK_ONLY) for name in _IGNORED),
    *(
        _source(
            name,
            "text",
            "",
            "refused by the blockgz-kafka source (it would change which "
            "records are read); use startingOffsets",
        )
        for name in _UNSUPPORTED
    ),
)


@dataclass(frozen=True)
class SourceSettings:
    """The validated options of one ``blockgz-kafka`` source (picklable, no clients)."""

    bootstrap_servers: str
    strategy: str  # one of STRATEGIES
    topics: tuple[str, ...] = ()  # subscribe
    pattern: str | None = None  # subscribePattern
    assigned: tuple[TopicPartition, ...] = ()  # assign
    starting: StartSpec = "latest"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    group_id_prefix: str = "blockgz-kafka-source"
    kafka: Mapping[str, str] = field(default_factory=dict)  # kafka.* without the prefix
    # startingOffsets=s3 reads the blockgz sink's manifests: the sink's options say where
    # (its target, key layout and job name; see
    # blockgz.commits.manifest_log.ManifestLog.from_options).
    manifest_options: Mapping[str, str] = field(default_factory=dict)
    emit_ranges: bool = False  # blockgz.emit=ranges: one offset-range row per range
    ranges_per_task: int = 32  # blockgz.ranges.per.task
    #: blockgz.topic.ids: the topic ids the run holds to (blockgz.sink.kafka.lives).
    topic_ids: Mapping[str, str] = field(default_factory=dict)
    #: blockgz.hold.partial.files (auto, true, false) and the rules it plans with
    #: (blockgz.hold.rules; blockgz.sink.kafka.holding).
    hold_mode: str = "auto"
    hold_rules: HoldRules | None = None

    @property
    def timeout_s(self) -> float:
        return self.poll_timeout_ms / 1000

    @property
    def read_committed(self) -> bool:
        """Whether the source reads as ``isolation.level=read_committed`` (not the
        :data:`DEFAULT_ISOLATION`).

        >>> SourceSettings("k:9092", "subscribe", kafka={"isolation.level": "read_committed"}
        ...                ).read_committed
        True
        """
        level = self.kafka.get("isolation.level", DEFAULT_ISOLATION)
        return str(level).lower() == "read_committed"

    def client_config(self) -> dict[str, Any]:
        """The ``kafka.*`` settings (prefix removed) plus the brokers: any librdkafka client
        (with :data:`RECONNECT_BACKOFF_MS` unless the job sets its own)."""
        return {
            "reconnect.backoff.ms": RECONNECT_BACKOFF_MS,
            **self.kafka,
            "bootstrap.servers": self.bootstrap_servers,
        }

    def admin_config(self) -> dict[str, Any]:
        """:meth:`client_config` without the consumer's own settings, which an admin client
        (a producer handle in librdkafka) would name in a ``CONFWARN`` line on stderr.

        >>> settings = SourceSettings("k:9092", "subscribe", kafka={"isolation.level": "x"})
        >>> settings.admin_config()
        {'reconnect.backoff.ms': 10, 'bootstrap.servers': 'k:9092'}
        """
        return {k: v for k, v in self.client_config().items() if k not in CONSUMER_ONLY}

    def consumer_config(self) -> dict[str, Any]:
        """librdkafka settings of a consumer that only assigns, reads and never commits
        (:meth:`client_config`'s, and the consumer's own defaults)."""
        config: dict[str, Any] = {"isolation.level": DEFAULT_ISOLATION, **self.client_config()}
        config.setdefault("group.id", f"{self.group_id_prefix}-{uuid.uuid4()}")
        # librdkafka >= 2.4 postpones a partition's next fetch by this much (1 s by default)
        # once its local queue holds queued.min.messages (100k): a task reading a range longer
        # than that then waits with an empty queue. 10 ms reads a 250k range 2.2x faster here.
        config.setdefault("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS)
        config.setdefault("queued.max.messages.kbytes", QUEUE_KBYTES)
        config.update(
            {
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
            }
        )
        return config


def parse_options(options: Mapping[str, str]) -> SourceSettings:
    """Validate the source's options (case-insensitive names) into a :class:`SourceSettings`.

    >>> parse_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "a, b"}).topics
    ('a', 'b')
    >>> parse_options({"kafka.bootstrap.servers": "b:9092"})
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: exactly one of subscribe, subscribePattern, assign must be set...
    """
    opts = Options(options, keys_ignore_case=True)  # Spark lower-cases a source's options
    _check_unsupported(opts)
    bootstrap = SOURCE_OPTIONS.read(opts, "kafka.bootstrap.servers")
    if not bootstrap:
        raise ConfigError(
            "kafka.bootstrap.servers is required: the host:port list of the Kafka brokers"
        )
    strategy, topics, pattern, assigned = _parse_strategy(opts)
    read = SOURCE_OPTIONS.read
    starting = parse_starting_offsets(read(opts, "startingOffsets"))
    return SourceSettings(
        bootstrap_servers=bootstrap,
        strategy=strategy,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        starting=starting,
        max_offsets_per_trigger=read(opts, "maxOffsetsPerTrigger"),
        fail_on_data_loss=read(opts, "failOnDataLoss"),
        include_headers=read(opts, "includeHeaders"),
        poll_timeout_ms=read(opts, "kafkaConsumer.pollTimeoutMs"),
        group_id_prefix=read(opts, "groupIdPrefix"),
        kafka=_kafka_settings(opts),
        manifest_options=_manifest_options(opts) if starting == "s3" else {},
        emit_ranges=read(opts, "blockgz.emit") == "ranges",
        ranges_per_task=read(opts, RANGES_PER_TASK),
        topic_ids=_topic_ids(read(opts, TOPIC_IDS)),
        hold_mode=read(opts, "blockgz.hold.partial.files"),
        hold_rules=HoldRules.from_json(read(opts, HOLD_RULES)),
    )


def _topic_ids(text: str) -> dict[str, str]:
    """``blockgz.topic.ids``' JSON object of topic -> id (empty: none given)."""
    try:
        found = json.loads(text) if text else {}
        if not isinstance(found, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        raise ConfigError(f"{TOPIC_IDS}: not a JSON object of topic ids ({exc})") from None
    return {str(topic): str(topic_id) for topic, topic_id in found.items()}


def _manifest_options(opts: Options) -> dict[str, str]:
    """The options naming the sink's manifests, for ``startingOffsets=s3`` (checked now)."""
    from blockgz.archive.layout import Layout
    from blockgz.store import StoreTarget

    chosen = {key: value for key, value in opts.items() if not key.startswith("kafka.")}
    StoreTarget.from_options(chosen)
    Layout.from_options(Options(chosen))
    return chosen


def _check_unsupported(opts: Options) -> None:
    for name in _UNSUPPORTED:
        if name.lower() in opts:
            raise ConfigError(
                f"option {name} is not supported by the {SOURCE_NAME} source; "
                "use startingOffsets (earliest, latest or per-partition JSON offsets)"
            )
    for name in _IGNORED:
        if name.lower() in opts:
            log.warning("option %s is ignored by the %s streaming source", name, SOURCE_NAME)


def _parse_strategy(
    opts: Mapping[str, str],
) -> tuple[str, tuple[str, ...], str | None, tuple[TopicPartition, ...]]:
    given = [name for name in STRATEGIES if name.lower() in opts]
    if len(given) != 1:
        raise ConfigError(
            f"exactly one of {', '.join(STRATEGIES)} must be set for the {SOURCE_NAME} source "
            f"(got {', '.join(given) or 'none'})"
        )
    strategy = given[0]
    value = opts[strategy.lower()]
    if strategy == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ConfigError("subscribe must list at least one topic, e.g. 'orders,payments'")
        return strategy, topics, None, ()
    if strategy == "subscribePattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise ConfigError(f"subscribePattern is not a valid regex ({exc}): {value!r}") from exc
        return strategy, (), value, ()
    return strategy, (), None, parse_assign(value)


def parse_assign(text: str) -> tuple[TopicPartition, ...]:
    """The partitions of an ``assign`` option: JSON ``{"topic": [0, 1]}``.

    >>> parse_assign('{"b": [1, 0], "a": [2]}')
    (('a', 2), ('b', 0), ('b', 1))
    """
    example = 'assign must be JSON like {"topicA": [0, 1], "topicB": [2]}'
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{example}; got {text!r}") from exc
    if not isinstance(parsed, dict) or not parsed:
        raise ConfigError(f"{example}; got {text!r}")
    partitions: set[TopicPartition] = set()
    for topic, ids in parsed.items():
        if not isinstance(ids, list) or not all(_is_partition(p) for p in ids):
            raise ConfigError(f"{example}; topic {topic!r} has {ids!r}")
        partitions.update((topic, int(p)) for p in ids)
    if not partitions:
        raise ConfigError(f"{example}; it lists no partition")
    return tuple(sorted(partitions))


def _is_partition(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def parse_starting_offsets(text: str) -> StartSpec:
    """``earliest``, ``latest``, or the per-partition offsets of a JSON ``startingOffsets``.

    >>> parse_starting_offsets(' Earliest ')
    'earliest'
    >>> parse_starting_offsets('{"t": {"1": -1, "0": 23}}')
    {('t', 0): 23, ('t', 1): -1}
    """
    value = text.strip()
    if value.lower() in ("earliest", "latest", "s3"):
        return value.lower()  # type: ignore[return-value]
    allowed = (
        "startingOffsets must be earliest, latest, s3 (what the blockgz sink's manifests "
        'committed) or JSON like {"topic": {"0": 23, "1": -2}} (-2 = earliest, -1 = latest)'
    )
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise ConfigError(f"{allowed}; got {text!r}") from exc
    if not isinstance(parsed, dict):
        raise ConfigError(f"{allowed}; got {text!r}")
    offsets: Offsets = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise ConfigError(f"{allowed}; topic {topic!r} has {partitions!r}")
        for partition, offset in partitions.items():
            if not str(partition).isdigit() or not isinstance(offset, int) or offset < EARLIEST:
                raise ConfigError(f"{allowed}; {topic!r} has {partition!r}: {offset!r}")
            offsets[(topic, int(partition))] = offset
    return dict(sorted(offsets.items()))


def _kafka_settings(opts: Options) -> dict[str, str]:
    settings = opts.prefixed("kafka.")
    for name, reason in _REJECTED_KAFKA.items():
        if name in settings:
            raise ConfigError(
                f"kafka.{name} is not supported by the {SOURCE_NAME} source: {reason}"
            )
    settings.pop("bootstrap.servers", None)
    return librdkafka_settings(settings)
