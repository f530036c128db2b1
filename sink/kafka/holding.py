"""Holding back a partition's partial file: micro-batches that end where Confluent's files end.

A running export cuts every file at the end of each micro-batch, so with the default 5 s trigger
a quiet partition gets one small file per batch, whatever ``flush.size`` says. With holding on
(``blockgz.hold.partial.files``), the ``blockgz-kafka`` source plans each partition's end offset
so that a batch reads a partition only as far as its files would be closed by Confluent's rules:

* ``flush.size`` = N: the largest multiple of N records past the committed offset (every file
  the batch writes is full); the remainder below N is held;
* ``rotate.interval.ms`` (record time, the partitioner's extractor reads the record's time):
  the partial file starting at the remainder's first record ``r`` closes at the first record
  whose Kafka timestamp is at least ``ts(r) + rotate.interval.ms`` (Confluent's rule: that
  record does not fit the file and starts the next one). That record is found with one
  ListOffsets-by-time request (:func:`~blockgz.sink.kafka.oldest.cuts_at_times`), so the batch
  reads up to (not including) it. With
  ``timestamp.extractor=Wallclock`` the interval counts wall-clock time: the remainder is read
  whole once its first record is that old;
* ``rotate.schedule.interval.ms``: the remainder is read whole once a scheduled boundary (from
  midnight in ``timezone``) has passed since its first record's timestamp.

With no time rotation the remainder waits for N records, as in Confluent's sink. Nothing spans
batches: held records are simply not read yet, so a stop or restart loses and duplicates
nothing. The planning is a pure function here; :mod:`blockgz.sink.kafka.oldest` reads the
timestamps and time cuts from Kafka.

>>> rules = HoldRules(flush_size=10, rotate_interval_ms=60_000)
>>> plan_partition(Remainder(start=0, latest=25), rules, first_ms=None, time_cut=None, now_ms=0)
(20, 'a full file (flush.size=10) or rotate.interval.ms=60000')
>>> plan_partition(Remainder(start=0, latest=25), rules, first_ms=1_000, time_cut=23, now_ms=0)[0]
23
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from blockgz.errors import ConfigError

#: The modes of ``blockgz.hold.partial.files``.
HOLD_MODES = ("auto", "true", "false")
#: Set by ``blockgz export`` on its ``blockgz-kafka`` source: the sink's rotation settings.
HOLD_RULES = "blockgz.hold.rules"


@dataclass(frozen=True)
class HoldRules:
    """The sink's rotation settings the source plans with (``None``: not set)."""

    flush_size: int | None = None
    rotate_interval_ms: int | None = None
    rotate_schedule_interval_ms: int | None = None
    timezone: str = "UTC"
    #: ``timestamp.extractor=Wallclock``: ``rotate.interval.ms`` counts wall-clock time.
    wallclock: bool = False

    @property
    def timed(self) -> bool:
        """Whether a time rotation bounds how long a held record waits."""
        return bool(self.rotate_interval_ms or self.rotate_schedule_interval_ms)

    @property
    def any(self) -> bool:
        """Whether any rule could hold a record back."""
        return bool(self.flush_size) or self.timed

    def waiting_for(self) -> str:
        """What held records wait for, for logs and ``status``.

        >>> HoldRules(flush_size=5, rotate_interval_ms=100).waiting_for()
        'a full file (flush.size=5) or rotate.interval.ms=100'
        """
        parts = [f"a full file (flush.size={self.flush_size})"] if self.flush_size else []
        if self.rotate_interval_ms:
            parts.append(f"rotate.interval.ms={self.rotate_interval_ms}")
        if self.rotate_schedule_interval_ms:
            parts.append(f"rotate.schedule.interval.ms={self.rotate_schedule_interval_ms}")
        return " or ".join(parts) or "nothing"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> HoldRules | None:
        """The rules of a ``blockgz.hold.rules`` value (empty: none).

        >>> HoldRules.from_json(HoldRules(flush_size=3).to_json()).flush_size
        3
        """
        if not text.strip():
            return None
        try:
            found = json.loads(text)
            return cls(**{k: found[k] for k in asdict(cls()) if k in found})
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{HOLD_RULES}: not the JSON of rotation settings ({exc})") from None


