"""The timestamps held partial files are planned with (issue 44), read from Apache Kafka:
the first record's time at an offset and the first offset at a time, asked again and again on
one consumer as a running export's driver does."""

from __future__ import annotations

import uuid

import pytest

from blockgz.sink.kafka.clients import first_record_consumer, new_consumer
from blockgz.sink.kafka.oldest import HoldClock
from blockgz.sink.kafka.options import parse_options

BASE = 1_795_305_600_000


@pytest.mark.parametrize("readers", ["shared", "one per chunk"])
def test_first_times_and_time_cuts_follow_the_partial_file(kafka, readers):
    """First records read on the clock's consumer ("shared") or on one of their own per chunk.
    A file that starts at a time cut takes that record's time from the cut's answer (the
    admin client's ListOffsets by time): of the four starts, only 0 and 250 are read."""
    from confluent_kafka import Producer

    from blockgz.sink.kafka.lives import shared_admin

    topic = "hold_clock_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0})
    for p in range(2):
        for i in range(300):  # one record a 100 ms: 10 s in 100 records
            producer.produce(topic, b"v", partition=p, timestamp=BASE + i * 100)
    assert producer.flush(30) == 0
    config = parse_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic})
    consumer = new_consumer(config)
    try:
        made: list[object] = []

        def fresh() -> object:
            made.append(first_record_consumer(config))
            return made[-1]

        clock = HoldClock(
            consumer,
            admin=shared_admin(config.admin_config()),
            new_consumer=None if readers == "shared" else fresh,
        )
        tps = [(topic, 0), (topic, 1)]
        for start in (0, 100, 200, 250):  # the partial file moves on, batch after batch
            offsets = dict.fromkeys(tps, start)
            firsts = clock.first_times(offsets)
            assert firsts == dict.fromkeys(tps, BASE + start * 100), start
            due = {tp: ms + 10_000 for tp, ms in firsts.items()}
            cuts = clock.time_cuts(offsets, due)
            want = start + 100 if start + 100 < 300 else None
            assert cuts == ({} if want is None else dict.fromkeys(tps, want)), start
            clock.forget(offsets)
        assert len(made) == {"shared": 0, "one per chunk": 2}[readers]
    finally:
        consumer.close()


def test_first_times_read_in_the_background_serve_the_next_batch(kafka, monkeypatch):
    """A running export's large read (here: any read) goes on a thread of its own with
    consumers of its own, and a later call plans with its answers."""
    from confluent_kafka import Producer

    from blockgz.sink.kafka import oldest
    from blockgz.sink.kafka.lives import shared_admin

    monkeypatch.setattr(oldest, "BACKGROUND_FROM", 0)
    topic = "hold_clock_bg_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=3)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0})
    for p in range(3):
        for i in range(5):
            producer.produce(topic, b"v", partition=p, timestamp=BASE + p * 1_000 + i)
    assert producer.flush(30) == 0
    config = parse_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic})
    consumer = new_consumer(config)
    clock = HoldClock(
        consumer,
        timeout_s=10,
        admin=shared_admin(config.admin_config()),
        new_consumer=lambda: first_record_consumer(config),
    )
    try:
        offsets = {(topic, p): 2 for p in range(3)}
        assert clock.first_times(offsets, wait_s=0.0, later=True) == {}  # the query's first
        assert clock.reading() == 3
        firsts = clock.first_times(offsets, wait_s=30.0)  # started now, waited for here
        assert firsts == {(topic, p): BASE + p * 1_000 + 2 for p in range(3)}
        assert clock.reading() == 0
    finally:
        clock.close()
        consumer.close()
