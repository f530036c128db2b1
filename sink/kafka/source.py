"""``blockgz-kafka``: a Spark streaming source for Kafka in Python, on confluent-kafka.

For Spark installations without the ``spark-sql-kafka`` jar. It takes the same options as
Spark's built-in ``kafka`` source and gives the same rows (:mod:`blockgz.sink.records`), so a query
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
reads the offset ranges of up to ``blockgz.ranges.per.task`` topic-partitions, one after the
other, each with its own consumer created inside ``read()``: beyond 64 ranges in a batch, small
ranges are packed together in partition order (a range of 10,000 offsets or more is a task
alone).

With ``blockgz.emit=ranges`` (what ``blockgz export`` uses with ``blockgz.tasks.read.kafka``)
each range gives one row, ``topic, partition, startOffset, endOffset``, instead of the records:
the ``blockgz`` sink then reads that range from Kafka itself (its input reader is
:func:`blockgz.sink.kafka.ranges.read_range_rows`), so records never cross the JVM. Spark still
plans, logs and replays the ranges, so exactly-once is unchanged.

Example (needs a running Spark and Kafka, so it is not a doctest)::

    from blockgz.sink.session import spark_session

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
import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from blockgz.errors import SourceError, TopicRecreatedError
from blockgz.runtime.gc_control import settle as settle_heap
from blockgz.sink.kafka.clients import asking_again, first_record_consumer, new_consumer
from blockgz.sink.kafka.held_ends import plan_held
from blockgz.sink.kafka.holding import HoldRules, held_counts, holding
from blockgz.sink.kafka.offsets import (
    cap_rows,
    manifest_start,
    offsets_from_json,
    offsets_to_json,
    plan_end,
    resolve_start,
    tp_names,
)
from blockgz.sink.kafka.oldest import offsets_for_times
from blockgz.sink.kafka.options import (
    EARLIEST,
    GROUP_RECORDS,
    LATEST,
    SOURCE_NAME,
    Offsets,
    SourceSettings,
    StartSpec,
    TopicPartition,
    parse_options,
)
from blockgz.sink.kafka.ranges import Range, read_ranges
from blockgz.sink.records import kafka_schema_ddl

log = logging.getLogger("blockgz.kafka_source")

#: The rows of ``blockgz.emit=ranges``: one per task, the offsets ``[startOffset, endOffset)``.
RANGE_SCHEMA_DDL = "topic STRING, partition INT, startOffset BIGINT, endOffset BIGINT"
RANGE_COLUMNS = ("topic", "partition", "startOffset", "endOffset")
#: How long a running export's batch waits for a large read of first records (their times
#: say when a partial file closes); the read goes on, and a later batch plans with it. No
#: wait: 0.1 s made batch 0 at 10,000 partitions 0.13 s slower and answered none sooner.
FIRST_TIMES_WAIT_S = 0.0
#: Ranges are packed into fewer tasks only beyond this many, so a batch of few partitions keeps
#: a task each (as many as a large cluster has cores).
MIN_TASKS = 64


# -- talking to Kafka -------------------------------------------------------------------------


def current_partitions(consumer: Any, config: SourceSettings) -> list[TopicPartition]:
    """The partitions the source reads now, from fresh metadata."""
    metadata = asking_again(
        config, "cannot get topic metadata", lambda: consumer.list_topics(timeout=config.timeout_s)
    )
    topics = {name: topic for name, topic in metadata.topics.items() if topic.error is None}
    if config.strategy == "assign":
        return sorted(tp for tp in config.assigned if tp[1] in _partitions_of(topics, tp[0]))
    if config.strategy == "subscribe":
        names: Iterable[str] = set(config.topics)
    else:  # the pattern is matched once per topic, not per partition
        pattern = re.compile(config.pattern or "")
        names = [n for n in topics if not n.startswith("__") and pattern.fullmatch(n)]
    return sorted((name, p) for name in names for p in _partitions_of(topics, name))


def _partitions_of(topics: Mapping[str, Any], name: str) -> Mapping[int, Any]:
    """The partitions of topic ``name`` in metadata ``topics`` (none when it is absent)."""
    topic = topics.get(name)
    return topic.partitions if topic is not None else {}


def query_offsets(
    consumer: Any, config: SourceSettings, partitions: Sequence[TopicPartition], which: int
) -> Offsets:
    """The earliest (``which=-2``) or latest (-1) offset of each partition, in one request
    per :data:`~blockgz.sink.kafka.oldest.OFFSETS_CHUNK` partitions.

    "Latest" is the high watermark, or the last stable offset under read_committed.
    """
    if not partitions:
        return {}
    from confluent_kafka import TopicPartition as KafkaTP

    wanted = [KafkaTP(topic, partition, which) for topic, partition in partitions]
    found = asking_again(
        config,
        "cannot list offsets",
        lambda: offsets_for_times(consumer, wanted, config.timeout_s),
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
    """The offsets ``[start, end)`` of one topic-partition (a Spark task alone)."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class KafkaRangeGroup(InputPartition):
    """One Spark task: the offset ranges of several topic-partitions, read one after the other."""

    ranges: tuple[Range, ...]


