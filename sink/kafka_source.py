"""``blockgz-kafka``: a Spark streaming source for Kafka in Python, on confluent-kafka.

For Spark installations without the ``spark-sql-kafka`` jar. It takes the same options as
Spark's built-in ``kafka`` source and gives the same rows (:mod:`sink.records`), so a query
can switch between the two by changing only the format name:

* ``kafka.bootstrap.servers`` (required) and any other ``kafka.*`` setting, passed to
  librdkafka without the prefix (``kafka.security.protocol``, ``kafka.isolation.level``, ...);
* exactly one of ``subscribe`` (comma list), ``subscribePattern`` (regex, full match) or
  ``assign`` (JSON ``{"topic": [0, 1]}``);
* ``startingOffsets``: ``latest`` (default), ``earliest`` or JSON ``{"t": {"0": 23, "1": -2}}``
  (-2 earliest, -1 latest; with ``subscribe*``, partitions left out start at earliest);
* ``maxOffsetsPerTrigger``: a cap per micro-batch, shared by the partitions in proportion to
  their lag; ``failOnDataLoss`` (default true); ``includeHeaders`` (default false);
  ``kafkaConsumer.pollTimeoutMs`` (default 120000) bounds every wait on the broker;
  ``groupIdPrefix`` (default ``blockgz-kafka-source``) names the never-committed group.

Offsets are ``{"topic": {"partition": next offset}}`` with topics and partitions always in the
same order, because Spark compares offsets as JSON strings. Partitions that appear later (new
topics matching the pattern, added partitions) start at their earliest offset. Each Spark task
reads one topic-partition range with its own consumer, created inside ``read()``.

With ``blockgz.emit=ranges`` (what ``blockgz export`` uses) each task gives one row,
``topic, partition, startOffset, endOffset``, instead of the records: the ``blockgz`` sink then
reads that range from Kafka itself (:func:`read_range`), so records never cross the JVM. Spark
still plans, logs and replays the ranges, so exactly-once is unchanged.

Example (needs a running Spark and Kafka, so it is not a doctest)::

    from sink.session import spark_session

    spark = spark_session("local[2,3]")  # registers blockgz-kafka
    rows = (
        spark.readStream.format("blockgz-kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("subscribe", "orders")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 200_000)
        .load()
    )
    query = rows.writeStream.format("blockgz").trigger(availableNow=True).start()
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
import uuid
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from blockgz.errors import ConfigError, DataLossError, SourceError
from sink.options import bool_option, choice_option
from sink.records import kafka_arrow_schema, kafka_schema_ddl

log = logging.getLogger("blockgz.kafka_source")

SOURCE_NAME = "blockgz-kafka"

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]
StartSpec = Literal["earliest", "latest", "s3"] | Offsets

EARLIEST = -2  # in startingOffsets JSON, as in Spark
LATEST = -1
BATCH_ROWS = 10_000  # rows per Arrow batch handed to Spark
FETCH_QUEUE_BACKOFF_MS = 10
_CONSUME_WAIT_S = 0.2  # one consume() call; the poll timeout bounds the whole wait

STRATEGIES = ("subscribe", "subscribePattern", "assign")
EMIT_MODES = ("records", "ranges")
#: The rows of ``blockgz.emit=ranges``: one per task, the offsets ``[startOffset, endOffset)``.
RANGE_SCHEMA_DDL = "topic STRING, partition INT, startOffset BIGINT, endOffset BIGINT"
RANGE_COLUMNS = ("topic", "partition", "startOffset", "endOffset")
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


# -- options ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceConfig:
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
    # startingOffsets=s3 reads the blockgz sink's manifests: the sink's own options say where.
    sink_options: Mapping[str, str] = field(default_factory=dict)
    emit_ranges: bool = False  # blockgz.emit=ranges: one offset-range row per task

    @property
    def timeout_s(self) -> float:
        return self.poll_timeout_ms / 1000

    def consumer_config(self) -> dict[str, Any]:
        """librdkafka settings of a consumer that only assigns, reads and never commits."""
        config: dict[str, Any] = {"isolation.level": "read_uncommitted", **self.kafka}
        config.setdefault("group.id", f"{self.group_id_prefix}-{uuid.uuid4()}")
        # librdkafka >= 2.4 postpones a partition's next fetch by this much (1 s by default)
        # once its local queue holds queued.min.messages (100k): a task reading a range longer
        # than that then waits with an empty queue. 10 ms reads a 250k range 2.2x faster here.
        config.setdefault("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS)
        config.update(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
            }
        )
        return config


def parse_options(options: Mapping[str, str]) -> SourceConfig:
    """Validate the source's options (case-insensitive names) into a :class:`SourceConfig`.

    >>> parse_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "a, b"}).topics
    ('a', 'b')
    >>> parse_options({"kafka.bootstrap.servers": "b:9092"})
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: exactly one of subscribe, subscribePattern, assign must be set...
    """
    opts = {str(key).lower(): str(value) for key, value in options.items()}
    _check_unsupported(opts)
    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise ConfigError(
            "kafka.bootstrap.servers is required: the host:port list of the Kafka brokers"
        )
    strategy, topics, pattern, assigned = _parse_strategy(opts)
    starting = parse_starting_offsets(opts.get("startingoffsets", "latest"))
    return SourceConfig(
        bootstrap_servers=bootstrap,
        strategy=strategy,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        starting=starting,
        max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger", None),
        fail_on_data_loss=bool_option(opts, "failOnDataLoss", True, key="failondataloss"),
        include_headers=bool_option(opts, "includeHeaders", False, key="includeheaders"),
        poll_timeout_ms=_positive_int(opts, "kafkaConsumer.pollTimeoutMs", 120_000) or 120_000,
        group_id_prefix=opts.get("groupidprefix", "blockgz-kafka-source"),
        kafka=_kafka_settings(opts),
        sink_options=_sink_settings(options) if starting == "s3" else {},
        emit_ranges=choice_option(opts, "blockgz.emit", EMIT_MODES, "records") == "ranges",
    )


def _sink_settings(options: Mapping[str, Any]) -> dict[str, str]:
    """The sink options given to the source for ``startingOffsets=s3`` (validated now)."""
    from sink.config import SinkConfig

    sink = {str(k): str(v) for k, v in options.items() if not str(k).startswith("kafka.")}
    SinkConfig.from_options(sink)
    return sink


def _check_unsupported(opts: Mapping[str, str]) -> None:
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


def _positive_int(opts: Mapping[str, str], name: str, default: int | None) -> int | None:
    text = opts.get(name.lower())
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"{name} must be a positive integer; got {text!r}")
    return value


def _kafka_settings(opts: Mapping[str, str]) -> dict[str, str]:
    settings = {
        key[len("kafka.") :]: value for key, value in opts.items() if key.startswith("kafka.")
    }
    for name, reason in _REJECTED_KAFKA.items():
        if name in settings:
            raise ConfigError(
                f"kafka.{name} is not supported by the {SOURCE_NAME} source: {reason}"
            )
    settings.pop("bootstrap.servers", None)
    return settings


# -- offsets ----------------------------------------------------------------------------------


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The canonical JSON form: topics sorted, partitions sorted by number, keys as strings.

    >>> offsets_to_json({("b", 10): 5, ("b", 2): 7, ("a", 0): 1})
    {'a': {'0': 1}, 'b': {'2': 7, '10': 5}}
    """
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return result


