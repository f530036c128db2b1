"""The export driver's Kafka clients: one admin client and one consumer per run, each made on
first use, shared by whatever the driver asks Kafka, closed once at the end.

The driver asks the source cluster several small things: the partitions of its topics (where
to start, what a killed run left), the high watermarks (lag), the timestamp of the oldest
record not yet archived (lag in seconds) and, in the background, a snapshot of the topics'
configs and the consumer groups' offsets. Each used to open its own client, so a run held
three connections to every broker (and their librdkafka threads) for questions that one
admin client and one consumer answer. The admin client is librdkafka's, safe to share
between the snapshot's thread and the driver's; the consumer is used by the driver's thread
only (watermarks, then record timestamps, one after the other).

>>> clients = DriverClients({"bootstrap.servers": "127.0.0.1:9"})
>>> clients.made  # nothing is made until it is asked for
{'admin': 0, 'consumer': 0}
>>> clients.close(); clients.close()  # closing twice (or without use) is fine
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from blockgz.kafka.access import QuietAdmin, quiet_admin

#: The consumer's group (it never joins it: partitions are assigned, nothing is committed).
GROUP_ID = "blockgz-export-progress"


class DriverClients:
    """One :class:`~blockgz.kafka.access.QuietAdmin` and one ``confluent_kafka.Consumer`` for
    librdkafka ``client_config``, made on first use."""

    def __init__(self, client_config: Mapping[str, Any]) -> None:
        self.client_config = dict(client_config)
        self._lock = threading.Lock()
        self._admin: QuietAdmin | None = None
        self._consumer: Any = None
        #: How many clients of each kind were made (for tests and the run's log).
        self.made = {"admin": 0, "consumer": 0}

    def admin(self) -> QuietAdmin:
        """The shared admin client (its librdkafka log kept off the terminal)."""
        with self._lock:
            if self._admin is None:
                self._admin = quiet_admin(self.client_config)
                self.made["admin"] += 1
            return self._admin

    def consumer(self) -> Any:
        """The shared consumer: no group membership, no commits, the first-record reader's
        small fetches (:func:`~blockgz.sink.kafka.clients.first_record_settings`: only the first
        record of a partition is ever read, its timestamp)."""
        with self._lock:
            if self._consumer is None:
                from confluent_kafka import Consumer

                from blockgz.sink.kafka.clients import first_record_settings

                conf = first_record_settings(self.client_config)
                conf.setdefault("group.id", GROUP_ID)
                conf.update({"enable.auto.commit": False, "enable.partition.eof": False})
                conf.setdefault("fetch.max.bytes", 1024 * 1024)
                self._consumer = Consumer(conf)
                self.made["consumer"] += 1
            return self._consumer

    def close(self) -> None:
        """Close the consumer and let the admin client go (confluent-kafka's has no close)."""
        with self._lock:
            consumer, self._consumer, self._admin = self._consumer, None, None
        if consumer is not None:
            consumer.close()
