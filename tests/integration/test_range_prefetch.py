"""A task reading a known offset range from a real broker (Apache Kafka 4) fetches little past
its end (issue 44): librdkafka's default local queue (64 MiB, 100k messages) read a 62.5k-record
range of a 250k-record partition 2.3-2.6 times over, all served by the broker and parsed by the
task, then thrown away. The range consumer's queue bound (``queued.max.messages.kbytes``) keeps
the over-read to a few MiB."""

from __future__ import annotations

import json
import time
import uuid

from blockgz.sink.kafka.options import parse_options
from blockgz.sink.kafka.ranges import Range, _read_range

RECORDS = 40_000  # ~12 MB in the partition
RANGE_END = 4_000  # ~1.2 MB in the range


def _value(_partition: int, i: int) -> bytes:
    return b'{"i":%d,"pad":"%s"}' % (i, b"x" * 280)


def _received(config, topic: str, end: int) -> tuple[list[int], int]:
    """Read ``[0, end)`` of partition 0 with the range consumer's settings; the offsets read
    and how many records librdkafka had fetched when the read ended."""
    from confluent_kafka import Consumer, TopicPartition

    stats: list[int] = []

    def on_stats(text: str) -> None:
        partition = json.loads(text)["topics"].get(topic, {}).get("partitions", {}).get("0")
        if partition is not None:
            stats.append(partition["rxmsgs"])

    settings = {**config.consumer_config(), "statistics.interval.ms": 100}
    consumer = Consumer({**settings, "stats_cb": on_stats})
    try:
        offsets = [
            o
            for batch in _read_range(consumer, config, Range(topic, 0, 0, end))
            for o in batch.column("offset").to_pylist()
        ]
        # Paused, the partition is neither fetched nor handed out: poll() only serves the
        # statistics callback, so what was fetched for the range stays what it was.
        consumer.pause([TopicPartition(topic, 0)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (len(stats) < 3 or stats[-1] != stats[-3]):
            assert consumer.poll(0.1) is None
        assert stats, "librdkafka sent no statistics in 10 s"
        return offsets, stats[-1]
    finally:
        consumer.close()


def test_a_range_read_fetches_little_past_its_end(kafka):
    """By the time the range's last record is read, librdkafka has fetched at most the queue
    bound (2 MiB) and the fetches in flight (1 MiB a partition each) past it. With its default
    bound (64 MiB) the same read fetched the whole 12 MB partition in most runs."""
    topic = "prefetch_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=1)
    kafka.produce_bulk(topic, RECORDS, 1, value_fn=_value)
    config = parse_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic})
    assert config.consumer_config()["queued.max.messages.kbytes"] == 2048

    offsets, fetched = _received(config, topic, RANGE_END)
    assert offsets == list(range(RANGE_END))
    past = (2048 + 2 * 1024) * 1024 // len(_value(0, RECORDS))
    assert fetched <= RANGE_END + past, f"fetched {fetched} records for a range of {RANGE_END}"
