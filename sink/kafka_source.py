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
import logging
import re
import time
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from blockgz.errors import SourceError
from sink.kafka_offsets import (
    check_range_start,
    manifest_start,
    offsets_from_json,
    offsets_to_json,
    plan_end,
    report_data_loss,
    resolve_start,
    tp_name,
    tp_names,
)
from sink.kafka_options import (
    EARLIEST,
    LATEST,
    SOURCE_NAME,
    Offsets,
    SourceConfig,
    TopicPartition,
    parse_options,
)
from sink.records import kafka_arrow_schema, kafka_schema_ddl

log = logging.getLogger("blockgz.kafka_source")

BATCH_ROWS = 10_000  # rows per Arrow batch handed to Spark
_CONSUME_WAIT_S = 0.2  # one consume() call; the poll timeout bounds the whole wait
#: The rows of ``blockgz.emit=ranges``: one per task, the offsets ``[startOffset, endOffset)``.
RANGE_SCHEMA_DDL = "topic STRING, partition INT, startOffset BIGINT, endOffset BIGINT"
RANGE_COLUMNS = ("topic", "partition", "startOffset", "endOffset")


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
            raise SourceError(f"assigned partitions do not exist: {tp_names(missing)}")
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
        with _kafka_errors(config, f"cannot read {tp_name(tp)}"):
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
                where = f"{tp_name(tp)} at {config.bootstrap_servers}"
                raise SourceError(f"cannot read {where}: {error}")
    if len(builder):
        yield builder.flush()


def _seek(consumer: Any, config: SourceConfig, part: KafkaInputPartition, offset: int) -> int:
    """Assign the consumer at ``offset``, or past offsets Kafka no longer has; return it."""
    from confluent_kafka import TopicPartition as KafkaTP

    tp = (part.topic, part.partition)
    with _kafka_errors(config, f"cannot get the offsets of {tp_name(tp)}"):
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
        message = f"{tp_name(tp)} ends at offset {high}, but the batch planned to read up to {end}"
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
            f"no record of {tp_name(tp)} at offset {position} arrived in "
            f"{config.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs); "
            f"the range to read is [{part.start}, {part.end})"
        )
