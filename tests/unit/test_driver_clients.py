"""One admin client and one consumer per export run: the tracker's watermarks, record times and
snapshots, and the start's partition listing, share them; the run's owner closes them once."""

from __future__ import annotations

from types import SimpleNamespace
from typing import ClassVar

import confluent_kafka
import pytest

from blockgz.sink.export import kafka_clients
from blockgz.sink.export.kafka_clients import DriverClients
from blockgz.sink.export.metrics import ExportMetrics
from blockgz.sink.export.start import kafka_partitions
from blockgz.sink.export.tracking import ExportResult, ProgressTracker
from blockgz.sink.jobconfig.config import ExportSettings


class FakeConsumer:
    made: ClassVar[list[FakeConsumer]] = []

    def __init__(self, conf):
        self.conf, self.closed = conf, 0
        FakeConsumer.made.append(self)

    def get_watermark_offsets(self, tp, timeout, cached):
        return 0, 9

    def offsets_for_times(self, partitions, timeout):  # -2: the log start, -1: the end
        return [
            SimpleNamespace(topic=p.topic, partition=p.partition, error=None,
                            offset=0 if p.offset == -2 else 9)
            for p in partitions
        ]  # fmt: skip

    def assign(self, partitions):
        self.assigned = {(p.topic, p.partition): p.offset for p in partitions}

    def consume(self, num_messages, timeout):
        return [
            SimpleNamespace(
                error=lambda: None, topic=lambda t=t: t, partition=lambda p=p: p,
                offset=lambda o=o: o, timestamp=lambda: (1, 5_000),
            )
            for (t, p), o in self.assigned.items()
        ]  # fmt: skip

    def pause(self, partitions):
        pass

    def resume(self, partitions):
        pass

    def unassign(self):
        pass

    def close(self):
        self.closed += 1


class FakeAdmin:
    def __init__(self, config):
        self.config = config
        meta = SimpleNamespace(topics={"t": SimpleNamespace(partitions={0: None, 1: None})})
        self.client = SimpleNamespace(list_topics=lambda timeout: meta)


@pytest.fixture
def fakes(monkeypatch):
    FakeConsumer.made = []
    monkeypatch.setattr(confluent_kafka, "Consumer", FakeConsumer)
    monkeypatch.setattr(kafka_clients, "quiet_admin", FakeAdmin)


def job(tmp_path) -> ExportSettings:
    return ExportSettings.from_mapping(
        {"name": "s3-sink", "topics": "t", "kafka.bootstrap.servers": "127.0.0.1:9",
         "path": str(tmp_path), "blockgz.snapshot.interval": "60s"}
    )  # fmt: skip


def test_the_tracker_asks_kafka_with_one_consumer_and_one_admin(fakes, tmp_path):
    tracker = ProgressTracker(job(tmp_path), "e", ExportResult(), observer=ExportMetrics("j"))
    assert tracker.watermarks.read([("t", 0), ("t", 1)]) == {("t", 0): (0, 9), ("t", 1): (0, 9)}
    assert tracker.record_times.at({("t", 0): 4}) == {("t", 0): 5.0}
    assert tracker.snapshotter._clients is tracker.clients
    assert tracker.snapshotter._clients.admin() is tracker.clients.admin()
    assert tracker.clients.made == {"admin": 1, "consumer": 1}
    assert len(FakeConsumer.made) == 1
    tracker.close()
    assert FakeConsumer.made[0].closed == 1, "the tracker closes the clients it made"


def test_clients_given_are_shared_and_left_to_their_owner(fakes, tmp_path):
    clients = DriverClients({"bootstrap.servers": "127.0.0.1:9"})
    assert kafka_partitions(job(tmp_path), clients) == [("t", 0), ("t", 1)]
    tracker = ProgressTracker(job(tmp_path), "e", ExportResult(), clients=clients)
    tracker.watermarks.read([("t", 0)])
    assert kafka_partitions(job(tmp_path), clients) == [("t", 0), ("t", 1)]
    tracker.close()
    assert FakeConsumer.made[0].closed == 0, "the caller closes what it gave"
    assert clients.made == {"admin": 1, "consumer": 1}
    clients.close()
    assert FakeConsumer.made[0].closed == 1
