"""How old the oldest record not yet archived is: its Kafka timestamp, read from the broker.

Lag in records says how much is waiting; lag in seconds says how late the archive is, which is
what an alert wants ("the archive is 10 minutes behind"). The oldest record not yet archived of
a topic-partition is the one at its committed offset (or the first after it: compaction and
transaction markers leave gaps), so its timestamp is one fetch. :class:`RecordTimes` reads it
once per committed offset (the answer cannot change until the next batch commits), with one
consumer for all partitions and a deadline, so a slow broker delays the figure, not the export.

Example (with a broker)::

    times = RecordTimes({"bootstrap.servers": "127.0.0.1:9092"})
    times.at({("orders", 0): 1200})  # {("orders", 0): 1764130000.123} (seconds)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("blockgz.export")

TopicPartition = tuple[str, int]


class RecordTimes:
    """The timestamp (Unix seconds) of the first record at or after an offset, per partition."""

    def __init__(self, client_config: Mapping[str, Any], *, timeout_s: float = 2.0):
        self.client_config = dict(client_config)
        self.timeout_s = timeout_s
        self._consumer: Any = None
        #: Per partition, the last offset asked for and its record's timestamp.
        self._known: dict[TopicPartition, tuple[int, float]] = {}

    def at(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, float]:
        """The timestamps of the records at ``offsets`` that could be read in time (those of
        partitions with nothing at or after the offset yet are left out)."""
        wanted = {tp: off for tp, off in offsets.items() if self._known.get(tp, (-1,))[0] != off}
        if wanted:
            try:
                self._fetch(wanted)
            except Exception:  # a figure for the metrics: never fails the export
                log.debug("could not read record timestamps", exc_info=True)
        found = {tp: self._known.get(tp) for tp in offsets}
        return {tp: k[1] for tp, k in found.items() if k is not None and k[0] == offsets[tp]}

    def _fetch(self, wanted: Mapping[TopicPartition, int]) -> None:
        from confluent_kafka import TopicPartition as KafkaPartition

        consumer = self._consumer_made()
        consumer.assign([KafkaPartition(t, p, off) for (t, p), off in wanted.items()])
        missing = set(wanted)
        deadline = time.monotonic() + self.timeout_s
        while missing and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=0.2):
                if message.error() is not None:
                    continue
                tp = (message.topic(), message.partition())
                if tp in missing and message.offset() >= wanted[tp]:
                    kind, ms = message.timestamp()
                    if kind != 0 and ms >= 0:  # 0: TIMESTAMP_NOT_AVAILABLE
                        self._known[tp] = (wanted[tp], ms / 1000)
                    missing.discard(tp)
                    consumer.pause([KafkaPartition(*tp)])
        consumer.unassign()

    def _consumer_made(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            conf = dict(self.client_config)
            conf.setdefault("group.id", "blockgz-export-lag")
            conf.update({"enable.auto.commit": False, "enable.partition.eof": False})
            # Only the first record of each partition is wanted: small fetches.
            conf.setdefault("fetch.max.bytes", 1024 * 1024)
            conf.setdefault("max.partition.fetch.bytes", 64 * 1024)
            self._consumer = Consumer(conf)
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