def group_ranges(
    ranges: Sequence[Range], per_task: int, records: int = GROUP_RECORDS
) -> list[tuple[Range, ...]]:
    """``ranges`` packed in order into tasks of at most ``per_task`` ranges and ``records``
    offsets; a range of ``records`` offsets or more is a task alone. A pure function of the
    ranges, so a replayed batch gets the same tasks.

    >>> sizes = [Range("t", p, 0, n) for p, n in enumerate([5, 5, 5, 20, 5])]
    >>> [[r.partition for r in group] for group in group_ranges(sizes, 2, records=12)]
    [[0, 1], [2], [3], [4]]
    """
    groups: list[tuple[Range, ...]] = []
    current: list[Range] = []
    size = 0
    for part in ranges:
        length = part.end - part.start
        if current and (len(current) >= per_task or size + length > records):
            groups.append(tuple(current))
            current, size = [], 0
        current.append(part)
        size += length
    if current:
        groups.append(tuple(current))
    return groups


#: How long the answers asked with a query's start may stand in for the first batch's own.
FIRST_ASKED_FOR_S = 5.0


@dataclass(frozen=True)
class _FirstAsked:
    """What a query's start was planned with: its partitions, their latest offsets and the
    topic ids being asked (``None``: the run holds to none), at ``asked_at`` (monotonic s).
    They stand in for the answers of the batch that begins at that start, planned right
    after; for no other batch (a replayed batch 0 asks the start without planning a batch)."""

    start: dict
    partitions: list[TopicPartition]
    latest: Offsets
    lives: Future[dict[str, str | None]] | None
    asked_at: float

    def serve(self, start: dict) -> bool:
        """Whether these answers may plan the batch that begins at ``start`` now."""
        return start == self.start and time.monotonic() - self.asked_at < FIRST_ASKED_FOR_S


def start_needs(spec: StartSpec, which: int) -> bool:
    """Whether resolving ``startingOffsets`` ``spec`` needs the earliest (``which=-2``) or the
    latest (-1) offsets (each costs a ListOffsets request per 500 partitions).

    >>> start_needs("earliest", LATEST), start_needs({("t", 0): 5}, EARLIEST)
    (False, True)
    """
    if isinstance(spec, dict):  # partitions it leaves out start at earliest
        return which in spec.values() or (which == EARLIEST)
    return spec == ("earliest" if which == EARLIEST else "latest")


