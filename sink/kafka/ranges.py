"""Read one topic-partition's offset range from Kafka as Arrow batches of Kafka rows.

Used by the ``blockgz-kafka`` source's tasks, and by the ``blockgz`` sink's tasks when they
read their ranges themselves (:func:`read_range_rows`, the sink's ``blockgz.input.reader``
in ``blockgz export``): then Spark plans and replays only the ranges, and records never cross
the JVM. A task's small ranges are read together, with one consumer assigned to all of them
(:func:`read_ranges`). Gaps (compaction, transaction markers) are skipped exactly; offsets that
vanished before being read are data loss (``failOnDataLoss``).
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from blockgz.errors import SourceError
from blockgz.sink.kafka.clients import kafka_errors, new_consumer
from blockgz.sink.kafka.offsets import check_range_start, report_data_loss, tp_name
from blockgz.sink.kafka.options import SourceSettings, TopicPartition, parse_options
from blockgz.sink.records import kafka_arrow_schema

log = logging.getLogger("blockgz.kafka_source")

BATCH_ROWS = 10_000  # rows per Arrow batch handed to Spark
_CONSUME_WAIT_S = 0.2  # one consume() call; the poll timeout bounds the whole wait
#: Ranges of at most this many offsets in all are read together, with one consumer (issue 44).
#: At most ``BATCH_ROWS``: each range's records go to Spark as one Arrow batch.
TOGETHER_OFFSETS = BATCH_ROWS


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


def read_range_rows(options: Mapping[str, str], batches: Iterator[Any]) -> Iterator[Any]:
    """The sink's input reader for offset-range rows (``topic, partition, startOffset,
    endOffset``): each range read from Kafka, as Arrow batches of Kafka rows, each batch of one
    topic-partition (:func:`read_ranges`). ``options`` are the source's
    (``kafka.bootstrap.servers``, ...)."""
    config = parse_options(options)
    parts: list[Range] = []
    for batch in batches:
        for row in batch.to_pylist():
            part = Range(row["topic"], row["partition"], row["startOffset"], row["endOffset"])
            log.info("%s-%d: reading [%d, %d)", part.topic, part.partition, part.start, part.end)
            parts.append(part)
    yield from read_ranges(config, parts)


def read_ranges(config: SourceSettings, parts: Sequence[OffsetRange]) -> Iterator[Any]:
    """The records of each range of ``parts`` as Arrow batches, each of one topic-partition and
    in offset order. Small ranges (:func:`together`) are read with one consumer assigned to all
    of them at once, so a task of many small ranges costs one consumer and a few fetches
    instead of a consumer, an offsets lookup and a fetch per range; a bigger range is read
    alone (:func:`read_range`)."""
    for group in together(parts):
        if len(group) == 1:
            yield from read_range(config, group[0])
        else:
            yield from read_together(config, group)


def together(
    parts: Sequence[OffsetRange], offsets: int = TOGETHER_OFFSETS
) -> list[list[OffsetRange]]:
    """``parts`` in order, packed into groups read with one consumer: at most ``offsets``
    offsets a group, each topic-partition once; a range of more offsets is a group alone.

    >>> sizes = [Range("t", p, 0, n) for p, n in enumerate([5, 5, 5, 20, 5])]
    >>> [[r.partition for r in group] for group in together(sizes, offsets=12)]
    [[0, 1], [2], [3], [4]]
    """
    groups: list[list[OffsetRange]] = []
    current: list[OffsetRange] = []
    seen: set[TopicPartition] = set()
    size = 0
    for part in parts:
        length, tp = part.end - part.start, (part.topic, part.partition)
        if current and (size + length > offsets or tp in seen):
            groups.append(current)
            current, seen, size = [], set(), 0
        current.append(part)
        seen.add(tp)
        size += length
    if current:
        groups.append(current)
    return groups


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
    # Assigned at the planned start, as read_together does, without asking the watermarks
    # first: a start Kafka no longer has comes back as an offset-reset error (then _seek), an
    # end past the partition's as its end-of-partition event. Asking first cost each range a
    # ListOffsets request whose leader lookup librdkafka 2.16 can lose with a new consumer's
    # bootstrap connection: 4 ranges in 48 waited 0.7 s (benchmarks/README.md, issue 44).
    position = part.start
    if position < part.end:
        with kafka_errors(config, f"cannot assign {tp_name(tp)}"):
            consumer.assign([KafkaTP(part.topic, part.partition, position)])
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


@dataclass
class _Reading:
    """One range of a group read together: its records so far and the next offset wanted."""

    part: OffsetRange
    builder: _BatchBuilder
    position: int

    @property
    def done(self) -> bool:
        return self.position >= self.part.end


def read_together(config: SourceSettings, group: Sequence[OffsetRange]) -> Iterator[Any]:
    """The records of several small ranges (of different topic-partitions), read with one
    consumer assigned to all of them at once; one Arrow batch per range that has records,
    yielded as the range completes."""
    consumer = new_consumer(config)
    try:
        yield from _read_assigned(consumer, config, group)
    finally:
        consumer.close()


def _read_assigned(
    consumer: Any, config: SourceSettings, group: Sequence[OffsetRange]
) -> Iterator[Any]:
    """:func:`read_together` on ``consumer``. A range whose offsets Kafka no longer has (the
    consumer's offset-reset error) is read alone afterwards, from where it got to
    (:func:`read_range` checks for data loss and seeks past it)."""
    from confluent_kafka import TopicPartition as KafkaTP

    reading = {
        (p.topic, p.partition): _Reading(
            p, _BatchBuilder(p.topic, p.partition, config.include_headers), p.start
        )
        for p in group
    }
    again: list[OffsetRange] = []
    with kafka_errors(config, f"cannot assign {len(group)} partitions"):
        consumer.assign([KafkaTP(p.topic, p.partition, p.start) for p in group])
    last_progress = time.monotonic()
    while reading:
        wanted = min(sum(r.part.end - r.position for r in reading.values()), BATCH_ROWS)
        with kafka_errors(config, f"cannot read {len(reading)} partitions"):
            messages = consumer.consume(num_messages=wanted, timeout=_CONSUME_WAIT_S)
        before = sum(r.position for r in reading.values())
        if messages:
            _route(messages, reading, config, again)
        else:  # gaps (compaction, transaction markers), or a slow broker
            _advance_positions(consumer, reading)
        if sum(r.position for r in reading.values()) > before:
            last_progress = time.monotonic()
        for tp in [tp for tp, r in reading.items() if r.done]:
            builder = reading.pop(tp).builder
            if len(builder):
                yield builder.flush()
        if reading:
            first = next(iter(reading.values()))
            tp = (first.part.topic, first.part.partition)
            _check_stall(config, tp, first.position, first.part, last_progress)
    for part in again:  # rare: a consumer of its own, nothing else assigned
        yield from read_range(config, part)


def _advance_positions(consumer: Any, reading: dict[TopicPartition, _Reading]) -> None:
    """Move each range's position to its consumer position (past gaps no record fills)."""
    from confluent_kafka import TopicPartition as KafkaTP

    positions = consumer.position([KafkaTP(topic, part) for topic, part in reading])
    for tp in positions:
        state = reading[(tp.topic, tp.partition)]
        state.position = max(state.position, min(tp.offset, state.part.end))


def _route(
    messages: list[Any],
    reading: dict[TopicPartition, _Reading],
    config: SourceSettings,
    again: list[OffsetRange],
) -> None:
    """Add each record of ``messages`` that lies in its range to that range's batch; end
    ranges at records past them, at the end of their partition, or (into ``again``) where
    Kafka no longer has their offsets; anything else is a :class:`SourceError`."""
    from confluent_kafka import KafkaError

    for message in messages:
        error = message.error()
        state = reading.get((message.topic(), message.partition()))
        if error is None:
            if state is not None and not state.done:
                offset = message.offset()
                if state.position <= offset < state.part.end:
                    state.builder.add([message])
                    state.position = offset + 1
                elif offset >= state.part.end:
                    state.position = state.part.end
        elif error.code() == KafkaError._PARTITION_EOF:
            if state is not None and not state.done:
                tp = (state.part.topic, state.part.partition)
                _check_end(tp, message.offset(), state.part.end, config.fail_on_data_loss)
                state.position = state.part.end
        elif error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            continue  # the never-used group's coordinator lookup (see _read_range)
        elif error.code() == KafkaError._AUTO_OFFSET_RESET:
            if state is not None and not state.done:  # else the range is read whole already
                part = state.part
                again.append(Range(part.topic, part.partition, state.position, part.end))
                state.position = part.end
        else:
            where = f"{message.topic()}-{message.partition()} at {config.bootstrap_servers}"
            raise SourceError(f"cannot read {where}: {error}")


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
    """Assign the consumer at ``offset``, or past offsets Kafka no longer has; return it
    (after Kafka said ``offset`` is out of range: the watermarks say which side)."""
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