def holding(mode: str, rules: HoldRules | None, *, once: bool) -> bool:
    """Whether the source holds partial files back.

    ``auto`` holds in a running export when a time rotation bounds the wait (a record then
    waits at most that long, unless its partition goes quiet); ``true`` holds whenever a rule
    is set (with ``flush.size`` alone a remainder waits for N records, as in Confluent's
    sink), also in ``--once`` runs; ``false`` never (every batch closes every file).

    >>> holding("auto", HoldRules(flush_size=9, rotate_interval_ms=1), once=False)
    True
    >>> holding("auto", HoldRules(flush_size=9), once=False), holding("true", None, once=False)
    (False, False)
    """
    if rules is None or not rules.any or mode == "false":
        return False
    if mode == "true":
        return True
    return rules.timed and not once


@dataclass(frozen=True)
class Remainder:
    """One partition's records ``[start, latest)`` not yet archived."""

    start: int
    latest: int

    def full_end(self, flush_size: int | None) -> int:
        """The end of the last full file (``start`` when none is full, or no ``flush.size``).

        >>> Remainder(3, 30).full_end(10), Remainder(3, 30).full_end(None)
        (23, 3)
        """
        if not flush_size:
            return self.start
        return self.start + (self.latest - self.start) // flush_size * flush_size


def plan_partition(
    part: Remainder,
    rules: HoldRules,
    *,
    first_ms: int | None,
    time_cut: int | None,
    now_ms: int,
) -> tuple[int, str]:
    """Where a held partition's batch ends, and what the rest (if any) waits for.

    ``first_ms`` is the timestamp of the first record of the partial file (at
    :meth:`Remainder.full_end`; ``None``: not known); ``time_cut`` the first offset whose
    timestamp is ``first_ms + rotate.interval.ms`` or later (``None``: no such record yet).
    The reason is ``''`` when nothing is held.

    >>> rules = HoldRules(flush_size=10, rotate_schedule_interval_ms=3_600_000)
    >>> plan_partition(Remainder(0, 5), rules, first_ms=10, time_cut=None, now_ms=3_600_001)
    (5, '')
    """
    full = part.full_end(rules.flush_size)
    if full >= part.latest:
        return part.latest, ""
    if first_ms is not None and _time_closes(rules, first_ms, now_ms):
        return part.latest, ""
    if (
        rules.rotate_interval_ms
        and not rules.wallclock
        and time_cut is not None
        and time_cut <= part.latest
    ):
        if time_cut <= full:  # out-of-order timestamps: the cut lies before the partial file
            return part.latest, ""
        return time_cut, "" if time_cut == part.latest else rules.waiting_for()
    return full, rules.waiting_for()


def _time_closes(rules: HoldRules, first_ms: int, now_ms: int) -> bool:
    """Whether a wall-clock rule closes a file whose first record has ``first_ms``."""
    if rules.rotate_schedule_interval_ms:
        from blockgz.sink.write.rotation import next_scheduled_rotation

        boundary = next_scheduled_rotation(
            first_ms, rules.rotate_schedule_interval_ms, rules.timezone
        )
        if boundary <= now_ms:
            return True
    interval = rules.rotate_interval_ms
    return bool(interval and rules.wallclock and now_ms - first_ms >= interval)


def round_to_files(admitted: int, lag: int, flush_size: int | None) -> int:
    """A ``maxOffsetsPerTrigger`` share cut down to whole files when it cuts the partition short.

    >>> round_to_files(25, 40, 10), round_to_files(40, 40, 10), round_to_files(7, 40, 10)
    (20, 40, 7)
    """
    if not flush_size or admitted >= lag or admitted < flush_size:
        return admitted
    return admitted // flush_size * flush_size


def held_counts(
    start: Mapping[tuple[str, int], int],
    latest: Mapping[tuple[str, int], int],
    end: Mapping[tuple[str, int], int],
) -> dict[tuple[str, int], int]:
    """Per partition, the records available now that the batch leaves for later.

    >>> held_counts({("t", 0): 0}, {("t", 0): 25}, {("t", 0): 20})
    {('t', 0): 5}
    """
    return {
        tp: latest[tp] - end[tp]
        for tp in end
        if tp in start and tp in latest and latest[tp] > end[tp]
    }


