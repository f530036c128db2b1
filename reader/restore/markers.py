"""How ``blockgz replay`` (and a restore into a target that held records, or ``--by-key``)
resumes after a kill: the ``blockgz.replay`` marker on every record sent.

Every replayed record carries one more header, ``blockgz.replay`` =
``<source topic>/<source partition>/<source offset>``. An idempotent producer keeps each target
partition's records in the order they were sent, so whatever a killed run delivered to a target
partition is a prefix of what it sent there: the newest marker in each target partition says
exactly how far the run got for each source partition. A rerun reads those tails
(:func:`delivered_so_far`) and skips, record by record, what its target partition already holds.
A restore one partition to one resumes from the positions its transactions recorded instead
(:mod:`blockgz.reader.restore.positions`).

>>> admin_settings({"bootstrap.servers": "k:9092", "linger.ms": 5, "sasl.mechanism": "PLAIN"})
{'bootstrap.servers': 'k:9092', 'sasl.mechanism': 'PLAIN'}
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

MARKER = "blockgz.replay"
#: Records read back from each target partition's end, at first, to find the newest markers.
TAIL_WINDOW = 1000


def admin_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of ``config`` (librdkafka's) an admin client or a consumer takes: the
    brokers and the security ones."""
    return {k: v for k, v in config.items() if _admin_setting(k)}


def _admin_setting(name: str) -> bool:
    return name == "bootstrap.servers" or name.startswith(("security.", "sasl.", "ssl."))


def delivered_so_far(
    config: Mapping[str, Any],
    topic: str,
    partitions: int,
    source_topic: str,
    sources: Iterable[int],
) -> dict[tuple[int, int], int]:
    """``(source partition, target partition) -> last source offset`` a previous run
    delivered, from the newest ``blockgz.replay`` markers at the end of each target partition."""
    from confluent_kafka import Consumer, TopicPartition

    wanted = set(sources)
    consumer = Consumer(
        {
            **admin_settings(config),
            "group.id": "blockgz-replay-resume",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    found: dict[tuple[int, int], int] = {}
    try:
        for target in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, target), timeout=15)
            window = TAIL_WINDOW
            while high > low:
                begin = max(low, high - window)
                seen = _markers(consumer, topic, target, begin, high, source_topic)
                for source, offset in seen.items():
                    found[(source, target)] = max(offset, found.get((source, target), -1))
                if begin == low or {s for s, t in found if t == target} >= wanted:
                    break
                window *= 8
    finally:
        consumer.close()
    return found


def _markers(consumer, topic: str, target: int, begin: int, end: int, source_topic: str):
    """Newest source offset per source partition among the markers in ``[begin, end)``."""
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(topic, target, begin)])
    newest: dict[int, int] = {}
    position = begin
    deadline = time.monotonic() + 60
    while position < end and time.monotonic() < deadline:
        for message in consumer.consume(1000, timeout=1):
            if message.error() is not None:
                continue
            position = message.offset() + 1
            marker = dict(message.headers() or []).get(MARKER)
            if marker is None:
                continue
            source_name, source_part, source_offset = marker.decode().rsplit("/", 2)
            if source_name == source_topic:
                part = int(source_part)
                newest[part] = max(int(source_offset), newest.get(part, -1))
    return newest
