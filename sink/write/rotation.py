"""When a file rotates: Confluent's rotation settings as rules a partition writer asks.

* ``flush.size`` records or ``flush.size.bytes`` bytes in the file (:meth:`RotationRules.full`);
* ``rotate.interval.ms``: the record time has moved that far past the file's first record
  (:meth:`RotationRules.interval_passed`; record time as the partitioner's timestamp extractor
  sees it, else the Kafka timestamp);
* ``rotate.file.on.partition.change`` (with ``rotate.interval.ms``): a record for another encoded
  partition than the previous one commits every open file, tombstones exempt
  (:meth:`RotationRules.partition_changed`);
* ``rotate.schedule.interval.ms``: on the wall clock, at multiples of the interval counted from
  local midnight (:class:`Schedule`; not deterministic, as in Confluent).

>>> from types import SimpleNamespace as File
>>> rules = RotationRules(flush_size=3)
>>> [rules.full(File(records=n, uncompressed_size=10)) for n in (2, 3)]
[False, True]
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any

from blockgz.sink.partitioning.zones import parse_timezone


def next_scheduled_rotation(now_ms: int, interval_ms: int, timezone: str) -> int:
    """The first multiple of ``interval_ms`` after ``now_ms``, counted from local midnight.

    >>> next_scheduled_rotation(3_600_000 + 5, 3_600_000, "UTC")  # 01:00:00.005 -> 02:00
    7200000
    """
    zone = parse_timezone(timezone)
    now = datetime.fromtimestamp(now_ms / 1000, zone)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    since = now_ms - int(midnight.timestamp() * 1000)
    step = (since // interval_ms + 1) * interval_ms
    nxt = int(midnight.timestamp() * 1000) + step
    tomorrow = int((midnight + timedelta(days=1)).timestamp() * 1000)
    return min(nxt, tomorrow)  # a schedule restarts every midnight, as in Confluent


@dataclass
class Schedule:
    """``rotate.schedule.interval.ms``: :meth:`due` is true once per interval boundary passed.

    >>> s = Schedule(3_600_000, "UTC")
    >>> s.due(5), s.due(3_600_000 - 1), s.due(3_600_000 + 1), s.due(3_600_000 + 2)
    (False, False, True, False)
    """

    interval_ms: int
    timezone: str
    _next: int | None = field(default=None, repr=False)

    def due(self, now_ms: int) -> bool:
        """Whether a boundary passed since the last call (the first call only starts the clock)."""
        if self._next is None:
            self._next = next_scheduled_rotation(now_ms, self.interval_ms, self.timezone)
            return False
        if now_ms < self._next:
            return False
        self._next = next_scheduled_rotation(now_ms, self.interval_ms, self.timezone)
        return True


@dataclass(frozen=True)
class RotationRules:
    """The record- and size-driven rotation settings of one sink (see the module docstring)."""

    flush_size: int | None = None
    flush_size_bytes: int | None = None
    rotate_interval_ms: int | None = None
    rotate_on_partition_change: bool = False
    tombstone_partition: str | None = None

    @classmethod
    def of(cls, config: Any) -> RotationRules:
        """The rules of a :class:`~blockgz.sink.write.config.SinkSettings` (its settings of the
        same names)."""
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)})

    def full(self, file: Any) -> bool:
        """``flush.size`` records or ``flush.size.bytes`` bytes reached."""
        return bool(
            (self.flush_size and file.records >= self.flush_size)
            or (self.flush_size_bytes and file.uncompressed_size >= self.flush_size_bytes)
        )

    def interval_passed(self, file: Any, stamp: int | None) -> bool:
        """``rotate.interval.ms``: ``stamp`` is that far past the open file's first record."""
        return bool(
            self.rotate_interval_ms
            and file is not None
            and stamp is not None
            and file.first_timestamp is not None
            and stamp - file.first_timestamp >= self.rotate_interval_ms
        )

    def partition_changed(self, previous: str | None, encoded: str) -> bool:
        """``rotate.file.on.partition.change``: the encoded partition moved (not to or from
        the tombstone directory)."""
        if not (self.rotate_interval_ms and self.rotate_on_partition_change):
            return False
        if previous is None or previous == encoded:
            return False
        return self.tombstone_partition not in (previous, encoded)


__all__ = ["RotationRules", "Schedule", "next_scheduled_rotation"]
