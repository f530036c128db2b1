"""How old the oldest record not yet archived is: its Kafka timestamp, read from the broker.

Lag in records says how much is waiting; lag in seconds says how late the archive is, which is
what an alert wants ("the archive is 10 minutes behind"). The oldest record not yet archived of
a topic-partition is the one at its committed offset (or the first after it: compaction and
transaction markers leave gaps), so its timestamp is one fetch. :class:`RecordTimes` reads it
once per committed offset (the answer cannot change until the next batch commits), with one
consumer for all partitions (:func:`~blockgz.sink.kafka.oldest.first_record_times`, which the
source's held partial files also use; the driver's shared consumer,
:class:`~blockgz.sink.export.kafka_clients.DriverClients`, when given) and a deadline, so a
slow broker delays the figure, not the export.

Example (with a broker)::

    times = RecordTimes({"bootstrap.servers": "127.0.0.1:9092"})
    times.at({("orders", 0): 1200})  # {("orders", 0): 1764130000.123} (seconds)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from blockgz.sink.export.kafka_clients import DriverClients
from blockgz.sink.kafka.oldest import first_record_times

log = logging.getLogger("blockgz.export")

TopicPartition = tuple[str, int]


class RecordTimes:
    """The timestamp (Unix seconds) of the first record at or after an offset, per partition."""

    def __init__(
        self,
        client_config: Mapping[str, Any],
        *,
        timeout_s: float = 2.0,
        clients: DriverClients | None = None,
    ):
        self.client_config = dict(client_config)
        self.timeout_s = timeout_s
        self._clients = clients or DriverClients(self.client_config)
        self._own_clients = clients is None
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
        found = first_record_times(self._clients.consumer(), wanted, self.timeout_s)
        for tp, ms in found.items():
            self._known[tp] = (wanted[tp], ms / 1000)

    def close(self) -> None:
        if self._own_clients:
            self._clients.close()
