"""Kafka's watermarks for many partitions (issue 44): asked in batches, not one partition at a
time, with the same answers and the same refusal of an unknown partition."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from blockgz.sink.export.tracking import Watermarks
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.kafka import oldest


class Consumer:
    """Answers ``offsets_for_times`` as librdkafka does for -2 (log start) and -1 (end)."""

    def __init__(self, unknown=()):
        self.asked: list[int] = []
        self.unknown = set(unknown)

    def offsets_for_times(self, partitions, timeout):
        self.asked.append(len(partitions))
        return [
            SimpleNamespace(
                topic=p.topic, partition=p.partition,
                offset=p.partition if p.offset == -2 else 100 + p.partition,
                error=KafkaError(KafkaError._UNKNOWN_PARTITION)
                if (p.topic, p.partition) in self.unknown else None,
            )
            for p in partitions
        ]  # fmt: skip


def _watermarks(tmp_path, consumer: Consumer) -> Watermarks:
    job = ExportSettings.from_mapping(
        {"name": "j", "topics": "t", "kafka.bootstrap.servers": "127.0.0.1:9",
         "path": str(tmp_path)}
    )  # fmt: skip
    return Watermarks(job, clients=SimpleNamespace(consumer=lambda: consumer))  # type: ignore[arg-type]


def test_many_partitions_are_asked_in_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(oldest, "OFFSETS_CHUNK", 1000)
    consumer = Consumer()
    wanted = [("t", p) for p in range(2500)]
    watermarks = _watermarks(tmp_path, consumer)
    found = watermarks.read(wanted)
    assert found == {("t", p): (p, 100 + p) for p in range(2500)}
    assert watermarks.latest == {("t", p): 100 + p for p in range(2500)}
    # Log starts, then ends: three requests each (some at once, so in any order).
    assert sorted(consumer.asked[:3]) == sorted(consumer.asked[3:]) == [500, 1000, 1000]


def test_an_unknown_partition_is_refused(tmp_path):
    consumer = Consumer(unknown=[("t", 3)])
    with pytest.raises(KafkaException):
        _watermarks(tmp_path, consumer).read([("t", p) for p in range(5)])
