"""What ``blockgz audit`` asks the brokers of an export job: a partition's log start offset, and
the first record Kafka holds from an offset on. :class:`blockgz.reader.audit.gaps.KafkaFacts`
describes the questions (the reader does not import the sink: this class only has its shape).

One consumer (the job's ``kafka.*`` settings, its isolation level: ``read_committed`` unless
the job says otherwise, so records of aborted transactions read as gaps, as the export saw them)
that assigns and never commits. It asks only about gaps between archived objects: a handful of
requests per partition, not a read of the topic.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from blockgz.sink.jobconfig.config import ExportSettings

#: How long one answer may take.
TIMEOUT_S = 10.0


class BrokerFacts:
    """The audit's questions, asked of the brokers of ``job``."""

    def __init__(self, job: ExportSettings, *, timeout_s: float = TIMEOUT_S):
        self.brokers = job.source.bootstrap_servers
        self.timeout_s = timeout_s
        self._config = job.source.consumer_config()
        quiet = logging.getLogger("blockgz.audit.librdkafka")  # connection chatter, not shown
        quiet.propagate = False
        self._config["logger"] = quiet
        self._consumer: Any = None

    def _client(self):
        from confluent_kafka import Consumer

        if self._consumer is None:
            self._consumer = Consumer(self._config)
        return self._consumer

    def log_start(self, topic: str, partition: int) -> int:
        from confluent_kafka import TopicPartition

        low, _ = self._client().get_watermark_offsets(
            TopicPartition(topic, partition), timeout=self.timeout_s, cached=False
        )
        return int(low)

    def first_record(
        self, topic: str, partition: int, offset: int, end: int
    ) -> tuple[int, bool] | None:
        """The first record at ``offset`` or after, below ``end``: its offset and whether its
        value is null (``None``: there is none)."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        consumer = self._client()
        _, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=self.timeout_s, cached=False
        )
        if offset >= high:
            return None
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + self.timeout_s
        try:
            while time.monotonic() < deadline:
                msg = consumer.poll(min(1.0, max(0.0, deadline - time.monotonic())))
                if msg is None:
                    continue
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return None  # nothing from there on (the rest is markers)
                    raise KafkaException(error)
                if msg.offset() >= end:
                    return None
                return msg.offset(), msg.value() is None
        finally:
            consumer.unassign()
        raise TimeoutError(f"no answer from {self.brokers} within {self.timeout_s:.0f} s")

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
