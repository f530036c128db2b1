"""Read one topic-partition's offset range from Kafka as Arrow batches of Kafka rows.

Used by the ``blockgz-kafka`` source's tasks, and by the ``blockgz`` sink's tasks when they
read their ranges themselves (:func:`read_range_rows`, the sink's ``blockgz.input.reader``
in ``blockgz export``): then Spark plans and replays only the ranges, and records never cross
the JVM. Gaps (compaction, transaction markers) are skipped exactly; offsets that vanished
before being read are data loss (``failOnDataLoss``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from blockgz.errors import SourceError
from blockgz.sink.kafka.offsets import check_range_start, report_data_loss, tp_name
from blockgz.sink.kafka.options import SourceSettings, TopicPartition, parse_options
from blockgz.sink.records import kafka_arrow_schema

log = logging.getLogger("blockgz.kafka_source")

BATCH_ROWS = 10_000  # rows per Arrow batch handed to Spark
_CONSUME_WAIT_S = 0.2  # one consume() call; the poll timeout bounds the whole wait


class OffsetRange(Protocol):
    """The offsets ``[start, end)`` of one topic-partition (read-only: frozen ranges qualify)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


@dataclass(frozen=True)
class Range:
    """A plain :class:`OffsetRange`."""

    topic: str
    partition: int
    start: int
    end: int


@contextlib.contextmanager
def kafka_errors(config: SourceSettings, what: str) -> Iterator[None]:
    """Turn confluent-kafka's exceptions into :class:`SourceError` naming the brokers."""
    from confluent_kafka import KafkaException

    try:
        yield
    except KafkaException as exc:
        raise SourceError(f"{what} from Kafka at {config.bootstrap_servers}: {exc}") from exc


#: librdkafka's answers while a broker restarts or a leader moves: worth asking again.
#: ``_UNKNOWN_PARTITION`` is its local answer for a partition its metadata lost while the
#: broker was away (seen in a restart test); the deadline still ends a partition that is gone.
_TRANSIENT = (
    "_TRANSPORT",
    "_ALL_BROKERS_DOWN",
    "_UNKNOWN_PARTITION",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",
)


def asking_again(config: SourceSettings, what: str, ask: Any) -> Any:
    """``ask()``, asked again while Kafka answers with a transient error (a broker restarting:
    librdkafka fails a metadata or offsets request at once when no broker is up), with backoff
    up to ``kafkaConsumer.pollTimeoutMs``; then, or on any other error, a :class:`SourceError`.
    (confluent-kafka retries produce requests, not these admin-style calls.)

    >>> calls = []
    >>> asking_again(parse_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t"}),
    ...              "cannot list offsets", lambda: calls.append(1) or 42), calls
    (42, [1])
    """
    from confluent_kafka import KafkaError, KafkaException

    transient = {getattr(KafkaError, name) for name in _TRANSIENT}
    deadline = time.monotonic() + config.timeout_s
    delay = 0.1
    while True:
        try:
            return ask()
        except KafkaException as exc:
            error = exc.args[0]
            again = error.retriable() or error.code() in transient
            if not again or time.monotonic() + delay > deadline:
                raise SourceError(
                    f"{what} from Kafka at {config.bootstrap_servers}: {exc}"
                ) from exc
            log.warning(
                "%s from Kafka at %s (%s): asking again",
                what,
                config.bootstrap_servers,
                error.str(),
            )
            time.sleep(delay)  # backoff between attempts; the deadline bounds the wait
            delay = min(delay * 2, 2.0)


def new_consumer(config: SourceSettings) -> Any:
    """A confluent-kafka Consumer for ``config`` (assign-only; never commits)."""
    from confluent_kafka import Consumer

    with kafka_errors(config, "cannot create a consumer"):
        return Consumer(config.consumer_config())