def _task(group: tuple[Range, ...]) -> InputPartition:
    """One Spark task of :meth:`KafkaStreamReader.partitions`."""
    if len(group) > 1:
        return KafkaRangeGroup(group)
    only = group[0]
    return KafkaInputPartition(only.topic, only.partition, only.start, only.end)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches on the driver; :meth:`read` runs on executors on a pickled copy."""

    def __init__(self, config: SourceSettings) -> None:
        self.config = config
        self._consumer: Any = None  # driver only; never pickled
        self._admin: Any = None  # driver only (topic ids, time cuts); never pickled
        self._target: Offsets | None = None  # Trigger.AvailableNow's frozen end
        self._latest: Offsets = {}
        self._clock: Any = None  # driver only: held partitions' timestamps (HoldClock)
        self._pool: Any = None  # driver only: asks the live topic ids beside the offsets
        self._initial: dict | None = None  # the query's first offsets, once known
        #: What the first offsets were asked with, for the ``latestOffset`` Spark asks right
        #: after (then dropped): batch 0 asks each once.
        self._first_asked: _FirstAsked | None = None
        self._planned = False  # whether this run has planned a batch's end
        #: Per partition, the records the last planned batch held back on purpose.
        self.held: Offsets = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_consumer"] = None
        state["_admin"] = None
        state["_clock"] = None
        state["_pool"] = None
        state["_first_asked"] = None  # driver only: its topic-id answer is a Future
        return state

    @property
    def consumer(self) -> Any:
        if self._consumer is None:
            self._consumer = new_consumer(self.config)
        return self._consumer

    @property
    def admin(self) -> Any:
        """The driver's admin client: the live topic ids, and held partitions' time cuts."""
        if self._admin is None:
            from blockgz.sink.kafka.lives import shared_admin

            self._admin = shared_admin(self.config.admin_config())
        return self._admin

    def initialOffset(self) -> dict:
        """Where the query starts. Asked once: Spark asks again when it plans the first batch
        (``getBatch``), and the answer must not move (nor cost the broker twice)."""
        if self._initial is None:
            self._initial = self._initial_offset()
        return self._initial

    def _initial_offset(self) -> dict:
        lives = self._ask_lives()  # answered while the offsets are asked
        frozen = self._target  # --once: the end Spark froze a moment ago, asked with its own
        partitions = (
            current_partitions(self.consumer, self.config) if frozen is None else sorted(frozen)
        )
        if self.config.strategy == "assign" and len(partitions) < len(self.config.assigned):
            missing = sorted(set(self.config.assigned) - set(partitions))
            raise SourceError(f"assigned partitions do not exist: {tp_names(missing)}")
        spec = self.config.starting
        if spec == "s3":
            spec = manifest_start(self.config.manifest_options, partitions)
        earliest = (
            query_offsets(self.consumer, self.config, partitions, EARLIEST)
            if start_needs(spec, EARLIEST)
            else {}
        )
        # Asked even where the start does not need them: the first batch's end
        # (latestOffset, asked right after) uses them rather than asking again. A --once run
        # reads no further than its frozen end, which stands in for them.
        latest = (
            query_offsets(self.consumer, self.config, partitions, LATEST)
            if frozen is None
            else frozen
        )
        start = offsets_to_json(
            resolve_start(
                spec,
                partitions,
                earliest,
                latest,
                every_partition=self.config.strategy == "assign",
            )
        )
        self._first_asked = _FirstAsked(start, partitions, latest, lives, time.monotonic())
        return start

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
        first, self._first_asked = self._first_asked, None
        first_batch, self._planned = not self._planned, True  # this run's: Spark plans after
        if first is not None and first.serve(start):  # the first batch: asked with its start
            partitions, latest, lives = first.partitions, first.latest, first.lives
        else:
            lives = self._ask_lives()  # answered while the offsets are asked
            partitions = current_partitions(self.consumer, self.config)
            latest = query_offsets(self.consumer, self.config, partitions, LATEST)
        new = [tp for tp in partitions if tp not in begin]
        earliest_new = query_offsets(self.consumer, self.config, new, EARLIEST)
        self._check_lives(lives)  # before plan_end: a recreated topic is not data loss
        self._latest = latest
        end = plan_end(
            begin,
            latest,
            earliest_new,
            target=self._target,
            fail_on_data_loss=self.config.fail_on_data_loss,
        )
        rules = self._hold_rules()
        if rules is not None:
            end = self._hold(begin, end, rules, first_batch=first_batch)
        flush_size = rules.flush_size if rules is not None else None
        return offsets_to_json(cap_rows(begin, end, max_rows, flush_size=flush_size))

    def _hold_rules(self) -> HoldRules | None:
        """The rotation rules partial files are held by (``blockgz.hold.partial.files``), or
        ``None``: every batch reads all it may (``--once`` runs by default)."""
        rules = self.config.hold_rules
        if holding(self.config.hold_mode, rules, once=self._target is not None):
            return rules
        return None

    def _hold(
        self, begin: Offsets, end: Offsets, rules: HoldRules, *, first_batch: bool = False
    ) -> Offsets:
        """``end`` cut back so each partition's batch ends where one of its files closes
        (:func:`~blockgz.sink.kafka.held_ends.plan_held`); records past it stay in Kafka and
        are counted in :attr:`held`. ``first_batch``: this run's first, after which Spark
        plans the query (a large read of first records then starts at the next batch, not
        beside that planning)."""
        from blockgz.sink.kafka.oldest import HoldClock

        if self._clock is None:
            self._clock = HoldClock(
                self.consumer,
                timeout_s=min(2.0, self.config.timeout_s),
                new_consumer=lambda: first_record_consumer(self.config),
                admin=self.admin,
                committed=self.config.read_committed,
            )
        # A running export's batch does not wait for the first records of thousands of
        # partitions: those not read yet are held until a later batch. A --once run, which
        # ends when a batch plans nothing, waits for the answers.
        wait_s = FIRST_TIMES_WAIT_S if self._target is None else None
        planned = plan_held(self._clock, begin, end, rules, wait_s=wait_s, later=first_batch)
        self.held = held_counts(begin, end, planned)
        if reading := self._clock.reading():
            log.info(
                "held until their first records are read (in the background): %d partitions",
                reading,
            )
        if self.held:
            log.info(
                "held: %d records of %d partitions waiting for %s",
                sum(self.held.values()),
                len(self.held),
                rules.waiting_for(),
            )
        return planned

    def _ask_lives(self) -> Future[dict[str, str | None]] | None:
        """The live ids of the run's topics, asked on a thread (``None``: the run holds to no
        ids), so the broker's answer costs no time beside the offsets' requests."""
        if not self.config.topic_ids:
            return None
        from blockgz.sink.kafka.lives import live_topic_ids

        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="blockgz-lives")
        return self._pool.submit(live_topic_ids, self.admin, self.config.topic_ids)

    def _check_lives(self, lives: Future[dict[str, str | None]] | None) -> None:
        """Before planning a batch: each topic still has the id the run started with, or the
        query stops (:class:`~blockgz.errors.TopicRecreatedError`; a topic recreated under its
        name must not be read as the old one's continuation)."""
        if lives is None:
            return
        from blockgz.sink.kafka.lives import changed_life, source_refusal

        changed = changed_life(self.config.topic_ids, lives.result())
        if changed is not None:
            raise TopicRecreatedError(source_refusal(*changed))

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The batch's tasks: the non-empty ranges in partition order, small ones grouped
        (:func:`group_ranges`) by up to ``blockgz.ranges.per.task``, and by no more than
        leaves :data:`MIN_TASKS` tasks."""
        begin, until = offsets_from_json(start), offsets_from_json(end)
        ranges = [
            Range(topic, partition, begin[(topic, partition)], stop)
            for (topic, partition), stop in sorted(until.items())
            if (topic, partition) in begin and begin[(topic, partition)] < stop
        ]
        per_task = min(self.config.ranges_per_task, -(-len(ranges) // MIN_TASKS))
        return [_task(group) for group in group_ranges(ranges, max(per_task, 1))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, KafkaRangeGroup):
            ranges: tuple[Any, ...] = partition.ranges
        else:
            assert isinstance(partition, KafkaInputPartition)
            ranges = (partition,)
        # collections skip the worker's long-lived objects (blockgz.runtime.gc_control)
        settle_heap()
        if self.config.emit_ranges:
            return iter([(r.topic, r.partition, r.start, r.end) for r in ranges])
        return read_ranges(self.config, ranges)  # small ones with one consumer

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets, Kafka is not told."""

    def stop(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)
        clock, self._clock = self._clock, None
        if clock is not None:
            clock.close()
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.close()
