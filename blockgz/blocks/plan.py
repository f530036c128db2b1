"""Which blocks of an indexed object a read needs, and which byte ranges fetch them.

The one block planner of the readers: a seek in one object
(:meth:`~blockgz.objects.indexed.IndexedReader.seek`), a seek across an archive's objects
(:class:`~blockgz.reader.reading.archive.Archive`, so ``blockgz seek``/``cat``, ``records`` and
``replay``)
and the Spark scan (:mod:`blockgz.reader.spark.scan_plan`) all ask :func:`plan_blocks`;
:func:`merge_ranges` then joins the planned blocks that lie close together in the object into one
byte range, so neighbouring blocks cost one read (one ``pread``, one ranged GET), as fsspec's
``merge_offset_ranges`` and Arrow's read coalescing do; :func:`merge_plans` does so for each
object of a read across several.

    >>> from blockgz.blocks.index import BlockIndex, Chunk
    >>> index = BlockIndex([Chunk(0, 10, 0, 100, 400), Chunk(10, 10, 100, 90, 400),
    ...                     Chunk(20, 10, 190, 80, 400)])
    >>> reads = plan_blocks(index, 15, count=10)
    >>> [(r.block, r.start, r.stop) for r in reads]
    [(1, 5, 15), (2, 0, 5)]
    >>> [(s.start, s.end, len(s.reads)) for s in merge_ranges(reads)]
    [(100, 270, 2)]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import TypeVar

from blockgz.blocks.index import BlockIndex, Chunk

#: What a read across objects names each object's plan by (an archive's ``ObjectRef``).
Obj = TypeVar("Obj")
J = TypeVar("J")
R = TypeVar("R")

#: Bytes between two planned blocks that are still read along rather than asked for apart: a
#: skipped small block costs less than another request.
DEFAULT_GAP = 64 * 1024

#: The most compressed bytes one merged range holds (``None``: no limit), so a long read
#: still comes in pieces that can be fetched ahead in parallel and held in memory.
DEFAULT_SPAN_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class BlockRead:
    """One block to read: its number in the index, its chunk, and which of its records
    (positions ``start`` up to ``stop``; ``None``: to its end).

    >>> BlockRead(3, Chunk(30, 10, 0, 99, 400), start=2, stop=20).records
    8
    """

    block: int
    chunk: Chunk
    start: int = 0
    stop: int | None = None

    @property
    def records(self) -> int:
        """How many records this read gives (by the index)."""
        total = self.chunk.num_records
        end = total if self.stop is None else min(self.stop, total)
        return max(0, end - self.start)


@dataclass(frozen=True, slots=True)
class Span:
    """One byte range ``[start, end)`` of an object, read at once, and the blocks in it."""

    start: int
    end: int
    reads: tuple[BlockRead, ...]

    def piece(self, raw: bytes, read: BlockRead) -> bytes:
        """The bytes of ``read``'s block out of the span's bytes ``raw``.

        >>> c = Chunk(0, 1, 10, 5, 5)
        >>> Span(8, 15, (BlockRead(0, c),)).piece(b"..abcde", BlockRead(0, c))
        b'abcde'
        """
        low = read.chunk.byte_offset - self.start
        return raw[low : low + read.chunk.byte_length]


def plan_blocks(
    index: BlockIndex,
    begin: int | None = None,
    count: int | None = None,
    *,
    keep: Callable[[Chunk], bool] | None = None,
) -> list[BlockRead]:
    """The blocks holding ``count`` records (``None``: all) from offset ``begin`` on, in order.

    ``begin`` ``None`` or before the object's first offset starts at its first block; an
    offset that was compacted away starts at the next one that exists; one past the last
    offset raises :class:`~blockgz.errors.OffsetNotFoundError`. ``keep`` leaves out the blocks
    it refuses (a time window, a scan's filter); their records are not counted.

    >>> from blockgz.blocks.index import BlockIndex
    >>> index = BlockIndex([Chunk(0, 5, 0, 9, 9), Chunk(5, 5, 9, 9, 9), Chunk(10, 5, 18, 9, 9)])
    >>> [(r.block, r.start) for r in plan_blocks(index, 7)]
    [(1, 2), (2, 0)]
    >>> [r.block for r in plan_blocks(index, keep=lambda c: c.first_record_offset != 5)]
    [0, 2]
    """
    chunks = index.chunks
    first = index.first_offset
    at_start = begin is None or first is None or begin < first
    seek_to = None if at_start else begin  # the offset to seek to inside the index, if any
    start = 0 if seek_to is None else index.locate(seek_to)
    needed = count
    reads: list[BlockRead] = []
    for block in range(start, len(chunks)):
        chunk = chunks[block]
        if keep is not None and not keep(chunk):
            continue
        skip = chunk.position_of(seek_to) if block == start and seek_to is not None else 0
        reads.append(BlockRead(block, chunk, skip, None if needed is None else skip + needed))
        if needed is not None:
            needed -= chunk.num_records - skip
            if needed <= 0:
                break
    return reads


def merge_ranges(
    reads: Iterable[BlockRead],
    *,
    gap: int = DEFAULT_GAP,
    limit: int | None = DEFAULT_SPAN_BYTES,
    first_alone: bool = False,
) -> list[Span]:
    """``reads`` grouped into byte ranges, in order: a block joins the range before it when it
    starts at most ``gap`` bytes after that range ends and the range stays within ``limit``
    bytes (a block larger than ``limit`` is a range of its own). Blocks out of file order
    start a new range. ``first_alone``: the first block is a range of its own, so the first
    record of an open-ended read comes after one block, not a whole range.

    >>> c = [Chunk(n, 1, n * 10, 10, 10) for n in range(5)]
    >>> reads = [BlockRead(0, c[0]), BlockRead(1, c[1]), BlockRead(3, c[3]), BlockRead(4, c[4])]
    >>> [(s.start, s.end) for s in merge_ranges(reads, gap=0)]
    [(0, 20), (30, 50)]
    >>> [(s.start, s.end) for s in merge_ranges(reads, gap=10, limit=30)]
    [(0, 20), (30, 50)]
    >>> [(s.start, s.end) for s in merge_ranges(reads, gap=10, first_alone=True)]
    [(0, 10), (10, 50)]
    """
    runs = join_ranges(
        reads,
        lambda read: (read.chunk.byte_offset, read.chunk.byte_end),
        gap=gap,
        limit=limit,
        first_alone=first_alone,
    )
    return [Span(run[0].chunk.byte_offset, run[-1].chunk.byte_end, tuple(run)) for run in runs]


def join_ranges(
    items: Iterable[J],
    bounds: Callable[[J], tuple[int, int]],
    *,
    gap: int,
    limit: int | None,
    first_alone: bool = False,
) -> list[list[J]]:
    """``items`` (each a byte range ``bounds(item)``, in file order) grouped into runs read as
    one range, by :func:`merge_ranges`'s rules.

    >>> join_ranges([(0, 10), (12, 20), (90, 99)], lambda r: r, gap=5, limit=None)
    [[(0, 10), (12, 20)], [(90, 99)]]
    """
    runs: list[list[J]] = []
    run: list[J] = []
    start = end = 0
    for item in items:
        low, high = bounds(item)
        joins = (
            bool(run)
            and not (first_alone and not runs)
            and end <= low <= end + gap
            and (limit is None or high - start <= limit)
        )
        if run and not joins:
            runs.append(run)
            run = []
        if not run:
            start = low
        run.append(item)
        end = high
    if run:
        runs.append(run)
    return runs


def merge_plans(
    plans: Iterable[tuple[Obj, list[BlockRead] | None]], *, first_alone: bool = False
) -> Iterator[tuple[Obj, Span | None]]:
    """:func:`merge_ranges` over a read of several objects, in order, as the caller iterates:
    ``(object, span)`` for each range of each object's planned blocks (a range never spans two
    objects); an object planned as ``None`` (no index: read whole) passes as ``(object, None)``.
    ``first_alone`` applies to the first object only: an open-ended read's first record comes
    after one block, later objects' blocks are merged as usual.

    >>> c = [Chunk(n, 1, n * 10, 10, 10) for n in range(3)]
    >>> plans = [("a", [BlockRead(n, c[n]) for n in range(3)]), ("b", None),
    ...          ("c", [BlockRead(0, c[0])])]
    >>> [(obj, s and (s.start, s.end)) for obj, s in merge_plans(plans, first_alone=True)]
    [('a', (0, 10)), ('a', (10, 30)), ('b', None), ('c', (0, 10))]
    """
    alone = first_alone
    for obj, reads in plans:
        if reads is None:
            yield obj, None
        else:
            for span in merge_ranges(reads, first_alone=alone):
                yield obj, span
        alone = False


def fetched(
    read_range: Callable[[int, int], bytes],
    spans: Iterable[Span],
    *,
    executor: Executor | None = None,
    ahead: int = 0,
) -> Iterator[tuple[BlockRead, bytes]]:
    """``(read, its block's bytes)`` for every read of ``spans``, one ``read_range(start,
    end)`` per span, as the caller iterates; with an ``executor``, ``ahead`` spans are fetched
    while the caller works on the current one (network time overlaps inflating).

    >>> c = [Chunk(n, 1, n * 2, 2, 2) for n in range(3)]
    >>> got = fetched(lambda a, b: b"aabbcc"[a:b], merge_ranges(BlockRead(n, c[n]) for n in (0, 1)))
    >>> [(r.block, raw) for r, raw in got]
    [(0, b'aa'), (1, b'bb')]
    """
    for span, raw in prefetched(spans, lambda s: read_range(s.start, s.end), executor, ahead):
        for read in span.reads:
            yield read, span.piece(raw, read)


def prefetched(
    jobs: Iterable[J], fetch: Callable[[J], R], executor: Executor | None, depth: int
) -> Iterator[tuple[J, R]]:
    """``(job, fetch(job))`` in job order, keeping ``depth`` fetches running ahead; what is
    still pending when the caller stops is cancelled. Without an ``executor`` (or with
    ``depth`` below 1) each job is fetched in turn, on the caller's thread.

    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(2) as pool:
    ...     list(prefetched([1, 2, 3], lambda n: n * 10, pool, 2))
    [(1, 10), (2, 20), (3, 30)]
    >>> list(prefetched([1, 2], lambda n: n * 10, None, 2))
    [(1, 10), (2, 20)]
    """
    if executor is None or depth < 1:
        yield from ((job, fetch(job)) for job in jobs)
        return
    pending: deque[tuple[J, Future[R]]] = deque()
    try:
        for job in jobs:
            pending.append((job, executor.submit(fetch, job)))
            while len(pending) > depth:
                done_job, future = pending.popleft()
                yield done_job, future.result()
        while pending:
            done_job, future = pending.popleft()
            yield done_job, future.result()
    finally:
        for _, future in pending:
            future.cancel()
