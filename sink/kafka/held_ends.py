"""Where a held batch ends: :mod:`blockgz.sink.kafka.holding`'s rules applied, partition by
partition, with the :class:`~blockgz.sink.kafka.oldest.HoldClock`'s answers from Kafka (the
first record's time of each partial file and the offset its time rotation closes it at).

The ``blockgz-kafka`` source (:mod:`blockgz.sink.kafka.source`) plans each batch's end with
:func:`plan_held`; records past that end stay in Kafka for a later batch.

Example (with a broker)::

    clock = HoldClock(consumer, admin=admin, new_consumer=lambda: first_record_consumer(config))
    plan_held(clock, {("orders", 0): 1200}, {("orders", 0): 1750}, rules)
    # {("orders", 0): 1700}: the file from 1200 closed by time at 1700; 50 records wait
"""

from __future__ import annotations

import time
from typing import Any

from blockgz.sink.kafka.holding import HoldRules, Remainder, plan_partition
from blockgz.sink.kafka.options import Offsets, TopicPartition

#: With held partial files, at most this many files closed by time per partition and batch.
MAX_TIME_CUTS = 8


def plan_held(
    clock: Any,
    begin: Offsets,
    end: Offsets,
    rules: HoldRules,
    *,
    wait_s: float | None = None,
    later: bool = False,
) -> Offsets:
    """``end`` cut back so each partition's batch ends where one of its files closes
    (:func:`~blockgz.sink.kafka.holding.plan_partition`). A partition whose partial file
    closed by time is planned again from that cut (up to :data:`MAX_TIME_CUTS` files a
    batch), so a backlog is read in few batches. ``wait_s`` and ``later`` are the first
    round's (:meth:`~blockgz.sink.kafka.oldest.HoldClock.first_times`); a backlog's later
    cuts wait for their first records."""
    todo = {
        tp: Remainder(begin[tp], stop)
        for tp, stop in end.items()
        if tp in begin and stop > begin[tp]  # new partitions, or offsets gone back: as is
    }
    clock.forget(todo)
    planned = dict(end)
    for _ in range(MAX_TIME_CUTS):
        cuts = _plan_remainders(clock, todo, rules, planned, wait_s, later=later)
        wait_s = None
        todo = {tp: Remainder(cut, todo[tp].latest) for tp, cut in cuts.items()}
        if not todo:
            break
    return planned


def _plan_remainders(
    clock: Any,
    parts: dict[TopicPartition, Remainder],
    rules: HoldRules,
    planned: Offsets,
    wait_s: float | None = None,
    *,
    later: bool = False,
) -> Offsets:
    """Plan ``parts`` into ``planned``; return the partitions whose partial file a
    ``rotate.interval.ms`` cut closed with records after it (at that cut). ``wait_s``:
    how long to wait for a large read of first records (``None``: until it ends);
    ``later``: start such a read at the next batch (see ``HoldClock.first_times``)."""
    full_ends = {tp: part.full_end(rules.flush_size) for tp, part in parts.items()}
    partial = {tp: full for tp, full in full_ends.items() if full < parts[tp].latest}
    for tp in parts.keys() - partial.keys():
        planned[tp] = parts[tp].latest
    firsts = clock.first_times(partial, wait_s=wait_s, later=later) if rules.timed else {}
    cuts: dict[TopicPartition, int] = {}
    if rules.rotate_interval_ms and not rules.wallclock:
        due = {tp: ms + rules.rotate_interval_ms for tp, ms in firsts.items()}
        ends = {tp: parts[tp].latest for tp in partial}
        cuts = clock.time_cuts(partial, due, ends)
    now_ms = int(time.time() * 1000)
    again: Offsets = {}
    for tp in partial:
        if tp in clock.gone:  # its offset was deleted: the range's read reports it
            planned[tp] = parts[tp].latest
            continue
        planned[tp], _ = plan_partition(
            parts[tp], rules, first_ms=firsts.get(tp), time_cut=cuts.get(tp), now_ms=now_ms
        )
        if planned[tp] == cuts.get(tp) and planned[tp] < parts[tp].latest:
            again[tp] = planned[tp]
    return again