def offsets_from_json(data: Mapping[str, Mapping[str, Any]]) -> Offsets:
    """The inverse of :func:`offsets_to_json` (partition keys may be strings or ints)."""
    try:
        return {
            (str(topic), int(partition)): int(offset)
            for topic, partitions in data.items()
            for partition, offset in partitions.items()
        }
    except (AttributeError, TypeError, ValueError) as exc:
        raise SourceError(f"not a {SOURCE_NAME} offset: {data!r}") from exc


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _names(tps: Sequence[TopicPartition]) -> str:
    return ", ".join(_name(tp) for tp in tps)


def report_data_loss(message: str, fail_on_data_loss: bool) -> None:
    """Raise :class:`DataLossError`, or log a warning when ``failOnDataLoss`` is false."""
    if fail_on_data_loss:
        raise DataLossError(
            f"{message}. Some data may have been lost; if that is expected, restart the "
            "query with failOnDataLoss=false to skip it"
        )
    log.warning("%s; skipping it (failOnDataLoss=false)", message)


def resolve_start(
    spec: StartSpec,
    partitions: Sequence[TopicPartition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    every_partition: bool = False,
) -> Offsets:
    """The first offsets of a new query, from ``startingOffsets`` and the broker's offsets.

    In a JSON spec -2 means earliest and -1 latest; partitions it leaves out start at
    earliest, unless ``every_partition`` (``assign``) requires them all, as Spark does.

    >>> parts = [("t", 0), ("t", 1)]
    >>> resolve_start({("t", 0): -1}, parts, {("t", 0): 3, ("t", 1): 4}, {("t", 0): 9, ("t", 1): 8})
    {('t', 0): 9, ('t', 1): 4}
    """
    if spec == "earliest":
        return {tp: earliest[tp] for tp in partitions}
    if spec == "latest":
        return {tp: latest[tp] for tp in partitions}
    assert isinstance(spec, dict)
    unknown = sorted(spec.keys() - set(partitions))
    if unknown:
        raise ConfigError(
            f"startingOffsets names partitions that are not subscribed or do not exist: "
            f"{_names(unknown)} (existing: {_names(sorted(partitions)) or 'none'})"
        )
    missing = sorted(set(partitions) - spec.keys())
    if every_partition and missing:
        raise ConfigError(
            "startingOffsets JSON must give an offset for every assigned partition "
            f"(-2 = earliest, -1 = latest); missing: {_names(missing)}"
        )
    start: Offsets = {}
    for tp in partitions:
        offset = spec.get(tp, EARLIEST)
        start[tp] = (
            earliest[tp] if offset == EARLIEST else latest[tp] if offset == LATEST else offset
        )
    return start


def manifest_start(
    sink_options: Mapping[str, str], partitions: Sequence[TopicPartition]
) -> Offsets:
    """``startingOffsets=s3``: per partition, the next offset the sink's manifests committed.

    Partitions no manifest mentions start at earliest. (``blockgz export`` also removes
    objects of batches that never committed; this source only reads.)
    """
    from sink.commit import committed_offsets
    from sink.config import SinkConfig

    config = SinkConfig.from_options(sink_options)
    store, prefix = config.make_store()
    committed = committed_offsets(store, prefix, config)
    return {tp: committed.get(tp[0], {}).get(tp[1], EARLIEST) for tp in partitions}


def split_limit(lags: Mapping[TopicPartition, int], limit: int) -> dict[TopicPartition, int]:
    """How many records each partition may read when ``limit`` is shared by lag.

    Like Spark's Kafka source, the share is proportional to each partition's lag and every
    lagging partition gets at least one record (when ``limit`` allows), so none starves; unlike
    Spark, the sum never exceeds ``limit`` (largest remainders, ties in partition order).

    >>> split_limit({("t", 0): 900, ("t", 1): 100, ("t", 2): 0}, 100)
    {('t', 0): 90, ('t', 1): 10}
    >>> split_limit({("t", 0): 9000, ("t", 1): 1}, 100)
    {('t', 0): 99, ('t', 1): 1}
    >>> split_limit({("t", 0): 5, ("t", 1): 3}, 100)
    {('t', 0): 5, ('t', 1): 3}
    """
    lagging = {tp: lag for tp, lag in sorted(lags.items()) if lag > 0}
    total = sum(lagging.values())
    if total <= limit:
        return lagging
    if limit < len(lagging):  # one each, to the most lagging partitions
        chosen = sorted(lagging, key=lambda tp: (-lagging[tp], tp))[:limit]
        return {tp: 1 for tp in sorted(chosen)}
    shares: dict[TopicPartition, int] = {}
    remainders: dict[TopicPartition, int] = {}
    for tp, lag in lagging.items():
        shares[tp], remainders[tp] = divmod(limit * lag, total)
    starved = [tp for tp, share in shares.items() if share == 0]
    for tp in starved:
        shares[tp] = 1
    for _ in range(sum(shares.values()) - limit):  # pay for them from the largest shares
        shares[min(shares, key=lambda tp: (-shares[tp], tp))] -= 1
    leftover = limit - sum(shares.values())
    fed = sorted(set(shares) - set(starved), key=lambda tp: (-remainders[tp], tp))
    for tp in fed[:leftover]:
        shares[tp] += 1
    return shares


def plan_end(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    earliest_new: Mapping[TopicPartition, int],
    *,
    max_rows: int | None = None,
    target: Mapping[TopicPartition, int] | None = None,
    fail_on_data_loss: bool = True,
) -> Offsets:
    """The end offsets of the next micro-batch (what ``latestOffset`` returns).

    ``latest`` holds every current partition's latest offset and ``earliest_new`` the earliest
    offset of those not in ``start``. A new partition enters at its earliest offset and is
    read from the next batch on, so a batch's ranges depend only on its start and end offsets.
    Partitions that vanished, new partitions that do not start at 0 and offsets that went
    back are data loss. ``target`` (Trigger.AvailableNow) caps each partition and leaves out
    the partitions it does not know; ``max_rows`` is shared out by :func:`split_limit`.

    >>> plan_end({("t", 0): 5}, {("t", 0): 50, ("t", 1): 7}, {("t", 1): 0}, max_rows=10)
    {('t', 0): 15, ('t', 1): 0}
    """
    for tp in sorted(start.keys() - latest.keys()):
        report_data_loss(f"partition {_name(tp)} no longer exists", fail_on_data_loss)
    end: Offsets = {}
    for tp, newest in sorted(latest.items()):
        if target is not None and tp not in target:
            continue
        if tp not in start:
            first = earliest_new[tp]
            if first > 0:
                message = f"new partition {_name(tp)} starts at offset {first}, not 0"
                report_data_loss(message, fail_on_data_loss)
            end[tp] = first
        elif newest < start[tp]:
            message = (
                f"partition {_name(tp)}'s latest offset went back from {start[tp]} to {newest} "
                "(was the topic recreated?)"
            )
            report_data_loss(message, fail_on_data_loss)
            end[tp] = newest
        else:
            cap = newest if target is None else min(newest, target[tp])
            end[tp] = max(start[tp], cap)
    if max_rows is not None:
        lags = {tp: end[tp] - start[tp] for tp in end if tp in start}
        for tp, admitted in split_limit(lags, max_rows).items():
            end[tp] = start[tp] + admitted
    return end


def check_range_start(
    tp: TopicPartition, start: int, end: int, earliest: int, fail_on_data_loss: bool
) -> int:
    """Where reading ``[start, end)`` begins, given the partition's earliest offset now.

    Offsets below ``earliest`` were deleted (retention) before being read: data loss.

    >>> check_range_start(("t", 0), 10, 20, 15, fail_on_data_loss=False)
    15
    """
    if earliest <= start:
        return start
    message = (
        f"offsets [{start}, {min(earliest, end)}) of {_name(tp)} are no longer in Kafka "
        f"(its earliest offset is now {earliest})"
    )
    report_data_loss(message, fail_on_data_loss)
    return min(earliest, end)


# -- talking to Kafka -------------------------------------------------------------------------


@contextlib.contextmanager
def _kafka_errors(config: SourceConfig, what: str) -> Iterator[None]:
    """Turn confluent-kafka's exceptions into :class:`SourceError` naming the brokers."""
    from confluent_kafka import KafkaException

    try:
        yield
    except KafkaException as exc:
        raise SourceError(f"{what} from Kafka at {config.bootstrap_servers}: {exc}") from exc


def new_consumer(config: SourceConfig) -> Any:
    """A confluent-kafka Consumer for ``config`` (assign-only; never commits)."""
    from confluent_kafka import Consumer

    with _kafka_errors(config, "cannot create a consumer"):
        return Consumer(config.consumer_config())


def current_partitions(consumer: Any, config: SourceConfig) -> list[TopicPartition]:
    """The partitions the source reads now, from fresh metadata."""
    with _kafka_errors(config, "cannot get topic metadata"):
        metadata = consumer.list_topics(timeout=config.timeout_s)
    existing = {
        (name, partition)
        for name, topic in metadata.topics.items()
        if topic.error is None
        for partition in topic.partitions
    }
    if config.strategy == "assign":
        return sorted(tp for tp in config.assigned if tp in existing)
    if config.strategy == "subscribe":
        wanted = set(config.topics)
        return sorted(tp for tp in existing if tp[0] in wanted)
    pattern = re.compile(config.pattern or "")
    return sorted(tp for tp in existing if not tp[0].startswith("__") and pattern.fullmatch(tp[0]))


def query_offsets(
    consumer: Any, config: SourceConfig, partitions: Sequence[TopicPartition], which: int
) -> Offsets:
    """The earliest (``which=-2``) or latest (-1) offset of each partition, in one request.

    "Latest" is the high watermark, or the last stable offset under read_committed.
    """
    if not partitions:
        return {}
    from confluent_kafka import TopicPartition as KafkaTP

    with _kafka_errors(config, "cannot list offsets"):
        found = consumer.offsets_for_times(
            [KafkaTP(topic, partition, which) for topic, partition in partitions],
            timeout=config.timeout_s,
        )
    offsets: Offsets = {}
    for tp in found:
        if tp.error is not None or tp.offset < 0:
            raise SourceError(f"cannot list the offsets of {tp.topic}-{tp.partition}: {tp.error}")
        offsets[(tp.topic, tp.partition)] = tp.offset
    return offsets


# -- the data source --------------------------------------------------------------------------


class KafkaDataSource(DataSource):
    """``spark.readStream.format("blockgz-kafka")``: Spark's Kafka source, in Python."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)  # type: ignore[arg-type]
        self.config = parse_options(options)

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        if self.config.emit_ranges:
            return RANGE_SCHEMA_DDL
        return kafka_schema_ddl(self.config.include_headers)

    def streamReader(self, schema: Any) -> KafkaStreamReader:
        return KafkaStreamReader(self.config)


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """One Spark task: the offsets ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches on the driver; :meth:`read` runs on executors on a pickled copy."""

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        self._consumer: Any = None  # driver only; never pickled
        self._target: Offsets | None = None  # Trigger.AvailableNow's frozen end
        self._latest: Offsets = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_consumer"] = None
        return state

    @property
    def consumer(self) -> Any:
        if self._consumer is None:
            self._consumer = new_consumer(self.config)
        return self._consumer

    def initialOffset(self) -> dict:
        partitions = current_partitions(self.consumer, self.config)
        if self.config.strategy == "assign" and len(partitions) < len(self.config.assigned):
            missing = sorted(set(self.config.assigned) - set(partitions))
            raise SourceError(f"assigned partitions do not exist: {_names(missing)}")
        earliest = query_offsets(self.consumer, self.config, partitions, EARLIEST)
        latest = query_offsets(self.consumer, self.config, partitions, LATEST)
        spec = self.config.starting
        if spec == "s3":
            spec = manifest_start(self.config.sink_options, partitions)
        start = resolve_start(
            spec,
            partitions,
            earliest,
            latest,
            every_partition=self.config.strategy == "assign",
        )
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.config.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.config.max_offsets_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        partitions = current_partitions(self.consumer, self.config)
        self._target = query_offsets(self.consumer, self.config, partitions, LATEST)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if isinstance(limit, ReadMaxRows):
            max_rows: int | None = limit.max_rows
        elif isinstance(limit, ReadAllAvailable):
            max_rows = None
        else:
            raise SourceError(f"the {SOURCE_NAME} source does not support the read limit {limit}")
        begin = offsets_from_json(start)
        partitions = current_partitions(self.consumer, self.config)
        latest = query_offsets(self.consumer, self.config, partitions, LATEST)
        new = [tp for tp in partitions if tp not in begin]
        earliest_new = query_offsets(self.consumer, self.config, new, EARLIEST)
        self._latest = latest
        end = plan_end(
            begin,
            latest,
            earliest_new,
            max_rows=max_rows,
            target=self._target,
            fail_on_data_loss=self.config.fail_on_data_loss,
        )
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = offsets_from_json(start), offsets_from_json(end)
        return [
            KafkaInputPartition(topic, partition, begin[(topic, partition)], stop)
            for (topic, partition), stop in sorted(until.items())
            if (topic, partition) in begin and begin[(topic, partition)] < stop
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaInputPartition)
        if self.config.emit_ranges:
            return iter([(partition.topic, partition.partition, partition.start, partition.end)])
        return read_range(self.config, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets, Kafka is not told."""

    def stop(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.close()


# -- reading one range ------------------------------------------------------------------------


class _BatchBuilder:
    """Collects one partition's records column by column into Arrow record batches."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        import pyarrow as pa

        self.pa = pa
        self.schema = kafka_arrow_schema(include_headers)
        self.topic = pa.scalar(topic, pa.string())
        self.partition = pa.scalar(partition, pa.int32())
        self.include_headers = include_headers
        self._clear()

    def _clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.types: list[int] = []
        self.headers: list[Any] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, messages: list[Any]) -> None:
        """Append error-free messages (column by column: one pass per field, no per-row calls)."""
        self.keys += [m.key() for m in messages]
        self.values += [m.value() for m in messages]
        self.offsets += [m.offset() for m in messages]
        stamps = [m.timestamp() for m in messages]
        self.timestamps += [millis * 1000 for _, millis in stamps]
        # librdkafka NOT_AVAILABLE/CREATE/LOG_APPEND = 0/1/2 → Spark's -1/0/1
        self.types += [kind - 1 for kind, _ in stamps]
        if self.include_headers:
            self.headers += [m.headers() or None for m in messages]

    def flush(self) -> Any:
        """The collected records as one ``pyarrow.RecordBatch``; starts a new one."""
        pa, n, fields = self.pa, len(self), self.schema
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(self.topic, n),
            pa.repeat(self.partition, n),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, fields.field("timestamp").type),
            pa.array(self.types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, fields.field("headers").type))
        self._clear()
        return pa.RecordBatch.from_arrays(arrays, schema=fields)


def read_range(config: SourceConfig, part: KafkaInputPartition) -> Iterator[Any]:
    """The records ``[part.start, part.end)`` of one partition as Arrow batches, in order."""
    consumer = new_consumer(config)
    try:
        yield from _read_range(consumer, config, part)
    finally:
        consumer.close()


def _read_range(consumer: Any, config: SourceConfig, part: KafkaInputPartition) -> Iterator[Any]:
    from confluent_kafka import KafkaError
    from confluent_kafka import TopicPartition as KafkaTP

    tp = (part.topic, part.partition)
    position = _seek(consumer, config, part, part.start)
    builder = _BatchBuilder(part.topic, part.partition, config.include_headers)
    last_progress, resets = time.monotonic(), 0
    while position < part.end:
        wanted = min(part.end - position, BATCH_ROWS)  # consume() waits for all it asks for
        with _kafka_errors(config, f"cannot read {_name(tp)}"):
            messages = consumer.consume(num_messages=wanted, timeout=_CONSUME_WAIT_S)
        if not messages:  # a gap (compaction, transaction markers), or a slow broker
            position = max(position, consumer.position([KafkaTP(*tp)])[0].offset)
            _check_stall(config, tp, position, part, last_progress)
            continue
        last_progress = time.monotonic()
        # Records up to the first error event, within [position, part.end): the broker sends
        # whole record batches, so the first ones may lie before the position.
        clean = next((n for n, m in enumerate(messages) if m.error() is not None), len(messages))
        offsets = [m.offset() for m in messages[:clean]]
        low, high = bisect_left(offsets, position), bisect_left(offsets, part.end)
        while low < high:
            take = min(high, low + BATCH_ROWS - len(builder))
            builder.add(messages[low:take])
            low = take
            if len(builder) >= BATCH_ROWS:
                yield builder.flush()
        if high > 0 and offsets[high - 1] >= position:
            position = offsets[high - 1] + 1
        if high < clean:  # past the end of the range
            position = part.end
        for message in messages[clean:]:
            if position >= part.end:
                break
            error = message.error()
            if error is None:
                offset = message.offset()
                if position <= offset < part.end:
                    builder.add([message])
                    position = offset + 1
                    if len(builder) >= BATCH_ROWS:
                        yield builder.flush()
                elif offset >= part.end:
                    position = part.end
            elif error.code() == KafkaError._PARTITION_EOF:
                _check_end(tp, message.offset(), part.end, config.fail_on_data_loss)
                position = part.end
                break
            elif error.code() == KafkaError._AUTO_OFFSET_RESET and resets < 3:
                resets += 1  # offset out of range: deleted meanwhile, or the partition shrank
                position = _seek(consumer, config, part, position)
                break
            else:
                raise SourceError(f"cannot read {_name(tp)} at {config.bootstrap_servers}: {error}")
    if len(builder):
        yield builder.flush()


def _seek(consumer: Any, config: SourceConfig, part: KafkaInputPartition, offset: int) -> int:
    """Assign the consumer at ``offset``, or past offsets Kafka no longer has; return it."""
    from confluent_kafka import TopicPartition as KafkaTP

    tp = (part.topic, part.partition)
    with _kafka_errors(config, f"cannot get the offsets of {_name(tp)}"):
        earliest, high = consumer.get_watermark_offsets(
            KafkaTP(*tp), timeout=config.timeout_s, cached=False
        )
    begin = check_range_start(tp, offset, part.end, earliest, config.fail_on_data_loss)
    if begin >= min(high, part.end):
        _check_end(tp, high, part.end, config.fail_on_data_loss)
        return part.end
    consumer.assign([KafkaTP(part.topic, part.partition, begin)])
    return begin


def _check_end(tp: TopicPartition, high: int, end: int, fail_on_data_loss: bool) -> None:
    """The partition ends (``high``) before the planned end of the range: data loss."""
    if high < end:
        message = f"{_name(tp)} ends at offset {high}, but the batch planned to read up to {end}"
        report_data_loss(message, fail_on_data_loss)


def _check_stall(
    config: SourceConfig,
    tp: TopicPartition,
    position: int,
    part: KafkaInputPartition,
    last_progress: float,
) -> None:
    if time.monotonic() - last_progress > config.timeout_s:
        raise SourceError(
            f"no record of {_name(tp)} at offset {position} arrived in "
            f"{config.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs); "
            f"the range to read is [{part.start}, {part.end})"
        )
