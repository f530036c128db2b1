"""How many archived records of one topic-partition a restore window holds, and how many of them
come before given offsets: the record counts of a restore's plan, and the translation of a
consumer group's committed offset into the restored topic's offsets.

A restore into an empty topic, one partition to one, gives the restored records offsets
``0, 1, 2, ...`` in source-offset order: the record at source offset ``o`` lands at the number
of window records before it. So a group that had committed ``o`` (the next record it reads) on
the source resumes at ``count below o`` on the target: nothing reprocessed, nothing skipped.

The counts come from the objects' block indexes where they are exact (an offset window, or a
time window and blocks whose index stamps lie wholly inside or outside it); a block that
straddles a time bound is read, as are partitions whose objects have no index or interleave
(a time or field partitioner), through the same reader the restore sends from.

>>> import tempfile
>>> from blockgz import BlockGzipUpload
>>> from blockgz.reader import open_archive
>>> from blockgz.store import LocalStore
>>> root = tempfile.mkdtemp()
>>> with BlockGzipUpload(LocalStore(root), "topics/t/partition=0/t+0+0000000010.json.gz",
...                      first_offset=10) as out:
...     for n in range(5):
...         out.write(b"v%d" % n)
>>> with open_archive(root) as archive:
...     count_window(archive, "t", 0, Window(start=11), below=[0, 13, 99])
WindowCount(records=4, first=11, last=14, below={0: 0, 13: 2, 99: 4})
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from blockgz.errors import ConfigError, OffsetNotFoundError


@dataclass(frozen=True)
class Window:
    """Which records of a partition a restore sends: ``start <= offset < end`` and
    ``from_time <= timestamp < to_time`` (epoch ms; ``None``: open)."""

    start: int | None = None
    end: int | None = None
    from_time: int | None = None
    to_time: int | None = None

    @property
    def timed(self) -> bool:
        return self.from_time is not None or self.to_time is not None

    def holds_offset(self, offset: int) -> bool:
        return (self.start is None or offset >= self.start) and (
            self.end is None or offset < self.end
        )

    def holds_time(self, stamp: int | None) -> bool:
        low = self.from_time
        high = self.to_time
        return (
            stamp is not None and (low is None or stamp >= low) and (high is None or stamp < high)
        )


@dataclass(frozen=True)
class WindowCount:
    """Records in the window, the first and last offset among them (``None`` when none), and
    per asked offset how many of them come before it."""

    records: int
    first: int | None
    last: int | None
    below: dict[int, int] = field(default_factory=dict)


class _Tally:
    def __init__(self, below: Iterable[int]):
        self.records = 0
        self.first: int | None = None
        self.last: int | None = None
        self.below = dict.fromkeys(sorted(set(below)), 0)

    def add(self, offsets: Sequence[int]) -> None:
        """Count ``offsets`` (ascending, all inside the window; a list or a ``range``)."""
        if not offsets:
            return
        self.records += len(offsets)
        self.first = offsets[0] if self.first is None else self.first
        self.last = offsets[-1]
        for target in self.below:
            if target > offsets[0]:
                self.below[target] += bisect.bisect_left(offsets, target)

    def result(self) -> WindowCount:
        return WindowCount(self.records, self.first, self.last, dict(self.below))


def count_window(
    archive, topic: str, partition: int, window: Window, below: Iterable[int] = ()
) -> WindowCount:
    """The records of ``window`` in ``topic``/``partition``, and how many lie before each of
    ``below`` (source offsets); see the module's notes."""
    from blockgz.reader.reading.catalog_source import overlapping

    tally = _Tally(below)
    refs = archive.objects(topic, partition)
    if refs and all(r.has_index for r in refs) and not overlapping(refs):
        try:
            _count_indexed(archive, refs, window, tally)
            return tally.result()
        except OffsetNotFoundError:
            tally = _Tally(below)
    blocks = archive.record_blocks(
        topic,
        [partition],
        start=window.start,
        end=window.end,
        from_time=window.from_time,
        to_time=window.to_time,
    )
    for _, block in blocks:
        tally.add([r.offset for r in block])
    return tally.result()


def _count_indexed(archive, refs, window: Window, tally: _Tally) -> None:
    """Count from the block indexes; read only blocks that straddle a time bound."""
    high = None if window.to_time is None else window.to_time - 1
    seen = -1  # two writers may overlap at an object's edge: each offset counts once
    for ref in refs:
        index = archive.index(ref)
        for number, chunk in enumerate(index.chunks):
            if chunk.num_records == 0 or chunk.last_record_offset <= seen:
                continue
            if window.end is not None and chunk.first_record_offset >= window.end:
                return
            if window.start is not None and chunk.last_record_offset < window.start:
                continue
            if window.timed and not chunk.may_hold_times(window.from_time, high):
                seen = chunk.last_record_offset
                continue
            inside = window.timed and _wholly_inside(chunk, window)
            if (not window.timed or inside) and chunk.offset_deltas is None:
                # Consecutive offsets: counted as a range, with no step per record.
                low = max(chunk.first_record_offset, seen + 1, window.start or 0)
                end = chunk.last_record_offset + 1
                end = end if window.end is None else min(end, window.end)
                tally.add(range(low, max(low, end)))
                seen = chunk.last_record_offset
                continue
            if not window.timed or inside:
                offsets = [o for o in chunk.record_offsets() if o > seen]
            else:
                records = list(archive.block_records(ref, number, timestamps=True))
                if any(r.timestamp is None for r in records):
                    raise ConfigError(
                        f"{ref.topic}/{ref.partition}: the archive kept no record timestamps, "
                        "so a time window cannot be applied; give offsets instead"
                    )
                offsets = [
                    r.offset for r in records if r.offset > seen and window.holds_time(r.timestamp)
                ]
            tally.add([o for o in offsets if window.holds_offset(o)])
            seen = chunk.last_record_offset


def _wholly_inside(chunk, window: Window) -> bool:
    if chunk.min_timestamp is None or chunk.max_timestamp is None:
        return False
    return window.holds_time(chunk.min_timestamp) and window.holds_time(chunk.max_timestamp)
