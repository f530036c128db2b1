"""Dead-letter test data: a topic where every tenth record is bad, and reading a topic back."""

from __future__ import annotations

import json
import time


def produce_mixed(kafka, topic: str, partitions: int, per_partition: int) -> set[tuple[int, int]]:
    """Records ``{"i", "p", "country"}``; every tenth is not JSON. Returns the bad ones."""
    bad = set()
    for p in range(partitions):
        rows = []
        for i in range(per_partition):
            if i % 10 == 7:
                rows.append((b"k%d" % i, b"\xffbad %d" % i, [("origin", b"test")]))
                bad.add((p, i))
            else:
                rows.append((b"k%d" % i, json.dumps({"i": i, "p": p, "country": "DE"}).encode()))
        kafka.produce(topic, rows, partition=p)
    return bad


def read_topic(kafka, topic: str) -> list:
    """Every message of a one-partition topic, from the start (assign, no group)."""
    from confluent_kafka import Consumer, TopicPartition

    end = kafka.high_watermarks(topic)[0]
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": "dlq-reader",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages = []
    try:
        deadline = time.monotonic() + 60  # a whole read, not each fetch: a busy broker lags
        while len(messages) < end:
            assert time.monotonic() < deadline, f"read {len(messages)} of {end} dead letters"
            messages += [m for m in consumer.consume(500, timeout=1) if m.error() is None]
    finally:
        consumer.close()
    return messages