def rules_of(sink: Any) -> HoldRules:
    """The rules of a :class:`~blockgz.sink.write.config.SinkSettings` (what ``blockgz export``
    gives its source as ``blockgz.hold.rules``). ``rotate.interval.ms`` counts wall-clock time
    only under a time-based partitioner whose extractor is ``Wallclock``; otherwise the
    write path counts the record's time, which the source reads as its Kafka timestamp."""
    parts = sink.partitioning
    wallclock = parts.time_based and parts.extractor.lower() == "wallclock"
    return HoldRules(
        flush_size=sink.flush_size,
        rotate_interval_ms=sink.rotate_interval_ms,
        rotate_schedule_interval_ms=sink.rotate_schedule_interval_ms,
        timezone=sink.timezone,
        wallclock=wallclock,
    )


#: Spark's Kafka source's options that stand in for holding (Spark 3.3+): a trigger waits until
#: ``minOffsetsPerTrigger`` new offsets (summed over all partitions) are there or
#: ``maxTriggerDelay`` has passed since the last batch.
SPARK_MIN_OFFSETS = "minOffsetsPerTrigger"
SPARK_MAX_DELAY = "maxTriggerDelay"
#: ``minOffsetsPerTrigger`` without ``flush.size``: never reached, so only time starts a batch.
NEVER = 2**63 - 1


def trigger_delay_ms(rules: HoldRules, trigger_ms: int = 0) -> int | None:
    """How long Spark's source may wait between batches: the shorter time rotation less one
    trigger interval (at least half the rotation). Spark starts a batch at the first trigger
    after the delay, so a batch spans up to a trigger more than the delay; a batch spanning a
    little more than ``rotate.interval.ms`` of record time would end in two files.

    >>> trigger_delay_ms(HoldRules(rotate_interval_ms=60_000, rotate_schedule_interval_ms=9_000))
    9000
    >>> trigger_delay_ms(HoldRules(rotate_interval_ms=20_000), 5_000)
    15000
    >>> trigger_delay_ms(HoldRules(rotate_interval_ms=4_000), 5_000)
    2000
    >>> trigger_delay_ms(HoldRules(flush_size=5)) is None
    True
    """
    times = [t for t in (rules.rotate_interval_ms, rules.rotate_schedule_interval_ms) if t]
    if not times:
        return None
    shortest = min(times)
    return max(shortest - trigger_ms, shortest // 2)


def spark_trigger_options(
    rules: HoldRules, partitions: int, given: Mapping[str, str], trigger_ms: int = 0
) -> dict[str, str]:
    """Spark's Kafka source's nearest thing to held files, for the options the job did not set
    (``given``, case-insensitive as Spark reads them): ``minOffsetsPerTrigger`` =
    ``flush.size`` x ``partitions`` (no more than a given ``maxOffsetsPerTrigger``; never
    reached without ``flush.size``) and ``maxTriggerDelay`` = :func:`trigger_delay_ms` (Spark's
    15 minutes without a time rotation). Both count per trigger over all partitions, not per
    partition.

    >>> spark_trigger_options(HoldRules(flush_size=1000, rotate_interval_ms=20_000), 20, {})
    {'minOffsetsPerTrigger': '20000', 'maxTriggerDelay': '20000ms'}
    >>> spark_trigger_options(HoldRules(rotate_interval_ms=5), 3, {"MAXOFFSETSPERTRIGGER": "99"})
    {'minOffsetsPerTrigger': '99', 'maxTriggerDelay': '5ms'}
    >>> spark_trigger_options(HoldRules(flush_size=10), 4, {"minOffsetsPerTrigger": "7"})
    {}
    """
    named = {k.lower(): v for k, v in given.items()}
    found: dict[str, str] = {}
    if SPARK_MIN_OFFSETS.lower() not in named:
        least = rules.flush_size * max(1, partitions) if rules.flush_size else NEVER
        cap = named.get("maxoffsetspertrigger", "").strip()
        if cap.isdigit() and int(cap) > 0:
            least = min(least, int(cap))
        found[SPARK_MIN_OFFSETS] = str(least)
    delay = trigger_delay_ms(rules, trigger_ms)
    if delay and SPARK_MAX_DELAY.lower() not in named:
        found[SPARK_MAX_DELAY] = f"{delay}ms"
    return found
