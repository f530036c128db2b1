"""Consumer groups placed on targets restored with ``blockgz.replay`` markers: read back where
each restored record landed, and find, per target partition, the offset a group resumes at.

A restore places groups from the target offsets its transactions recorded where it filled
target partitions one to one (:mod:`blockgz.reader.restore.positions`). Into a target that
already held records before the restore reached it, and with
``--by-key``, every restored record carries a marker naming its source partition and offset.
Once every record is delivered, the restore reads the target partitions back and, for each
group, takes in each target partition the restored records the group had consumed on the
source (source offset below its committed offset there): the group resumes just after the last
of them (at the first restored record when it had consumed none). That is exact when those
records form a prefix of the partition's restored records — always one to one (a source
partition's records go in offset order), and with ``--by-key`` when the group had consumed the
source partitions sent first (sources are sent one after the other) or the source had one
partition. Otherwise no single offset resumes it: the group is left alone with a one-line
reason, never set to an offset that would reprocess or skip records.

>>> ours = {0: [Restored(5, 0, 10), Restored(6, 0, 11), Restored(7, 1, 3)], 1: []}
>>> place_group(ours, {0: 8, 1: 0}, {0: 11, 1: 0}, by_key=True)  # consumed 0:10 only
{0: 6, 1: 0}
>>> print(place_group(ours, {0: 8, 1: 0}, {0: 0, 1: 4}, target="t", by_key=True))
... # doctest: +ELLIPSIS
t[0]: source partition 0's offset 10, which the group had not consumed, was sent before ...
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from blockgz.errors import RestoreError

#: The consumer group id the read-back uses (it commits nothing).
READ_GROUP = "blockgz.restore.groups"
_TIMEOUT_S = 15.0
#: How long a read-back may go without receiving a record before it gives up.
_STALL_S = 60.0


@dataclass(frozen=True)
class Restored:
    """A restored record in a target partition: its offset there, and its source's."""

    offset: int
    source: int
    source_offset: int


def place_group(
    restored: Mapping[int, list[Restored]],
    ends: Mapping[int, int],
    committed: Mapping[int, int],
    *,
    by_key: bool,
    target: str = "",
) -> dict[int, int] | str:
    """Per target partition, the offset the group resumes at (``restored``: each target
    partition's restored records in offset order; ``ends``: its end offsets; ``committed``:
    the group's offset per source partition); a one-line reason when none is exact.

    One to one, only the group's partitions are placed, each from its own source partition's
    records; ``by_key``, every target partition, from the records of every source partition.

    >>> one = {0: [Restored(1, 0, 7), Restored(2, 0, 9)]}  # offset 0: a record of its own
    >>> place_group(one, {0: 3}, {0: 8}, by_key=False)
    {0: 2}
    >>> place_group(one, {0: 3}, {0: 99}, by_key=False)  # past the restored range: its end
    {0: 3}
    >>> place_group(one, {0: 3}, {0: 0}, by_key=False)  # none consumed: the first restored
    {0: 1}
    """
    placed: dict[int, int] = {}
    partitions = sorted(ends) if by_key else sorted(p for p in committed if p in ends)
    for partition in partitions:
        ours = restored.get(partition, [])
        if not by_key:
            ours = [r for r in ours if r.source == partition]
        done = [r.source in committed and r.source_offset < committed[r.source] for r in ours]
        last = max((n for n, d in enumerate(done) if d), default=-1)
        before = max(last, 0)  # the records before the last consumed one
        early = next((r for r, d in zip(ours[:before], done[:before], strict=True) if not d), None)
        if early is not None:
            later = ours[last]
            return (
                f"{target}[{partition}]: source partition {early.source}'s offset "
                f"{early.source_offset}, which the group had not consumed, was sent before "
                f"partition {later.source}'s offset {later.source_offset}, which it had "
                "(--by-key sends source partitions one after the other): no single offset "
                "resumes it"
                if by_key
                else f"{target}[{partition}]: the restored records are not in source-offset "
                f"order (offset {early.source_offset} of partition {early.source} comes before "
                f"{later.source_offset}): no single offset resumes the group"
            )
        if last >= 0:
            placed[partition] = ours[last].offset + 1
        else:
            placed[partition] = ours[0].offset if ours else ends[partition]
    return placed


def restored_records(
    client: Mapping[str, Any], topic: str, partitions: int, source_topic: str
) -> tuple[dict[int, list[Restored]], dict[int, int]]:
    """Read ``topic``'s partitions back: each one's records restored from ``source_topic``
    (by their ``blockgz.replay`` markers), and its end offset. Reads every record there once
    (Kafka has no reading of headers alone): the cost of placing groups on a marker target."""
    from confluent_kafka import Consumer, TopicPartition

    from blockgz.reader.restore.markers import MARKER

    consumer = Consumer(
        {
            **client,
            "group.id": READ_GROUP,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "log_level": 3,
        }
    )
    prefix = f"{source_topic}/".encode()
    found: dict[int, list[Restored]] = {}
    ends: dict[int, int] = {}
    try:
        for partition in range(partitions):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=_TIMEOUT_S, cached=False
            )
            ends[partition], ours = high, []
            consumer.assign([TopicPartition(topic, partition, low)])
            position, quiet_since = low, time.monotonic()
            while position < high:
                messages = consumer.consume(5000, timeout=1)
                if not messages and time.monotonic() - quiet_since > _STALL_S:
                    raise RestoreError(
                        f"reading {topic}[{partition}] back to place the consumer groups "
                        f"stalled at offset {position} of {high}; run the restore again"
                    )
                for message in messages:
                    at = message.offset()
                    if message.error() is not None or at is None:
                        continue
                    position, quiet_since = at + 1, time.monotonic()
                    # A consumed message's headers are (name, bytes or None) pairs; the stubs'
                    # type also allows the dict a producer may be given.
                    headers = cast(list[tuple[str, bytes | None]], message.headers() or [])
                    for name, value in headers:
                        if name == MARKER and value is not None and value.startswith(prefix):
                            _, part, offset = value.decode().rsplit("/", 2)
                            ours.append(Restored(at, int(part), int(offset)))
                            break
            found[partition] = ours
    finally:
        consumer.close()
    return found, ends
