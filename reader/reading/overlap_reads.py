"""Reading a partition whose objects share offsets: merged in offset order, each offset once.

Objects of a time or field partitioner interleave; two writers leave objects that hold the
same offsets. Either way the records come back in offset order, each offset once, from the
object with the lowest first offset, then the lowest key, and a warning (once per pair of
objects) names the object whose copy was left out (:mod:`blockgz.reader.reading.overlaps` finds the
overlaps; ``blockgz verify`` reports them as problems). The archive's own read path reads each
object; this merges them.

>>> import tempfile
>>> from blockgz.sample import write_sample_objects
>>> from blockgz.store import LocalStore
>>> from blockgz.reader.reading.archive import Archive
>>> store = LocalStore(tempfile.mkdtemp())
>>> _ = write_sample_objects(store, "t", (0, 3))
>>> archive = Archive(store)
>>> runs = archive.merged_blocks(archive.objects("t", 0), 2)
>>> [r.offset for run in runs for r in run]
[2, 3, 4, 5, 6, 7]
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator

from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.decode import Record
from blockgz.blocks.index import BlockIndex
from blockgz.errors import OffsetNotFoundError
from blockgz.reader.reading.catalog_source import merged_by_offset
from blockgz.reader.reading.locate import ObjectLocator
from blockgz.reader.reading.overlaps import Overlap, find_overlaps
from blockgz.reader.reading.record_runs import flattened, in_runs

log = logging.getLogger("blockgz.reader")

#: The archive's read of objects from an offset on, in runs (``Archive._blocks``: ``refs``,
#: ``first``, ``offset``, ``count``, ``where``, and ``quiet``/``times``/``timestamps``).
ReadBlocks = Callable[..., Iterator[list[Record]]]


class OverlapReads:
    """Merged reads and duplicate warnings for one archive.

    ``locator`` finds the objects (and gives the store and prefix, which it may move);
    ``index_of`` gives an indexed object's index (the archive's cached one); ``read_blocks``
    is the archive's read path for a list of objects.
    """

    def __init__(
        self,
        locator: ObjectLocator,
        index_of: Callable[[ObjectRef], BlockIndex],
        read_blocks: ReadBlocks,
    ):
        self._locator = locator
        self._index_of = index_of
        self._read_blocks = read_blocks
        self._warned: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def merged_blocks(
        self, refs: list[ObjectRef], offset: int, *, timestamps: bool = False
    ) -> Iterator[list[Record]]:
        """The records of ``refs`` (one topic-partition) from ``offset`` on, merged in offset
        order, each offset once (from the first object holding it); nothing past the end."""
        ref = refs[0]
        where = f"{ref.topic}/{ref.partition} under {self._locator.store.url(self._locator.prefix)}"
        try:
            yield from self.merged(refs, offset, None, where, None, timestamps)
        except OffsetNotFoundError:
            return

    def merged(
        self,
        refs: list[ObjectRef],
        offset: int,
        count: int | None,
        where: str,
        times: tuple[int | None, int | None] | None,
        timestamps: bool,
    ) -> Iterator[list[Record]]:
        """Records from ``offset`` of objects whose offsets interleave, in offset order."""
        reaching = [r for r in refs if r.last_offset is None or r.last_offset >= offset]
        merged = merged_by_offset(
            reaching,
            lambda ref: flattened(
                self._read_blocks(
                    [ref], 0, offset, None, where, quiet=True, times=times, timestamps=timestamps
                )
            ),
            on_duplicate=lambda ref, record: self.warn_duplicate(record.offset, ref, reaching),
        )
        if count is not None:
            merged = itertools.islice(merged, count)
        yielded = False
        for run in in_runs(merged):
            yield run
            yielded = True
        if not yielded:
            raise OffsetNotFoundError(f"offset {offset} of {where} is past the end")

    def warn_duplicate(self, offset: int, ref: ObjectRef, refs: list[ObjectRef]) -> None:
        """Warn once per object that a copy of an offset in ``ref`` was left out."""
        earlier = [r.key for r in refs if (r.start_offset, r.key) < (ref.start_offset, ref.key)]
        holder = earlier[-1] if earlier else "an earlier object"
        with self._lock:
            if (ref.key, holder) in self._warned:
                return
            self._warned.add((ref.key, holder))
        store = self._locator.store
        log.warning(
            "%s/%s: %s holds offset %d again (also in %s): each offset is read once, from the "
            "object with the lowest first offset; run `blockgz verify` to list the overlaps",
            ref.topic,
            ref.partition,
            store.url(ref.key),
            offset,
            store.url(holder) if earlier else holder,
        )

    def overlaps(self, topic: str, partitions: Iterable[int]) -> list[Overlap]:
        """Pairs of objects of ``topic``'s ``partitions`` that hold the same offsets."""
        found: list[Overlap] = []
        for partition in partitions:
            refs = self._locator.locate(topic, partition, None)[0]
            found += find_overlaps(refs, lambda r: self._index_of(r) if r.has_index else None)
        return found