def read_range_rows(options: Mapping[str, str], batches: Iterator[Any]) -> Iterator[Any]:
    """The sink's input reader for offset-range rows (``topic, partition, startOffset,
    endOffset``): each range read from Kafka, as Arrow batches of Kafka rows. ``options`` are
    the source's (``kafka.bootstrap.servers``, ...)."""
    config = parse_options(options)
    for batch in batches:
        for row in batch.to_pylist():
            part = Range(row["topic"], row["partition"], row["startOffset"], row["endOffset"])
            log.info("%s-%d: reading [%d, %d)", part.topic, part.partition, part.start, part.end)
            yield from read_range(config, part)


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


def read_range(config: SourceSettings, part: OffsetRange) -> Iterator[Any]:
    """The records ``[part.start, part.end)`` of one partition as Arrow batches, in order."""
    consumer = new_consumer(config)
    try:
        yield from _read_range(consumer, config, part)
    finally:
        consumer.close()


def _read_range(consumer: Any, config: SourceSettings, part: OffsetRange) -> Iterator[Any]:
    from confluent_kafka import KafkaError
    from confluent_kafka import TopicPartition as KafkaTP

    tp = (part.topic, part.partition)
    position = _seek(consumer, config, part, part.start)
    builder = _BatchBuilder(part.topic, part.partition, config.include_headers)
    last_progress, resets = time.monotonic(), 0
    while position < part.end:
        wanted = min(part.end - position, BATCH_ROWS)  # consume() waits for all it asks for
        with kafka_errors(config, f"cannot read {tp_name(tp)}"):
            messages = consumer.consume(num_messages=wanted, timeout=_CONSUME_WAIT_S)
        if not messages:  # a gap (compaction, transaction markers), or a slow broker
            position = max(position, consumer.position([KafkaTP(*tp)])[0].offset)
            _check_stall(config, tp, position, part, last_progress)
            continue
        last_progress = time.monotonic()
        # Records up to the first error event, within [position, part.end): the broker sends
        # whole record batches, so the first ones may lie before the position.
        clean = next((n for n, m in enumerate(messages) if m.error() is not None), len(messages))
        full, position = _add_in_range(builder, messages[:clean], position, part.end)
        yield from full
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
            elif error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                # librdkafka looks up the coordinator of the consumer's group.id even though
                # this consumer only assigns and never commits: the group is never used, so
                # the job needs no ACL on it.
                continue
            elif error.code() == KafkaError._AUTO_OFFSET_RESET and resets < 3:
                resets += 1  # offset out of range: deleted meanwhile, or the partition shrank
                position = _seek(consumer, config, part, position)
                break
            else:
                where = f"{tp_name(tp)} at {config.bootstrap_servers}"
                raise SourceError(f"cannot read {where}: {error}")
    if len(builder):
        yield builder.flush()


def _add_in_range(
    builder: _BatchBuilder, messages: list[Any], position: int, end: int
) -> tuple[list[Any], int]:
    """Add the records of ``messages`` (in offset order, no error event among them) that lie in
    ``[position, end)`` to ``builder``; return the batches that filled up and the position
    after them (``end`` when a record lies past it)."""
    offsets = [m.offset() for m in messages]
    low, high = bisect_left(offsets, position), bisect_left(offsets, end)
    full = []
    while low < high:
        take = min(high, low + BATCH_ROWS - len(builder))
        builder.add(messages[low:take])
        low = take
        if len(builder) >= BATCH_ROWS:
            full.append(builder.flush())
    if high > 0 and offsets[high - 1] >= position:
        position = offsets[high - 1] + 1
    if high < len(messages):  # past the end of the range
        position = end
    return full, position


def _seek(consumer: Any, config: SourceSettings, part: OffsetRange, offset: int) -> int:
    """Assign the consumer at ``offset``, or past offsets Kafka no longer has; return it."""
    from confluent_kafka import TopicPartition as KafkaTP

    tp = (part.topic, part.partition)
    with kafka_errors(config, f"cannot get the offsets of {tp_name(tp)}"):
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
    config: SourceSettings,
    tp: TopicPartition,
    position: int,
    part: OffsetRange,
    last_progress: float,
) -> None:
    if time.monotonic() - last_progress > config.timeout_s:
        raise SourceError(
            f"no record of {tp_name(tp)} at offset {position} arrived in "
            f"{config.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs); "
            f"the range to read is [{part.start}, {part.end})"
        )
